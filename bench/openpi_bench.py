"""openpi bridge benchmark: one observation with two 224x224 images to a real openpi server and its actions back.

Not a pass/fail test: it prints figures. The server is openpi's own ``WebsocketPolicyServer`` (openpi-server
0.1.0 in its own venv, built and cached by ``test/openpi_harness.py``) serving a trivial deterministic policy
(a [4, 8] chunk) on 127.0.0.1. Three ways to call it, each ``--calls`` times after ``--warmup``:

- ``direct``: openpi-client's own ``WebsocketClientPolicy.infer`` in the openpi venv (the team's baseline);
- ``bridge``: this package's ``OpenPIPolicy.act`` in this process (station observation -> droid mapping ->
  openpi wire -> actions mapped back to a chunk);
- ``relay``: the station's ``PolicySession.act`` in this process -> a relay process -> ``strands-robots job serve
  --openpi`` (the Evaluation Client and the bridge, its own process) -> the server, and the chunk back;
- ``relay-jpeg`` (with ``--ways ...,relay-jpeg``): the ``relay`` path with the frames as the station sends them
  for a task asking ``cameras=scene:224x224,wrist:224x224`` (JPEG q90, encoding counted in the round trip;
  scene-like frames: smooth shading, a red block, sensor noise), decoded by the client before the bridge;
- ``echo`` (with ``--ways ...,echo``): the same relay path to an Evaluation Client whose policy answers a fixed
  chunk at once (no openpi server): what the relay hop alone costs for this observation.

Reported per way: mean, p50, p90 and p99 of one round trip (ms), and each way's mean against ``direct``, with the
target for the full path (``relay`` <= 1.3 x direct + 5 ms).

Usage::

    source scripts/env.sh --no-install; export PYTHONPATH=$PWD/src/strands_robots:$PYTHONPATH
    python bench/openpi_bench.py                      # about 30 s (the first run also builds the openpi venv)
    python bench/openpi_bench.py --calls 1000 --ways direct,bridge
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src" / "strands_robots" / "test"))

import numpy as np  # noqa: E402
from openpi_harness import openpi_venv, start_openpi_server, stop_server  # noqa: E402
from test_relay_harness import (  # noqa: E402
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
    yes_no_task,
)

KEYS = tuple(f"{arm}.{joint}" for arm in ("left", "right")
             for joint in ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_6", "gripper"))

_DIRECT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    url, calls, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(0)
    policy = WebsocketClientPolicy(url)
    obs = {"observation/exterior_image_1_left": rng.integers(0, 256, (224, 224, 3), dtype=np.uint8),
           "observation/wrist_image_left": rng.integers(0, 256, (224, 224, 3), dtype=np.uint8),
           "observation/joint_position": rng.uniform(-1, 1, 7).astype(np.float32),
           "observation/gripper_position": np.array([0.5], dtype=np.float32), "prompt": "pick up the cube"}
    out = []
    for i in range(warmup + calls):
        t = time.perf_counter()
        actions = policy.infer(obs)["actions"]
        if i >= warmup:
            out.append((time.perf_counter() - t) * 1000)
    assert actions.shape == (4, 8)
    print(json.dumps(out))
""")


_ECHO = textwrap.dedent("""
    import sys
    from strands_robots.client import EvaluationClient, Policy

    class Fixed(Policy):
        def act(self, observation):
            return [{"right.joint_1": 0.1 * h} for h in range(4)]

    EvaluationClient(sys.argv[1], token=sys.argv[2]).serve_policy(sys.argv[3], Fixed())
""")


def observation(rng: np.random.Generator) -> dict:
    obs = {f"{k}.pos": float(rng.uniform(-1, 1)) for k in KEYS}
    obs["right.gripper.pos"] = 0.4
    obs["scene.image"] = rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
    obs["wrist.image"] = rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
    return obs


