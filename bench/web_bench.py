"""Web status page benchmark: how long a station's snapshot takes to reach an open page, and page render times.

Not a pass/fail test: it prints figures.

- The page (``WebStatusServer``) runs in this process on a throwaway SQLite store, listening on 127.0.0.1.
- **Update latency**: ``--streams`` job pages hold their server-sent event stream open (plain HTTP clients on
  threads of their own, each reading its stream); a snapshot with one more finished episode is put in the store
  every ``--interval`` s, ``--updates`` times; reported: the time from the store write to each stream's event
  (p50, p95, max over all streams and updates), for each ``--poll`` period of the page (it re-reads the store
  that often; expected about half a period on average).
- **Render**: GET of the job list (``--jobs`` jobs of ``--episodes`` finished episodes each, 50 listed) and of one
  job's page, ``--renders`` times each, one client; reported: mean and p95 (ms).

Usage::

    source scripts/env.sh --no-install; export PYTHONPATH=$PWD/src/strands_robots:$PYTHONPATH
    python bench/web_bench.py                 # about 30 s
    python bench/web_bench.py --streams 50 --poll 0.5,0.1 --updates 20 --jobs 50 --episodes 20
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src" / "strands_robots"))

from strands_robots.client import pb  # noqa: E402
from strands_robots.relay.auth import TokenBook  # noqa: E402
from strands_robots.relay.sqlite_store import SqliteStore  # noqa: E402
from strands_robots.relay.store import JobRecord, Snapshot  # noqa: E402
from strands_robots.relay.web.server import WebStatusServer  # noqa: E402

TOKEN = "bench-team-token-0123456789"


def _episode(i: int):
    e = pb.EpisodeResult(episode_id=f"ep_{i:04d}", end_condition="timeout", scored=True, success=i % 2 == 0,
                         score=1.0 if i % 2 == 0 else 0.0)
    e.task.task_id = "pick"
    e.items.add(name="placed", answer_type=pb.ANSWER_TYPE_YES_NO, yes_no=i % 2 == 0,
                points=1.0 if i % 2 == 0 else 0.0, max_points=1.0, is_success_item=True)
    return e


def _put(store, job_id: str, sequence: int, episodes: int, total: int) -> None:
    status = pb.JobStatus(job_id=job_id, station_id="sim_station", state="RUNNING", episodes_total=total,
                          updated_unix_ms=int(time.time() * 1000), message=f"update {sequence}", sequence=sequence)
    status.episodes.extend(_episode(i) for i in range(episodes))
    store.put_snapshot(Snapshot(job_id=job_id, updated_unix_ms=status.updated_unix_ms, state="RUNNING",
                                payload=status.SerializeToString(), episodes_done=episodes, sequence=sequence))


def _create(store, job_id: str, total: int, at: int) -> None:
    request = pb.SubmitJobRequest(station_id="sim_station", episodes=total, job_id=job_id)
    store.create_job(JobRecord(job_id=job_id, client_id="team", station_id="sim_station",
                               request=request.SerializeToString(), submitted_unix_ms=at, episodes_total=total))


def _sign_in(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/signin")
    response = conn.getresponse()
    page = response.read().decode()
    pre = response.headers["Set-Cookie"].split(";", 1)[0]
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    conn.request("POST", "/signin", body=urlencode({"csrf": csrf, "token": TOKEN}),
                 headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": pre})
    response = conn.getresponse()
    response.read()
    conn.close()
    return [c for c in response.headers.get_all("Set-Cookie") if c.startswith("sr_session=")][0].split(";", 1)[0]


def _listen(port: int, cookie: str, job_id: str, written: dict, latencies: list, ready: threading.Barrier,
            want: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", f"/jobs/{job_id}/events", headers={"Cookie": cookie})
    response = conn.getresponse()
    first = True
    while True:
        line = response.fp.readline().decode()
        if not line:
            break
        if 'id="progress">' not in line:
            continue
        done = int(line.split('id="progress">', 1)[1].split("/", 1)[0])
        if first:  # the page's state when the stream opened
            first = False
            ready.wait()
            continue
        at = written.get(done)
        if at is not None:  # (two snapshots inside one poll period show as one: the first is not measured)
            latencies.append(time.perf_counter() - at)
        if done >= want:
            break
    conn.close()


def update_latency(poll_s: float, streams: int, updates: int, interval_s: float) -> list:
    with tempfile.TemporaryDirectory(prefix="web_bench_") as tmp:
        store = SqliteStore(os.path.join(tmp, "relay.db"))
        web = WebStatusServer(store, lambda: TokenBook({"team": TOKEN}, {}), "127.0.0.1:0", poll_s=poll_s)
        port = web.start()
        try:
            _create(store, "live", updates + 1, 1)
            _put(store, "live", 1, 0, updates + 1)
            cookie = _sign_in(port)
            web.page.sessions.max_sessions = 10_000
            written: dict = {}
            latencies: list = []
            ready = threading.Barrier(streams + 1)
            # one session holds at most 8 streams: sign in once per 8
            cookies = [cookie] + [_sign_in(port) for _ in range((streams - 1) // 8)]
            threads = [threading.Thread(target=_listen, args=(port, cookies[i // 8], "live", written, latencies,
                                                              ready, updates), daemon=True)
                       for i in range(streams)]
            for t in threads:
                t.start()
            ready.wait(timeout=30)
            for n in range(1, updates + 1):
                time.sleep(interval_s)
                written[n] = time.perf_counter()
                _put(store, "live", n + 1, n, updates + 1)
            for t in threads:
                t.join(timeout=30)
            return latencies
        finally:
            web.stop()
            store.close()


def render_times(jobs: int, episodes: int, renders: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="web_bench_") as tmp:
        store = SqliteStore(os.path.join(tmp, "relay.db"))
        for i in range(jobs):
            _create(store, f"job-{i:03d}", episodes, i)
            _put(store, f"job-{i:03d}", 1, episodes, episodes)
        web = WebStatusServer(store, lambda: TokenBook({"team": TOKEN}, {}), "127.0.0.1:0")
        port = web.start()
        out = {}
        try:
            cookie = _sign_in(port)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            for name, path in (("list", "/jobs"), ("job", "/jobs/job-000")):
                times = []
                for _ in range(renders):
                    t0 = time.perf_counter()
                    conn.request("GET", path, headers={"Cookie": cookie})
                    response = conn.getresponse()
                    body = response.read()
                    times.append(time.perf_counter() - t0)
                    assert response.status == 200 and body
                out[name] = times
            conn.close()
            return out
        finally:
            web.stop()
            store.close()


def _ms(values: list, q: float) -> float:
    values = sorted(values)
    return 1000.0 * values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--streams", type=int, default=20)
    p.add_argument("--poll", default="0.5,0.1", help="the page's poll periods to measure (s), comma-separated")
    p.add_argument("--updates", type=int, default=15)
    p.add_argument("--interval", type=float, default=0.73, help="seconds between snapshots (not a multiple of a poll)")
    p.add_argument("--jobs", type=int, default=50)
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--renders", type=int, default=50)
    args = p.parse_args()
    print(f"web_bench: {os.cpu_count()} CPU(s), Python {sys.version.split()[0]}, load {os.getloadavg()[0]:.2f}")
    for poll in (float(x) for x in args.poll.split(",")):
        lat = update_latency(poll, args.streams, args.updates, args.interval)
        print(f"update latency, poll {poll:g} s, {args.streams} streams x {args.updates} updates "
              f"({len(lat)} events): p50 {_ms(lat, 0.5):.0f} ms, p95 {_ms(lat, 0.95):.0f} ms, "
              f"max {_ms(lat, 1.0):.0f} ms")
    times = render_times(args.jobs, args.episodes, args.renders)
    for name, values in times.items():
        what = f"job list ({args.jobs} jobs x {args.episodes} episodes)" if name == "list" else \
            f"job page ({args.episodes} episodes)"
        print(f"render {what}: mean {1000 * statistics.mean(values):.1f} ms, p95 {_ms(values, 0.95):.1f} ms "
              f"over {len(values)} GETs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
