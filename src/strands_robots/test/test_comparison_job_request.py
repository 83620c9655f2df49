"""A comparison (A/B) job's ``compare`` key: read, carried over the wire, checked at the relay and the station.

Each malformed setting is refused naming its key (``compare.slots[1]``, ``compare.stop.alpha`` ...), at the job
file, at the relay's submit and at the station; a good one runs every slot in each of its blocks, the blocks
taking the job's task entries in turn.
"""

from __future__ import annotations

import pytest

from strands_robots.job_model.team_job import TeamJobRefused, team_job_from_mapping, team_job_to_mapping
from strands_robots.package_files import config_dir
from strands_robots.relay.job_request import InvalidJob, check_submit
from strands_robots.station.job import JobSpecError
from strands_robots.station.job_file import job_spec_from_mapping, job_spec_to_mapping
from strands_robots.station.suite_file import load_suites
from strands_robots.station.suite_job import job_spec_for, station_offer
from strands_robots.wire.pb_model import suite_job_to_pb, team_job_from_pb

TASKS = [{"task": "reach_cube", "trials": 5}, {"task": "hold_pose", "trials": 2}]


def _job(compare, tasks=TASKS, **more):
    return team_job_from_mapping({"station_id": "sim_station", "suite": "demo", "tasks": tasks, "compare": compare,
                                  **more})


@pytest.fixture(scope="module")
def suites():
    return load_suites(str(config_dir("suites")), "simulated")


BAD = [
    ({"slots": ["a"]}, "compare.slots", "2 to 8"),
    ({"slots": [f"s{i}" for i in range(9)]}, "compare.slots", "2 to 8"),
    ({"slots": "a,b"}, "compare.slots", "list"),
    ({"slots": ["a", "a"]}, "compare.slots[1]", "named once"),
    ({"slots": ["a", "b c"]}, "compare.slots[1]", "1-64 letters"),
    ({"slots": ["a", "x" * 65]}, "compare.slots[1]", "1-64 letters"),
    ({"slots": ["a", 3]}, "compare.slots[1]", "1-64 letters"),
    ({"slots": ["a", "b"], "weights": [1, 2]}, "compare.weights", "unknown key"),
    ({"slots": ["a", "b"], "stop": {"when": "always"}}, "compare.stop.when", "separated"),
    ({"slots": ["a", "b"], "stop": {"alpha": 0}}, "compare.stop.alpha", "(0, 0.5]"),
    ({"slots": ["a", "b"], "stop": {"alpha": 0.6}}, "compare.stop.alpha", "(0, 0.5]"),
    ({"slots": ["a", "b"], "stop": {"alpha": True}}, "compare.stop.alpha", "(0, 0.5]"),
    ({"slots": ["a", "b"], "stop": {"max_blocks": 0}}, "compare.stop.max_blocks", "integer"),
    ({"slots": ["a", "b"], "stop": {"max_blocks": 8}}, "compare.stop.max_blocks", "make 7 block(s)"),
    ({"slots": ["a", "b"], "stop": {"or_out_of_reach": "yes"}}, "compare.stop.or_out_of_reach", "true or false"),
    ({"slots": ["a", "b"], "stop": {"alpha_": 0.1}}, "compare.stop.alpha_", "did you mean 'alpha'"),
    (["a", "b"], "compare", "slots"),
    ({"slots": ["a", {"team": "lab_b"}]}, "compare.slots[1].name", "missing"),
    ({"slots": ["a", {"name": "b", "team": "lab b"}]}, "compare.slots[1].team", "client name"),
    ({"slots": ["a", {"name": "b", "team": 7}]}, "compare.slots[1].team", "client name"),
    ({"slots": ["a", {"name": "b c", "team": "lab_b"}]}, "compare.slots[1].name", "1-64 letters"),
    ({"slots": ["a", {"name": "b", "teams": "lab_b"}]}, "compare.slots[1].teams", "did you mean 'team'"),
    ({"slots": ["a", {"name": "a", "team": "lab_b"}]}, "compare.slots[1]", "named once"),
]


@pytest.mark.parametrize("compare,key,words", BAD, ids=[f"{k}:{w}" for _, k, w in BAD])
def test_a_malformed_compare_is_refused_naming_its_key(compare, key, words):
    with pytest.raises(TeamJobRefused) as err:
        _job(compare)
    assert err.value.field == key
    assert words in err.value.reason


