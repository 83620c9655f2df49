"""Durable job state: atomic writes, format version, and restart (station/persistence.py)."""

import json
import os

import pytest

from strands_robots.station import persistence
from strands_robots.station.episodes import JobRunner
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.model import JobState
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.durable_files import PersistenceError
from strands_robots.station.job_codec import FORMAT_VERSION, record_from_mapping, record_to_mapping
from strands_robots.station.persistence import MAX_RESTARTS, JobStore, recover
from strands_robots.station.record import JobRecord, RunningEpisode

SHEET = [
    {"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"},
    {"name": "grip", "question": "Grip?", "answer_type": "choice", "max_points": 2, "choices": ["none", "firm"],
     "choice_points": [0, 2]},
    {"name": "n", "question": "How many?", "answer_type": "count", "max_points": 2, "points_per_unit": 1},
]


def spec(episodes=3, **params):
    return job_spec_from_mapping({
        "job_id": "persist-1", "client_id": "team", "station_id": "sim", "episodes_total": episodes,
        "duration_s": 0.4, "policy": {"provider": "scripted", "config": {"mode": "torque_ramp", "target": 1.0}},
        "tasks": [{"task_id": "a", "instruction": "do a", "parameters": {"success_when": "end_condition == timeout",
                                                                          "answer.grip": "firm", **params},
                   "scoring": SHEET},
                  {"task_id": "b", "instruction": "do b", "parameters": {"policy.end_after_steps": "5"},
                   "scoring": SHEET}]})


class Killed(BaseException):
    """Stands for the station process dying: nothing after it runs."""


def run_until(store, message_fragment, spec_=None):
    """Run a job persisted in ``store`` and die right after the snapshot whose message has the fragment."""

    def publish(status):
        if message_fragment in status.message:
            raise Killed(status.message)

    runner = JobRunner(JobRecord(spec_ or spec()), InProcessRobot(), ScriptedOperator(), store=store,
                       publish=publish)
    with pytest.raises(Killed):
        runner.run()


def test_record_round_trips_through_json_with_typed_answers(tmp_path):
    store = JobStore(str(tmp_path))
    final = JobRunner(JobRecord(spec()), InProcessRobot(), ScriptedOperator(), store=store).run()
    loaded = store.load("persist-1")
    assert loaded.state is JobState.SUCCEEDED and loaded.message == final.message
    assert loaded.episodes == final.episodes  # every field, answers keep their types
    first, second = loaded.episodes[0], loaded.episodes[1]  # task a has a predicate, task b none
    assert (first.success_at_end, first.success_ever) == (True, True)
    assert (second.success_at_end, second.success_ever) == (None, None)
    assert all(e.missed_deadlines is not None and e.mean_observation_age_steps is not None for e in loaded.episodes)
    answers = [i.answer for i in loaded.episodes[0].items]
    assert answers == [True, 1, 0] and isinstance(answers[0], bool) and not isinstance(answers[1], bool)
    data = json.loads(open(store.path_of("persist-1")).read())
    assert data["format_version"] == FORMAT_VERSION


def test_state_is_on_disk_after_every_change(tmp_path):
    store = JobStore(str(tmp_path))
    on_disk = []

    def publish(status):  # a snapshot is published only after its state was saved
        record = store.load(status.job_id)
        on_disk.append((record.state, record.message, len(record.episodes)))
        assert (record.state, record.message, record.episodes) == (status.state, status.message, status.episodes)

    JobRunner(JobRecord(spec()), InProcessRobot(), ScriptedOperator(), store=store, publish=publish).run()
    assert on_disk[0][0] is JobState.CREATED and on_disk[-1][0] is JobState.SUCCEEDED
    assert [n for _, _, n in on_disk] == sorted(n for _, _, n in on_disk)


def test_killed_during_an_episode_resumes_and_reruns_its_task_as_a_new_episode(tmp_path):
    store = JobStore(str(tmp_path))
    run_until(store, "ep_0001 running")
    crashed = store.load("persist-1")
    assert crashed.state is JobState.RUNNING and crashed.running == RunningEpisode("ep_0001", 1, 0, "b")
    assert [e.episode_id for e in crashed.episodes] == ["ep_0000"]

    resumed = recover(crashed)
    assert resumed.state is JobState.WAITING_POLICY and resumed.running is None
    assert resumed.interrupted == ("ep_0001",) and resumed.restarts == 1
    assert "ep_0001" in resumed.message and "runs again as a new episode" in resumed.message
    final = JobRunner(resumed, InProcessRobot(), ScriptedOperator(), store=store).run()
    assert final.state is JobState.SUCCEEDED
    assert [(e.episode_id, e.task.task_id) for e in final.episodes] == [
        ("ep_0000", "a"), ("ep_0002", "b"), ("ep_0003", "a")]
    assert store.load("persist-1").interrupted == ("ep_0001",)


