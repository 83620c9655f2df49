"""The observer lane's five rules and its stamps (spec/observer-lane.txt), one test per rule."""

from __future__ import annotations

import asyncio
import time

import pytest

from strands_robots.rollout.runner import PolicyRunner
from strands_robots.simulation.observers import (
    SCHEMA_VERSION,
    CooperativeStop,
    ObserverLane,
    RunPolicyEnded,
    RunPolicyStarted,
    RunPolicyStep,
    attach_note,
)

from rollout_fakes import Collect, FakeBackend, FakeTime, ScriptedPolicy

TIMING_FIELDS = {"run_id", "monotonic_ns", "utc_ns", "elapsed_s", "inference_latency_p50_s",
                 "inference_latency_max_s", "inference_latency_p99_s"}


def run(observer=None, backend=None, policy=None, **kwargs):
    backend = backend or FakeBackend()
    runner = PolicyRunner(backend, robot_name="alice")
    kwargs.setdefault("n_steps", 10)
    kwargs.setdefault("fast_mode", True)
    result = runner.run(policy or ScriptedPolicy(), observer=observer, **kwargs)
    return result, backend


def _raise(exc):
    def observer(event):
        raise exc
    return observer


def test_observer_lane_is_additive_adds_only_observer_failures():
    plain, plain_backend = run(observer=None)
    failing, failing_backend = run(observer=[_raise(RuntimeError("boom")), Collect()])
    assert plain["status"] == failing["status"] == "success"
    (a,), (b,) = plain["episodes"], failing["episodes"]
    # Without an observer there is no observer_failures key anywhere; with one it is the only key added.
    assert "observer_failures" not in plain and "observer_failures" not in a
    assert set(b) - set(a) == {"observer_failures"} and set(a) <= set(b)
    assert set(failing) - set(plain) == {"observer_failures"}
    assert set(b) == {f for f in RunPolicyEnded.__dataclass_fields__}
    assert {k for k in a if a[k] != b[k]} - TIMING_FIELDS == set()
    assert b["observer_failures"] == 12 and failing["observer_failures"] == 12  # Started + 10 steps + Ended
    # and the same actions reached the robot
    assert [dict(x) for x in plain_backend.sent] == [dict(x) for x in failing_backend.sent]
    assert set(plain) == {"status", "episodes"}


def test_no_observer_means_no_observer_failures_key_even_on_refusal_or_many_episodes():
    refused, _ = run(observer=None, control_frequency=5000.0)
    assert refused["status"] == "error" and "observer_failures" not in refused
    many, _ = run(observer=None, n_episodes=3)
    assert len(many["episodes"]) == 3
    assert "observer_failures" not in many and all("observer_failures" not in ep for ep in many["episodes"])
    refused_watched, _ = run(observer=Collect(), control_frequency=5000.0)
    assert refused_watched["observer_failures"] == 0


def test_raising_observer_in_a_list_does_not_stop_dispatch_to_the_others():
    before, after = Collect(), Collect()
    result, _ = run(observer=[before, _raise(RuntimeError("boom")), after])
    assert result["observer_failures"] == 12
    assert len(after.events) == len(before.events) == 12
    assert [e.event_seq for e in after.events] == list(range(12))


def test_observer_exception_is_contained_and_counted():
    seen = Collect(lambda e: (_ for _ in ()).throw(ValueError("drawing failed")))
    result, backend = run(observer=seen)
    (ep,) = result["episodes"]
    assert ep["outcome"] == "ok" and ep["stopped_reason"] == "budget"
    assert ep["applied_actions"] == 10 and len(backend.sent) == 10
    assert ep["observer_failures"] == 12 and result["observer_failures"] == 12
    # the Ended event itself saw the failures before its own dispatch
    assert seen.of(RunPolicyEnded)[0].observer_failures == 11


def test_cooperative_stop_in_observer_is_contained_by_name():
    assert not issubclass(CooperativeStop, Exception) and issubclass(CooperativeStop, BaseException)
    result, backend = run(observer=_raise(CooperativeStop("not yours to cancel")))
    (ep,) = result["episodes"]
    assert ep["outcome"] == "ok" and ep["stopped_reason"] == "budget"
    assert ep["applied_actions"] == 10
    assert ep["observer_failures"] == 12


def test_contained_failures_never_reach_max_onframe_failures():
    hook = Collect()
    collect = Collect()
    result, _ = run(observer=[_raise(RuntimeError("x")), collect],
                    max_onframe_failures=0, on_frame=lambda step, obs, action: hook(step))
    (ep,) = result["episodes"]
    assert ep["outcome"] == "ok" and ep["stopped_reason"] == "budget"
    assert ep["observer_failures"] == 12
    assert {e.legacy_hook_outcome for e in collect.of(RunPolicyStep)} == {"ok"}
    assert ep["legacy_steps_used"] == 10


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError])
def test_keyboard_interrupt_propagates(exc_type):
    collect = Collect()

    def observer(event):
        if isinstance(event, RunPolicyStep) and event.applied_action_index == 3:
            raise exc_type()

    backend = FakeBackend()
    runner = PolicyRunner(backend)
    with pytest.raises(exc_type):
        runner.run(ScriptedPolicy(), n_steps=10, fast_mode=True, observer=[observer, collect])
    ended = collect.of(RunPolicyEnded)
    assert len(ended) == 1 and collect.events[-1] is ended[0]
    assert ended[0].outcome == "cancelled" and exc_type.__name__ in ended[0].end_detail
    assert len(backend.sent) == 4  # nothing after the interrupt


