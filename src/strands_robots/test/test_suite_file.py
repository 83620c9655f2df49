"""A station's suite files, and a team's job expanded into the episodes the station runs.

Validated on load (each refusal names file, task and key), the hardware profile's refusals, what the relay is
offered.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from strands_robots import validation as rules
from strands_robots.job_model.offer import StationOffer
from strands_robots.job_model import team_job as tj
from strands_robots.job_model.team_job import TeamJobRefused, check_against_offer, team_job_from_mapping
from strands_robots.station.job import JobSpecError, plan_episode
from strands_robots.station.suite_file import SuiteError, load_suite, load_suites, suite_from_mapping
from strands_robots.station.suite_job import job_spec_for, station_offer

CONFIG = Path(__file__).resolve().parent.parent / "config"
SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"},
         {"name": "motion", "question": "Smooth?", "answer_type": "choice", "max_points": 1,
          "choices": ["jerky", "smooth"], "choice_points": [0, 1]}]
SUITE = {
    "suite": "bench", "title": "Bench", "headline": "success_ever",
    "team_may_choose": {"cameras": True, "control_frequency": {"min": 25, "max": 50}},
    "tasks": [
        {"task_id": "hold", "instruction": "hold", "layout": "table", "budget_s": 1.5, "scoring": SHEET,
         "success": {"when": "right.joint_4.pos > 0.9"}, "seeds": [11, 12, 13],
         "operator": {"takeover_at_s": 0.5, "answers": {"motion": "smooth"}}, "faults": {"stop_heartbeat_at_s": 1},
         "scene": {"object_x": 0.3}, "start_pose": {"timeout_s": 4}, "policy_hints": {"end_after_steps": 7}},
        {"task_id": "reach", "instruction": "reach", "budget_s": 2, "scoring": SHEET,
         "seed_rule": {"first": 100, "count": 4}},
    ],
}


def suite(profile="simulated", **changes):
    data = copy.deepcopy(SUITE)
    data.update(changes)
    return suite_from_mapping(data, "bench.yaml", profile)


def task_change(profile="simulated", **changes):
    data = copy.deepcopy(SUITE)
    data["tasks"][0].update(changes)
    with pytest.raises(SuiteError) as info:
        suite_from_mapping(data, "bench.yaml", profile)
    return info.value


def test_a_suite_task_becomes_the_stations_task_with_trial_i_on_seed_i():
    hold = suite().task("hold")
    tasks = [hold.station_task(i, {"control_frequency": "40"}) for i in range(3)]
    assert [t.parameters["seed"] for t in tasks] == ["11", "12", "13"]
    assert dict(tasks[0].parameters) == {
        "control_frequency": "40", "duration_s": "1.5", "success_when": "right.joint_4.pos > 0.9",
        "operator_takeover_at_s": "0.5", "answer.motion": "smooth", "fault.stop_heartbeat_at_s": "1",
        "object_x": "0.3", "start_pose_timeout_s": "4", "policy.end_after_steps": "7", "seed": "11"}
    assert suite().task("reach").seeds == (100, 101, 102, 103)
    with pytest.raises(IndexError):
        hold.station_task(3)


@pytest.mark.parametrize("changes, key", [
    ({"budget_s": -1}, "budget_s"),
    ({"success": {"when": "joint ~ 3"}}, "success.when"),
    ({"operator": {"takeover_at_s": -2}}, "operator.takeover_at_s"),
    ({"operator": {"answers": {"done": "yes"}}}, "operator.answers.done"),
    ({"operator": {"answers": {"motion": "wobbly"}}}, "operator.answers.motion"),
    ({"operator": {"hover": 1}}, "operator.hover"),
    ({"faults": {"stop_heartbeat_at_s": "soon"}}, "faults.stop_heartbeat_at_s"),
    ({"scene": {"object_x": 9}}, "scene.object_x"),
    ({"start_pose": {"tolerance_rad": 3}}, "start_pose.tolerance_rad"),
    ({"seeds": [1, 1]}, "seeds"),
    ({"seeds": [-1]}, "seeds"),
    ({"seed_rule": {"first": 0, "count": 3}}, "seeds"),
    ({"scoring": []}, "scoring"),
    ({"succes": {}}, "succes"),
])
def test_a_bad_value_in_a_suite_is_refused_naming_file_task_and_key(changes, key):
    exc = task_change(**changes)
    assert (exc.path, exc.task, exc.key) == ("bench.yaml", "hold", key), str(exc)
    assert str(exc).startswith("bench.yaml: task 'hold': ")


@pytest.mark.parametrize("changes, key", [
    ({"suite": "no spaces"}, "suite"), ({"headline": "success_sometimes"}, "headline"),
    ({"team_may_choose": {"seed": True}}, "team_may_choose.seed"),
    ({"team_may_choose": {"control_frequency": {"min": 60, "max": 50}}}, "team_may_choose.control_frequency"),
    ({"tasks": []}, "tasks"), ({"owner": "me"}, "owner"),
])
def test_a_bad_suite_level_value_is_refused_naming_file_and_key(changes, key):
    with pytest.raises(SuiteError) as info:
        suite(**changes)
    assert (info.value.path, info.value.task, info.value.key) == ("bench.yaml", None, key)


@pytest.mark.parametrize("section", ["operator", "faults"])
def test_a_hardware_station_refuses_a_suite_with_scripted_operator_or_fault_settings(section):
    data = copy.deepcopy(SUITE)
    for name in ("operator", "faults"):
        if name != section:
            del data["tasks"][0][name]
    with pytest.raises(SuiteError) as info:
        suite_from_mapping(data, "bench.yaml", "hardware")
    assert (info.value.task, info.value.key) == ("hold", section) and "hardware" in info.value.reason
    for name in ("operator", "faults"):
        data["tasks"][0].pop(name, None)
    assert suite_from_mapping(data, "bench.yaml", "hardware").task("hold")  # without them it loads


def test_the_demo_suite_loads_on_its_simulated_station_and_only_there():
    demo = load_suite(str(CONFIG / "suites" / "demo.yaml"), "simulated")
    assert [t.task_id for t in demo.tasks] == ["hold_pose", "short_reach", "push_to_limit", "assisted_hold",
                                               "redo_after_discard", "blocked_start", "reach_cube",
                                               "reach_cube_blind", "reach_cube_quick"]
    with pytest.raises(SuiteError):
        load_suite(str(CONFIG / "suites" / "demo.yaml"), "hardware")
    station = yaml.safe_load((CONFIG / "station.yaml").read_text())["/**/station"]["ros__parameters"]
    assert station["profile"] == "simulated" and station["allow_free_form_tasks"] is True


def test_two_suite_files_with_one_id_are_refused_naming_both(tmp_path):
    for name in ("a.yaml", "b.yml"):
        (tmp_path / name).write_text(yaml.safe_dump(SUITE))
    (tmp_path / "notes.txt").write_text("not a suite")
    with pytest.raises(SuiteError) as info:
        load_suites(str(tmp_path), "simulated")
    assert info.value.path.endswith("b.yml") and "a.yaml" in info.value.reason
    (tmp_path / "b.yml").unlink()
    assert list(load_suites(str(tmp_path), "simulated")) == ["bench"]
    assert load_suites(str(tmp_path / "missing"), "simulated") == {}


def test_the_offer_lists_tasks_trials_questions_and_choices_but_no_predicate_seed_or_operator():
    offer = station_offer("st", {"bench": suite()}, "simulated", False)
    text = repr(offer.to_mapping())
    assert StationOffer.from_mapping(offer.to_mapping()) == offer
    (bench,) = offer.suites
    assert [(t.task_id, t.trials, t.budget_s) for t in bench.tasks] == [("hold", 3, 1.5), ("reach", 4, 2.0)]
    assert bench.tasks[0].questions == ("Done?", "Smooth?") and bench.headline == "success_ever"
    for secret in ("right.joint_4", "takeover", "11", "heartbeat", "object_x"):
        assert secret not in text


def job(**changes):
    data = {"station_id": "st", "suite": "bench", "tasks": [{"task": "hold", "trials": 2}, {"task": "reach"}],
            "policy": {"provider": "scripted", "config": {"mode": "torque_ramp"}}}
    data.update(changes)
    return team_job_from_mapping(data)


def expand(team_job, allow_free_form=False, profile="simulated"):
    return job_spec_for(team_job, {"bench": suite()}, station_id="st", profile=profile,
                        allow_free_form_tasks=allow_free_form, job_id="j1", client_id="team")


def test_a_suite_job_runs_each_task_for_its_trials_in_order_with_the_suites_seeds():
    spec = expand(job(choose={"control_frequency": 40, "cameras": "none"}, max_discards=3))
    plans = [plan_episode(spec, f"ep_{i}", i) for i in range(spec.episodes_total)]
    assert [(p.task.task_id, p.seed) for p in plans] == [("hold", 11), ("hold", 12), ("reach", 100)]
    assert {p.control_frequency for p in plans} == {40.0} and spec.max_discards == 3
    assert [p.duration_s for p in plans] == [1.5, 1.5, 2.0]
    assert spec.tasks[0].parameters["cameras"] == "none"


@pytest.mark.parametrize("changes, field", [
    ({"suite": "other"}, "suite"),
    ({"tasks": [{"task": "hodl"}]}, "tasks[0].task"),
    ({"tasks": [{"task": "hold", "trials": 4}]}, "tasks[0].trials"),
    ({"choose": {"control_frequency": 100}}, "choose.control_frequency"),
    ({"choose": {"cameras": "scene:1x1"}}, "choose.cameras"),
])
def test_a_job_the_suite_does_not_allow_is_refused_naming_the_key(changes, field):
    with pytest.raises(JobSpecError) as info:
        expand(job(**changes))
    assert info.value.field == field, str(info.value)


def test_a_choice_the_suite_does_not_leave_to_the_team_is_refused_by_the_offer_check():
    data = copy.deepcopy(SUITE)
    data["team_may_choose"] = {"control_frequency": True}
    offer = station_offer("st", {"bench": suite_from_mapping(data, "b.yaml", "simulated")}, "simulated", False)
    with pytest.raises(TeamJobRefused) as info:
        check_against_offer(job(choose={"image_format": "png"}), offer)
    assert info.value.field == "choose.image_format" and "control_frequency" in info.value.reason


def test_free_form_tasks_run_where_allowed_and_the_scripted_operator_keeps_them_unscored():
    own = {"task_id": "wave", "instruction": "wave at the camera", "trials": 2, "budget_s": 1.0, "scoring": SHEET}
    team_job = team_job_from_mapping({"station_id": "st", "free_form": [own]})
    with pytest.raises(JobSpecError) as info:
        expand(team_job)
    assert info.value.field == "free_form"
    spec = expand(team_job, allow_free_form=True)
    assert [t.task_id for t in spec.tasks] == ["wave", "wave"]
    assert dict(spec.tasks[0].parameters) == {"duration_s": "1", "operator_score": "false"}


def test_the_job_models_limits_are_the_stations():
    assert tj.MAX_EPISODES == rules.JOB_LIMITS["episodes_total"].maximum
    assert tj.MAX_DISCARDS == rules.JOB_LIMITS["max_discards"].maximum
    with pytest.raises(TeamJobRefused) as info:
        job(tasks=[{"task": "hold", "trials": tj.MAX_EPISODES + 1}])
    assert info.value.field == "tasks[0].trials"


def test_the_demo_job_file_names_the_demo_suites_tasks_once_each():
    from strands_robots.job_model.team_job import load_team_job

    demo = load_team_job(str(CONFIG / "demo_job.yaml"))
    suites = load_suites(str(CONFIG / "suites"), "simulated")
    spec = job_spec_for(demo, suites, station_id="sim_station", profile="simulated", allow_free_form_tasks=True,
                        job_id="demo_job", client_id="demo")
    # every task once, but the comparison's (config/demo_compare.yaml names it: make run's comparison job)
    assert [t.task_id for t in spec.tasks] == [t.task_id for t in suites["demo"].tasks][:-1]
    assert spec.episodes_total == 8 and spec.max_discards == 2
    compare = job_spec_for(load_team_job(str(CONFIG / "demo_compare.yaml")), suites, station_id="sim_station",
                           profile="simulated", allow_free_form_tasks=False, job_id="demo_compare", client_id="demo")
    assert {t.task_id for t in compare.tasks} == {"reach_cube_quick"} and len(compare.tasks) == 12
    assert compare.comparison.slots == ("vision", "blind") and compare.comparison.stop.max_blocks == 12


def test_a_task_named_again_goes_on_with_its_next_seeds_and_the_total_is_checked():
    spec = expand(job(tasks=[{"task": "hold"}, {"task": "reach"}, {"task": "hold", "trials": 2}]))
    assert [(t.task_id, t.parameters["seed"]) for t in spec.tasks] == [
        ("hold", "11"), ("reach", "100"), ("hold", "12"), ("hold", "13")]
    with pytest.raises(JobSpecError) as info:
        expand(job(tasks=[{"task": "hold", "trials": 2}, {"task": "reach"}, {"task": "hold", "trials": 2}]))
    assert info.value.field == "tasks[2].trials" and "asks 4 in all" in info.value.reason


@pytest.mark.parametrize("key", ["success_when", "operator_takeover_at_s", "fault.stop_heartbeat_at_s", "answer.x",
                                 "seed", "object_x", "start_pose_timeout_s"])
def test_the_station_refuses_a_relay_jobs_own_task_carrying_a_station_key(key):
    """The station keeps the rule too: a job that reached it without the relay's check is refused naming the key."""
    from strands_robots.wire import pb_model
    from strands_robots.wire.proto import station_service_pb2 as ss

    job = ss.Job(job_id="j", client_id="team", station_id="st", episodes_total=1)
    own = job.tasks.add(task_id="wave", instruction="wave")
    own.parameters[key] = "1"
    own.scoring.items.add(name="done", question="Done?", answer_type=1, max_points=1, success_answer="yes")
    with pytest.raises(JobSpecError) as info:
        pb_model.job_spec_from_pb(job, suites={"bench": suite()}, profile="simulated", allow_free_form_tasks=True)
    assert info.value.field == f"parameters[{key!r}]" and info.value.task_index == 0, str(info.value)
    del own.parameters[key]
    spec = pb_model.job_spec_from_pb(job, suites={"bench": suite()}, profile="simulated", allow_free_form_tasks=True)
    assert dict(spec.tasks[0].parameters) == {"operator_score": "false"}
    with pytest.raises(JobSpecError) as info:
        pb_model.job_spec_from_pb(job, suites={"bench": suite()}, profile="hardware", allow_free_form_tasks=False)
    assert info.value.field == "tasks" and "free-form" in info.value.reason