def test_killed_while_waiting_for_the_policy_waits_again(tmp_path):
    store = JobStore(str(tmp_path))
    run_until(store, "waiting for the policy")
    resumed = recover(store.load("persist-1"))
    assert resumed.state is JobState.WAITING_POLICY and resumed.interrupted == ()
    final = JobRunner(resumed, InProcessRobot(), ScriptedOperator(), store=store).run()
    assert final.state is JobState.SUCCEEDED and len(final.episodes) == 3


def test_a_station_that_keeps_dying_fails_the_job_with_the_reason(tmp_path):
    store = JobStore(str(tmp_path))
    run_until(store, "ep_0000 running")
    record = store.load("persist-1")
    for _ in range(MAX_RESTARTS):
        record = recover(record).replace(state=JobState.RUNNING, running=RunningEpisode("ep_0009", 0, 0))
    final_record = recover(record)
    assert final_record.state is JobState.FAILED
    assert f"restarted {MAX_RESTARTS + 1} times in a row without keeping an episode" in final_record.message
    assert "crash loop" in final_record.message
    status = JobRunner(final_record, InProcessRobot(), ScriptedOperator(), store=store).run()
    assert status.state is JobState.FAILED and status.message == final_record.message


def kill_once_per_kept_episode(store, record):
    """Run ``record`` until the station dies at the start of the next episode after one more was kept.

    Returns the final status when the job ended before such a kill, else None (the station died: recover it).
    """
    kept_at_start = len(record.episodes)

    def publish(status):
        if " running (" in status.message and len(status.episodes) > kept_at_start:
            raise Killed(status.message)

    try:
        return JobRunner(record, InProcessRobot(), ScriptedOperator(), store=store, publish=publish).run()
    except Killed:
        return None


def test_restart_limit_counts_a_crash_loop_not_restarts_spread_over_a_long_job(tmp_path):
    # More restarts than the limit over one job, each after an episode was kept: the job goes on to SUCCEEDED.
    store = JobStore(str(tmp_path))
    record = JobRecord(spec(episodes=MAX_RESTARTS + 4))
    kills = 0
    while True:
        final = kill_once_per_kept_episode(store, record)
        if final is not None:
            break
        kills += 1
        record = recover(store.load("persist-1"))
        assert record.state is JobState.WAITING_POLICY, record.message
        assert record.restarts == kills and record.restarts_without_progress == 1
    assert kills > MAX_RESTARTS
    assert final.state is JobState.SUCCEEDED and len(final.episodes) == MAX_RESTARTS + 4
    saved = store.load("persist-1")
    assert saved.restarts == kills and saved.restarts_without_progress == 0  # the last kept episode reset it


def test_a_kept_episode_resets_the_crash_loop_count(tmp_path):
    store = JobStore(str(tmp_path))
    run_until(store, "ep_0000 running")
    record = store.load("persist-1")
    for _ in range(MAX_RESTARTS):  # up to the limit before any episode is kept
        record = recover(record)
        assert record.state is JobState.WAITING_POLICY
    assert kill_once_per_kept_episode(store, record) is None  # one episode kept, then killed again
    record = recover(store.load("persist-1"))
    assert record.state is JobState.WAITING_POLICY and record.restarts == MAX_RESTARTS + 1
    assert record.restarts_without_progress == 1 and len(record.episodes) == 1
    for _ in range(MAX_RESTARTS - 1):
        record = recover(record)
    assert record.state is JobState.WAITING_POLICY
    failed = recover(record)
    assert failed.state is JobState.FAILED and failed.restarts_without_progress == MAX_RESTARTS + 1


def test_restart_counts_round_trip_and_an_older_file_counts_the_loop_from_zero():
    record = JobRecord(spec(), state=JobState.WAITING_POLICY, restarts=7, restarts_without_progress=2)
    assert record_from_mapping(record_to_mapping(record)) == record
    older = record_to_mapping(record)
    del older["restarts_without_progress"]
    loaded = record_from_mapping(older)
    assert loaded.restarts == 7 and loaded.restarts_without_progress == 0


def test_terminal_job_is_loaded_as_it_was(tmp_path):
    store = JobStore(str(tmp_path))
    JobRunner(JobRecord(spec(episodes=1)), InProcessRobot(), ScriptedOperator(), store=store).run()
    record = store.load("persist-1")
    assert recover(record) is record


