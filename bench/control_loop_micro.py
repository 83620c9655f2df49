"""The control-loop benchmark's measurements before the runs: the observer-lane microbenchmark and the pacer floor.

:func:`microbench` gives µs per event of the observer lane's parts and of the rollout node's publishing observer
(best of 5 rounds, on the main thread); :func:`pacer_floor` runs the project's ``DeadlinePacer`` alone, with no
work, at one rate: the best step timing the machine allows at that moment (bench/README.md).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from control_loop_timing import CountingObserver, percentiles


def microbench(n: int = 100_000) -> dict:
    """µs per event of the observer lane's parts, on the bench process's main thread (best of 5 rounds)."""
    from strands_robots.arm.driver import DriverCore
    from strands_robots.simulation.observers import ObserverLane, RunPolicyStep

    core = DriverCore.simulated()
    observation = core.observe()
    action = {k: 0.0 for k in core.action_keys()}
    clock = time.perf_counter_ns

    def noop(_e: Any) -> None:
        return None

    def make_step(lane: Any, i: int) -> Any:
        seq, mono, utc = lane.stamp()
        return RunPolicyStep(
            run_id=lane.run_id, event_seq=seq, monotonic_ns=mono, utc_ns=utc, applied_action_index=i,
            legacy_step_index=i, action_resolution="full", applied_action_keys=tuple(action),
            unresolved_action_keys=(), unresolved_action_reasons=(), action_error="",
            observation_is_chunk_reused=False, observation_age_steps=0, legacy_hook_outcome="ok",
            chunk_index=0, elapsed_s=0.0, sim_time_s=0.0, deadline_missed=False,
            observation=observation, action=action)

    def best(fn: Callable[[int], None], rounds: int = 5) -> float:
        per = n // rounds
        times = []
        for _ in range(rounds):
            t0 = clock()
            fn(per)
            times.append((clock() - t0) / per / 1e3)
        return min(times)

    out: dict = {"events_per_round": n // 5, "observation_values": len(observation), "action_keys": len(action)}
    lane0 = ObserverLane(None)
    lane0.open_run()
    lane1 = ObserverLane(noop)
    lane1.open_run()
    event = make_step(lane1, 0)

    def loop_empty(k: int) -> None:
        for _ in range(k):
            pass

    def dispatch_none(k: int) -> None:
        d = lane0.dispatch
        for _ in range(k):
            d(event)

    def dispatch_noop(k: int) -> None:
        d = lane1.dispatch
        for _ in range(k):
            d(event)

    def stamp_make_dispatch(k: int) -> None:
        d = lane1.dispatch
        for i in range(k):
            d(make_step(lane1, i))

    def stamp_make(k: int) -> None:
        for i in range(k):
            make_step(lane0, i)

    counting = CountingObserver()
    lane2 = ObserverLane(counting)
    lane2.open_run()

    def dispatch_counting(k: int) -> None:
        d = lane2.dispatch
        for i in range(k):
            d(make_step(lane2, i))

    out["loop_overhead_us"] = best(loop_empty)
    out["dispatch_no_observer_us"] = best(dispatch_none)
    out["dispatch_noop_observer_us"] = best(dispatch_noop)
    out["stamp_and_build_step_us"] = best(stamp_make)
    out["stamp_build_dispatch_noop_us"] = best(stamp_make_dispatch)
    out["stamp_build_dispatch_counting_us"] = best(dispatch_counting)

    # The rollout node's publishing observer: the control thread's share (copies + put_nowait) while its
    # thread converts to ROS messages (publish itself a no-op), then the conversion alone.
    try:
        from strands_robots.conversions.events import event_to_msg
        from strands_robots.nodes.rollout.event_publisher import QueuedEventPublisher

        m = 20_000
        q = QueuedEventPublisher(lambda _m: None, depth=m + 10)
        lane3 = ObserverLane(q)
        lane3.open_run()
        events = [make_step(lane3, i) for i in range(m)]
        d = lane3.dispatch
        t0 = clock()
        for e in events:
            d(e)
        t1 = clock()
        q.flush(60.0)
        t2 = clock()
        q.close(5.0)
        out["queued_publisher_enqueue_us"] = (t1 - t0) / m / 1e3
        out["queued_publisher_drain_total_us"] = (t2 - t0) / m / 1e3
        out["queued_publisher_dropped"] = q.dropped

        def convert(k: int) -> None:
            for _ in range(k):
                event_to_msg(event, 0, observation=observation, action=action)

        out["event_to_msg_us"] = best(convert, rounds=5) if n >= 5 else float("nan")
    except Exception as exc:  # ROS messages not importable: the lane figures above still stand
        out["queued_publisher_error"] = f"{type(exc).__name__}: {exc}"
    return out


def pacer_floor(rate: float, duration: float) -> dict:
    """Measure the machine's timing floor: the project's DeadlinePacer alone (no policy, no robot) at ``rate``.

    What the loop could hold at best on this machine at this moment; the difference to a real run is the
    loop's own cost and jitter.
    """
    from strands_robots.rollout.pacing import DeadlinePacer

    steps = max(2, int(round(duration * rate)))
    starts = [0] * steps
    clock = time.perf_counter_ns
    pacer = DeadlinePacer(1.0 / rate)
    pacer.start()
    for i in range(steps):
        pacer.wait()
        starts[i] = clock()
    a = np.asarray(starts, dtype=np.int64)
    intervals = np.diff(a)
    dev = np.abs(intervals - 1e9 / rate) / 1e6
    return {"rate_hz": rate, "duration_s": duration, "steps": steps,
            "achieved_hz": (steps - 1) / ((a[-1] - a[0]) / 1e9), "interval_dev_ms": percentiles(dev),
            "missed_pct": 100.0 * pacer.missed_deadlines / steps}