def test_a_comparison_runs_suite_tasks_only():
    with pytest.raises(TeamJobRefused) as err:
        team_job_from_mapping({"station_id": "s", "compare": {"slots": ["a", "b"]}, "free_form": [
            {"task_id": "wave", "instruction": "wave", "scoring": [
                {"name": "ok", "question": "ok?", "answer_type": "yes_no", "max_points": 1,
                 "success_answer": "yes"}]}]})
    assert err.value.field == "compare"
    with pytest.raises(TeamJobRefused) as err:
        _job({"slots": ["a", "b"]}, free_form=[{"task_id": "wave", "instruction": "wave", "scoring": [
            {"name": "ok", "question": "ok?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]}])
    assert err.value.field == "free_form"


def test_a_comparison_asks_every_slot_once_per_block_up_to_max_blocks():
    job = _job({"slots": ["vision", "blind", "random"], "stop": {"max_blocks": 6, "or_out_of_reach": True}})
    assert (job.blocks, job.episodes) == (6, 18)
    assert _job({"slots": ["vision", "blind"]}).episodes == 14  # no stop rule: every trial is a block
    assert team_job_from_mapping(team_job_to_mapping(job)) == job


def test_compare_crosses_the_wire_unchanged():
    job = _job({"slots": ["vision", "blind"], "stop": {"alpha": 0.01, "max_blocks": 7, "or_out_of_reach": True}})
    assert team_job_from_pb(suite_job_to_pb(job), station_id="sim_station") == job
    plain = _job({"slots": ["vision", "blind"]})
    assert team_job_from_pb(suite_job_to_pb(plain), station_id="sim_station") == plain


def test_another_teams_slot_is_read_carried_over_the_wire_and_kept_by_the_station(suites):
    job = _job({"slots": ["vision", {"name": "theirs", "team": "lab_b"}], "stop": {"max_blocks": 4}})
    assert job.compare.slots == ("vision", "theirs") and job.compare.teams == ("", "lab_b")
    assert job.compare.invited == ("lab_b",)
    assert (job.compare.team_of("vision", "team_a"), job.compare.team_of("theirs", "team_a")) == ("team_a", "lab_b")
    assert team_job_to_mapping(job)["compare"]["slots"] == ["vision", {"name": "theirs", "team": "lab_b"}]
    assert team_job_from_mapping(team_job_to_mapping(job)) == job
    assert team_job_from_pb(suite_job_to_pb(job), station_id="sim_station") == job
    spec = job_spec_for(job, suites, station_id="sim_station", profile="simulated", allow_free_form_tasks=False,
                        job_id="ab", client_id="team_a", policy_provider="relay")
    assert spec.comparison.teams == ("", "lab_b")
    assert job_spec_from_mapping(job_spec_to_mapping(spec)) == spec
    own = _job({"slots": ["vision", {"name": "blind"}]})  # a mapping without a team is the submitting team's
    assert own.compare.teams == () and own == _job({"slots": ["vision", "blind"]})


def test_the_station_makes_blocks_from_the_task_entries_in_turn_and_persists_the_comparison(suites):
    job = _job({"slots": ["vision", "blind"], "stop": {"max_blocks": 6}})
    spec = job_spec_for(job, suites, station_id="sim_station", profile="simulated", allow_free_form_tasks=False,
                        job_id="ab", client_id="team_a", policy_provider="relay")
    assert [(t.task_id, t.parameters["seed"]) for t in spec.tasks] == [
        ("reach_cube", "0"), ("hold_pose", "0"), ("reach_cube", "1"), ("hold_pose", "1"), ("reach_cube", "2"),
        ("reach_cube", "3")]
    assert spec.episodes_total == 12
    assert spec.comparison.slots == ("vision", "blind") and spec.comparison.suite == "demo"
    assert job_spec_from_mapping(job_spec_to_mapping(spec)) == spec


def test_a_station_file_with_a_malformed_compare_is_refused_naming_the_key(suites):
    job = _job({"slots": ["vision", "blind"]})
    spec = job_spec_for(job, suites, station_id="sim_station", profile="simulated", allow_free_form_tasks=False,
                        job_id="ab", client_id="team_a", policy_provider="relay")
    data = job_spec_to_mapping(spec)
    data["compare"]["slots"] = ["vision", "vision"]
    with pytest.raises(JobSpecError) as err:
        job_spec_from_mapping(data)
    assert err.value.field == "compare.slots[1]"
    data = job_spec_to_mapping(spec)
    data["episodes_total"] = 7
    with pytest.raises(JobSpecError) as err:
        job_spec_from_mapping(data)
    assert err.value.field == "episodes_total" and "14 episodes at most" in err.value.reason


def _request(compare_job, episodes):
    from strands_robots.wire.proto import evaluation_service_pb2 as pb

    return pb.SubmitJobRequest(station_id="sim_station", episodes=episodes, suite_job=suite_job_to_pb(compare_job))


def test_the_relay_refuses_a_malformed_compare_naming_its_key_and_takes_a_good_one(suites):
    offer = station_offer("sim_station", suites, "simulated", False)
    good = _job({"slots": ["vision", "blind"], "stop": {"max_blocks": 4}})
    assert check_submit(_request(good, 8), "team_a", {"sim_station"}, offer=offer)
    with pytest.raises(InvalidJob, match="episodes: 14 refused.*make 8 episode"):
        check_submit(_request(good, 14), "team_a", {"sim_station"}, offer=offer)
    bad = suite_job_to_pb(good)
    bad.compare.slots[1] = "vision"
    from strands_robots.wire.proto import evaluation_service_pb2 as pb

    with pytest.raises(InvalidJob, match=r"^compare\.slots\[1\]: 'vision' is also"):
        check_submit(pb.SubmitJobRequest(station_id="sim_station", episodes=8, suite_job=bad), "team_a",
                     {"sim_station"}, offer=offer)
    bad = suite_job_to_pb(good)
    bad.compare.stop.alpha = 0.9
    with pytest.raises(InvalidJob, match=r"^compare\.stop\.alpha"):
        check_submit(pb.SubmitJobRequest(station_id="sim_station", episodes=8, suite_job=bad), "team_a",
                     {"sim_station"}, offer=offer)
