"""A real openpi policy server for the bridge's tests and bench: its own venv, its own process, loopback only.

:func:`openpi_venv` builds (once, cached under ``~/.cache/strands_robots/`` keyed by the requirements) a venv
with ``openpi-server`` and ``openpi-client`` from PyPI (they need numpy < 2: a team's environment, not ours).
:func:`start_openpi_server` runs :data:`SERVER_SCRIPT` there: openpi's own ``WebsocketPolicyServer`` serving
:class:`StepPolicy`, a deterministic policy whose actions are computed from the observation it received, so a
test can check every number; each observation it received is logged (JSON lines) for the test to read. The
``roboarena`` mode serves the RoboArena variant (``endpoint`` infer/reset, reset answered by a text frame),
with openpi-client's msgpack codec on the server side. ``misbehave`` makes a server that breaks the protocol the
way a faulty one does (the same policy, on openpi-client's codec): ``answer_twice`` sends every answer twice,
``complex_actions`` / ``string_actions`` send the actions as a complex or a string array, ``redirect`` answers
every handshake with HTTP 302 to ``redirect_to``.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import List, Optional

#: openpi-client 0.1.2's websocket_client_policy imports typing_extensions without declaring it: named here.
REQUIREMENTS = ("openpi-server==0.1.0", "openpi-client==0.1.2", "numpy<2", "typing_extensions")
#: Actions per chunk the test servers answer.
HORIZON = 4


def _base_python() -> str:
    """Return a Python 3.11 for the team's venv: pyenv's, then python3.11 on PATH, then this interpreter."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.11*/bin/python")))
    if found:
        return found[-1]
    return shutil.which("python3.11") or sys.executable


def openpi_venv() -> Path:
    """Return the python of the cached openpi venv, building it first if needed (serialised by a file lock)."""
    base = _base_python()
    key = hashlib.sha256("\n".join((base, *REQUIREMENTS)).encode()).hexdigest()[:12]
    root = Path(os.environ.get("STRANDS_ROBOTS_CACHE", os.path.expanduser("~/.cache/strands_robots")))
    venv = root / f"openpi-venv-{key}"
    py = venv / "bin" / "python"
    done = venv / ".complete"
    if done.exists():
        return py
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"openpi-venv-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return py
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=180)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")}
        out = subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", *REQUIREMENTS],
                             capture_output=True, text=True, timeout=900, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"pip could not install {' '.join(REQUIREMENTS)}:\n{out.stdout[-3000:]}"
                               f"{out.stderr[-3000:]}")
        done.write_text("\n".join(REQUIREMENTS) + "\n")
    return py


