"""Relay benchmark: ``get_status`` under concurrent clients, and a policy round trip through the relay.

The round trip is set against a direct in-process call. Not a pass/fail test: it prints figures.

- The relay runs as its own process (``python -m strands_robots.relay``) on a throwaway SQLite store (or
  ``--store postgresql://...``), listening on 127.0.0.1 only.
- ``get_status``: for each concurrency level (default 1, 16, 64, 256) that many clients, each with its own
  channel, poll one job's status (a snapshot with ``--episodes`` finished episodes) in a loop for
  ``--duration`` seconds, while ``--idle-streams`` (default 200) ``ServePolicy`` streams that never send
  ``attach`` are held open by another process (the flood that froze the thread-per-stream relay). Reported:
  calls/s over all clients, and p50/p99 latency of one call. The clients are coroutines (``grpc.aio``, each with
  its own channel) of ``--client-processes`` worker processes (default 2), on the same 2-core machine as the
  relay, so their Python overhead is in the figure too.
- policy round trip: the station's ``PolicySession.act`` (observation of ``--obs-keys`` floats out, an
  8-step chunk back) through the relay to an Evaluation Client serving the policy in another process, against
  calling the same policy's ``act`` directly in this process. Reported: mean and p99 of each, and their ratio.

Usage::

    source scripts/env.sh --no-install; export PYTHONPATH=$PWD/src/strands_robots:$PYTHONPATH
    python bench/relay_bench.py                         # about 20 s
    python bench/relay_bench.py --concurrency 1,16,64,256 --duration 5 --idle-streams 200 --round-trips 2000
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src" / "strands_robots"))

from strands_robots.client import EvaluationClient, Policy, pb  # noqa: E402
from strands_robots.station_link.link import StationLink  # noqa: E402

CLIENT_TOKEN = "bench-client-token-0123456789"
STATION_TOKEN = "bench-station-token-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src" / "strands_robots") + os.pathsep + env.get("PYTHONPATH", "")
    return env


IDLE_TOKEN = "bench-idle-token-0123456789"


def _start_relay(port: int, store: str, tokens: Path, *extra: str) -> subprocess.Popen:
    # the idle streams stay open for the whole run: a long first-message deadline and room for them
    proc = subprocess.Popen([sys.executable, "-m", "strands_robots.relay", "--listen", f"127.0.0.1:{port}",
                             "--store", store, "--tokens", str(tokens), "--poll-s", "0.2",
                             "--first-message-deadline-s", "3600", "--max-streams-per-token", "100000", *extra],
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        if proc.poll() is not None:
            raise SystemExit(f"relay exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("relay did not start")


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _status_with(job_id: str, episodes: int) -> "pb.JobStatus":
    status = pb.JobStatus(job_id=job_id, station_id="bench_station", state=pb.JOB_RUNNING, episodes_total=episodes + 1,
                          updated_unix_ms=int(time.time() * 1000), message="bench")
    for i in range(episodes):
        ep = status.episodes.add(episode_id=f"ep_{i:04d}", end_condition=pb.END_TIMEOUT, scored=True, success=True,
                                 score=1.0)
        ep.items.add(name="placed", answer_type=pb.ANSWER_TYPE_YES_NO, yes_no=True, points=1, max_points=1,
                     is_success_item=True)
        ep.task.task_id = "pick"
        ep.task.instruction = "pick up the cube"
    return status


_IDLE = textwrap.dedent("""
    import asyncio, sys, grpc

    async def main(target, token, n):
        channels = [grpc.aio.insecure_channel(target) for _ in range(4)]
        md = (("authorization", "Bearer " + token),)
        calls = [channels[i % 4].stream_stream("/strands_robots.relay.v1.Evaluation/ServePolicy")(metadata=md)
                 for i in range(n)]
        for call in calls:
            await call.initial_metadata()  # the relay holds the stream; it never gets an attach
        print("open", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
""")

_POLLER = textwrap.dedent("""
    import asyncio, json, sys, time
    import grpc
    from strands_robots.wire.proto import evaluation_service_pb2 as es
    from strands_robots.wire.proto import evaluation_service_pb2_grpc as es_grpc

    target, token, job_id = sys.argv[1], sys.argv[2], sys.argv[3]
    clients, duration_s = int(sys.argv[4]), float(sys.argv[5])
    md = (("authorization", "Bearer " + token),)

    async def main():
        channels = [grpc.aio.insecure_channel(target) for _ in range(clients)]
        stubs = [es_grpc.EvaluationStub(c) for c in channels]
        request = es.GetStatusRequest(job_id=job_id)
        for stub in stubs:
            await stub.GetStatus(request, metadata=md, timeout=10)  # connect before timing
        latencies, errors = [], []
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # go
        end = time.perf_counter() + duration_s

        async def run(stub):
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                try:
                    await stub.GetStatus(request, metadata=md, timeout=10)
                except grpc.RpcError as exc:
                    errors.append(exc.code().name)
                    continue
                latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(run(stub) for stub in stubs))
        elapsed = time.perf_counter() - t0
        for c in channels:
            await c.close()
        print(json.dumps({"elapsed": elapsed, "latencies": latencies, "errors": errors}))

    asyncio.run(main())
