"""A job asking for its episodes' recordings (``record: true``): the job file's key, the wire, the station's answer.

The key is read by the job model's rules (a non-boolean refused naming it), carried by ``SubmitJobRequest`` and
the relay's ``Job`` to the station's ``JobSpec`` and every episode's plan (the rollout's goal records then); a
station whose config forbids recordings leaving it (``team_recordings: false``) says so in its offer, and the relay
and the station refuse such a job at submit with the same reason.
"""

from __future__ import annotations

import pytest

from strands_robots.job_model.offer import StationOffer
from strands_robots.job_model.team_job import (RECORDINGS_REFUSED, TeamJobRefused, check_against_offer,
                                               team_job_from_mapping, team_job_to_mapping)
from strands_robots.relay.job_request import InvalidJob, check_submit
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job import JobSpecError, plan_episode
from strands_robots.station.job_file import job_spec_from_mapping, job_spec_to_mapping
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.station import Station
from strands_robots.wire import pb_model
from strands_robots.wire.proto import evaluation_service_pb2 as es
from strands_robots.wire.proto import station_service_pb2 as ss

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]
OWN = {"task_id": "wave", "instruction": "wave", "scoring": SHEET}


def test_the_job_files_record_key_is_a_boolean_kept_through_the_mapping():
    job = team_job_from_mapping({"station_id": "st", "free_form": [OWN], "record": True})
    assert job.record is True and team_job_to_mapping(job)["record"] is True
    assert team_job_from_mapping({"station_id": "st", "free_form": [OWN]}).record is False
    for bad in ("yes", 1, None):
        with pytest.raises(TeamJobRefused) as info:
            team_job_from_mapping({"station_id": "st", "free_form": [OWN], "record": bad})
        assert info.value.field == "record" and "must be true or false" in info.value.reason


def test_the_offer_of_a_station_keeping_its_recordings_refuses_a_job_asking_for_them():
    job = team_job_from_mapping({"station_id": "st", "free_form": [OWN], "record": True})
    keeping = StationOffer("st", "simulated", True, (), refuses_recordings=True)
    with pytest.raises(TeamJobRefused) as info:
        check_against_offer(job, keeping)
    assert info.value.field == "record" and info.value.reason == RECORDINGS_REFUSED.format(station="st")
    check_against_offer(job, StationOffer("st", "simulated", True, ()))  # records: taken
    check_against_offer(team_job_from_mapping({"station_id": "st", "free_form": [OWN]}), keeping)  # not asked
    offer = pb_model.station_offer_from_pb("st", pb_model.station_offer_to_pb(keeping))
    assert offer.refuses_recordings and StationOffer.from_mapping(keeping.to_mapping()) == keeping


def _request(record=None):
    request = es.SubmitJobRequest(station_id="st", episodes=1, tasks=[pb_model.task_to_pb(_spec().tasks[0])])
    if record is not None:
        request.record = record
    return request


def _spec(**changes):
    data = {"job_id": "j1", "client_id": "team_a", "station_id": "st", "episodes_total": 2,
            "policy": {"provider": "relay"}, "tasks": [OWN]}
    data.update(changes)
    return job_spec_from_mapping(data)


def test_the_relay_refuses_record_for_a_station_that_keeps_its_recordings_and_takes_it_elsewhere():
    keeping = StationOffer("st", "simulated", True, (), refuses_recordings=True)
    with pytest.raises(InvalidJob) as info:
        check_submit(_request(True), "team_a", {"st"}, offer=keeping)
    assert str(info.value) == f"record: {RECORDINGS_REFUSED.format(station='st')}"
    check_submit(_request(False), "team_a", {"st"}, offer=keeping)
    check_submit(_request(True), "team_a", {"st"}, offer=StationOffer("st", "simulated", True, ()))
    check_submit(_request(True), "team_a", {"st"}, offer=None)  # not connected yet: the station decides


def test_record_reaches_the_stations_job_and_every_episode_plan_through_the_wire():
    submit = _request(True)
    job = ss.Job(job_id="j1", client_id="team_a", station_id="st", tasks=list(submit.tasks), episodes_total=2,
                 **pb_model.job_options_from_pb(submit))
    spec = pb_model.job_spec_from_pb(job, suites={}, profile="simulated", allow_free_form_tasks=True)
    assert spec.record is True
    assert [plan_episode(spec, f"ep_{i}", i).record for i in range(2)] == [True, True]
    plain = ss.Job(job_id="j2", client_id="team_a", station_id="st", tasks=list(submit.tasks), episodes_total=1)
    assert pb_model.job_spec_from_pb(plain).record is False
    saved = job_spec_from_mapping(job_spec_to_mapping(spec))  # what the station persists and recovers
    assert saved.record is True and saved == spec
    with pytest.raises(JobSpecError) as info:
        job_spec_from_mapping({**job_spec_to_mapping(spec), "record": "yes"})
    assert info.value.field == "record"


@pytest.mark.parametrize("team_recordings, accepted", [(True, True), (False, False)])
def test_a_station_whose_config_keeps_its_recordings_refuses_a_job_asking_at_submit(team_recordings, accepted):
    operator = ScriptedOperator()
    station = Station("st", InProcessRobot(), operator, settings=ProcedureSettings(team_recordings=team_recordings))
    try:
        reply = station.submit(_spec(record=True))
        assert reply.accepted is accepted, reply.message
        if not accepted:
            assert reply.message == f"job refused: record: {RECORDINGS_REFUSED.format(station='st')}"
            assert station.status("j1") is None
        assert station.submit(_spec(job_id="j2")).accepted  # a job not asking is taken either way
    finally:
        station.stop(timeout_s=2.0)
        operator.close()
