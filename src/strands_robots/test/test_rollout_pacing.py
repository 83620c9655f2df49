"""DeadlinePacer: a fixed deadline grid, dropped (never caught-up) deadlines, interruptible waits, pause."""

from __future__ import annotations

import random
import threading
import time

import pytest

from strands_robots.rollout.pacing import DeadlinePacer
from strands_robots.rollout.stop import StopToken

from rollout_fakes import FakeTime


def fake_pacer(period, **kwargs):
    t = FakeTime()
    pacer = DeadlinePacer(period, clock_ns=t.clock, waiter=t.wait, stop=kwargs.pop("stop", StopToken()), **kwargs)
    return pacer, t


def test_pacing_deadlines_follow_the_grid_without_drift():
    period = 0.004
    pacer, t = fake_pacer(period)
    pacer.start()
    rng = random.Random(3)
    stamps = []
    for _ in range(100):
        assert pacer.wait()
        stamps.append(t.now_ns)
        t.spend(rng.uniform(0.0, 0.9) * period)  # the step's own work, under a period
    # Every step starts exactly on the grid: start + k * period, k = step index (nothing dropped).
    assert stamps == [k * 4_000_000 for k in range(100)]
    assert pacer.missed_deadlines == 0


def test_pacing_jitter_does_not_drift_and_overruns_stay_on_the_grid():
    period = 0.004
    pacer, t = fake_pacer(period)
    pacer.start()
    stamps = []
    for i in range(50):
        assert pacer.wait()
        stamps.append(t.now_ns)
        t.spend(2.2 * period if i % 10 == 9 else 0.5 * period)  # an occasional stall
    assert all(s % 4_000_000 == 0 for s in stamps)  # on the grid, whatever the stalls
    # Each of the four stalls seen by a later wait (2.2 periods) drops the two deadlines it overran.
    assert pacer.missed_deadlines == 4 * 2 and stamps[-1] // 4_000_000 == 49 + pacer.missed_deadlines


def test_pacing_overrun_drops_missed_deadlines_and_never_catches_up():
    pacer, t = fake_pacer(0.01)
    pacer.start()
    assert pacer.wait() and pacer.last_dropped == 0  # first deadline: at once
    t.spend(0.035)  # the step took 3.5 periods: deadlines 10, 20, 30 ms passed
    assert pacer.wait()
    assert pacer.last_dropped == 3 and pacer.missed_deadlines == 3
    assert t.now_ns == 40_000_000  # ran at the next grid deadline, not at 10/20/30 in a burst
    assert pacer.wait() and t.now_ns == 50_000_000 and pacer.last_dropped == 0


def test_pacing_fast_mode_does_not_wait():
    pacer, t = fake_pacer(1.0, fast_mode=True)
    pacer.start()
    for _ in range(1000):
        assert pacer.wait()
    assert t.waits == [] and t.now_ns == 0 and pacer.missed_deadlines == 0


def test_pacing_wait_is_interrupted_by_a_stop():
    token = StopToken()
    t = FakeTime()
    waits = []

    def wait(event, timeout):  # the stop arrives 50 ms into a 30 s wait, which ends there
        waits.append(timeout)
        t.spend(0.05)
        token.request("cancel")
        return event.is_set()

    pacer = DeadlinePacer(30.0, stop=token, clock_ns=t.clock, waiter=wait)
    pacer.start()
    assert pacer.wait()  # first deadline: now
    assert pacer.wait() is False
    assert t.now_ns == 50_000_000 and waits == [pytest.approx(30.0)]


def test_pacing_real_wait_is_interrupted_by_a_stop_from_another_thread():
    token = StopToken()
    pacer = DeadlinePacer(3600.0, stop=token)
    pacer.start()
    assert pacer.wait()
    timer = threading.Timer(0.01, token.request, args=("cancel",))
    timer.start()
    try:
        assert pacer.wait() is False  # would otherwise wait an hour
    finally:
        timer.cancel()


