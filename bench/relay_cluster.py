"""Relay cluster figures for ``relay_bench.py --cluster``: one relay vs two relays on one PostgreSQL, and failover.

- ``get_status`` at each concurrency level: all clients on relay A (one relay), then the same clients split
  over relays A and B (two relay processes on the same store), each half in its own worker process.
- policy round trip (``act``: observation out, 8-step chunk back): station and team on relay A, then the
  station on A and the team on B (the team's stream forwarded to the session's home: one more hop).
- failover, kill to the next answered call (``--failover-trials`` fresh pairs of relays each):
  ``get_status`` of a client given both addresses (A first) when A is SIGKILLed; and the policy: the station
  (given A and B, attached to A, the session's home on A) acting in a loop, A SIGKILLed, the station opening
  a new session (now on B), which B can take over once A was silent for ``--cluster-stale-s``; the time to
  the first answered ``act`` after the kill.

Every relay is a process of its own (``python -m strands_robots.relay`` with ``--advertise``), ended by PID.
"""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from relay_bench import (
    _POLLER,
    _TEAM,
    CLIENT_TOKEN,
    STATION_TOKEN,
    _env,
    _free_port,
    _pct,
    _start_relay,
    _status_with,
)

from strands_robots.client import EvaluationClient, RelayError, pb
from strands_robots.station_link.link import StationLink
from strands_robots.station_link.session import PolicySessionError


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _relay(store: str, tokens: Path, stale_s: float) -> "tuple[subprocess.Popen, str]":
    port = _free_port()
    return _start_relay(port, store, tokens, "--cluster-stale-s", str(stale_s)), f"127.0.0.1:{port}"


def _task() -> "pb.Task":
    task = pb.Task(task_id="pick", instruction="pick up the cube")
    task.scoring.items.add(name="placed", question="Placed?", answer_type=pb.ANSWER_TYPE_YES_NO, max_points=1,
                           success_answer="yes")
    return task


