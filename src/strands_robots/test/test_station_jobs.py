"""The station's jobs: submit, queue, cancel, operator routing, recovery (station/station.py), in process."""

import threading

import pytest

from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.model import JobState
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.persistence import JobStore
from strands_robots.station.record import JobRecord, RunningEpisode
from strands_robots.station.station import Station

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]


def spec(job_id, station_id="sim", episodes=2, duration_s=0.3):
    return job_spec_from_mapping({
        "job_id": job_id, "client_id": "team", "station_id": station_id, "episodes_total": episodes,
        "duration_s": duration_s, "policy": {"provider": "scripted", "config": {"mode": "torque_ramp", "target": 1.0}},
        "tasks": [{"task_id": "t", "instruction": "do it", "scoring": SHEET}]})


@pytest.fixture
def make_station():
    made = []

    def make(publish=None, fast_mode=True):
        operator = ScriptedOperator()
        st = Station("sim", InProcessRobot(fast_mode=fast_mode), operator, publish=publish)
        made.append((st, operator))
        return st

    yield make
    for st, operator in made:
        assert st.stop(timeout_s=30.0)
        operator.close()


def test_job_for_another_station_or_a_taken_id_is_refused(make_station):
    station = make_station()
    reply = station.submit(spec("j1", station_id="other"))
    assert not reply.accepted and "addressed to 'other', this is 'sim'" in reply.message
    assert station.submit(spec("j1")).accepted
    again = station.submit(spec("j1"))
    assert not again.accepted and "already exists" in again.message
    assert station.status("nobody") is None


def test_jobs_run_one_at_a_time_in_submission_order(make_station):
    order = []
    station = make_station(publish=lambda s: order.append((s.job_id, s.state)))
    assert station.submit(spec("first")).accepted and station.submit(spec("second")).accepted
    station.start()
    assert station.wait_idle(timeout_s=60.0)
    assert [s.state for s in station.statuses()] == [JobState.SUCCEEDED, JobState.SUCCEEDED]
    first_done = order.index(("first", JobState.SUCCEEDED))
    second_running = order.index(("second", JobState.RUNNING))
    assert first_done < second_running  # the second started only after the first ended
    assert len(station.status("second").episodes) == 2


def test_cancel_of_a_queued_job_ends_it_before_it_starts(make_station):
    station = make_station()
    station.submit(spec("queued"))
    reply = station.cancel("queued", "changed our mind")
    assert reply.ok
    status = station.status("queued")
    assert status.state is JobState.CANCELLED and "changed our mind" in status.message
    assert not station.cancel("queued").ok and "already ended" in station.cancel("queued").message
    assert "no job 'ghost'" in station.cancel("ghost").message


def test_cancel_of_the_running_job_stops_it_and_operator_actions_reach_its_console(make_station):
    started = threading.Event()
    station = make_station(publish=lambda s: started.set() if "ep_0000 running" in s.message else None,
                           fast_mode=False)  # paced: the 30 s rollout is surely still running when cancelled
    console, why = station.operator()
    assert console is None and "no job is running" in why
    station.submit(spec("long", episodes=1, duration_s=30.0))
    station.start()
    assert started.wait(30.0)
    console, _ = station.operator()
    assert console is not None and console.episode_id == "ep_0000"
    assert station.cancel("long", "client cancelled").ok
    assert station.wait_idle(timeout_s=30.0)
    status = station.status("long")
    assert status.state is JobState.CANCELLED and "client cancelled" in status.message
    assert status.episodes == ()


def test_recover_resumes_saved_jobs_and_reruns_the_interrupted_episode(tmp_path):
    store = JobStore(str(tmp_path))
    interrupted = JobRecord(spec("was-running"), state=JobState.RUNNING, message="ep_0000 running",
                            running=RunningEpisode("ep_0000", 0, 0), next_episode_number=1)
    store.save(interrupted)
    store.save(JobRecord(spec("was-done"), state=JobState.SUCCEEDED, message="completed"))
    operator = ScriptedOperator()
    station = Station("sim", InProcessRobot(), operator, store=store)
    try:
        lines = station.recover()
        assert len(lines) == 1 and lines[0].startswith("was-running: resumed (WAITING_POLICY)")
        assert station.status("was-done").state is JobState.SUCCEEDED
        station.start()
        assert station.wait_idle(timeout_s=60.0)
        status = station.status("was-running")
        assert status.state is JobState.SUCCEEDED
        assert [e.episode_id for e in status.episodes] == ["ep_0001", "ep_0002"]
        assert store.load("was-running").interrupted == ("ep_0000",)
    finally:
        station.stop()
        operator.close()


def test_stopping_the_station_suspends_the_running_job_for_the_next_start(tmp_path):
    store = JobStore(str(tmp_path))
    started = threading.Event()
    operator = ScriptedOperator()
    station = Station("sim", InProcessRobot(fast_mode=False), operator, store=store,  # paced: 30 s of rollout
                      publish=lambda s: started.set() if "ep_0000 running" in s.message else None)
    station.submit(spec("long", episodes=1, duration_s=30.0))
    station.start()
    try:
        assert started.wait(30.0)
    finally:
        assert station.stop(timeout_s=30.0)
        operator.close()
    saved = store.load("long")
    assert saved.state is JobState.RUNNING and saved.running.episode_id == "ep_0000"
    again = Station("sim", InProcessRobot(), ScriptedOperator(), store=store)
    assert again.recover()[0].startswith("long: resumed (WAITING_POLICY)")