def test_crash_inside_a_write_leaves_the_previous_state_intact(tmp_path, monkeypatch):
    store = JobStore(str(tmp_path))
    record = JobRecord(spec(), message="first")
    store.save(record)

    def crash(src, dst):
        raise OSError("disk went away")

    monkeypatch.setattr(persistence.os, "replace", crash)
    with pytest.raises(PersistenceError) as info:
        store.save(record.replace(message="second"))
    assert "disk went away" in str(info.value)
    monkeypatch.undo()
    assert store.load("persist-1").message == "first"
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []  # the temp file was removed


def test_leftover_temp_file_of_a_killed_write_is_not_a_job(tmp_path):
    store = JobStore(str(tmp_path))
    store.save(JobRecord(spec()))
    (tmp_path / ".persist-1.abc.tmp").write_text('{"format_version": 1, "job"')  # torn: the process died
    assert store.job_ids() == ("persist-1",)
    assert [r.job_id for r in store.load_all()] == ["persist-1"]


def test_unreadable_or_foreign_version_file_is_refused_naming_it(tmp_path):
    store = JobStore(str(tmp_path))
    store.save(JobRecord(spec()))
    path = store.path_of("persist-1")
    data = json.loads(open(path).read())
    data["format_version"] = 99
    open(path, "w").write(json.dumps(data))
    with pytest.raises(PersistenceError) as info:
        store.load("persist-1")
    assert path in str(info.value) and "format_version 99" in str(info.value)
    open(path, "w").write("{not json")
    with pytest.raises(PersistenceError) as info:
        list(store.load_all())
    assert path in str(info.value) and "unreadable" in str(info.value)
    with pytest.raises(PersistenceError) as info:
        store.load("nobody")
    assert "no saved state" in str(info.value)


def test_malformed_record_is_refused_with_the_reason():
    data = record_to_mapping(JobRecord(spec()))
    del data["episodes"]
    with pytest.raises(PersistenceError) as info:
        record_from_mapping(data)
    assert "malformed job state" in str(info.value) and "episodes" in str(info.value)


CHILD = r"""
import sys
from strands_robots.station.episodes import JobRunner
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.persistence import JobStore
from strands_robots.station.record import JobRecord
import json
spec = job_spec_from_mapping(json.loads(sys.argv[2]))
JobRunner(JobRecord(spec), InProcessRobot(fast_mode=False), ScriptedOperator(), store=JobStore(sys.argv[1])).run()
"""


def test_station_process_killed_mid_episode_is_resumed_by_the_next_one(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from strands_robots.station.job_file import job_spec_to_mapping

    store = JobStore(str(tmp_path))
    job = spec(episodes=3)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), json.dumps(job_spec_to_mapping(job))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = None
        for _ in range(6000):  # poll the job file (at most ~60 s, normally well under 2 s)
            if proc.poll() is not None:
                break
            try:
                record = store.load("persist-1")
            except PersistenceError:
                record = None  # not written yet
            if record is not None and record.running is not None and record.running.episode_id == "ep_0001":
                seen = record
                break
            time.sleep(0.01)
        assert seen is not None, proc.stderr.read().decode() if proc.poll() is not None else "never ran ep_0001"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    crashed = store.load("persist-1")
    assert crashed.state is JobState.RUNNING and crashed.running.episode_id == "ep_0001"
    final = JobRunner(recover(crashed), InProcessRobot(), ScriptedOperator(), store=store).run()
    assert final.state is JobState.SUCCEEDED
    assert [e.episode_id for e in final.episodes] == ["ep_0000", "ep_0002", "ep_0003"]
    assert store.load("persist-1").interrupted == ("ep_0001",)


def test_crash_between_the_episode_append_and_the_job_file_keeps_the_counted_episodes(tmp_path, monkeypatch):
    store = JobStore(str(tmp_path))
    final_record = None

    def keep(status):
        nonlocal final_record
        final_record = status

    JobRunner(JobRecord(spec()), InProcessRobot(), ScriptedOperator(), store=JobStore(str(tmp_path / "ran")),
              publish=keep).run()
    done = JobStore(str(tmp_path / "ran")).load("persist-1")
    two = done.replace(episodes=done.episodes[:2], state=JobState.RUNNING, message="two kept")
    store.save(two)  # the state of a station that had kept two of the three episodes
    assert len(store.load("persist-1").episodes) == 2

    def crash(src, dst):
        raise OSError("killed before the rename")

    monkeypatch.setattr(persistence.os, "replace", crash)
    with pytest.raises(PersistenceError):
        store.save(done)  # the third episode reached the log, the job file still counts two
    monkeypatch.undo()
    log_lines = open(store.log_path_of("persist-1"), "rb").read().count(b"\n")
    assert log_lines == 3
    fresh = JobStore(str(tmp_path))  # a restarted station
    reloaded = fresh.load("persist-1")
    assert reloaded.message == "two kept" and reloaded.episodes == done.episodes[:2]
    fresh.save(reloaded.replace(message="after restart"))  # the uncounted line is cut off
    assert open(fresh.log_path_of("persist-1"), "rb").read().count(b"\n") == 2
    assert JobStore(str(tmp_path)).load("persist-1").episodes == done.episodes[:2]