def test_propagating_exception_during_unwinding_is_attached_as_note():
    # In the loop: the policy raises KeyboardInterrupt; an observer raises SystemExit on the Ended dispatch.
    def on_act(n):
        if n == 1:
            raise KeyboardInterrupt("ctrl-c")

    def observer(event):
        if isinstance(event, RunPolicyEnded):
            raise SystemExit("viewer closed")

    collect = Collect()
    runner = PolicyRunner(FakeBackend())
    with pytest.raises(KeyboardInterrupt) as info:
        runner.run(ScriptedPolicy(on_act=on_act), n_steps=10, fast_mode=True, observer=[observer, collect])
    notes = getattr(info.value, "__notes__", [])
    assert any("SystemExit" in n and "viewer closed" in n for n in notes)
    assert len(collect.of(RunPolicyEnded)) == 1  # later observers still got the Ended

    # The lane alone, from an except block, on Python 3.10's path (no add_note): appended to __notes__.
    class NoAddNote(RuntimeError):
        add_note = None

    lane = ObserverLane(_raise(GeneratorExit()))
    lane.open_run()
    with pytest.raises(NoAddNote) as info:
        try:
            raise NoAddNote("original")
        except NoAddNote as original:
            lane.dispatch("ended", unwinding=original)
            raise
    assert str(info.value) == "original"
    assert len(info.value.__notes__) == 1 and "GeneratorExit" in info.value.__notes__[0]
    # with nothing unwinding it propagates as itself
    with pytest.raises(GeneratorExit):
        lane.dispatch("step")
    attach_note(info.value, "second")
    assert info.value.__notes__[-1] == "second"


def test_event_objects_are_borrowed_not_copied():
    hook_args = []
    collect = Collect()
    result, backend = run(observer=collect, on_frame=lambda step, obs, action: hook_args.append((obs, action)))
    steps = collect.of(RunPolicyStep)
    assert len(steps) == 10
    for i, event in enumerate(steps):
        assert event.action is backend.sent[i]
        assert event.action is hook_args[i][1]
        assert event.observation is hook_args[i][0]
        assert any(event.observation is obs for obs in backend.observations)
    # derived message arrays come from the borrowed objects
    assert steps[0].action_keys == ("a", "b") and steps[0].observation_keys == ("a.pos", "b.pos", "sim_time_s")
    with pytest.raises(Exception):
        steps[0].applied_action_index = 5  # frozen


def test_blocking_observer_overrun_drops_deadline_without_catch_up():
    period = 0.02
    t = FakeTime()

    def observer(event):
        if isinstance(event, RunPolicyStep) and event.applied_action_index == 3:
            t.spend(2.5 * period)  # blocks the robot for 2.5 periods

    collect = Collect()
    backend = FakeBackend(clock=t.seconds)
    runner = PolicyRunner(backend, robot_name="alice", clock_ns=t.clock, waiter=t.wait)
    result = runner.run(ScriptedPolicy(), observer=[observer, collect], n_steps=10, control_frequency=1 / period)
    (ep,) = result["episodes"]
    assert ep["applied_actions"] == 10
    assert ep["missed_deadlines"] == 2  # the deadlines at 80 and 100 ms
    gaps = [b - a for a, b in zip(backend.send_times, backend.send_times[1:])]
    assert gaps[3] == pytest.approx(3 * period)  # the arm sees a gap (the next deadline on the grid) ...
    assert gaps[4:] == pytest.approx([period] * 5)  # ... and no burst of catch-up actions after it
    steps = collect.of(RunPolicyStep)
    assert steps[4].deadline_missed and not any(s.deadline_missed for s in steps[:4])


def test_event_seq_dense_zero_based_per_run_id():
    collect = Collect()
    result, _ = run(observer=collect, n_episodes=3, n_steps=5)
    by_run: dict = {}
    for e in collect.events:
        by_run.setdefault(e.run_id, []).append(e.event_seq)
    assert len(by_run) == 3
    for seqs in by_run.values():
        assert seqs == list(range(7))


def test_utc_ns_derived_from_single_anchor():
    collect = Collect()
    wall_before = time.time_ns()
    run(observer=collect, n_episodes=2, n_steps=5)
    wall_after = time.time_ns()
    offsets = {e.utc_ns - e.monotonic_ns for e in collect.events}
    assert len(offsets) == 1
    # a real wall-clock anchor: the first event's utc lies between the wall clock read before and after
    assert wall_before <= collect.events[0].utc_ns <= wall_after

    ticks = iter(range(1000, 10_000, 7))
    lane = ObserverLane(monotonic_ns=lambda: next(ticks), wall_ns=lambda: 5_000_000)
    lane.open_run("r")
    assert lane.stamp() == (0, 1007, 5_000_007)
    assert lane.stamp() == (1, 1014, 5_000_014)


def test_monotonic_ns_orders_stream():
    collect = Collect()
    run(observer=collect, n_episodes=2, n_steps=8)
    stamps = [e.monotonic_ns for e in collect.events]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert all(e.schema_version == SCHEMA_VERSION == 2 for e in collect.events)
    assert isinstance(collect.events[0], RunPolicyStarted)