def get_status_split(targets: list, job_id: str, clients: int, duration_s: float, tmp: Path) -> dict:
    """``clients`` pollers split over ``targets`` (one worker process per target), started together."""
    script = tmp / "poller.py"
    script.write_text(_POLLER)
    shares = [clients // len(targets) + (1 if i < clients % len(targets) else 0) for i in range(len(targets))]
    workers = [subprocess.Popen([sys.executable, str(script), t, CLIENT_TOKEN, job_id, str(n), str(duration_s)],
                                env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for t, n in zip(targets, shares) if n > 0]
    try:
        for w in workers:
            if w.stdout.readline().strip() != "ready":
                raise SystemExit("a get_status worker failed to start")
        for w in workers:
            w.stdin.write("go\n")
            w.stdin.flush()
        results = [json.loads(w.stdout.readline()) for w in workers]
    finally:
        for w in workers:
            _stop(w)
    flat = [x for r in results for x in r["latencies"]]
    elapsed = max(r["elapsed"] for r in results)
    return {"calls": len(flat), "per_s": len(flat) / elapsed, "errors": sum(len(r["errors"]) for r in results),
            "p50_ms": _pct(flat, 0.50) * 1e3, "p99_ms": _pct(flat, 0.99) * 1e3}


def round_trip(station_target: str, team_target: str, job_id: str, n: int, obs_keys: int, tmp: Path) -> dict:
    script = tmp / "team.py"
    script.write_text(_TEAM)
    link = StationLink(station_target, "bench_station", STATION_TOKEN, heartbeat_s=1.0).start()
    team = subprocess.Popen([sys.executable, str(script), team_target, CLIENT_TOKEN, job_id], env=_env())
    try:
        session = link.open_session(job_id)
        session.wait_attached(30)
        session.start_episode("ep_0000", pb.Task(task_id="pick", instruction="pick"))
        obs = {f"joint_{i}": 0.01 * i for i in range(obs_keys)}
        for _ in range(50):
            session.act(obs)
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            session.act(obs)
            times.append(time.perf_counter() - t0)
        session.end_episode("ep_0000", "timeout")
        session.close()
    finally:
        link.report(pb.JobStatus(job_id=job_id, station_id="bench_station", state=pb.JOB_SUCCEEDED, episodes_total=1,
                                 sequence=99, updated_unix_ms=int(time.time() * 1000)))
        link.flush(10)
        link.close()
        try:
            team.wait(15)
        except subprocess.TimeoutExpired:
            team.kill()
            team.wait(5)
    return {"mean_us": statistics.fmean(times) * 1e6, "p50_us": _pct(times, 0.5) * 1e6,
            "p99_us": _pct(times, 0.99) * 1e6}


def failover_trial(store: str, tokens: Path, stale_s: float, obs_keys: int, tmp: Path) -> dict:
    """One trial on a fresh pair of relays: seconds from A's SIGKILL to the next answered get_status and act."""
    relay_a, a = _relay(store, tokens, stale_s)
    relay_b, b = _relay(store, tokens, stale_s)
    script = tmp / "team.py"
    script.write_text(_TEAM)
    team = link = None
    try:
        with EvaluationClient(b, token=CLIENT_TOKEN) as submitter:
            job_id = submitter.submit_job(station_id="bench_station", tasks=[_task()], episodes=1)
        link = StationLink([a, b], "bench_station", STATION_TOKEN, heartbeat_s=0.5, retry_s=(0.05, 0.5)).start()
        link.report(_status_with(job_id, 0))
        link.flush(10)
        poller = EvaluationClient([a, b], token=CLIENT_TOKEN, timeout_s=2.0)
        poller.get_status(job_id)  # connected to A (first)
        obs = {f"joint_{i}": 0.01 * i for i in range(obs_keys)}
        session = link.open_session(job_id)  # the station first: the home is A
        team = subprocess.Popen([sys.executable, str(script), b, CLIENT_TOKEN, job_id], env=_env())
        session.wait_attached(30)
        session.start_episode("ep_0000", pb.Task(task_id="pick", instruction="pick"))
        session.act(obs)
        status_after: dict = {}

        def poll_until_answered() -> None:
            while "s" not in status_after:
                try:
                    poller.get_status(job_id)
                except RelayError:
                    continue
                status_after["s"] = time.perf_counter()

        relay_a.send_signal(signal.SIGKILL)
        killed = time.perf_counter()
        relay_a.wait(10)
        poll = threading.Thread(target=poll_until_answered, daemon=True)
        poll.start()
        answered = None
        episode = 1
        while answered is None and time.perf_counter() - killed < 120:
            try:
                session.act(obs)
                continue  # an answer still in flight before the kill reached us
            except PolicySessionError:
                session.close()
            try:
                session = link.open_session(job_id)
                session.wait_attached(30)
                session.start_episode(f"ep_{episode:04d}", pb.Task(task_id="pick", instruction="pick"))
                session.act(obs)
                answered = time.perf_counter()
            except PolicySessionError:
                session.close()
                episode += 1
        poll.join(60)
        session.close()
        poller.close()
        link.report(pb.JobStatus(job_id=job_id, station_id="bench_station", state=pb.JOB_SUCCEEDED, episodes_total=1,
                                 sequence=99, updated_unix_ms=int(time.time() * 1000)))
        link.flush(10)
        return {"get_status_s": status_after.get("s", float("nan")) - killed,
                "act_s": (answered - killed) if answered else float("nan")}
    finally:
        if link is not None:
            link.close()
        if team is not None:
            _stop(team)
        _stop(relay_a, signal.SIGKILL)
        _stop(relay_b)


def run(args, tmp: Path, tokens: Path, store: str) -> None:
    levels = [int(x) for x in args.concurrency.split(",") if x]
    relay_a, a = _relay(store, tokens, args.cluster_stale_s)
    relay_b = None
    try:
        with EvaluationClient(a, token=CLIENT_TOKEN) as client:
            polled = client.submit_job(station_id="bench_station", tasks=[_task()], episodes=args.episodes + 1)
            one = client.submit_job(station_id="bench_station", tasks=[_task()], episodes=1)
            two = client.submit_job(station_id="bench_station", tasks=[_task()], episodes=1)
        link = StationLink(a, "bench_station", STATION_TOKEN, heartbeat_s=1.0).start()
        link.report(_status_with(polled, args.episodes))
        link.flush(10)
        link.close()
        relay_b, b = _relay(store, tokens, args.cluster_stale_s)
        print(f"\nrelay cluster on {store.split('@')[-1]} (PostgreSQL; relays {a} and {b}; "
              f"cluster_stale_s {args.cluster_stale_s:g})")
        print(f"get_status ({args.duration:g} s per level)")
        print(f"{'clients':>8} {'relays':>7} {'calls/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
        for n in levels:
            for targets in ([a], [a, b]) if n > 1 else ([a],):  # one client is on one relay either way
                r = get_status_split(targets, polled, n, args.duration, tmp)
                print(f"{n:>8} {len(targets):>7} {r['per_s']:>10.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                      f"{r['errors']:>7}", flush=True)
        print(f"policy round trip ({args.obs_keys}-key observation, 8-step chunk; {args.round_trips} calls)")
        for label, station, team, job in (("station and team on A", a, a, one),
                                          ("station on A, team on B", a, b, two)):
            r = round_trip(station, team, job, args.round_trips, args.obs_keys, tmp)
            print(f"  {label:<24}: mean {r['mean_us']:8.1f} us   p50 {r['p50_us']:8.1f} us   "
                  f"p99 {r['p99_us']:8.1f} us", flush=True)
    finally:
        _stop(relay_a)
        if relay_b is not None:
            _stop(relay_b)
    trials = [failover_trial(store, tokens, args.cluster_stale_s, args.obs_keys, tmp)
              for _ in range(args.failover_trials)]
    print(f"failover, relay A SIGKILLed -> next answered call ({len(trials)} trial(s), each on a fresh pair)")
    for key, label in (("get_status_s", "get_status (client given A,B)"),
                       ("act_s", "policy act (station given A,B)")):
        values = [t[key] for t in trials]
        each = "  ".join(f"{v:.2f}" for v in values)
        print(f"  {label:<32}: {each} s   (median {statistics.median(values):.2f} s)")