""")


def bench_get_status(target: str, job_id: str, clients: int, duration_s: float, processes: int, tmp: Path) -> dict:
    script = tmp / "poller.py"
    script.write_text(_POLLER)
    shares = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    workers = [subprocess.Popen([sys.executable, str(script), target, CLIENT_TOKEN, job_id, str(n), str(duration_s)],
                                env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for n in shares if n > 0]
    try:
        for w in workers:
            if w.stdout.readline().strip() != "ready":
                raise SystemExit("a get_status worker failed to start")
        for w in workers:  # all start together
            w.stdin.write("go\n")
            w.stdin.flush()
        results = [json.loads(w.stdout.readline()) for w in workers]
    finally:
        for w in workers:
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait(5)
    flat = [x for r in results for x in r["latencies"]]
    elapsed = max(r["elapsed"] for r in results)
    errors = [e for r in results for e in r["errors"]]
    return {"clients": clients, "calls": len(flat), "per_s": len(flat) / elapsed, "errors": len(errors),
            "p50_ms": _pct(flat, 0.50) * 1e3, "p99_ms": _pct(flat, 0.99) * 1e3}


_TEAM = textwrap.dedent("""
    import sys
    from strands_robots.client import EvaluationClient, Policy

    class Chunker(Policy):
        def act(self, observation):
            base = observation["joint_0"]
            return [{"left/joint_1": base + i} for i in range(8)]

    EvaluationClient(sys.argv[1], token=sys.argv[2]).serve_policy(sys.argv[3], Chunker())
