"""The driver's joint_states deadlines (arm.publish_pacing): due once per period, no burst after falling behind."""

from __future__ import annotations

import threading

from strands_robots.arm.publish_pacing import PublishPacer


def test_due_once_per_period_from_the_restart():
    pacer = PublishPacer(10.0)  # 0.1 s
    pacer.restart(5.0)
    ticks = [5.0 + 0.025 * i for i in range(17)]  # a 40 Hz step over 0.4 s
    due = [round(t, 3) for t in ticks if pacer.due(t)]
    assert due == [5.0, 5.1, 5.2, 5.3, 5.4]


def test_a_rate_above_the_step_rate_publishes_once_per_step():
    pacer = PublishPacer(1000.0)
    pacer.restart(0.0)
    assert [pacer.due(0.01 * i) for i in range(5)] == [True] * 5


def test_falling_behind_restarts_one_period_from_now_instead_of_a_burst():
    pacer = PublishPacer(10.0)
    pacer.restart(0.0)
    assert pacer.due(0.0)
    assert pacer.due(1.0)  # ten periods late: due once...
    assert not pacer.due(1.05)  # ...and not again until one period after the late one
    assert pacer.due(1.1)


def test_a_rate_change_applies_from_the_next_deadline():
    pacer = PublishPacer(10.0)
    pacer.restart(0.0)
    assert pacer.due(0.0)  # next at 0.1 (set under the old rate)
    pacer.set_rate(2.0)
    assert not pacer.due(0.09) and pacer.due(0.1)  # the deadline set before stands
    assert not pacer.due(0.5) and pacer.due(0.6)  # then 0.5 s periods


def test_concurrent_callers_never_see_one_deadline_twice():
    pacer = PublishPacer(1.0)
    pacer.restart(0.0)
    hits = []
    barrier = threading.Barrier(8)

    def tick():
        barrier.wait(timeout=5.0)
        hits.append(pacer.due(0.5))

    threads = [threading.Thread(target=tick) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5.0)
    assert hits.count(True) == 1 and len(hits) == 8
