"""The job state machine and job validation (station/job.py)."""

import itertools
import threading

import pytest

from strands_robots.station.job import (
    LEGAL_TRANSITIONS,
    JobSpec,
    JobSpecError,
    JobStateMachine,
    JobTransitionError,
    plan_episode,
    transition_refusal,
    validate_job_spec,
)
from strands_robots.station.model import AnswerType, JobState, ScoringItemDefinition, ScoringSheet, Task

S = JobState
SHEET = ScoringSheet((ScoringItemDefinition("done", "Done?", AnswerType.YES_NO, 1.0, success_answer="yes"),))


def task(task_id="pick", **kw):
    kw.setdefault("instruction", "pick up the cube")
    kw.setdefault("scoring", SHEET)
    return Task(task_id, **kw)


def spec(**kw):
    base = dict(job_id="job-1", client_id="team-a", station_id="sim_station", tasks=(task(),), episodes_total=3,
                policy_provider="mock", policy_config={"seed": 1})
    base.update(kw)
    return JobSpec(**base)


def clock():
    counter = itertools.count(1000)
    return lambda: next(counter)


# -- transitions ------------------------------------------------------------------------------------------------
def test_happy_path_walks_every_state_with_a_message_each():
    m = JobStateMachine(clock_ms=clock())
    for target in (S.WAITING_POLICY, S.RUNNING, S.FINALIZING, S.SUCCEEDED):
        m.transition(target, f"to {target.value}")
    assert m.state is S.SUCCEEDED and m.terminal
    history = m.history()
    assert [(t.from_state, t.to_state) for t in history] == [
        (S.CREATED, S.WAITING_POLICY), (S.WAITING_POLICY, S.RUNNING), (S.RUNNING, S.FINALIZING),
        (S.FINALIZING, S.SUCCEEDED)]
    assert [t.message for t in history] == ["to WAITING_POLICY", "to RUNNING", "to FINALIZING", "to SUCCEEDED"]
    assert [t.unix_ms for t in history] == [1000, 1001, 1002, 1003]
    assert m.message == "to SUCCEEDED"


def test_every_illegal_transition_raises_with_a_reason_and_leaves_the_state():
    legal_pairs = {(a, b) for a, targets in LEGAL_TRANSITIONS.items() for b in targets}
    for current in S:
        for target in S:
            if (current, target) in legal_pairs:
                continue
            m = JobStateMachine(current)
            with pytest.raises(JobTransitionError) as info:
                m.transition(target, "try")
            assert current.value in info.value.reason
            assert m.state is current and m.history() == ()


def test_skipping_waiting_policy_is_refused_listing_the_legal_targets():
    reason = transition_refusal(S.CREATED, S.RUNNING)
    assert "CREATED -> RUNNING is not a legal transition" in reason
    assert "WAITING_POLICY" in reason and "CANCELLED" in reason


def test_terminal_states_have_no_way_out():
    for terminal in (S.SUCCEEDED, S.FAILED, S.CANCELLED):
        assert "terminal" in transition_refusal(terminal, S.RUNNING)
        with pytest.raises(JobTransitionError):
            JobStateMachine(terminal).cancel("too late")


@pytest.mark.parametrize("state", [S.CREATED, S.WAITING_POLICY, S.RUNNING, S.FINALIZING])
def test_cancel_is_legal_from_every_non_terminal_state(state):
    m = JobStateMachine(state)
    m.cancel("client cancelled")
    assert m.state is S.CANCELLED and m.message == "client cancelled"


def test_lost_policy_session_returns_running_to_waiting_policy():
    m = JobStateMachine(S.RUNNING)
    m.transition(S.WAITING_POLICY, "policy disconnected; waiting for it again")
    assert m.state is S.WAITING_POLICY


def test_transition_without_a_message_is_refused():
    m = JobStateMachine()
    with pytest.raises(JobTransitionError) as info:
        m.transition(S.WAITING_POLICY, " ")
    assert "needs a message" in info.value.reason and m.state is S.CREATED


def test_on_transition_sees_each_change_once():
    seen = []
    m = JobStateMachine(on_transition=seen.append)
    m.transition(S.WAITING_POLICY, "waiting")
    m.cancel("stop")
    assert [t.to_state for t in seen] == [S.WAITING_POLICY, S.CANCELLED]


