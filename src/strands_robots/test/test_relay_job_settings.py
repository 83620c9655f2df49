"""Every setting a job file can hold reaches the station through the relay, or is refused where it enters.

A job file (``config/demo_job.yaml``, with every setting given a value other than its default) is submitted the
way ``demo_job``, ``strands-robots job submit`` and the demo do (``client_side.submit_job_file``) to a real relay;
the station's side is a real ``StationLink`` taking the job from the relay's stream, turned into the ``JobSpec``
the station node runs (``pb_model.job_spec_from_pb``, the node's own conversion). Each setting is compared there
with the file's. A value out of range is refused at submit (``InvalidTask``) with the setting's name.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest
from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, running_relay

from strands_robots.cli.client_side import demo_tasks, job_settings, submit_job_file
from strands_robots.client import EvaluationClient, InvalidTask
from strands_robots.wire import pb_model
from strands_robots.station_link.link import StationLink
from strands_robots.station import job_file
from strands_robots.station.job_file import load_job_file

DEMO_JOB = Path(__file__).resolve().parent.parent / "config" / "demo_job.yaml"

# How each key of a job file reaches the station through the relay (a key missing here fails the first test).
ARRIVES = ("station_id", "episodes_total", "duration_s", "control_frequency", "max_discards", "intervals", "tasks",
           "images")
# The submit names the job (a fresh id each time) and its owner (the token's client); the file's policy is served
# by the client that submits (the station's provider is "relay").
GIVEN_BY_THE_SUBMIT = ("job_id", "client_id")
SERVED_BY_THE_CLIENT = ("policy",)


def _spec_with_every_setting_changed():
    """Return the demo job with each job-level setting away from its default (and from the file's own value)."""
    spec = load_job_file(str(DEMO_JOB))
    return dataclasses.replace(spec, duration_s=1.5, control_frequency=40.0, max_discards=7, episodes_total=5,
                               intervals="clopper-pearson")


def _station_side(relay, timeout_s: float = 20.0):
    """Take the next job on a real StationLink; return it as the station node's JobSpec."""
    got: list = []
    arrived = threading.Event()

    def on_job(job) -> None:
        got.append(job)
        arrived.set()

    link = StationLink(relay.target, "sim_station", STATION_TOKENS["sim_station"], on_job=on_job,
                       heartbeat_s=0.2).start()
    try:
        assert arrived.wait(timeout_s), "the relay's job never reached the station's link"
    finally:
        link.close()
    return pb_model.job_spec_from_pb(got[0])


def test_every_key_of_a_job_file_is_accounted_for():
    keys = set(ARRIVES) | set(GIVEN_BY_THE_SUBMIT) | set(SERVED_BY_THE_CLIENT)
    assert set(job_file._JOB_KEYS) == keys, set(job_file._JOB_KEYS) ^ keys


def test_every_setting_of_a_job_file_reaches_the_station_through_the_relay(tmp_path):
    spec = _spec_with_every_setting_changed()
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job_id = submit_job_file(client, spec, write=lambda line: None)
        station = _station_side(relay)
    assert station.job_id == job_id and station.client_id == "team_a"  # given by the submit
    assert station.station_id == spec.station_id
    assert station.episodes_total == 5
    assert (station.duration_s, station.control_frequency, station.max_discards) == (1.5, 40.0, 7)
    assert station.intervals == "clopper-pearson"  # how the station's status computes the rates' intervals
    # the tasks whole, the file's images settings in every task's parameters
    assert station.tasks == spec.tasks
    assert all(t.parameters["cameras"] == "scene:224x224,wrist:224x224" for t in station.tasks)
    assert all(t.parameters["image_format"] == "jpeg" and t.parameters["image_quality"] == "90" for t in station.tasks)
    assert station.policy_provider == "relay"  # the file's policy runs on the client that serves it


def test_a_job_that_leaves_a_setting_out_gets_the_stations_default(tmp_path):
    spec = load_job_file(str(DEMO_JOB))
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        client.submit_job(station_id="sim_station", tasks=demo_tasks(spec), episodes=2)  # an older client's submit
        station = _station_side(relay)
    defaults = job_file.job_spec_from_mapping({"job_id": "j", "client_id": "c", "station_id": "s",
                                               "episodes_total": 1, "policy": {"provider": "mock"},
                                               "tasks": [job_file.task_to_mapping(spec.tasks[0])]})
    assert (station.duration_s, station.control_frequency, station.max_discards, station.intervals) == (
        defaults.duration_s, defaults.control_frequency, defaults.max_discards, "wilson")


@pytest.mark.parametrize("setting, value, reason", [
    ("duration_s", 0.0, "duration_s"),
    ("duration_s", float("nan"), "duration_s"),
    ("control_frequency", 5000.0, "control_frequency"),
    ("max_discards", 1001, "max_discards"),
    ("max_discards", -1, "max_discards"),
    ("intervals", "bayes", "intervals"),
])
def test_a_setting_out_of_range_is_refused_at_submit_naming_it_and_no_job_is_made(tmp_path, setting, value, reason):
    spec = load_job_file(str(DEMO_JOB))
    settings = dict(job_settings(spec), **{setting: value})
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        with pytest.raises(InvalidTask) as refused:
            client.submit_job(station_id="sim_station", tasks=demo_tasks(spec), episodes=2, **settings)
        assert refused.value.reason.startswith(f"{reason}:"), refused.value.reason
        assert relay.store.open_jobs_for_station("sim_station") == []


def test_a_setting_of_the_wrong_type_is_refused_by_the_client_naming_it(tmp_path):
    spec = load_job_file(str(DEMO_JOB))
    with EvaluationClient("127.0.0.1:1", token=CLIENT_TOKENS["team_a"]) as client:  # never reached
        with pytest.raises(InvalidTask) as refused:
            client.submit_job(station_id="sim_station", tasks=demo_tasks(spec), episodes=2, max_discards=2.5)
    assert refused.value.reason.startswith("max_discards: 2.5 refused"), refused.value.reason
