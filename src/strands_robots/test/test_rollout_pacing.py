"""DeadlinePacer: a fixed deadline grid, dropped (never caught-up) deadlines, interruptible waits, pause."""

from __future__ import annotations

import threading
import time

import pytest

from strands_robots.rollout.pacing import DeadlinePacer
from strands_robots.rollout.stop import StopToken


def test_pacing_deadlines_follow_the_grid_without_drift():
    period = 0.004
    pacer = DeadlinePacer(period)
    pacer.start()
    stamps = []
    for _ in range(100):
        assert pacer.wait()
        stamps.append(time.perf_counter_ns())
    start = stamps[0]
    # Every step starts on the grid start + k*period (k counts dropped deadlines too): no drift, whatever
    # the per-step jitter or a stall of a loaded machine.
    for n, stamp in enumerate(stamps):
        k = round((stamp - start) / (period * 1e9))
        assert abs((stamp - start) - k * period * 1e9) < 0.5 * period * 1e9
    assert round((stamps[-1] - start) / (period * 1e9)) == 99 + pacer.missed_deadlines


def test_pacing_overrun_drops_missed_deadlines_and_never_catches_up():
    now = [0]
    pacer = DeadlinePacer(0.01, clock_ns=lambda: now[0], spin_ns=0, stop=StopToken())
    pacer.start()
    assert pacer.wait() and pacer.last_dropped == 0  # first deadline: at once
    now[0] = 35_000_000  # the step took 3.5 periods: deadlines 10, 20, 30 ms passed
    pacer.stop.event.wait = lambda timeout=None: now.__setitem__(0, now[0] + int(timeout * 1e9)) or False
    assert pacer.wait()
    assert pacer.last_dropped == 3 and pacer.missed_deadlines == 3
    assert now[0] == 40_000_000  # ran at the next grid deadline, not at 10/20/30 in a burst
    assert pacer.wait() and now[0] == 50_000_000 and pacer.last_dropped == 0


def test_pacing_fast_mode_does_not_wait():
    pacer = DeadlinePacer(1.0, fast_mode=True)
    pacer.start()
    t0 = time.perf_counter()
    for _ in range(1000):
        assert pacer.wait()
    assert time.perf_counter() - t0 < 0.5 and pacer.missed_deadlines == 0


def test_pacing_wait_is_interrupted_by_a_stop():
    token = StopToken()
    pacer = DeadlinePacer(30.0, stop=token)
    pacer.start()
    assert pacer.wait()  # first deadline: now
    threading.Timer(0.05, token.request, args=("cancel",)).start()
    t0 = time.perf_counter()
    assert pacer.wait() is False  # would otherwise wait 30 s
    assert time.perf_counter() - t0 < 5.0


def test_pacing_pause_holds_the_budget_clock():
    pacer = DeadlinePacer(0.01)
    pacer.start()
    assert pacer.wait()
    pacer.pause()
    threading.Timer(0.1, pacer.resume).start()
    assert pacer.wait()  # held until resume
    assert pacer.paused_s >= 0.09
    assert pacer.elapsed_s < 0.05
    assert pacer.take_resumed() and not pacer.take_resumed()
    assert pacer.missed_deadlines == 0


def test_pacing_refuses_a_bad_period():
    with pytest.raises(ValueError):
        DeadlinePacer(0)