""")


class Chunker(Policy):
    def act(self, observation):
        base = observation["joint_0"]
        return [{"left/joint_1": base + i} for i in range(8)]


def bench_round_trip(target: str, job_id: str, n: int, obs_keys: int, link: StationLink, tmp: Path) -> dict:
    script = tmp / "team.py"
    script.write_text(_TEAM)
    team = subprocess.Popen([sys.executable, str(script), target, CLIENT_TOKEN, job_id], env=_env())
    try:
        session = link.open_session(job_id)
        session.wait_attached(30)
        session.start_episode("ep_0000", pb.Task(task_id="pick", instruction="pick"))
        obs = {f"joint_{i}": 0.01 * i for i in range(obs_keys)}
        for _ in range(50):  # warm-up
            session.act(obs)
        relay_times = []
        for _ in range(n):
            t0 = time.perf_counter()
            session.act(obs)
            relay_times.append(time.perf_counter() - t0)
        session.end_episode("ep_0000", "timeout")
        direct, policy = [], Chunker()
        for _ in range(n):
            t0 = time.perf_counter()
            policy.act(obs)
            direct.append(time.perf_counter() - t0)
        session.close()
    finally:
        link.report(pb.JobStatus(job_id=job_id, station_id="bench_station", state=pb.JOB_SUCCEEDED,
                                 episodes_total=1, updated_unix_ms=int(time.time() * 1000) + 1000))
        link.flush(10)
        try:
            team.wait(15)
        except subprocess.TimeoutExpired:
            team.kill()
            team.wait(5)
    mean_relay, mean_direct = statistics.fmean(relay_times), statistics.fmean(direct)
    return {"n": n, "relay_mean_us": mean_relay * 1e6, "relay_p99_us": _pct(relay_times, 0.99) * 1e6,
            "direct_mean_us": mean_direct * 1e6, "direct_p99_us": _pct(direct, 0.99) * 1e6,
            "ratio": mean_relay / mean_direct}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--concurrency", default="1,16,64,256",
                   help="client counts for get_status (default %(default)s)")
    p.add_argument("--duration", type=float, default=5.0, help="seconds per concurrency level")
    p.add_argument("--idle-streams", type=int, default=200,
                   help="ServePolicy streams held open without attach during get_status (default %(default)s)")
    p.add_argument("--client-processes", type=int, default=2,
                   help="worker processes the get_status clients are spread over (default %(default)s)")
    p.add_argument("--episodes", type=int, default=10, help="finished episodes in the polled snapshot")
    p.add_argument("--round-trips", type=int, default=2000, help="policy round trips to time")
    p.add_argument("--obs-keys", type=int, default=14, help="float entries in the observation")
    p.add_argument("--store", default="", help="store URL (default: a throwaway SQLite file)")
    p.add_argument("--cluster", action="store_true",
                   help="the relay-cluster figures instead (bench/relay_cluster.py): one vs two relays on one "
                        "PostgreSQL (--store, else a throwaway server from Debian's binaries) and failover")
    p.add_argument("--cluster-stale-s", type=float, default=3.0, help="with --cluster: the relays' cluster_stale_s")
    p.add_argument("--failover-trials", type=int, default=3, help="with --cluster: failover trials")
    args = p.parse_args(argv)
    if args.cluster:
        return _cluster(args)
    levels = [int(x) for x in args.concurrency.split(",") if x]

    with tempfile.TemporaryDirectory(prefix="relay_bench_") as tmp_name:
        tmp = Path(tmp_name)
        tokens = tmp / "tokens.yaml"
        tokens.write_text(f"clients:\n  bench_team: {CLIENT_TOKEN}\n  idle_team: {IDLE_TOKEN}\n"
                          f"stations:\n  bench_station: {STATION_TOKEN}\n")
        tokens.chmod(0o600)  # the relay refuses a tokens file others may read
        store = args.store or f"sqlite:{tmp / 'relay.db'}"
        port = _free_port()
        target = f"127.0.0.1:{port}"
        relay = _start_relay(port, store, tokens)
        link = StationLink(target, "bench_station", STATION_TOKEN, heartbeat_s=1.0).start()
        idle = None
        try:
            with EvaluationClient(target, token=CLIENT_TOKEN) as client:
                task = pb.Task(task_id="pick", instruction="pick up the cube")
                task.scoring.items.add(name="placed", question="Placed?", answer_type=pb.ANSWER_TYPE_YES_NO,
                                       max_points=1, success_answer="yes")
                polled = client.submit_job(station_id="bench_station", tasks=[task], episodes=args.episodes + 1)
                served = client.submit_job(station_id="bench_station", tasks=[task], episodes=1)
            link.report(_status_with(polled, args.episodes))
            link.flush(10)
            size = len(_status_with(polled, args.episodes).SerializeToString())
            print(f"relay bench: relay process on {target}, store {store.split(':')[0]}, "
                  f"{os.cpu_count()} CPU(s), python {sys.version.split()[0]}")
            if args.idle_streams:
                script = tmp / "idle.py"
                script.write_text(_IDLE)
                idle = subprocess.Popen([sys.executable, str(script), target, IDLE_TOKEN, str(args.idle_streams)],
                                        env=_env(), stdout=subprocess.PIPE, text=True)
                if idle.stdout.readline().strip() != "open":
                    raise SystemExit("the idle streams did not open")
            print(f"\nget_status (snapshot with {args.episodes} episodes, {size} bytes; {args.duration:g} s per level; "
                  f"{args.idle_streams} idle ServePolicy streams open; clients in {args.client_processes} process(es))")
            print(f"{'clients':>8} {'calls':>8} {'calls/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
            for n in levels:
                r = bench_get_status(target, polled, n, args.duration, args.client_processes, tmp)
                print(f"{r['clients']:>8} {r['calls']:>8} {r['per_s']:>10.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                      f"{r['errors']:>7}", flush=True)
            if idle is not None:
                idle.kill()
                idle.wait(10)
                idle = None
            r = bench_round_trip(target, served, args.round_trips, args.obs_keys, link, tmp)
            print(f"\npolicy round trip ({args.obs_keys}-key observation out, 8-step chunk back; {r['n']} calls)")
            print(f"  through the relay : mean {r['relay_mean_us']:8.1f} us   p99 {r['relay_p99_us']:8.1f} us")
            print(f"  direct in-process : mean {r['direct_mean_us']:8.1f} us   p99 {r['direct_p99_us']:8.1f} us")
            print(f"  ratio (relay / direct, means): {r['ratio']:.0f}x")
        finally:
            if idle is not None:
                idle.kill()
                idle.wait(10)
            link.close()
            relay.send_signal(signal.SIGTERM)
            try:
                relay.wait(10)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait(5)
    return 0


def _cluster(args) -> int:
    import contextlib

    from relay_cluster import run

    with tempfile.TemporaryDirectory(prefix="relay_bench_") as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        tokens = tmp / "tokens.yaml"
        tokens.write_text(f"clients:\n  bench_team: {CLIENT_TOKEN}\nstations:\n  bench_station: {STATION_TOKEN}\n")
        tokens.chmod(0o600)
        store = args.store
        if not store.startswith(("postgresql://", "postgres://")):
            sys.path.insert(0, str(ROOT / "src" / "strands_robots" / "test"))
            from test_relay_harness import postgres_server  # a throwaway server, stopped on exit

            store = stack.enter_context(postgres_server())
        print(f"relay bench --cluster: {os.cpu_count()} CPU(s), python {sys.version.split()[0]}")
        run(args, tmp, tokens, store)
    return 0


if __name__ == "__main__":
    sys.exit(main())
