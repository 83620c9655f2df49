"""Recording transfer benchmark: an episode's MCAP station -> relay -> team, and what the relay's metrics cost.

Not a pass/fail test: it prints figures.

- The relay runs as its own process (``python -m strands_robots.relay``) on a throwaway SQLite store, or on a
  PostgreSQL given with ``--store postgresql://...``, listening on 127.0.0.1 only (``--metrics`` on, as an
  operator would run it).
- upload: the station's ``recording_upload.upload`` of a ``--mb`` MiB file (one pass to hash it, one to send it
  in 1 MiB chunks; the relay checks size and SHA-256 and writes every chunk to the store);
- download: the team's ``EvaluationClient.download_recording`` of it to a file (checked against the station's
  size and SHA-256 and the episode's ``recording_sha256``; fsync before the rename), ``--repeat`` times;
- metrics: the cost of one counted and timed call, ``RelayMetrics.instrument`` around a coroutine that returns
  at once, against the bare coroutine (in this process, no gRPC).

Usage::

    source scripts/env.sh --no-install; export PYTHONPATH=$PWD/src/strands_robots:$PYTHONPATH
    python bench/recording_bench.py                     # 64 MiB, about 10 s
    python bench/recording_bench.py --mb 256 --repeat 3 [--store postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "strands_robots"
sys.path.insert(0, str(ROOT))

CLIENT, STATION = "tok-bench-team-0123456789", "tok-bench-station-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_relay(workdir: Path, store: str, max_bytes: int) -> "tuple[subprocess.Popen, str]":
    tokens = workdir / "tokens.yaml"
    tokens.write_text(f"clients:\n  team: {CLIENT}\nstations:\n  st: {STATION}\n")
    tokens.chmod(0o600)
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.Popen([sys.executable, "-m", "strands_robots.relay", "--listen", f"127.0.0.1:{port}",
                             "--store", store or f"sqlite:{workdir / 'relay.db'}", "--tokens", str(tokens),
                             "--max-recording-bytes", str(max_bytes), "--metrics", f"127.0.0.1:{_free_port()}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"127.0.0.1:{port}"
        if proc.poll() is not None:
            raise SystemExit(f"the relay exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the relay did not listen within 30 s")


def _metrics_cost(calls: int) -> "tuple[float, float]":
    from strands_robots.relay.metrics import RelayMetrics

    async def bare(request, context):
        return request

    counted = RelayMetrics().instrument("Evaluation.GetStatus", "unary", bare)

    async def run(fn) -> float:
        start = time.perf_counter()
        for i in range(calls):
            await fn(i, None)
        return (time.perf_counter() - start) / calls * 1e6

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(run(bare)), loop.run_until_complete(run(counted))
    finally:
        loop.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mb", type=int, default=64, help="recording size in MiB (default %(default)s)")
    p.add_argument("--repeat", type=int, default=3, help="downloads (default %(default)s)")
    p.add_argument("--store", default="", help="postgresql://... (default: SQLite in a temp dir)")
    p.add_argument("--metric-calls", type=int, default=200000)
    args = p.parse_args()

    import grpc

    from strands_robots.client import EvaluationClient
    from strands_robots.wire.proto import station_service_pb2_grpc as ss_grpc
    from strands_robots.station_link.recording_upload import upload

    workdir = Path(tempfile.mkdtemp(prefix="recording_bench_"))
    proc = None
    try:
        size = args.mb * 1024 * 1024
        source = workdir / "episode.mcap"
        with open(source, "wb") as f:  # incompressible bytes, as camera JPEGs are
            for _ in range(args.mb):
                f.write(os.urandom(1024 * 1024))
        proc, target = _start_relay(workdir, args.store, size + 1)
        with EvaluationClient(target, token=CLIENT) as client, grpc.insecure_channel(
                target, options=[("grpc.max_send_message_length", 16 << 20)]) as channel:
            client.submit_job("st", [{"task_id": "t", "instruction": "x", "scoring": [
                {"name": "ok", "question": "ok?", "answer_type": "yes_no", "max_points": 1,
                 "success_answer": "yes"}]}], episodes=1, job_id="bench")
            start = time.perf_counter()
            upload(ss_grpc.StationStub(channel), (("authorization", f"Bearer {STATION}"),), "bench", "ep_0000",
                   source, timeout_s=600)
            up_s = time.perf_counter() - start
            downs = []
            for i in range(args.repeat):
                out = workdir / f"home_{i}.mcap"
                start = time.perf_counter()
                done = client.download_recording("bench", "ep_0000", out)
                downs.append(time.perf_counter() - start)
                assert done.sha256 == hashlib.sha256(source.read_bytes()).hexdigest()
                out.unlink()
        bare_us, counted_us = _metrics_cost(args.metric_calls)
        store = "PostgreSQL" if args.store else "SQLite"
        print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}, store {store}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print(f"recording {args.mb} MiB: upload {up_s:.2f} s ({args.mb / up_s:.0f} MiB/s, hash pass included)")
        best, worst = min(downs), max(downs)
        print(f"download x{args.repeat}: best {best:.2f} s ({args.mb / best:.0f} MiB/s), worst {worst:.2f} s "
              f"({args.mb / worst:.0f} MiB/s), checked and fsynced")
        print(f"metrics per call: bare coroutine {bare_us:.2f} us, counted and timed {counted_us:.2f} us "
              f"(+{counted_us - bare_us:.2f} us)")
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
