"""Shared pieces of the relay, store and client tests.

A real PostgreSQL server, token files, certificates, an in-process relay and a relay process. Nothing here is a
test; the helpers start real parts and stop them by PID (or handle) in ``finally``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # src/strands_robots (the import root)

CLIENT_TOKENS = {"team_a": "tok-team-a-0123456789", "team_b": "tok-team-b-0123456789"}
STATION_TOKENS = {"sim_station": "tok-sim-station-0123456789", "other_station": "tok-other-station-0123456789"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_tokens(directory: Path) -> Path:
    lines = ["clients:"] + [f"  {k}: {v}" for k, v in CLIENT_TOKENS.items()]
    lines += ["stations:"] + [f"  {k}: {v}" for k, v in STATION_TOKENS.items()]
    path = Path(directory) / "tokens.yaml"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)  # the relay refuses a tokens file group or others may read
    return path


# -- PostgreSQL from Debian's package -----------------------------------------------------------------------
def postgres_bin_dir() -> "str | None":
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return os.path.dirname(found[-1]) if found else None


def _as_postgres_user(argv: list[str]) -> list[str]:
    """Initdb refuses to run as root: run the server tools as the ``postgres`` account when we are root."""
    if os.geteuid() != 0:
        return argv
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("running as root and runuser is missing: cannot start PostgreSQL as an unprivileged user")
    return [runuser, "-u", "postgres", "--", *argv]


@contextlib.contextmanager
def postgres_server(listen: str = "127.0.0.1", argv_prefix: tuple = (), allow_from: str = ""):
    """Run a throwaway PostgreSQL server on ``listen`` (free port; unix socket in its temp dir); yield its URL.

    ``argv_prefix`` starts it elsewhere (``ip netns exec NS``: another host), ``allow_from`` (a CIDR) lets
    clients from there in (without a password, as from loopback). Skips with the reason when Debian's binaries
    are missing (``apt-get install -y postgresql``).
    """
    bindir = postgres_bin_dir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
                    "(apt-get install -y postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"psycopg is not importable: {exc}")
    tmp = tempfile.mkdtemp(prefix="strands_pg_")
    data = os.path.join(tmp, "data")
    if os.geteuid() == 0:
        try:
            import pwd

            pw = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.skip("running as root and there is no 'postgres' account to run the server as")
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
    port = free_port()
    pg_ctl = os.path.join(bindir, "pg_ctl")
    started = False
    try:
        subprocess.run(
            _as_postgres_user([os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
                               "-E", "UTF8", "--no-sync"]),
            check=True, capture_output=True, timeout=120,
        )
        if allow_from:
            with open(os.path.join(data, "pg_hba.conf"), "a", encoding="utf-8") as hba:
                hba.write(f"host all all {allow_from} trust\n")
        opts = f"-c listen_addresses={listen} -p {port} -k {tmp} -c fsync=off"
        subprocess.run(
            [*argv_prefix, *_as_postgres_user([pg_ctl, "-D", data, "-o", opts, "-l", os.path.join(tmp, "log"), "-w",
                                               "-t", "60", "start"])],
            check=True, capture_output=True, timeout=90,
        )
        started = True
        yield f"postgresql://postgres@{listen}:{port}/postgres"
    finally:
        if started:
            subprocess.run(_as_postgres_user([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"]),
                           capture_output=True, timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


def reset_postgres(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS jobs, snapshots, stations, relays, policy_homes, station_offers, "
                     "comparison_blocks, comparison_participants, job_teams")


# -- TLS --------------------------------------------------------------------------------------------------------
def self_signed_cert(directory: Path, ips: "tuple[str, ...]" = ()) -> "tuple[Path, Path]":
    """Make a self-signed certificate for 127.0.0.1/localhost and ``ips`` (openssl); skip when openssl is missing."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed (apt-get install -y openssl): cannot make a test certificate")
    key, cert = Path(directory) / "relay.key", Path(directory) / "relay.crt"
    names = ",".join(["DNS:localhost", "IP:127.0.0.1", *(f"IP:{ip}" for ip in ips)])
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", "/CN=localhost", "-addext", f"subjectAltName={names}"],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


# -- relay as its own process -----------------------------------------------------------------------------
def relay_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PACKAGE_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_relay_process(port: int, store_url: str, tokens: Path, *extra: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "strands_robots.relay", "--listen", f"127.0.0.1:{port}", "--store", store_url,
         "--tokens", str(tokens), *extra],
        env=relay_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"relay exited with {proc.returncode}: {proc.stdout.read()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    stop_process(proc)
    raise RuntimeError("relay did not listen within 30 s")


def stop_process(proc: "subprocess.Popen | None", sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, sig)
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)
    except ProcessLookupError:
        pass


def wait_until(predicate, timeout_s: float = 15.0, interval_s: float = 0.02, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


# -- relay in this process ----------------------------------------------------------------------------------
@contextlib.contextmanager
def running_relay(directory: Path, store=None, **kwargs):
    """Run a RelayServer on 127.0.0.1 (free port) with the test tokens; yield a namespace (target, store)."""
    from types import SimpleNamespace

    from strands_robots.relay.auth import TokenBook
    from strands_robots.relay.server import RelayServer
    from strands_robots.relay.sqlite_store import SqliteStore

    tokens = TokenBook(CLIENT_TOKENS, STATION_TOKENS)
    own_store = store is None
    if own_store:
        store = SqliteStore(str(Path(directory) / "relay.db"))
    kwargs.setdefault("poll_s", 0.1)
    server = RelayServer(store, tokens, "127.0.0.1:0", **kwargs)
    port = server.start()
    try:
        yield SimpleNamespace(server=server, port=port, target=f"127.0.0.1:{port}", store=store, tokens=tokens)
    finally:
        server.stop(0)
        if own_store:
            store.close()


def yes_no_task(task_id: str = "pick", instruction: str = "pick up the cube") -> dict:
    return {"task_id": task_id, "instruction": instruction,
            "scoring": {"items": [{"name": "placed", "question": "Is the cube in the bin?", "answer_type": "yes_no",
                                   "max_points": 1.0, "success_answer": "yes"}]}}


def serve_in_background(client, job_id, policy, **serve) -> dict:
    """Serve ``job_id`` with ``policy`` on a thread; the dict gets ``final`` or ``error`` when it ends.

    ``serve``: serve_policy's keywords (``slot``, ``reconnect_s``).
    """
    out: dict = {}

    def run():
        try:
            out["final"] = client.serve_policy(job_id, policy, **serve)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out["error"] = exc

    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def serve_slot(client, job_id, policy, slot):
    """Serve one slot of a comparison on a thread (:func:`serve_in_background`)."""
    return serve_in_background(client, job_id, policy, slot=slot)
