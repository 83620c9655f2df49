"""The control-loop benchmark's runs: one episode under the wall-clock cap, its row, and the in-process mode.

:func:`run_rollout` runs one episode of ``PolicyRunner.run`` (mock policy, deadline pacing, ``seed=0``) with the
garbage collector's start-up objects frozen, as the rollout node does, and a cooperative stop past
``1.5 * duration + 10 s``; :func:`summarise` makes the report's row of it; :func:`run_inproc` is the ``inproc``
mode (``InProcessBackend(DriverCore.simulated())``, the physics stepped inside the loop). The ROS modes:
:mod:`control_loop_ros`.
"""

from __future__ import annotations

import gc
import threading
from typing import Any, Optional

from control_loop_processes import CpuMeter
from control_loop_timing import CountingObserver, TimedBackend, TimedObserver, loop_metrics, observer_metrics



# The budget is in steps (duration * rate): a loop that cannot keep up would run far longer than `duration`.
# Past this wall-clock cap the run is stopped cooperatively (outcome "cancelled", its figures still count).
WALL_CAP_FACTOR = 1.5
WALL_CAP_EXTRA_S = 10.0


def run_rollout(runner: Any, rate: float, duration: float, observer: Any) -> dict:
    # As the rollout node's main(): what exists before the run is frozen out of the garbage collector, so a full
    # collection (13 ms over ~60 000 objects here) does not stall the loop.
    gc.collect()
    gc.freeze()
    cap_s = duration * WALL_CAP_FACTOR + WALL_CAP_EXTRA_S
    timer = threading.Timer(cap_s, runner.request_stop, args=(f"bench wall-clock cap {cap_s:g} s",))
    timer.daemon = True
    timer.start()
    try:
        return runner.run("mock", duration=duration, control_frequency=rate, fast_mode=False, seed=0,
                          observer=observer, instruction="bench")
    finally:
        timer.cancel()


def summarise(mode: str, with_obs: bool, rate: float, duration: float, result: dict, timed: TimedBackend,
              timed_obs: Optional[TimedObserver], cpu: dict, extra: dict) -> dict:
    episode = result["episodes"][0] if result.get("episodes") else {}
    steps = int(episode.get("applied_actions", 0))
    missed = int(episode.get("missed_deadlines", 0))
    row = {
        "mode": mode, "observer": with_obs, "rate_hz": rate, "duration_s": duration,
        "status": result.get("status"), "outcome": episode.get("outcome"),
        "stopped_reason": episode.get("stopped_reason"), "end_detail": episode.get("end_detail", ""),
        "error": result.get("error_message") or episode.get("error_message", ""),
        "steps": steps, "steps_budget": int(round(duration * rate)), "missed_deadlines": missed,
        "missed_pct": 100.0 * missed / steps if steps else float("nan"),
        "unknown_count": episode.get("unknown_count", 0),
        "action_errors_first": list(episode.get("action_errors", []))[:3],
        "elapsed_s": episode.get("elapsed_s"),
        "paused_s": episode.get("paused_s", 0.0),
        "observer_failures": result.get("observer_failures", 0),
    }
    row.update(loop_metrics(timed, rate))
    # Command-to-verdict latency: on the stream, publish to verdict arrival (set in extra); on the service and
    # in process the verdict is the call's return, so it is the round trip.
    row["c2v_ms"] = row["rtt_ms"]
    row["observer_cost"] = observer_metrics(timed_obs, steps)
    row["cpu"] = cpu
    row.update(extra)
    return row


# -- in-process mode ----------------------------------------------------------------------------------------------
def run_inproc(rate: float, duration: float, with_obs: bool, observer_kind: str) -> dict:
    from strands_robots.arm.backend import InProcessBackend
    from strands_robots.arm.driver import DriverCore
    from strands_robots.rollout.runner import PolicyRunner
    from strands_robots.rollout.stop import StopToken

    steps = int(round(duration * rate))
    timed = TimedBackend(InProcessBackend(DriverCore.simulated()), steps + 16)
    runner = PolicyRunner(timed, robot_name="bench_inproc", stop=StopToken())
    inner: Any = None
    queued = None
    extra: dict = {"observer_kind": ""}
    if with_obs:
        if observer_kind == "queued":
            from strands_robots.nodes.rollout.event_publisher import QueuedEventPublisher

            sink_count = [0]

            def sink(_msg: Any) -> None:
                sink_count[0] += 1

            queued = QueuedEventPublisher(sink, depth=8192)
            inner = queued
            extra["observer_kind"] = "QueuedEventPublisher (no DDS)"
        else:
            inner = CountingObserver()
            extra["observer_kind"] = "counting observer"
    timed_obs = TimedObserver(inner, steps + 16) if inner is not None else None
    meter = CpuMeter({})
    result = run_rollout(runner, rate, duration, timed_obs)
    if queued is not None:
        queued.flush(10.0)
    cpu = meter.stop()
    if queued is not None:
        queued.close(5.0)
        extra["events"] = {"published": queued.published, "dropped": queued.dropped,
                           "received": queued.published, "missing": queued.dropped}
    elif isinstance(inner, CountingObserver):
        s = inner.summary()
        extra["events"] = {"published": s["received"], "dropped": 0, "received": s["received"],
                           "missing": s["missing"]}
    return summarise("inproc", with_obs, rate, duration, result, timed, timed_obs, cpu, extra)
