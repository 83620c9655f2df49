"""A team's job never carries a key that would let it score itself, inject faults or drive the scripted operator.

One test per key, at every place a team can put it: the job file (top level, a suite task entry, a free-form task,
``choose``) and a free-form task's wire parameters (what the relay's SubmitJob and the station node's submit_job
check with the same rule). Each refusal names the key.
"""

from __future__ import annotations

import pytest

from strands_robots.job_model.team_job import TeamJobRefused, team_job_from_mapping
from strands_robots.job_model.team_keys import (
    CHOICE,
    FREE_FORM_TASK,
    JOB,
    SUITE_TASK,
    TASK_PARAMETER,
    TeamKeyRefused,
    team_key_refusal,
)

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]
# key -> the word its refusal gives as the reason
NEVER_A_TEAMS = {
    "success_when": "never scores", "success": "never scores", "headline": "never scores",
    "answers": "never scores", "answer.motion": "never scores", "answer.task_done": "never scores",
    "operator": "scripted operator", "operator_takeover_at_s": "scripted operator",
    "operator_takeover_for_s": "scripted operator", "operator_claim_at_s": "scripted operator",
    "operator_discard": "scripted operator", "operator_score": "scripted operator",
    "operator.takeover_at_s": "scripted operator",
    "faults": "simulated faults", "fault.stop_heartbeat_at_s": "simulated faults",
    "fault.policy_lost_at_s": "simulated faults", "faults.stop_heartbeat_at_s": "simulated faults",
    "seed": "seeds", "seeds": "seeds", "seed_rule": "seeds",
    "scene": "scene", "object_x": "scene", "object_y": "scene", "camera_cover": "scene", "start_pose": "scene",
    "start_pose_timeout_s": "scene", "start_pose_tolerance_rad": "scene", "scene.object_x": "scene",
}
# keys a team's own task may set but a suite task may not (the suite fixes them)
SUITE_FIXED = ("scoring", "budget", "budget_s", "duration_s", "instruction", "layout", "parameters")


def base(**extra):
    return {"station_id": "sim_station", "suite": "demo", "tasks": [{"task": "hold_pose", "trials": 1}], **extra}


def refused(data) -> TeamJobRefused:
    with pytest.raises(TeamJobRefused) as info:
        team_job_from_mapping(data)
    return info.value


@pytest.mark.parametrize("key", sorted(NEVER_A_TEAMS))
def test_a_job_key_that_is_never_a_teams_is_refused_naming_it(key):
    exc = refused(base(**{key: "1"}))
    assert exc.field == key and isinstance(exc, TeamKeyRefused)
    assert NEVER_A_TEAMS[key] in exc.reason and repr(key) in exc.reason


@pytest.mark.parametrize("key", sorted(NEVER_A_TEAMS))
def test_a_suite_task_entry_carrying_a_station_key_is_refused_naming_it(key):
    exc = refused(base(tasks=[{"task": "hold_pose", "trials": 1, key: "1"}]))
    assert exc.field == f"tasks[0].{key}" and NEVER_A_TEAMS[key] in exc.reason


@pytest.mark.parametrize("key", sorted(NEVER_A_TEAMS))
def test_a_choice_that_is_never_a_teams_is_refused_naming_it(key):
    exc = refused(base(choose={key: "1"}))
    assert exc.field == f"choose.{key}" and NEVER_A_TEAMS[key] in exc.reason


@pytest.mark.parametrize("key", sorted(NEVER_A_TEAMS))
def test_a_free_form_task_carrying_a_station_key_is_refused_naming_it(key):
    own = {"task_id": "wave", "instruction": "wave", "scoring": SHEET, key: "1"}
    exc = refused({"station_id": "s", "free_form": [own]})
    assert exc.field == f"free_form[0].{key}" and NEVER_A_TEAMS[key] in exc.reason


@pytest.mark.parametrize("key", sorted(NEVER_A_TEAMS))
def test_a_free_form_task_parameter_on_the_wire_is_refused_by_the_same_rule(key):
    assert NEVER_A_TEAMS[key] in team_key_refusal(key, TASK_PARAMETER)


@pytest.mark.parametrize("key", SUITE_FIXED)
def test_a_suite_task_entry_may_not_set_what_the_suite_fixes(key):
    exc = refused(base(tasks=[{"task": "hold_pose", "trials": 1, key: "1"}]))
    assert exc.field == f"tasks[0].{key}" and "suite" in exc.reason


def test_the_old_job_shape_with_parameters_is_refused_naming_the_station_key():
    old = {"task_id": "hold", "instruction": "hold", "parameters": {"success_when": "x > 1"}, "scoring": SHEET}
    exc = refused(base(tasks=[old]))
    assert exc.field == "tasks[0].parameters['success_when']" and "never scores" in exc.reason
    plain = {"task_id": "hold", "instruction": "hold", "scoring": SHEET}
    exc = refused(base(tasks=[plain]))
    assert exc.field == "tasks[0]" and "free_form" in exc.reason


@pytest.mark.parametrize("key, hint", [("episodes_total", "trials"), ("duration_s", "budget"),
                                       ("control_frequency", "choose"), ("images", "choose")])
def test_a_job_key_of_the_old_format_says_where_its_setting_went(key, hint):
    exc = refused(base(**{key: 1}))
    assert exc.field == key and hint in exc.reason


def test_a_choice_no_suite_offers_is_refused_naming_it():
    exc = refused(base(choose={"action_horizon": 4}))
    assert exc.field == "choose.action_horizon" and "choosable" in exc.reason


def test_the_rule_allows_a_teams_own_settings():
    for key in ("cameras", "image_format", "image_quality", "control_frequency"):
        assert team_key_refusal(key, CHOICE) is None and team_key_refusal(key, TASK_PARAMETER) is None
    for key in ("duration_s", "policy.end_after_steps"):
        assert team_key_refusal(key, TASK_PARAMETER) is None
    for key in ("scoring", "budget_s", "instruction"):
        assert team_key_refusal(key, FREE_FORM_TASK) is None and team_key_refusal(key, SUITE_TASK) is not None
    assert team_key_refusal("station_id", JOB) is None
    with pytest.raises(ValueError):
        team_key_refusal("seed", "somewhere")
