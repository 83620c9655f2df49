"""PolicyRunner: lifecycle, resolution, hook outcomes, chunk age, fail fast and cancellation (fake backends)."""

from __future__ import annotations

import threading

import pytest

from strands_robots.arm.verdict import REASON_NON_FINITE, REASON_UNKNOWN_KEY, ActionVerdict
from strands_robots.policies.base import EndEpisode
from strands_robots.rollout.runner import PolicyRunner, classify_verdict
from strands_robots.rollout.stop import StopToken
from strands_robots.simulation.observers import (
    CooperativeStop,
    RunPolicyEnded,
    RunPolicyStarted,
    RunPolicyStep,
)

from rollout_fakes import FakeTime, KEYS, Collect, FakeBackend, ScriptedPolicy, install_fake_recording


def runner_for(backend=None, **kwargs):
    return PolicyRunner(backend or FakeBackend(), robot_name="alice", **kwargs)


def fast(**kwargs):
    kwargs.setdefault("n_steps", 10)
    kwargs.setdefault("fast_mode", True)
    return kwargs


def kinds(events):
    return [type(e).__name__ for e in events]


# -- lifecycle ------------------------------------------------------------------------------------------------

def _policy_raising(exc, at_call=1):
    def on_act(n):
        if n == at_call:
            raise exc
    return ScriptedPolicy(on_act=on_act)


@pytest.mark.parametrize("path", ["error", "cancel", "keyboard_interrupt", "end_episode", "budget", "safety_stop"])
def test_exactly_one_ended_on_every_exit_path(path):
    backend = FakeBackend(safety_after=3 if path == "safety_stop" else None)
    runner = runner_for(backend)
    policy = ScriptedPolicy()
    on_frame = None
    if path == "error":
        policy = _policy_raising(RuntimeError("inference failed"))
    elif path == "keyboard_interrupt":
        policy = _policy_raising(KeyboardInterrupt())
    elif path == "end_episode":
        policy = _policy_raising(EndEpisode("done"))
    elif path == "cancel":
        def on_frame(step, obs, action):
            return runner.request_stop("goal cancelled") if step == 2 else None
    collect = Collect()
    if path == "keyboard_interrupt":
        with pytest.raises(KeyboardInterrupt):
            runner.run(policy, observer=collect, on_frame=on_frame, **fast())
    else:
        result = runner.run(policy, observer=collect, on_frame=on_frame, **fast())
        assert len(result["episodes"]) == 1
    events = collect.events
    assert isinstance(events[0], RunPolicyStarted) and isinstance(events[-1], RunPolicyEnded)
    assert kinds(events).count("RunPolicyEnded") == 1 and kinds(events).count("RunPolicyStarted") == 1
    ended = events[-1]
    expected = {
        "error": ("error", "error"), "cancel": ("cancelled", "cancelled"),
        "keyboard_interrupt": ("cancelled", "cancelled"), "end_episode": ("policy_completed", "ok"),
        "budget": ("budget", "ok"), "safety_stop": ("safety_stop", "error"),
    }[path]
    assert (ended.stopped_reason, ended.outcome) == expected
    if path == "error":
        assert ended.error_type == "RuntimeError" and ended.error_message == "inference failed"
    if path == "safety_stop":
        assert ended.end_detail == "right: joint 4 reads +6.3 N*m" and ended.applied_actions == 3


def test_preflight_refusal_opens_no_lifecycle(monkeypatch):
    install_fake_recording(monkeypatch)
    cases = [
        dict(policy="mock", control_frequency=0),
        dict(policy="mock", action_horizon=0),
        dict(policy="no-such-provider"),
        dict(policy="mock", policy_config={"keys": ["elbow", "wrist"]}),  # keys match no actuator
        dict(policy="mock", record=True, recording_dir="/tmp/unused", fps=30, control_frequency=50),
        dict(policy="mock", observer="not callable"),
    ]
    for case in cases:
        collect = Collect()
        backend = FakeBackend()
        policy = case.pop("policy")
        observer = case.pop("observer", collect)
        result = runner_for(backend).run(policy, observer=observer, **fast(**case))
        assert result["status"] == "error" and result["episodes"] == [], case
        assert result["error_message"], case
        assert collect.events == [] and backend.sent == [], case
    refused = runner_for().run("mock", policy_config={"keys": ["elbow"]}, **fast())
    assert "valid keys: a, b" in refused["error_message"]


