"""What judging a task's success predicate on every step costs the rollout loop (station/success_judgement.py).

    python bench/success_watch_bench.py [--steps 5000]

Per step, the rollout reads the predicate's inputs from the step's observation and judges it
(``SuccessWatch.step``). Printed, in microseconds per step (median and 99th percentile of the steps): a predicate
on an observation key, and one on ``object_distance_m`` (forward kinematics of the bundled MJCF from the joints,
``cameras.reach.ObjectDistance``), each with a new observation every step (no chunk reuse), beside one
``object_distance`` call that builds its kinematics data anew (what the scripted operator did once per episode).
"""

from __future__ import annotations

import argparse
import platform
import random
import time

import numpy as np

from strands_robots.cameras.reach import object_distance
from strands_robots.station.success_judgement import SuccessWatch

JOINTS = [f"{arm}.joint_{i}.pos" for arm in ("left", "right") for i in range(1, 7)]


def _observations(n: int) -> list:
    rng = random.Random(0)
    return [{key: rng.uniform(-0.5, 0.5) for key in JOINTS} | {"sim_time_s": i * 0.02} for i in range(n)]


def _per_step_us(fn, observations: list) -> "tuple[float, float]":
    times = []
    for i, obs in enumerate(observations):
        t0 = time.perf_counter_ns()
        fn(i, obs)
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return float(np.median(times)), float(np.percentile(times, 99))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args()
    observations = _observations(args.steps)
    params = {"object_x": "0.4", "object_y": "-0.15"}
    key = SuccessWatch.for_task({"success_when": "right.joint_4.pos > 0.95"}, seed=0)
    distance = SuccessWatch.for_task({"success_when": "object_distance_m < 0.06", **params}, seed=0)
    distance.step(0, observations[0])  # the model is loaded once per process, outside the timing
    rows = [("key predicate (right.joint_4.pos > 0.95)", _per_step_us(key.step, observations)),
            ("object_distance_m < 0.06 (cached kinematics)", _per_step_us(distance.step, observations)),
            ("object_distance() with new kinematics data", _per_step_us(
                lambda _i, obs: object_distance(obs, params, 0), observations[: max(1, args.steps // 10)]))]
    print(f"machine: {platform.node()} {platform.machine()} python {platform.python_version()}, "
          f"{args.steps} steps")
    print(f"{'judged per step':48s} {'median us':>10s} {'p99 us':>10s}")
    for name, (median, p99) in rows:
        print(f"{name:48s} {median:10.1f} {p99:10.1f}")


if __name__ == "__main__":
    main()
