"""Camera frames through the relay: bytes per observation and the policy round trip, two cameras vs joints only.

Not pass/fail: it prints figures. The relay runs as its own process (``python -m strands_robots.relay``, SQLite
store, 127.0.0.1 only); the Evaluation Client serving the policy is another process (its policy checks each
image's shape and returns an 8-step chunk). The observation is a real one: the joint readings of the in-process
MuJoCo arms and one real render of each camera of ``config/cameras.yaml`` (``scene`` and ``wrist``, 224x224).

Per case, every call does what the station's ``relay`` provider does per step: the task's camera request
applied (:func:`strands_robots.cameras.request.encode_observation`: select, resize, JPEG/PNG encode), then
``PolicySession.act`` through the relay; the client decodes the images before ``act``. Timed on the station's
side, from before the encoding to the chunk back. Cases: joints only (``cameras: none``), both cameras as JPEG
(quality 90, and 75), both as PNG, and both as raw ``Tensor`` bytes (no compression, as before JPEG).

Usage (about 30 s)::

    source scripts/env.sh --no-install; export PYTHONPATH=$PWD/src/strands_robots:$PYTHONPATH
    python bench/relay_image_bench.py --round-trips 1000
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src" / "strands_robots"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from relay_bench import CLIENT_TOKEN, STATION_TOKEN, _env, _free_port, _pct, _start_relay  # noqa: E402

from strands_robots.cameras.request import encode_observation, image_request  # noqa: E402
from strands_robots.client import EvaluationClient, codec, pb  # noqa: E402
from strands_robots.station_link.link import StationLink  # noqa: E402

_TEAM = textwrap.dedent("""
    import sys
    from strands_robots.client import EvaluationClient, Policy

    class Looker(Policy):
        def act(self, observation):
            for key, value in observation.items():
                if key.endswith(".image") and (value.shape != (224, 224, 3) or value.dtype.name != "uint8"):
                    raise ValueError(f"{key}: {value.shape} {value.dtype}")
            base = observation["right.joint_1.pos"]
            return [{"right.joint_1": base + 0.001 * i} for i in range(8)]

    EvaluationClient(sys.argv[1], token=sys.argv[2]).serve_policy(sys.argv[3], Looker())
""")

CASES = (
    ("joints only", {"cameras": "none"}),
    ("2 cameras JPEG q90", {"cameras": "scene:224x224,wrist:224x224", "image_quality": "90"}),
    ("2 cameras JPEG q75", {"cameras": "scene:224x224,wrist:224x224", "image_quality": "75"}),
    ("2 cameras PNG", {"cameras": "scene:224x224,wrist:224x224", "image_format": "png"}),
    ("2 cameras raw Tensor", None),  # the arrays as they are: Tensor bytes, no compression
)


def real_observation() -> dict:
    """Return one observation of the in-process arms with a real render of each camera (start pose)."""
    from strands_robots.cameras.config import load_camera_set
    from strands_robots.simulation import Simulation

    sim = Simulation.with_robot("bench", cameras=load_camera_set())
    backend = sim.robot("bench").backend
    backend.set_task({"parameters": {"object_x": "0.4", "object_y": "-0.15"}})
    backend.reset(1)
    for key, value in {"joint_2": 0.4, "joint_3": 1.0, "joint_4": 0.9}.items():
        for arm in ("left", "right"):
            backend.send_action({f"{arm}.{key}": value})
    obs = backend.observe()
    backend.close()
    return obs


def run_case(session, obs: dict, params, n: int) -> dict:
    request = image_request(params) if params is not None else None

    def encoded():
        return encode_observation(obs, request) if request is not None else obs

    size = len(codec.observation_to_pb(encoded(), skip_unsupported=True).SerializeToString())
    for _ in range(30):  # warm-up
        session.act(encoded())
    times, encode_times = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        out = encoded()
        t1 = time.perf_counter()
        session.act(out)
        times.append(time.perf_counter() - t0)
        encode_times.append(t1 - t0)
    return {"bytes": size, "mean_ms": statistics.fmean(times) * 1e3, "p50_ms": _pct(times, 0.5) * 1e3,
            "p99_ms": _pct(times, 0.99) * 1e3, "encode_ms": statistics.fmean(encode_times) * 1e3}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--round-trips", type=int, default=1000, help="timed round trips per case")
    args = p.parse_args(argv)
    obs = real_observation()
    with tempfile.TemporaryDirectory(prefix="relay_image_bench_") as tmp_name:
        tmp = Path(tmp_name)
        tokens = tmp / "tokens.yaml"
        tokens.write_text(f"clients:\n  bench_team: {CLIENT_TOKEN}\nstations:\n  bench_station: {STATION_TOKEN}\n")
        tokens.chmod(0o600)
        port = _free_port()
        target = f"127.0.0.1:{port}"
        relay = _start_relay(port, f"sqlite:{tmp / 'relay.db'}", tokens)
        link = StationLink(target, "bench_station", STATION_TOKEN, heartbeat_s=1.0).start()
        team, job_id = None, ""
        try:
            with EvaluationClient(target, token=CLIENT_TOKEN) as client:
                task = pb.Task(task_id="look", instruction="look")
                task.scoring.items.add(name="ok", question="OK?", answer_type=pb.ANSWER_TYPE_YES_NO, max_points=1,
                                       success_answer="yes")
                job_id = client.submit_job(station_id="bench_station", tasks=[task], episodes=1)
            script = tmp / "team.py"
            script.write_text(_TEAM)
            team = subprocess.Popen([sys.executable, str(script), target, CLIENT_TOKEN, job_id], env=_env())
            session = link.open_session(job_id, reply_timeout_s=30.0)
            session.wait_attached(60)
            session.start_episode("ep_0000", task, action_keys=["right.joint_1"])
            load = os.getloadavg()
            print(f"relay image bench: relay process on {target}; {os.cpu_count()} CPU(s), "
                  f"{platform.platform()}, python {sys.version.split()[0]}; load average {load[0]:.2f} at start; "
                  f"{len([k for k in obs if not k.endswith('.image')])} non-image keys + "
                  f"{', '.join(k for k in obs if k.endswith('.image'))}; {args.round_trips} calls per case")
            print(f"{'case':<22} {'bytes/obs':>10} {'encode ms':>10} {'mean ms':>8} {'p50 ms':>8} {'p99 ms':>8}")
            for name, params in CASES:
                r = run_case(session, obs, params, args.round_trips)
                print(f"{name:<22} {r['bytes']:>10} {r['encode_ms']:>10.2f} {r['mean_ms']:>8.2f} {r['p50_ms']:>8.2f} "
                      f"{r['p99_ms']:>8.2f}", flush=True)
            print(f"load average {os.getloadavg()[0]:.2f} at the end")
            session.end_episode("ep_0000", "timeout")
            session.close()
        finally:
            if job_id:
                link.report(pb.JobStatus(job_id=job_id, station_id="bench_station", state=pb.JOB_SUCCEEDED,
                                         episodes_total=1, updated_unix_ms=int(time.time() * 1000) + 1000))
                link.flush(10)
            if team is not None:
                try:
                    team.wait(15)
                except subprocess.TimeoutExpired:
                    team.kill()
                    team.wait(5)
            link.close()
            relay.send_signal(signal.SIGTERM)
            try:
                relay.wait(10)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