def test_each_episode_own_run_id_lifecycle():
    collect = Collect()
    result = runner_for().run(ScriptedPolicy(), observer=collect, n_episodes=3, **fast(n_steps=4))
    assert result["status"] == "success" and len(result["episodes"]) == 3
    runs: dict = {}
    for e in collect.events:
        runs.setdefault(e.run_id, []).append(e)
    assert len(runs) == 3
    for index, (run_id, events) in enumerate(runs.items()):
        assert kinds(events) == ["RunPolicyStarted"] + ["RunPolicyStep"] * 4 + ["RunPolicyEnded"]
        assert events[0].episode_index == index and events[0].n_episodes == 3
        assert result["episodes"][index]["run_id"] == run_id


def test_simulation_reset_before_every_episode_in_runner():
    backend = FakeBackend()
    backend.t = 3.0  # the robot ran before: the first episode must be reset too
    collect = Collect()
    runner_for(backend).run(ScriptedPolicy(), observer=collect, n_episodes=3, seed=7, **fast(n_steps=3))
    assert backend.resets == [7, 8, 9]
    firsts = [e for e in collect.of(RunPolicyStep) if e.applied_action_index == 0]
    assert [e.sim_time_s for e in firsts] == [0.0, 0.0, 0.0]


# -- step indices and the legacy hook --------------------------------------------------------------------------

def _cancel_hook_at(step):
    def on_frame(index, obs, action):
        if index == step:
            raise CooperativeStop("operator abort")
    return on_frame


def test_applied_action_index_equals_legacy_step_index_including_aborting_step():
    collect = Collect()
    runner_for().run(ScriptedPolicy(), observer=collect, on_frame=_cancel_hook_at(4), **fast())
    steps = collect.of(RunPolicyStep)
    assert [s.applied_action_index for s in steps] == [0, 1, 2, 3, 4]
    assert all(s.applied_action_index == s.legacy_step_index for s in steps)
    assert steps[-1].legacy_hook_outcome == "cancelled"


def test_applied_actions_may_exceed_legacy_steps_used_by_one():
    result = runner_for().run(ScriptedPolicy(), on_frame=_cancel_hook_at(4), **fast())
    (ep,) = result["episodes"]
    assert ep["stopped_reason"] == "cancelled"
    assert ep["applied_actions"] == 5 and ep["legacy_steps_used"] == 4
    normal = runner_for().run(ScriptedPolicy(), on_frame=lambda *a: None, **fast())["episodes"][0]
    assert normal["applied_actions"] == normal["legacy_steps_used"] == 10


@pytest.mark.parametrize("outcome", ["ok", "cancelled", "recording_error", "error", "absent"])
def test_hook_outcome_values(outcome, monkeypatch, tmp_path):
    kwargs = fast()
    if outcome == "ok":
        kwargs["on_frame"] = lambda *a: None
    elif outcome == "cancelled":
        kwargs["on_frame"] = _cancel_hook_at(2)
    elif outcome == "recording_error":
        install_fake_recording(monkeypatch, fail_at_step=2)
        kwargs.update(record=True, recording_dir=str(tmp_path))
    elif outcome == "error":
        def on_frame(index, obs, action):
            if index == 2:
                raise RuntimeError("mirror lost")
        kwargs["on_frame"] = on_frame
    collect = Collect()
    result = runner_for().run(ScriptedPolicy(), observer=collect, **kwargs)
    (ep,) = result["episodes"]
    hooks = [s.legacy_hook_outcome for s in collect.of(RunPolicyStep)]
    if outcome in ("ok", "absent"):
        assert set(hooks) == {outcome} and ep["stopped_reason"] == "budget"
    elif outcome == "error":  # one failure is within the default watchdog: the episode goes on
        assert hooks[2] == "error" and set(hooks[:2] + hooks[3:]) == {"ok"}
        assert ep["stopped_reason"] == "budget" and ep["legacy_steps_used"] == 10
    else:
        assert hooks[-1] == outcome and len(hooks) == 3 and set(hooks[:2]) == {"ok"}
        assert ep["applied_actions"] == 3 and ep["legacy_steps_used"] == 2
        if outcome == "recording_error":  # never silent: the episode stops with an error
            assert (ep["outcome"], ep["stopped_reason"], ep["error_type"]) == ("error", "error", "RecordingError")
            assert ep["recorded_frames"] == 2


