"""The rollout step's phases on their own: StepReporter (complete), EpisodeState, EpisodeLoop over a fake robot."""

from __future__ import annotations

import threading
import types

import pytest
from rollout_fakes import Collect, FakeBackend, FakeTime, ScriptedPolicy

from strands_robots.arm.verdict import REASON_UNKNOWN_KEY, ActionVerdict
from strands_robots.rollout.chunks import ChunkTelemetry, PlannedAction
from strands_robots.rollout.episode_loop import EpisodeLoop
from strands_robots.rollout.episode_state import (
    DRIVER_FAULT,
    EpisodeState,
    HookAbort,
    RecordingFailed,
    Sent,
    merge_telemetry,
)
from strands_robots.rollout.pacing import DeadlinePacer
from strands_robots.rollout.step_report import StepReporter, UnknownActionKeys
from strands_robots.rollout.stop import StopToken
from strands_robots.simulation.observers import (
    HOOK_ABSENT,
    HOOK_CANCELLED,
    HOOK_ERROR,
    HOOK_OK,
    HOOK_RECORDING_ERROR,
    OUTCOME_ERROR,
    OUTCOME_OK,
    RESOLUTION_FULL,
    RESOLUTION_UNKNOWN,
    STOPPED_BUDGET,
    STOPPED_ERROR,
    STOPPED_SAFETY_STOP,
    CooperativeStop,
    ObserverLane,
    RunPolicyStep,
)


def settings(**over):
    base = dict(on_frame=None, hook_present=False, max_onframe_failures=0, period_s=0.02, actuator_keys=("a", "b"),
                total_steps=10, policy=None, action_horizon=4, async_rtc=False, inference_timeout_s=5.0,
                fast_mode=True, stop_when=None)
    base.update(over)
    return types.SimpleNamespace(**base)


def sent(index, action=None, observation=None):
    action = {"a": 0.1, "b": 0.2} if action is None else action
    observation = {"a.pos": 0.0, "sim_time_s": 0.5 + index} if observation is None else observation
    return Sent(index, PlannedAction(action, observation, 0, index > 0, index), 1_000 + index, False)


def reporter(s=None, recorder=None, stop=None):
    collect = Collect()
    lane = ObserverLane(collect)
    lane.open_run()
    st = EpisodeState()
    return StepReporter(s or settings(), lane, recorder, st, stop or StopToken(), ()), st, collect


def test_a_full_verdict_without_a_hook_is_counted_and_dispatched():
    rep, st, collect = reporter()
    assert rep.complete(sent(0), ActionVerdict(applied_keys=("a", "b"))) is None
    (event,) = collect.of(RunPolicyStep)
    assert (event.action_resolution, event.applied_action_keys, event.legacy_hook_outcome) == (
        RESOLUTION_FULL, ("a", "b"), HOOK_ABSENT)
    assert (st.full, st.unknown, st.legacy_steps_used, st.sim_time_s) == (1, 0, 1, 0.5)


def test_a_coarse_verdict_is_unknown_and_its_error_kept():
    rep, st, collect = reporter()
    rep.complete(sent(2), ActionVerdict(error="driver not active"))
    assert (st.unknown, st.action_errors) == (1, ["step 2: driver not active"])
    assert collect.of(RunPolicyStep)[0].action_resolution == RESOLUTION_UNKNOWN


def test_on_frame_failing_past_its_limit_aborts_and_earlier_failures_count():
    def on_frame(i, obs, act):
        raise RuntimeError(f"frame {i}")

    rep, st, collect = reporter(settings(on_frame=on_frame, hook_present=True, max_onframe_failures=1))
    assert rep.complete(sent(0), ActionVerdict(applied_keys=("a", "b"))) is None
    abort = rep.complete(sent(1), ActionVerdict(applied_keys=("a", "b")))
    assert isinstance(abort, HookAbort) and "on_frame failed 2 times" in str(abort)
    assert [e.legacy_hook_outcome for e in collect.of(RunPolicyStep)] == [HOOK_ERROR, HOOK_ERROR]
    assert (st.onframe_failures, st.legacy_steps_used) == (2, 1)