def test_episode_log_shorter_than_its_count_is_refused(tmp_path):
    store = JobStore(str(tmp_path))
    JobRunner(JobRecord(spec()), InProcessRobot(), ScriptedOperator(), store=store).run()
    log = store.log_path_of("persist-1")
    data = open(log, "rb").read()
    open(log, "wb").write(data[: data.rindex(b"\n", 0, len(data) - 1) + 1])  # lose the last episode
    with pytest.raises(PersistenceError) as info:
        JobStore(str(tmp_path)).load("persist-1")
    assert log in str(info.value) and "counts 3 episodes but the log holds 2" in str(info.value)


def test_episodes_store_their_task_by_index_into_the_job(tmp_path):
    store = JobStore(str(tmp_path))
    JobRunner(JobRecord(spec()), InProcessRobot(), ScriptedOperator(), store=store).run()
    lines = [json.loads(line) for line in open(store.log_path_of("persist-1"))]
    assert [line["task_index"] for line in lines] == [0, 1, 0] and all("task" not in line for line in lines)
    job_file = json.loads(open(store.path_of("persist-1")).read())
    assert job_file["episodes_logged"] == 3 and "episodes" not in job_file


def test_suspended_job_keeps_its_saved_state_and_a_restarted_station_resumes_it(tmp_path):
    store = JobStore(str(tmp_path))
    holder = {}

    class SuspendMidway(ScriptedOperator):
        def rollout_progress(self, plan, t, console):
            if plan.episode_id == "ep_0001" and t >= 0.06:  # task b ends itself after 5 steps (0.1 s)
                holder["runner"].suspend("station shutting down")

    runner = JobRunner(JobRecord(spec()), InProcessRobot(),
                       SuspendMidway(), store=store)
    holder["runner"] = runner
    last = runner.run()
    assert last.state is JobState.RUNNING and runner.suspended  # not terminal: nothing ended the job
    saved = store.load("persist-1")
    assert saved.state is JobState.RUNNING and saved.running.episode_id == "ep_0001"
    assert [e.episode_id for e in saved.episodes] == ["ep_0000"]
    assert not runner.cancel("too late").ok
    final = JobRunner(recover(saved), InProcessRobot(), ScriptedOperator(), store=store).run()
    assert final.state is JobState.SUCCEEDED
    assert [e.episode_id for e in final.episodes] == ["ep_0000", "ep_0002", "ep_0003"]


def test_killed_while_finalizing_finishes_without_running_anything(tmp_path):
    store = JobStore(str(tmp_path))
    run_until(store, "finishing:")
    saved = store.load("persist-1")
    assert saved.state is JobState.FINALIZING and len(saved.episodes) == 3
    robot = InProcessRobot()
    final = JobRunner(recover(saved), robot, ScriptedOperator(), store=store).run()
    assert final.state is JobState.SUCCEEDED and final.episodes == saved.episodes
    assert robot.last_ended is None  # no rollout ran after the restart


def test_the_task_of_an_episode_lost_to_a_restart_is_kept_for_the_summary_and_round_trips():
    record = JobRecord(spec(), state=JobState.RUNNING, next_episode_number=2,
                       running=RunningEpisode("ep_0001", 1, 0, "b"), unlisted_tasks=(("ep_0000", "a"),),
                       discarded=("ep_0000",))
    assert record_from_mapping(record_to_mapping(record)) == record
    recovered = recover(record)
    assert recovered.interrupted == ("ep_0001",)
    assert recovered.unlisted_tasks == (("ep_0000", "a"), ("ep_0001", "b"))
    older = record_to_mapping(record)
    del older["unlisted_tasks"], older["running"]["task_id"]
    loaded = record_from_mapping(older)  # a file from before: those episodes count in the job's coverage only
    assert loaded.unlisted_tasks == () and loaded.running.task_id == ""
    assert recover(loaded).unlisted_tasks == ()