def test_onframe_watchdog_stops_after_max_onframe_failures():
    def on_frame(index, obs, action):
        raise RuntimeError("frame dropped")

    collect = Collect()
    result = runner_for().run(ScriptedPolicy(), observer=collect, on_frame=on_frame, max_onframe_failures=2, **fast())
    (ep,) = result["episodes"]
    assert ep["outcome"] == "error" and ep["applied_actions"] == 3 and ep["legacy_steps_used"] == 2
    assert "max_onframe_failures=2" in ep["end_detail"]


# -- resolution ------------------------------------------------------------------------------------------------

ACTION = {"a": 1.0, "b": 2.0, "c": 3.0}


@pytest.mark.parametrize("verdict, expected", [
    (ActionVerdict(applied_keys=("a", "b", "c")), "full"),
    (ActionVerdict(("a", "b"), ("c",), (REASON_NON_FINITE,)), "partial"),
    (ActionVerdict((), ("a", "b", "c"), (REASON_UNKNOWN_KEY,) * 3), "none"),
    (ActionVerdict(("a",), ("c",), (REASON_NON_FINITE,)), "unknown"),                      # b missing
    (ActionVerdict(("a", "a", "b"), ("c",), (REASON_NON_FINITE,)), "unknown"),             # duplicate
    (ActionVerdict(("a", "b", "c"), ("c",), (REASON_NON_FINITE,)), "unknown"),             # not disjoint
    (ActionVerdict(("a", "b"), ("c", "d"), (REASON_NON_FINITE,) * 2), "unknown"),          # extra key
    (ActionVerdict(("a", "b"), ("c",), ()), "unknown"),                                    # no reason
    (ActionVerdict((), ("x", "y", "z"), (REASON_UNKNOWN_KEY,) * 3), "unknown"),            # other keys
    ("applied", "unknown"),                                                                # not a verdict
])
def test_partial_and_none_need_complete_breakdown(verdict, expected):
    resolution, applied, unresolved, reasons, error = classify_verdict(ACTION, verdict)
    assert resolution == expected
    if expected == "unknown":
        assert applied == unresolved == reasons == () and error
    else:
        assert error == "" and len(unresolved) == len(reasons)


def test_coarse_error_is_unknown_with_empty_keys_kept_in_action_errors_and_out_of_rate_denominators():
    def verdict(index, action):
        if index == 1:
            raise ConnectionError("driver unreachable")
        if index == 2:
            return ActionVerdict.coarse("adapter command failed")
        if index == 3:
            return ActionVerdict(("a",), ("b",), (REASON_NON_FINITE,))
        if index == 4:
            return ActionVerdict(("a",), (), ())  # incomplete breakdown: unknown too
        return ActionVerdict(tuple(action))

    collect = Collect()
    result = runner_for(FakeBackend(verdict=verdict)).run(ScriptedPolicy(), observer=collect, **fast())
    (ep,) = result["episodes"]
    steps = collect.of(RunPolicyStep)
    for i in (1, 2, 4):
        s = steps[i]
        assert s.action_resolution == "unknown" and s.action_error
        assert s.applied_action_keys == s.unresolved_action_keys == s.unresolved_action_reasons == ()
    assert "ConnectionError: driver unreachable" in steps[1].action_error
    assert ep["unknown_count"] == 3 and len(ep["action_errors"]) == 3
    assert ep["action_errors"][0].startswith("step 1: ")
    assert (ep["full_count"], ep["partial_count"], ep["none_count"]) == (6, 1, 0)
    assert ep["full_rate"] == pytest.approx(6 / 7) and ep["partial_rate"] == pytest.approx(1 / 7)
    assert ep["outcome"] == "ok" and ep["applied_actions"] == 10