def test_a_stop_seen_by_the_hook_cancels_that_step_and_its_event_reports_it_when_the_verdict_comes():
    stop = StopToken()
    calls = []
    rep, st, collect = reporter(settings(on_frame=lambda *a: calls.append(a[0]), hook_present=True), stop=stop)
    first, second = sent(0), sent(1)
    st.applied_actions = 1
    assert rep.hook(first) is None  # sent, its hook ran, its verdict still out
    stop.request("operator")
    st.applied_actions = 2
    abort = rep.hook(second)
    assert isinstance(abort, CooperativeStop) and calls == [0, 1]
    assert (first.hook_outcome, second.hook_outcome, second.aborted) == (HOOK_OK, HOOK_CANCELLED, True)
    assert collect.of(RunPolicyStep) == []  # nothing reported before the verdicts
    assert rep.report(first, ActionVerdict(applied_keys=("a", "b"))) is None
    assert rep.report(second, ActionVerdict(applied_keys=("a", "b"))) is None
    assert [e.legacy_hook_outcome for e in collect.of(RunPolicyStep)] == [HOOK_OK, HOOK_CANCELLED]
    assert (st.applied_actions, st.legacy_steps_used) == (2, 1)


class _Recorder:
    def __init__(self, fail_events=False):
        self.steps, self.events, self.fail_events = [], [], fail_events

    def write_step(self, index, utc_ns, observation, action, verdict):
        self.steps.append(index)

    def write_event(self, event):
        if self.fail_events:
            raise OSError("disk full")
        self.events.append(event)


def test_the_step_is_recorded_before_dispatch_and_a_failed_write_is_the_steps_recording_error():
    rec = _Recorder()
    rep, st, collect = reporter(settings(hook_present=True), recorder=rec)
    assert rep.complete(sent(0), ActionVerdict(applied_keys=("a", "b"))) is None
    assert rec.steps == [0] and rec.events == collect.of(RunPolicyStep) and st.recorded_frames == 1
    assert rec.events[0].legacy_hook_outcome == HOOK_OK

    failing = _Recorder(fail_events=True)
    rep, st, collect = reporter(settings(hook_present=True), recorder=failing)
    st.applied_actions = 4  # step 3 was the last sent
    abort = rep.complete(sent(3), ActionVerdict(applied_keys=("a", "b")))
    assert isinstance(abort, RecordingFailed) and "disk full" in str(abort)
    assert collect.of(RunPolicyStep)[0].legacy_hook_outcome == HOOK_RECORDING_ERROR
    assert st.legacy_steps_used == 3  # the step's frame is in the file, its event is not


def test_an_event_that_cannot_be_recorded_after_later_steps_were_sent_ends_on_the_last_one_sent():
    rec = _Recorder()
    rep, st, collect = reporter(settings(hook_present=True), recorder=rec)
    steps = [sent(i) for i in range(4)]
    for i, step in enumerate(steps):  # four commands in flight, each hooked at its send
        st.applied_actions = i + 1
        assert rep.hook(step) is None
    assert rec.steps == [0, 1, 2, 3] and st.legacy_steps_used == 4
    assert rep.report(steps[0], ActionVerdict(applied_keys=("a", "b"))) is None
    rec.fail_events = True  # the disk fills while steps 1-3 are in flight
    failure = rep.report(steps[1], ActionVerdict(applied_keys=("a", "b")))
    assert isinstance(failure, RecordingFailed) and "the event of step 1" in str(failure)
    assert rep.report(steps[2], ActionVerdict(applied_keys=("a", "b"))) is None  # reported once
    assert rep.report(steps[3], ActionVerdict(applied_keys=("a", "b"))) is None
    outcomes = [e.legacy_hook_outcome for e in collect.of(RunPolicyStep)]
    assert outcomes == [HOOK_OK, HOOK_OK, HOOK_OK, HOOK_RECORDING_ERROR]  # the last step sent carries it
    assert [e.applied_action_index for e in rec.events] == [0]
    assert (st.applied_actions, st.legacy_steps_used) == (4, 3)