SERVER_SCRIPT = textwrap.dedent('''
    """openpi's WebsocketPolicyServer serving a deterministic policy (run in the openpi venv)."""
    import argparse, asyncio, json, os, sys
    import numpy as np

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--mode", default="droid", choices=["droid", "aloha", "libero", "roboarena"])
    p.add_argument("--raise-on", type=int, default=0, help="raise on this infer call (1-based)")
    p.add_argument("--horizon", type=int, default=4)
    p.add_argument("--scale", type=float, default=1.0, help="multiplies the step offsets")
    p.add_argument("--metadata", default="{}")
    p.add_argument("--misbehave", default="", choices=["", "answer_twice", "complex_actions", "string_actions",
                                                       "redirect"])
    p.add_argument("--redirect-to", default="")
    args = p.parse_args()
    log = open(args.log, "a", buffering=1)

    def summary(obs):
        out = {}
        def walk(prefix, value):
            if isinstance(value, dict):
                for k, v in value.items():
                    walk(prefix + k + ".", v) if isinstance(v, dict) else walk(prefix + k, v)
            elif isinstance(value, np.ndarray):
                out[prefix] = {"shape": list(value.shape), "dtype": value.dtype.str,
                               "sum": float(value.astype(np.float64).sum()),
                               "values": value.tolist() if value.size <= 32 else None}
            else:
                out[prefix] = value
        walk("", obs)
        return out

    class StepPolicy:
        """actions[h] = the state vector (+ gripper) + scale * (0.01 * (h + 1) + 0.1 * (call - 1))."""
        def __init__(self):
            self.calls = 0
        def infer(self, obs):
            self.calls += 1
            log.write(json.dumps({"call": self.calls, "pid": os.getpid(), "obs": summary(obs)}) + "\\n")
            if self.calls == args.raise_on:
                raise ValueError(f"policy exploded at call {self.calls}")
            if args.mode == "aloha":
                base = np.asarray(obs["state"], dtype=np.float64)
            elif args.mode == "libero":
                base = np.asarray(obs["observation/state"], dtype=np.float64)[:7]
            else:
                base = np.concatenate([obs["observation/joint_position"], obs["observation/gripper_position"]])
            steps = args.scale * (0.01 * (np.arange(args.horizon)[:, None] + 1) + 0.1 * (self.calls - 1))
            return {"actions": (base[None, :] + steps).astype(np.float32),
                    "policy_timing": {"infer_ms": np.float64(0.5)}}

    metadata = json.loads(args.metadata)
    if args.misbehave:
        import msgpack
        import websockets.exceptions
        import websockets.asyncio.server as server
        from http import HTTPStatus
        from openpi_client import msgpack_numpy

        def raw(value):  # openpi's array form, written by hand: its Packer refuses complex arrays
            if isinstance(value, np.ndarray):
                return {b"__ndarray__": True, b"data": value.tobytes(), b"dtype": value.dtype.str,
                        b"shape": list(value.shape)}
            raise TypeError(type(value).__name__)

        def answer(reply):
            if args.misbehave == "complex_actions":
                reply["actions"] = reply["actions"].astype(np.complex128) + 1j
                return msgpack.packb(reply, default=raw, use_bin_type=True)
            if args.misbehave == "string_actions":
                reply["actions"] = reply["actions"].astype(str)
            return msgpack_numpy.packb(reply)

        async def misbehaving(ws):
            policy = StepPolicy()
            await ws.send(msgpack_numpy.packb(metadata))
            while True:
                try:
                    frame = answer(policy.infer(msgpack_numpy.unpackb(await ws.recv())))
                except websockets.exceptions.ConnectionClosed:
                    break
                if args.misbehave == "answer_twice":  # both frames in one write, as one buffered flush sends them
                    header = bytes([0x82]) + (bytes([len(frame)]) if len(frame) < 126 else
                                              bytes([126]) + len(frame).to_bytes(2, "big") if len(frame) < 65536
                                              else bytes([127]) + len(frame).to_bytes(8, "big"))
                    ws.transport.write((header + frame) * 2)
                    log.write(json.dumps({"sent_twice": policy.calls}) + "\\n")
                    continue
                await ws.send(frame)

        def redirect(connection, request):
            if args.misbehave != "redirect":
                return None
            response = connection.respond(HTTPStatus.FOUND, "moved\\n")
            response.headers["Location"] = args.redirect_to
            return response

        async def serve_misbehaving():
            async with server.serve(misbehaving, "127.0.0.1", args.port, compression=None, max_size=None,
                                    process_request=redirect):
                print("READY", flush=True)
                await asyncio.get_running_loop().create_future()

        asyncio.run(serve_misbehaving())
        sys.exit(0)
    if args.mode != "roboarena":
        from openpi_server import WebsocketPolicyServer
        print("READY", flush=True)
        WebsocketPolicyServer(StepPolicy(), host="127.0.0.1", port=args.port, metadata=metadata).serve_forever()
        sys.exit(0)

    # RoboArena: every request names its endpoint; a reset is answered by a text frame.
    import traceback
    import websockets.exceptions
    import websockets.asyncio.server as server
    from openpi_client import msgpack_numpy

    async def handler(ws):
        packer = msgpack_numpy.Packer()
        policy = StepPolicy()
        await ws.send(packer.pack(metadata))
        while True:
            try:
                obs = msgpack_numpy.unpackb(await ws.recv())
                endpoint = obs.pop("endpoint")
                if endpoint == "reset":
                    log.write(json.dumps({"reset": True, "session_id": obs.get("session_id")}) + "\\n")
                    policy.calls = 0
                    await ws.send("reset successful")
                    continue
                assert endpoint == "infer", endpoint
                await ws.send(packer.pack(policy.infer(obs)))
            except websockets.exceptions.ConnectionClosed:
                break
            except Exception:
                await ws.send(traceback.format_exc())
                await ws.close(code=1011, reason="Internal server error")
                raise

    async def main():
        async with server.serve(handler, "127.0.0.1", args.port, compression=None, max_size=None):
            print("READY", flush=True)
            await asyncio.get_running_loop().create_future()

    asyncio.run(main())
''')


def start_openpi_server(directory: Path, port: int, *, mode: str = "droid", raise_on: int = 0,
                        metadata: Optional[dict] = None, horizon: int = HORIZON, scale: float = 1.0,
                        misbehave: str = "", redirect_to: str = "", timeout_s: float = 60.0) -> subprocess.Popen:
    """Start the openpi server process on 127.0.0.1:``port``; return once it accepts connections."""
    py = openpi_venv()
    script = Path(directory) / "openpi_server_script.py"
    script.write_text(SERVER_SCRIPT)
    log = Path(directory) / f"openpi_{port}.jsonl"
    out = open(Path(directory) / f"openpi_{port}.out", "ab")
    proc = subprocess.Popen([str(py), str(script), "--port", str(port), "--log", str(log), "--mode", mode,
                             "--raise-on", str(raise_on), "--horizon", str(horizon), "--scale", repr(scale),
                             "--metadata", json.dumps(metadata or {}), "--misbehave", misbehave,
                             "--redirect-to", redirect_to],
                            stdout=out, stderr=subprocess.STDOUT,
                            env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")})
    deadline = time.monotonic() + timeout_s
    import socket

    while True:
        if proc.poll() is not None:
            out.close()
            text = (Path(directory) / f"openpi_{port}.out").read_text(errors="replace")
            raise RuntimeError(f"openpi server exited {proc.returncode}: {text[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                out.close()  # the child holds its own copy
                return proc
        except OSError:
            if time.monotonic() > deadline:
                stop_server(proc)
                raise RuntimeError(f"openpi server did not listen on {port} within {timeout_s:g} s") from None
            time.sleep(0.05)


def server_log(directory: Path, port: int) -> List[dict]:
    """Return what the server on ``port`` logged (one dict per infer call or reset), in order."""
    path = Path(directory) / f"openpi_{port}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stop_server(proc: Optional[subprocess.Popen], sig: int = signal.SIGTERM) -> None:
    """End the server process by its PID (SIGKILL when it does not end within 5 s)."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, sig)
        proc.wait(5)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
    except ProcessLookupError:
        pass
