"""Every setting a job file can hold reaches the station through the relay, or is refused where it enters.

A job file (``config/demo_job.yaml``: the demo suite's tasks and trials, with every setting given a value other
than its default) is submitted the way ``demo_job``, ``strands-robots job submit`` and the demo do
(``client_side.submit_job_file``) to a real relay; the station's side is a real ``StationLink`` that offers the
demo station's suites and takes the job from the relay's stream, turned into the ``JobSpec`` the station node runs
(``pb_model.job_spec_from_pb`` with the station's suites, the node's own conversion). Each setting is compared
there with the file's. What the station does not offer, and every key a team must never set, is refused at submit
(``InvalidTask``) naming it, and no job is made.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest
from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, running_relay
from test_team_job_refused_keys import NEVER_A_TEAMS, SHEET

from strands_robots.client.cli.client_side import free_form_tasks, submit_job_file
from strands_robots.client import EvaluationClient, InvalidTask
from strands_robots.job_model import team_job
from strands_robots.job_model.team_job import load_team_job, team_job_from_mapping
from strands_robots.station.suite_file import load_suites
from strands_robots.station.suite_job import station_offer
from strands_robots.station_link.link import StationLink
from strands_robots.wire import pb_model

CONFIG = Path(__file__).resolve().parent.parent / "config"
DEMO_JOB = CONFIG / "demo_job.yaml"
SUITES = load_suites(str(CONFIG / "suites"), "simulated")

# How each key of a job file reaches the station through the relay (a key missing here fails the first test).
ARRIVES = ("station_id", "suite", "tasks", "choose", "free_form", "max_discards", "intervals", "compare", "record")
# The submit names the job (a fresh id each time) and its owner (the token's client); the file's policy is served
# by the client that submits (the station's provider is "relay").
GIVEN_BY_THE_SUBMIT = ("job_id", "client_id")
SERVED_BY_THE_CLIENT = ("policy",)


def _job_with_every_setting_changed():
    """Return the demo job with each setting away from its default (and from the file's own value)."""
    job = load_team_job(str(DEMO_JOB))
    own = team_job_from_mapping({"station_id": "s", "free_form": [
        {"task_id": "wave", "instruction": "wave", "trials": 2, "budget_s": 1.5, "scoring": SHEET}]}).free_form
    return dataclasses.replace(job, max_discards=7, intervals="clopper-pearson", free_form=own, record=not job.record,
                               tasks=(team_job.SuiteTrials("hold_pose", 2), team_job.SuiteTrials("reach_cube", 3)),
                               choose={"cameras": "scene:112x112", "image_format": "png", "control_frequency": "40"})


def _offer(allow_free_form=True):
    return pb_model.station_offer_to_pb(station_offer("sim_station", SUITES, "simulated", allow_free_form))


def _connect(relay, on_job=None, allow_free_form=True):
    return StationLink(relay.target, "sim_station", STATION_TOKENS["sim_station"], on_job=on_job, heartbeat_s=0.2,
                       offer=_offer(allow_free_form)).start()


def _offered(relay, timeout_s: float = 20.0, allow_free_form=True) -> None:
    """Connect the station's link until the relay holds its offer (a bounded wait on the store)."""
    import time

    link = _connect(relay, lambda job: None, allow_free_form=allow_free_form)  # TakeJobs carries the offer
    try:
        deadline = time.monotonic() + timeout_s
        while not relay.store.station_offers("sim_station"):
            assert time.monotonic() < deadline, "the station's offer never reached the relay"
            time.sleep(0.05)
    finally:
        link.close()


def _station_side(relay, timeout_s: float = 20.0):
    """Take the next job on a real StationLink; return it as the station node's JobSpec."""
    got: list = []
    arrived = threading.Event()

    def on_job(job) -> None:
        got.append(job)
        arrived.set()

    link = _connect(relay, on_job)
    try:
        assert arrived.wait(timeout_s), "the relay's job never reached the station's link"
    finally:
        link.close()
    return pb_model.job_spec_from_pb(got[0], suites=SUITES, profile="simulated", allow_free_form_tasks=True)


def test_every_key_of_a_job_file_is_accounted_for():
    keys = set(ARRIVES) | set(GIVEN_BY_THE_SUBMIT) | set(SERVED_BY_THE_CLIENT)
    assert set(team_job._JOB_KEYS) == keys, set(team_job._JOB_KEYS) ^ keys


def test_every_setting_of_a_job_file_reaches_the_station_through_the_relay(tmp_path):
    job = _job_with_every_setting_changed()
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        _offered(relay)
        job_id = submit_job_file(client, job, write=lambda line: None)
        station = _station_side(relay)
    assert station.job_id == job_id and station.client_id == "team_a"  # given by the submit
    assert station.station_id == job.station_id
    assert station.episodes_total == 7 and station.max_discards == 7
    assert station.intervals == "clopper-pearson"  # how the station's status computes the rates' intervals
    assert station.record is job.record  # the episodes recorded and sent to the team, or not
    # the suite's tasks, trial i on the suite's seed i, then the team's own (unscored by the scripted operator)
    assert [(t.task_id, t.parameters.get("seed")) for t in station.tasks] == [
        ("hold_pose", "0"), ("hold_pose", "1"), ("reach_cube", "0"), ("reach_cube", "1"), ("reach_cube", "2"),
        ("wave", None), ("wave", None)]
    assert station.tasks[0] == SUITES["demo"].task("hold_pose").station_task(0, job.choose)
    for task in station.tasks:
        assert (task.parameters["cameras"], task.parameters["image_format"]) == ("scene:112x112", "png")
        assert task.parameters["control_frequency"] == "40"
    assert station.control_frequency == 40.0
    assert dict(station.tasks[-1].parameters) == {**job.choose, "duration_s": "1.5", "operator_score": "false"}
    assert station.policy_provider == "relay"  # the file's policy runs on the client that serves it


def test_a_comparison_job_file_reaches_the_station_with_its_slots_and_stop_rule(tmp_path):
    from strands_robots.job_model.compare import CompareRequest, StopRequest

    job = dataclasses.replace(_job_with_every_setting_changed(), free_form=(), compare=CompareRequest(
        ("vision", "blind"), StopRequest(alpha=0.01, max_blocks=4, or_out_of_reach=True)))
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        _offered(relay)
        submit_job_file(client, job, write=lambda line: None)
        station = _station_side(relay)
    assert station.comparison == dataclasses.replace(job.compare, suite="demo")
    assert station.episodes_total == 8  # 4 blocks, every slot once in each
    assert [(t.task_id, t.parameters.get("seed")) for t in station.tasks] == [
        ("hold_pose", "0"), ("reach_cube", "0"), ("hold_pose", "1"), ("reach_cube", "1")]


def test_the_relay_lists_what_the_station_offered(tmp_path):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        assert client.list_suites() == []
        _offered(relay)
        (entry,) = client.list_suites("sim_station")
        assert client.list_suites() == [entry]
    assert entry.station_id == "sim_station" and entry.offer.profile == "simulated"
    assert entry.offer.allow_free_form_tasks
    (demo,) = entry.offer.suites
    assert [t.task_id for t in demo.tasks] == [t.task_id for t in SUITES["demo"].tasks]
    assert {t.trials for t in demo.tasks} == {100} and demo.headline == "success_at_end"
    assert [(c.key, c.min, c.max) for c in demo.team_may_choose][1] == ("control_frequency", 10.0, 200.0)
    assert "right.joint_4" not in str(entry)  # the station's predicates stay the station's


@pytest.mark.parametrize("tasks, choose, reason", [
    ([("hodl_pose", 1)], {}, "tasks[0].task: suite 'demo' has no task 'hodl_pose'"),
    ([("hold_pose", 101)], {}, "tasks[0].trials: 101 refused"),
    ([("hold_pose", 1)], {"control_frequency": 500}, "choose.control_frequency: "),
    ([("hold_pose", 1)], {"image_quality": 200}, "choose.image_quality: "),
    ([("hold_pose", 1)], {"cameras": "scene:4096x4096,wrist:4096x4096", "image_format": "png"},
     "choose: cameras='scene:4096x4096,wrist:4096x4096', image_format='png' refused: "),
])
def test_a_job_the_offered_suite_does_not_allow_is_refused_at_submit_naming_it(tmp_path, tasks, choose, reason):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        _offered(relay)
        with pytest.raises(InvalidTask) as refused:
            client.submit_suite_job("sim_station", "demo", tasks, choose=choose)
        assert refused.value.reason.startswith(reason), refused.value.reason
        assert relay.store.open_jobs_for_station("sim_station") == []


def test_free_form_tasks_are_refused_where_the_station_does_not_allow_them(tmp_path):
    own = free_form_tasks(team_job_from_mapping({"station_id": "s", "free_form": [
        {"task_id": "wave", "instruction": "wave", "scoring": SHEET}]}))
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        _offered(relay, allow_free_form=False)
        with pytest.raises(InvalidTask) as refused:
            client.submit_job("sim_station", own, 1)
        assert refused.value.reason.startswith("tasks: station 'sim_station' runs only its suites' tasks")
        assert relay.store.open_jobs_for_station("sim_station") == []


@pytest.mark.parametrize("key", sorted(NEVER_A_TEAMS))
def test_a_key_a_team_must_never_set_is_refused_by_the_relay_naming_it(tmp_path, key):
    """On every station, offered or not: in a free-form task's parameters and in the choices."""
    task = {"task_id": "wave", "instruction": "wave", "parameters": {key: "1"}, "scoring": SHEET}
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        with pytest.raises(InvalidTask) as refused:
            client.submit_job("other_station", [task], 1)
        assert refused.value.reason.startswith(f"tasks[0].parameters[{key!r}]: {key!r} refused: "), \
            refused.value.reason
        assert NEVER_A_TEAMS[key] in refused.value.reason
        with pytest.raises(InvalidTask) as refused:
            client.submit_suite_job("other_station", "demo", [("hold_pose", 1)], choose={key: "1"})
        assert refused.value.reason.startswith(f"choose.{key}: {key!r} refused: "), refused.value.reason
        assert relay.store.open_jobs_for_station("other_station") == []


@pytest.mark.parametrize("setting, value", [("max_discards", 1001), ("max_discards", -1), ("intervals", "bayes")])
def test_a_setting_out_of_range_is_refused_at_submit_naming_it_and_no_job_is_made(tmp_path, setting, value):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        with pytest.raises(InvalidTask) as refused:
            client.submit_suite_job("sim_station", "demo", [("hold_pose", 1)], **{setting: value})
        assert setting in refused.value.reason, refused.value.reason
        assert relay.store.open_jobs_for_station("sim_station") == []


def test_a_suite_task_entry_of_the_wrong_shape_is_refused_by_the_client_naming_it():
    with EvaluationClient("127.0.0.1:1", token=CLIENT_TOKENS["team_a"]) as client:  # never reached
        with pytest.raises(InvalidTask) as refused:
            client.submit_suite_job("sim_station", "demo", [("hold_pose", 0)])
        assert refused.value.reason.startswith("tasks[0]: "), refused.value.reason
        with pytest.raises(InvalidTask) as refused:
            client.submit_suite_job("sim_station", "demo", [{"task": "hold_pose"}], max_discards=2.5)
        assert refused.value.reason.startswith("max_discards: 2.5 refused"), refused.value.reason


def test_job_suites_prints_each_stations_offer(tmp_path, monkeypatch, capsys):
    from strands_robots.client.cli.job import main

    monkeypatch.setenv("STRANDS_ROBOTS_TOKEN", CLIENT_TOKENS["team_a"])
    with running_relay(tmp_path) as relay:
        assert main(["suites", "--relay", relay.target]) == 0
        assert "(no station has offered suites yet)" in capsys.readouterr().out
        _offered(relay)
        assert main(["suites", "--relay", relay.target, "--station", "sim_station"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("station sim_station: simulated profile, free-form tasks allowed (offered ")
    assert lines[1] == "  suite demo: Demo bench (simulated arms, scripted operator)"
    assert lines[2] == "    headline success_at_end; the team may choose: cameras, control_frequency 10..200"
    assert [line.split()[:3] for line in lines if line.startswith("    hold_pose")] == [["hold_pose", "100", "2s"]]
    assert "? How smooth was the motion?" in out and "right.joint_4" not in out


def test_a_job_that_leaves_its_intervals_out_gets_wilson(tmp_path):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        _offered(relay)
        client.submit_suite_job("sim_station", "demo", [("hold_pose", 1)])
        station = _station_side(relay)
    assert station.intervals == "wilson"