# -- chunks and recording --------------------------------------------------------------------------------------

def test_sync_chunk_age_is_chunk_index():
    collect = Collect()
    runner_for().run(ScriptedPolicy(horizon=4), observer=collect, action_horizon=4, **fast())
    steps = collect.of(RunPolicyStep)
    assert [s.chunk_index for s in steps] == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert all(s.observation_age_steps == s.chunk_index for s in steps)
    assert [s.observation_is_chunk_reused for s in steps] == [s.chunk_index > 0 for s in steps]
    assert steps[1].observation is steps[0].observation  # the chunk-start snapshot, reused


def test_recording_refreshes_every_step_age_zero(monkeypatch, tmp_path):
    rec = install_fake_recording(monkeypatch)
    collect = Collect()
    result = runner_for().run(ScriptedPolicy(horizon=4), observer=collect, action_horizon=4, record=True,
                              recording_dir=str(tmp_path), **fast())
    (ep,) = result["episodes"]
    steps = collect.of(RunPolicyStep)
    assert [s.observation_age_steps for s in steps] == [0] * 10
    assert not any(s.observation_is_chunk_reused for s in steps)
    assert len({id(s.observation) for s in steps}) == 10
    (recorder,) = rec.EpisodeRecorder.opened
    assert recorder.closed and ep["recorded_frames"] == 10 and ep["recording_path"] == recorder.path
    assert collect.of(RunPolicyStarted)[0].recording_path == recorder.path
    assert [type(e).__name__ for e in recorder.events] == (["RunPolicyStarted"] + ["RunPolicyStep"] * 10
                                                           + ["RunPolicyEnded"])
    assert [e.event_seq for e in recorder.events] == [e.event_seq for e in collect.events]
    assert [f[1] for f in recorder.frames] == [s.observation for s in steps]


# -- fail fast and cancellation --------------------------------------------------------------------------------

class UndeclaredKeysPolicy(ScriptedPolicy):
    """A policy that does not declare its keys, so only the loop can find out they match nothing."""

    def __init__(self):
        super().__init__(keys=("elbow", "wrist"))


def test_fail_fast_when_policy_keys_match_no_actuator_lists_valid_keys():
    def verdict(index, action):
        known = [k for k in action if k in KEYS]
        unknown = [k for k in action if k not in KEYS]
        return ActionVerdict(tuple(known), tuple(unknown), (REASON_UNKNOWN_KEY,) * len(unknown))

    backend = FakeBackend(verdict=verdict)
    result = runner_for(backend).run(UndeclaredKeysPolicy(), **fast(n_steps=50))
    (ep,) = result["episodes"]
    assert result["status"] == "error"
    assert ep["outcome"] == "error" and ep["applied_actions"] == 3
    assert ep["error_type"] == "UnknownActionKeys"
    assert "valid keys: a, b" in ep["error_message"] and "elbow" in ep["error_message"]


def test_cancel_mid_wait_stops_within_one_period():
    period = 0.2  # long enough that the request certainly lands while the loop waits on a deadline
    token = StopToken()
    backend = FakeBackend()
    at_request = {}

    def request_later(event):
        if isinstance(event, RunPolicyStep) and event.applied_action_index == 1:
            def cancel():
                at_request["sent"] = len(backend.sent)
                token.request("goal cancelled")
            threading.Timer(period / 4, cancel).start()

    collect = Collect(request_later)
    result = PolicyRunner(backend, stop=token).run(ScriptedPolicy(), observer=collect, n_steps=100,
                                                  control_frequency=1 / period)
    (ep,) = result["episodes"]
    assert ep["stopped_reason"] == "cancelled" and ep["end_detail"] == "goal cancelled"
    assert len(backend.sent) - at_request["sent"] <= 1
    assert ep["applied_actions"] == len(backend.sent) == 2


