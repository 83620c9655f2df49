"""The stop of a live sink waits for what is in flight (monitoring/stop_drain.py), with an injected clock."""

from __future__ import annotations

import pytest

from strands_robots.monitoring.stop_drain import ArrivalClock, wait_until_quiet


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0, seconds
        self.now += seconds


def test_a_message_arriving_during_the_stop_is_waited_for_then_the_stop_ends_once_quiet():
    t = FakeTime()
    in_flight = [100.1, 100.25]  # two messages still on their way when the stop begins at 100.0
    taken: list = []

    def last_arrival() -> float:  # the executor takes each message when its time comes
        taken.extend(a for a in in_flight if a <= t.now and a not in taken)
        return max(taken, default=100.0)

    assert wait_until_quiet(last_arrival, quiet_s=0.2, max_s=1.0, clock=t.clock, sleep=t.sleep) is True
    assert taken == in_flight  # both were taken before the stop went on
    assert t.now == pytest.approx(100.45, abs=0.051)  # quiet 0.2 s after the last one, not at the bound


def test_the_arrival_clock_holds_the_time_of_the_latest_message():
    t = FakeTime()
    arrivals = ArrivalClock(clock=t.clock)
    assert arrivals.last() == 100.0
    t.now = 103.5
    arrivals.mark()
    t.now = 104.0
    assert arrivals.last() == 103.5


def test_topics_that_keep_publishing_end_the_wait_at_its_bound():
    t = FakeTime()
    assert wait_until_quiet(lambda: t.now, quiet_s=0.2, max_s=1.0, clock=t.clock, sleep=t.sleep) is False
    assert t.now == pytest.approx(101.0, abs=0.051)


def test_already_quiet_returns_at_once():
    t = FakeTime()
    assert wait_until_quiet(lambda: 99.0, clock=t.clock, sleep=t.sleep) is True
    assert t.now == 100.0


def test_negative_bounds_are_refused():
    with pytest.raises(ValueError, match="quiet_s and max_s"):
        wait_until_quiet(lambda: 0.0, quiet_s=-1.0)