def test_fail_fast_after_the_first_steps_emit_only_unknown_keys():
    rep, st, _ = reporter(settings(total_steps=10))
    unknown = ActionVerdict(unresolved_keys=("x",), unresolved_reasons=(REASON_UNKNOWN_KEY,))
    for i in range(3):
        rep.complete(sent(i, action={"x": 1.0}), unknown)
        error = rep.fail_fast(sent(i, action={"x": 1.0}))
        assert (error is None) == (i < 2)
    assert st.none == 3 and isinstance(error, UnknownActionKeys) and "valid keys: a, b" in str(error)
    short, _, _ = reporter(settings(total_steps=1))
    short.complete(sent(0, action={"x": 1.0}), unknown)
    assert isinstance(short.fail_fast(sent(0, action={"x": 1.0})), UnknownActionKeys)  # a one-step budget too


def test_episode_state_driver_fault_ends_the_episode_as_an_error():
    st = EpisodeState()
    assert st.driver_fault("") is False and st.outcome == ""
    assert st.driver_fault("driver silent for 0.5 s") is True
    assert (st.stopped_reason, st.outcome, st.error_type, st.error_message) == (
        STOPPED_ERROR, OUTCOME_ERROR, DRIVER_FAULT, "driver silent for 0.5 s")


def test_merge_telemetry_sums_counts_over_a_takeovers_pipelines():
    one = types.SimpleNamespace(telemetry=ChunkTelemetry(4, 3, 1, 0.02, 0.05))
    two = types.SimpleNamespace(telemetry=ChunkTelemetry(2, 1, 1, 0.04, 0.09))
    empty = types.SimpleNamespace(telemetry=ChunkTelemetry(0, 0, 0, 0.0, 0.0))
    merged = merge_telemetry([one, two, empty])
    assert (merged.chunks_inferred, merged.prefetch_hits, merged.prefetch_blocks) == (6, 4, 2)
    assert merged.latency_p50_s == pytest.approx(0.03) and merged.latency_max_s == 0.09
    assert merge_telemetry([]) == ChunkTelemetry(0, 0, 0, 0.0, 0.0)
    assert merge_telemetry([one]) is one.telemetry


def _loop(backend, s, stop=None):
    collect = Collect()
    lane = ObserverLane(collect)
    lane.open_run()
    t = FakeTime()
    stop = stop or StopToken()
    pacer = DeadlinePacer(s.period_s, fast_mode=s.fast_mode, stop=stop, clock_ns=t.clock, waiter=t.wait)
    pacer.start()
    st, pipelines = EpisodeState(), []
    loop = EpisodeLoop(backend, s, lane, pacer, None, st, pipelines, stop=stop, clock_ns=t.clock,
                       pause_lock=threading.Lock(), takeover_requested=lambda: False)
    return loop, st, collect, pipelines


def test_episode_loop_runs_the_budget_one_action_per_step():
    backend = FakeBackend()
    loop, st, collect, pipelines = _loop(backend, settings(policy=ScriptedPolicy(), total_steps=6))
    loop.run()
    for p in pipelines:
        p.close()
    assert (st.stopped_reason, st.outcome, st.applied_actions, st.full) == (STOPPED_BUDGET, OUTCOME_OK, 6, 6)
    assert len(backend.sent) == 6 and backend.advances == 6
    assert [e.applied_action_index for e in collect.of(RunPolicyStep)] == list(range(6))


def test_episode_loop_ends_on_a_safety_stop_after_the_step_that_tripped_it():
    backend = FakeBackend(safety_after=2)
    loop, st, collect, pipelines = _loop(backend, settings(policy=ScriptedPolicy(), total_steps=10))
    loop.run()
    for p in pipelines:
        p.close()
    assert (st.stopped_reason, st.error_type, st.applied_actions) == (STOPPED_SAFETY_STOP, "SafetyStop", 2)
    assert len(collect.of(RunPolicyStep)) == 2