def test_pacing_pause_holds_the_budget_clock():
    pacer, t = fake_pacer(0.01)
    pacer.start()
    assert pacer.wait()
    t.spend(0.002)
    pacer.pause()
    t.at(0.102, pacer.resume)
    assert pacer.wait()  # held until resume
    assert pacer.paused_s == pytest.approx(0.1)
    assert pacer.elapsed_s == pytest.approx(0.002)
    assert pacer.take_resumed() and not pacer.take_resumed()
    assert pacer.missed_deadlines == 0


def test_a_takeover_that_begins_and_ends_inside_a_step_is_never_a_missed_deadline():
    # The loop never waited inside the takeover (a stalled step, or a takeover shorter than the step): the
    # paused time is the operator's, not an overrun, and the grid restarts as after any resume.
    pacer, t = fake_pacer(0.01)
    pacer.start()
    assert pacer.wait()
    t.spend(0.002)
    pacer.pause()
    t.spend(0.1)
    pacer.resume()
    t.spend(0.001)
    assert pacer.wait()
    assert (pacer.last_dropped, pacer.missed_deadlines) == (0, 0)
    assert t.now_ns == 103_000_000  # runs at once: the grid restarts here
    assert pacer.take_resumed()
    assert pacer.wait() and t.now_ns == 113_000_000 and pacer.missed_deadlines == 0
    assert pacer.elapsed_s == pytest.approx(0.013)


def test_lateness_outside_a_takeover_inside_a_step_still_counts_as_an_overrun():
    pacer, t = fake_pacer(0.01)
    pacer.start()
    assert pacer.wait()
    t.spend(0.005)
    pacer.pause()
    t.spend(0.01)
    pacer.resume()
    t.spend(0.022)  # 37 ms in all, 27 ms of them rollout time: the 10 ms deadline and a whole period after it
    assert pacer.wait()
    assert (pacer.last_dropped, pacer.missed_deadlines) == (1, 1)
    assert t.now_ns == 37_000_000  # runs at once: the grid restarts after the takeover
    assert pacer.wait() and t.now_ns == 47_000_000 and pacer.missed_deadlines == 1


def test_a_step_a_hair_late_after_a_takeover_inside_a_step_is_not_a_missed_deadline():
    # Seen under load: 122 ms between two sends, 102 of them paused, 20 ms of rollout time (one period) and
    # 0.3 ms more: the step after the takeover was not a deadline with no step, and is not counted as one.
    pacer, t = fake_pacer(0.02)
    pacer.start()
    assert pacer.wait()
    t.spend(0.005)
    pacer.pause()
    t.spend(0.102)
    pacer.resume()
    t.spend(0.0153)
    assert pacer.wait()
    assert (pacer.last_dropped, pacer.missed_deadlines) == (0, 0)


def test_a_takeover_during_the_final_spin_holds_that_step_until_the_resume():
    # Real clock: a long spin so the other thread's pause lands inside it.
    pacer = DeadlinePacer(1.0, spin_ns=900_000_000)
    pacer.start()
    assert pacer.wait()
    started = time.monotonic()
    pause = threading.Timer(0.4, pacer.pause)
    resume = threading.Timer(1.4, pacer.resume)
    pause.start()
    resume.start()
    try:
        assert pacer.wait()
        assert time.monotonic() - started >= 1.4 - 0.01, "the step ran while the arms were taken over"
        assert pacer.take_resumed() and pacer.missed_deadlines == 0
    finally:
        pause.cancel()
        resume.cancel()


def test_after_a_pause_the_next_step_never_comes_sooner_than_a_period_after_the_previous_one():
    # A hold on the driver (or a short takeover) that ends before the next deadline: the grid is kept.
    pacer, t = fake_pacer(0.01)
    pacer.start()
    assert pacer.wait()
    t.spend(0.001)
    pacer.pause()
    t.spend(0.003)
    pacer.resume()
    assert pacer.wait()
    assert t.now_ns == 10_000_000 and pacer.missed_deadlines == 0
    # ... and a pause the wait itself sees and that ends early: the same
    t.spend(0.001)
    pacer.pause()
    t.at(0.0125, pacer.resume)
    assert pacer.wait()
    assert t.now_ns == 20_000_000 and pacer.missed_deadlines == 0


def test_pacing_refuses_a_bad_period():
    with pytest.raises(ValueError):
        DeadlinePacer(0)