def run_direct(py: Path, url: str, calls: int, warmup: int) -> list:
    out = subprocess.run([str(py), "-c", _DIRECT, url, str(calls), str(warmup)], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"openpi-client's WebsocketClientPolicy failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_bridge(url: str, calls: int, warmup: int) -> list:
    from strands_robots.client.openpi import OpenPIPolicy

    rng = np.random.default_rng(0)
    obs = observation(rng)
    policy = OpenPIPolicy(url, obs_map="droid")
    policy.reset({"instruction": "pick up the cube", "action_keys": KEYS})
    out = []
    try:
        for i in range(warmup + calls):
            t = time.perf_counter()
            chunk = policy.act(obs)
            if i >= warmup:
                out.append((time.perf_counter() - t) * 1000)
        assert len(chunk) == 4
    finally:
        policy.close()
    return out


def scene_like(rng: np.random.Generator) -> np.ndarray:
    """Return a 224x224 frame shaped like a rendered scene: smooth shading, a red block, sensor noise."""
    y, x = np.mgrid[0:224, 0:224]
    frame = np.stack([90 + 0.3 * x, 100 + 0.2 * y, 120 + 0.1 * (x + y)], axis=-1)
    frame[120:160, 80:120] = (200, 30, 30)
    return np.clip(frame + rng.normal(0, 3, frame.shape), 0, 255).astype(np.uint8)


def run_relay(work: Path, url: str, calls: int, warmup: int, echo: bool = False, jpeg: bool = False) -> list:
    from strands_robots.client import EvaluationClient, pb
    from strands_robots.station_link.link import StationLink

    tokens = write_tokens(work)
    port = free_port()
    target = f"127.0.0.1:{port}"
    relay = start_relay_process(port, f"sqlite:{work / 'relay.db'}", tokens, "--poll-s", "0.1")
    jobs: list = []
    link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], on_job=jobs.append, heartbeat_s=0.5)
    cli = None
    out = []
    try:
        link.start()
        client = EvaluationClient(target, token=CLIENT_TOKENS["team_a"])
        job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        wait_until(lambda: jobs, timeout_s=30, what="the job at the station")
        command = ([sys.executable, "-c", _ECHO, target, CLIENT_TOKENS["team_a"], job_id] if echo else
                   [sys.executable, "-m", "strands_robots.client.cli.job", "serve", job_id, "--relay", target, "--openpi",
                    url, "--obs-map", "droid"])
        cli = subprocess.Popen(command,
                               env={**os.environ, "STRANDS_ROBOTS_TOKEN": CLIENT_TOKENS["team_a"]},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        session = link.open_session(job_id, reply_timeout_s=30.0)
        session.wait_attached(60)
        session.start_episode("ep_0000", jobs[0].tasks[0], action_keys=KEYS, action_horizon=10)
        obs = observation(np.random.default_rng(0))
        request = None
        if jpeg:  # as the station sends a task asking cameras=scene:224x224,wrist:224x224 (JPEG q90)
            from strands_robots.cameras.request import encode_observation, image_request

            request = image_request({"cameras": "scene:224x224,wrist:224x224", "image_format": "jpeg"})
            rng = np.random.default_rng(1)
            obs["scene.image"], obs["wrist.image"] = scene_like(rng), scene_like(rng)
        for i in range(warmup + calls):
            t = time.perf_counter()
            chunk = session.act(encode_observation(obs, request) if jpeg else obs)  # encoding counted
            if i >= warmup:
                out.append((time.perf_counter() - t) * 1000)
        assert len(chunk) == 4
        session.end_episode("ep_0000", pb.END_TIMEOUT)
        session.close()
        link.report(pb.JobStatus(job_id=job_id, station_id="sim_station", state=pb.JOB_SUCCEEDED, episodes_total=1,
                                 updated_unix_ms=int(time.time() * 1000)))
        cli.wait(30)
    finally:
        if cli is not None and cli.poll() is None:
            cli.kill()
            cli.wait(10)
        link.close()
        stop_process(relay)
    return out


def stats(samples: list) -> dict:
    s = sorted(samples)

    def q(p: float) -> float:
        return s[min(len(s) - 1, int(p * len(s)))]

    return {"mean": statistics.fmean(s), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--ways", default="direct,bridge,relay")
    args = parser.parse_args()
    ways = [w.strip() for w in args.ways.split(",") if w.strip()]
    py = openpi_venv()
    with tempfile.TemporaryDirectory(prefix="openpi_bench_") as tmp:
        work = Path(tmp)
        port = free_port()
        url = f"ws://127.0.0.1:{port}"
        server = start_openpi_server(work, port)
        results = {}
        try:
            for way in ways:
                if way == "direct":
                    results[way] = stats(run_direct(py, url, args.calls, args.warmup))
                elif way == "bridge":
                    results[way] = stats(run_bridge(url, args.calls, args.warmup))
                elif way == "relay":
                    results[way] = stats(run_relay(work, url, args.calls, args.warmup))
                elif way == "relay-jpeg":
                    results[way] = stats(run_relay(work, url, args.calls, args.warmup, jpeg=True))
                elif way == "echo":
                    results[way] = stats(run_relay(work, url, args.calls, args.warmup, echo=True))
                else:
                    raise SystemExit(f"unknown way {way!r} (direct, bridge, relay, relay-jpeg, echo)")
        finally:
            stop_server(server)
    print(f"openpi round trip, two 224x224 images + state + prompt -> actions [4, 8]; {args.calls} calls "
          f"after {args.warmup} warm-up, ms")
    print(f"{'way':<10} {'mean':>7} {'p50':>7} {'p90':>7} {'p99':>7}  vs direct")
    base = results.get("direct", {}).get("mean")
    for way, r in results.items():
        ratio = f"{r['mean'] / base:5.2f}x" if base else "-"
        print(f"{way:<10} {r['mean']:7.2f} {r['p50']:7.2f} {r['p90']:7.2f} {r['p99']:7.2f}  {ratio}")
    for way in ("relay", "relay-jpeg"):
        if base and way in results:
            target = 1.3 * base + 5.0
            verdict = "met" if results[way]["mean"] <= target else "NOT met"
            print(f"target {way} <= 1.3 x direct + 5 ms = {target:.2f} ms: {verdict} ({results[way]['mean']:.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