def test_a_relay_suite_job_is_filled_in_from_the_stations_suite_and_its_episodes_must_add_up():
    from strands_robots.wire import pb_model
    from strands_robots.wire.proto import station_service_pb2 as ss

    job = ss.Job(job_id="j", client_id="team", station_id="st", episodes_total=3)
    job.suite_job.suite = "bench"
    job.suite_job.tasks.add(task="hold", trials=2)
    job.suite_job.tasks.add(task="reach", trials=1)
    job.suite_job.choose["control_frequency"] = "40"
    spec = pb_model.job_spec_from_pb(job, suites={"bench": suite()}, profile="simulated", allow_free_form_tasks=False)
    assert [(t.task_id, t.parameters["seed"]) for t in spec.tasks] == [("hold", "11"), ("hold", "12"),
                                                                        ("reach", "100")]
    assert spec.policy_provider == "relay" and spec.control_frequency == 40.0
    job.episodes_total = 4
    with pytest.raises(JobSpecError) as info:
        pb_model.job_spec_from_pb(job, suites={"bench": suite()}, profile="simulated", allow_free_form_tasks=False)
    assert info.value.field == "episodes_total"
    job.suite_job.choose["seed"] = "3"
    with pytest.raises(JobSpecError) as info:
        pb_model.job_spec_from_pb(job, suites={"bench": suite()}, profile="simulated", allow_free_form_tasks=False)
    assert info.value.field == "suite_job.choose.seed"