def test_stop_requested_before_run_is_not_lost():
    token = StopToken()
    token.request("early")
    collect = Collect()
    backend = FakeBackend()
    result = PolicyRunner(backend, stop=token).run(ScriptedPolicy(), observer=collect, **fast())
    assert backend.sent == [] and result["episodes"][0]["stopped_reason"] == "cancelled"
    assert kinds(collect.events) == ["RunPolicyStarted", "RunPolicyEnded"]


def test_takeover_pause_stops_the_budget_clock_and_resumes_policy():
    t = FakeTime()
    backend = FakeBackend(clock=t.seconds)
    policy = ScriptedPolicy()
    runner = PolicyRunner(backend, robot_name="alice", clock_ns=t.clock, waiter=t.wait)
    observations_at_resume = []
    original_resume = policy.resume

    def resume(observation):
        observations_at_resume.append(observation)
        original_resume(observation)

    policy.resume = resume

    def observer(event):
        if isinstance(event, RunPolicyStep) and event.applied_action_index == 2:
            runner.pause()
            t.at(t.seconds() + 0.1, runner.resume)

    collect = Collect(observer)
    result = runner.run(policy, observer=collect, n_steps=6, control_frequency=100)
    (ep,) = result["episodes"]
    # Steps at 0, 10, 20 ms; paused 20..120 ms; the grid restarts at the resume: 120, 130, 140 ms.
    assert ep["paused_s"] == pytest.approx(0.1) and ep["elapsed_s"] == pytest.approx(0.04)
    assert backend.send_times == pytest.approx([0.0, 0.01, 0.02, 0.12, 0.13, 0.14])
    assert ep["missed_deadlines"] == 0 and policy.resumed == 1 and ep["applied_actions"] == 6
    # resume() got the arm's current state, observed after the takeover (not the chunk's stale snapshot)
    # (three steps advanced the robot to 0.03 s; the chunk in use was inferred from the 0.0 s snapshot)
    assert observations_at_resume[0]["sim_time_s"] == pytest.approx(0.03)
    steps = collect.of(RunPolicyStep)
    assert [s.elapsed_s for s in steps] == pytest.approx([0.0, 0.01, 0.02, 0.02, 0.03, 0.04])


def test_takeover_asked_before_the_first_step_holds_the_episode_until_resume():
    t = FakeTime()
    backend = FakeBackend(clock=t.seconds)
    policy = ScriptedPolicy()
    runner = PolicyRunner(backend, robot_name="alice", clock_ns=t.clock, waiter=t.wait)
    runner.pause()  # the station takes over before the episode starts
    t.at(0.25, runner.resume)
    out = runner.run(policy, n_steps=3, control_frequency=100)
    (ep,) = out["episodes"]
    assert backend.send_times == pytest.approx([0.25, 0.26, 0.27])  # nothing moved while held
    assert ep["paused_s"] == pytest.approx(0.25) and ep["elapsed_s"] == pytest.approx(0.02)
    assert policy.resumed == 1 and not runner.paused


def test_stop_during_takeover_cancels_and_the_pause_does_not_leak_into_the_next_run():
    t = FakeTime()
    backend = FakeBackend(clock=t.seconds)
    runner = PolicyRunner(backend, robot_name="alice", clock_ns=t.clock, waiter=t.wait)

    def observer(event):
        if isinstance(event, RunPolicyStep) and event.applied_action_index == 1:
            runner.pause()
            t.at(t.seconds() + 0.05, lambda: runner.request_stop("operator ended the episode"))

    out = runner.run(ScriptedPolicy(), n_steps=10, control_frequency=100, observer=observer)
    (ep,) = out["episodes"]
    assert (ep["outcome"], ep["stopped_reason"]) == ("cancelled", "cancelled") and ep["applied_actions"] == 2
    again = runner.run(ScriptedPolicy(), n_steps=3, control_frequency=100)
    assert again["episodes"][0]["applied_actions"] == 3 and again["episodes"][0]["paused_s"] == 0.0