def test_concurrent_cancels_end_the_job_exactly_once():
    m = JobStateMachine(S.RUNNING)
    outcomes = []
    barrier = threading.Barrier(8)

    def cancel(i):
        barrier.wait()
        try:
            m.cancel(f"cancel {i}")
            outcomes.append("ok")
        except JobTransitionError:
            outcomes.append("refused")

    threads = [threading.Thread(target=cancel, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 1 and outcomes.count("refused") == 7
    assert len(m.history()) == 1


# -- job validation ---------------------------------------------------------------------------------------------
def test_valid_spec_is_accepted_and_its_config_frozen():
    s = validate_job_spec(spec())
    with pytest.raises(TypeError):
        s.policy_config["seed"] = 2  # type: ignore[index]


@pytest.mark.parametrize("field,value,words", [
    ("job_id", "", "non-empty"),
    ("job_id", "../etc", "letters, digits"),
    ("client_id", " ", "non-empty"),
    ("station_id", "", "non-empty"),
    ("episodes_total", 0, ">= 1"),
    ("episodes_total", True, ">= 1"),
    ("tasks", (), "at least one task"),
    ("policy_provider", "", "policy provider"),
    ("policy_config", {"x": float("nan")}, "JSON"),
    ("duration_s", 0.0, "> 0"),
    ("max_discards", -1, ">= 0"),
])
def test_malformed_job_field_is_refused_naming_it(field, value, words):
    with pytest.raises(JobSpecError) as info:
        validate_job_spec(spec(**{field: value}))
    assert info.value.field == field and info.value.task_index is None and words in info.value.reason


@pytest.mark.parametrize("bad_task,field,words", [
    (task(task_id=""), "task_id", "non-empty"),
    (task(instruction=""), "instruction", "non-empty"),
    (task(parameters={"duration_s": "soon"}), "parameters['duration_s']", "> 0"),
    (task(parameters={"seed": "1.5"}), "parameters['seed']", "integer"),
    (task(scoring=ScoringSheet(())), "scoring", "success item"),
    (task(scoring=ScoringSheet((ScoringItemDefinition("done", "Done?", AnswerType.YES_NO, -1.0,
                                                      success_answer="yes"),))), "scoring", "item 'done'"),
])
def test_malformed_task_is_refused_with_its_index_field_and_reason(bad_task, field, words):
    with pytest.raises(JobSpecError) as info:
        validate_job_spec(spec(tasks=(task("ok"), bad_task)))
    err = info.value
    assert err.task_index == 1 and err.field == field and words in err.reason
    assert str(err).startswith(f"tasks[1].{field}: ")


def test_tasks_cycle_in_order_and_task_parameters_override_the_plan():
    fast = task("fast", parameters={"duration_s": "0.5", "policy.end_after_steps": "7", "policy.amplitude": "0.5",
                                    "seed": "4", "start_pose_timeout_s": "0.05"})
    s = validate_job_spec(spec(tasks=(task("a"), fast), duration_s=2.0))
    assert [s.task_for(i).task_id for i in range(5)] == ["a", "fast", "a", "fast", "a"]
    plan = plan_episode(s, "ep_0001", 1)
    assert plan.duration_s == 0.5 and plan.control_frequency == 50.0 and plan.seed == 4
    assert plan.start_pose_timeout_s == 0.05 and plan.start_pose_tolerance_rad == 0.0
    assert dict(plan.policy_config) == {"seed": 1, "end_after_steps": 7, "amplitude": 0.5}
    default = plan_episode(s, "ep_0000", 0)
    assert default.duration_s == 2.0 and dict(default.policy_config) == {"seed": 1} and default.seed is None


def test_same_task_id_with_another_definition_is_refused_but_a_repeat_is_not():
    validate_job_spec(spec(tasks=(task("a"), task("b"), task("a"))))
    with pytest.raises(JobSpecError) as info:
        validate_job_spec(spec(tasks=(task("a"), task("a", instruction="something else"))))
    err = info.value
    assert (err.task_index, err.field) == (1, "task_id") and "also tasks[0]" in err.reason
