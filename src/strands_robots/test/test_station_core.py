"""The station core's job rules (station/station.py, station/job_queue.py), with real files and in-process arms.

Persisted before the answer, queued jobs visible and cancellable, round-robin across teams, a relay's job matched
by id, one bad file never stops recovery, and a per-job snapshot sequence that survives restarts. No ROS.
"""

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from strands_robots.station.episodes import JobRunner
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping, job_spec_to_mapping
from strands_robots.station.job_queue import JobQueue
from strands_robots.station.model import JobState
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.durable_files import PersistenceError
from strands_robots.station.persistence import JobStore
from strands_robots.station.record import JobRecord
from strands_robots.station.station import SET_ASIDE_SEQUENCE, Station

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]


def spec(job_id, team="team", episodes=1, duration_s=0.2, station_id="sim"):
    return job_spec_from_mapping({
        "job_id": job_id, "client_id": team, "station_id": station_id, "episodes_total": episodes,
        "duration_s": duration_s, "policy": {"provider": "scripted", "config": {"mode": "torque_ramp", "target": 1.0}},
        "tasks": [{"task_id": "t", "instruction": "do it", "scoring": SHEET}]})


class Rig:
    """A station over a store in ``directory``, every snapshot it publishes kept."""

    def __init__(self, directory, fast_mode=True):
        self.store = JobStore(str(directory))
        self.operator = ScriptedOperator()
        self.snapshots = []
        self.lock = threading.Lock()
        self.station = Station("sim", InProcessRobot(fast_mode=fast_mode), self.operator, store=self.store,
                               publish=self._keep)

    def _keep(self, status):
        with self.lock:
            self.snapshots.append(status)

    def of(self, job_id):
        with self.lock:
            return [s for s in self.snapshots if s.job_id == job_id]

    def close(self):
        assert self.station.stop(timeout_s=30.0)
        self.operator.close()


@pytest.fixture
def rigs(tmp_path):
    made = []

    def make(directory=None, fast_mode=True):
        rig = Rig(directory or tmp_path / "state", fast_mode=fast_mode)
        made.append(rig)
        return rig

    yield make
    for rig in made:
        rig.close()


# -- persist before the answer; queued jobs visible and cancellable ---------------------------------------------
def test_an_accepted_job_is_on_disk_before_the_answer_and_shows_created_with_its_place(rigs):
    rig = rigs()
    first, second = rig.station.submit(spec("j1")), rig.station.submit(spec("j2"))
    assert first.accepted and second.accepted
    assert rig.store.load("j1").state is JobState.CREATED and rig.store.load("j2").state is JobState.CREATED
    assert (rig.station.status("j1").state, rig.station.status("j1").message) == (
        JobState.CREATED, "queued at station sim behind 0 job(s)")
    assert rig.station.status("j2").message == "queued at station sim behind 1 job(s)"
    assert second.message == "job j2 accepted: queued at station sim behind 1 job(s)"
    assert rig.store.load("j2").message == "queued at station sim behind 1 job(s)"


def test_a_queued_job_cancelled_at_once_stays_cancelled_after_a_restart_and_never_runs(rigs, tmp_path):
    rig = rigs()
    rig.station.submit(spec("keep"))
    rig.station.submit(spec("drop"))
    reply = rig.station.cancel("drop", "not needed")
    assert reply.ok, reply.message
    assert rig.store.load("drop").state is JobState.CANCELLED
    assert rig.station.status("keep").message == "queued at station sim behind 0 job(s)"
    assert rig.station.cancel("drop").message == "job drop already ended (CANCELLED)"
    again = rigs(tmp_path / "state")  # a restarted station on the same files
    again.station.recover()
    again.station.start()
    assert again.station.wait_idle(timeout_s=60.0)
    assert again.station.status("drop").state is JobState.CANCELLED
    assert "not needed" in again.station.status("drop").message
    assert [s.state for s in again.of("drop")] == [JobState.CANCELLED]  # re-reported once, never run
    assert again.station.status("keep").state is JobState.SUCCEEDED


CHILD = r"""
import json, sys, threading
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.persistence import JobStore
from strands_robots.station.station import Station
station = Station("sim", InProcessRobot(), ScriptedOperator(), store=JobStore(sys.argv[1]))
reply = station.submit(job_spec_from_mapping(json.loads(sys.argv[2])))
if sys.argv[3] == "cancel":
    reply = station.cancel(reply.job_id, "the team cancelled")
print("answered", reply.message, flush=True)
threading.Event().wait(120)  # never started: the parent kills this process
"""


@pytest.mark.parametrize("then", ["run", "cancel"])
def test_a_station_killed_right_after_its_answer_keeps_the_job(tmp_path, rigs, then):
    job = spec("killed-1", episodes=2)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "state"),
                             json.dumps(job_spec_to_mapping(job)), then], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # blocks until the child answered (or died: then "" and the assert says so)
        assert line.startswith("answered"), proc.stderr.read() if proc.poll() is not None else line
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    rig = rigs(tmp_path / "state")
    rig.station.recover()
    rig.station.start()
    assert rig.station.wait_idle(timeout_s=60.0)
    final = rig.station.status("killed-1")
    if then == "run":
        assert final.state is JobState.SUCCEEDED, final.message
        assert [e.episode_id for e in final.episodes] == ["ep_0000", "ep_0001"]
    else:
        assert final.state is JobState.CANCELLED and "the team cancelled" in final.message
        assert final.episodes == ()


# -- a relay's job matched by id ----------------------------------------------------------------------------------
def test_a_job_the_relay_sends_again_is_matched_by_id_and_never_restarted(rigs):
    rig = rigs()
    rig.station.submit(spec("held", episodes=2))
    queued = rig.station.take(spec("held", episodes=2))
    assert queued.accepted and "already held (CREATED)" in queued.message
    assert rig.station.queued() == ("held",)  # not queued twice
    rig.station.start()
    assert rig.station.wait_idle(timeout_s=60.0)
    done = rig.station.status("held")
    before = len(rig.of("held"))
    again = rig.station.take(spec("held", episodes=2))
    assert again.accepted and "already held (SUCCEEDED)" in again.message
    assert rig.station.wait_idle(timeout_s=5.0) and rig.station.status("held") == done
    assert rig.of("held")[before:] == [done]  # its end reported again, nothing re-run
    assert rig.store.load("held").episodes == done.episodes


# -- one bad file never disables recovery ------------------------------------------------------------------------
def _two_episodes_then_killed(store, job):
    """Persist ``job`` as a station killed while its third episode ran: two episodes logged, RUNNING."""

    class Killed(BaseException):
        pass

    def publish(status):
        if "ep_0002 running" in status.message:
            raise Killed()

    with pytest.raises(Killed):
        JobRunner(JobRecord(job), InProcessRobot(), ScriptedOperator(), store=store, publish=publish).run()


def test_an_unreadable_job_file_is_set_aside_and_every_other_job_recovers_with_its_log_intact(rigs, tmp_path):
    store = JobStore(str(tmp_path / "state"))
    _two_episodes_then_killed(store, spec("good", episodes=3))
    store.save(JobRecord(spec("bad", episodes=4)))
    log_before = open(store.log_path_of("good"), "rb").read()
    assert log_before.count(b"\n") == 2
    with open(store.path_of("bad"), "w") as handle:
        handle.write('{"format_version": 1, "job": {torn')
    rig = rigs(tmp_path / "state")
    lines = rig.station.recover()
    assert any(line.startswith("good: resumed (WAITING_POLICY)") for line in lines)
    (aside,) = rig.station.set_aside
    assert aside.job_id == "bad" and store.path_of("bad") in aside.reason
    (moved,) = aside.moved_to
    assert moved.startswith(store.path_of("bad") + ".unreadable-")
    assert open(moved).read() == '{"format_version": 1, "job": {torn'  # kept as it was, for a person
    bad = rig.station.status("bad")
    assert bad.state is JobState.FAILED and moved in bad.message and "unreadable job state" in bad.message
    assert bad.sequence == SET_ASIDE_SEQUENCE
    # The relay sends both open jobs again: each is matched by id, neither restarts.
    assert "already held" in rig.station.take(spec("good", episodes=3)).message
    assert "already held (FAILED)" in rig.station.take(spec("bad", episodes=4)).message
    rig.station.start()
    assert rig.station.wait_idle(timeout_s=60.0)
    good = rig.station.status("good")
    assert good.state is JobState.SUCCEEDED, good.message
    assert [e.episode_id for e in good.episodes] == ["ep_0000", "ep_0001", "ep_0003"]
    assert open(store.log_path_of("good"), "rb").read().startswith(log_before)  # appended, never truncated
    assert rig.station.status("bad").state is JobState.FAILED
    # A second restart still knows the failed job (persisted under its id) and finds no new unreadable file.
    again = rigs(tmp_path / "state")
    again.station.recover()
    assert again.station.set_aside == () and again.station.status("bad").state is JobState.FAILED


def test_an_episode_log_shorter_than_its_count_sets_that_job_aside_not_the_others(rigs, tmp_path):
    store = JobStore(str(tmp_path / "state"))
    _two_episodes_then_killed(store, spec("short", episodes=3))
    store.save(JobRecord(spec("fine")))
    log = store.log_path_of("short")
    data = open(log, "rb").read()
    open(log, "wb").write(data[: data.index(b"\n") + 1])  # one of the two counted episodes lost
    rig = rigs(tmp_path / "state")
    rig.station.recover()
    (aside,) = rig.station.set_aside
    assert aside.job_id == "short" and "counts 2 episodes but the log holds 1" in aside.reason
    assert sorted(os.path.basename(p).split(".unreadable-")[0] for p in aside.moved_to) == [
        "short.episodes.jsonl", "short.job.json"]
    assert aside.episodes_total == 3 and rig.station.status("short").episodes_total == 3
    assert rig.station.queued() == ("fine",)


def test_a_record_with_fewer_episodes_than_the_log_is_refused_and_the_log_is_kept(tmp_path):
    store = JobStore(str(tmp_path))
    _two_episodes_then_killed(store, spec("log", episodes=3))
    size = os.path.getsize(store.log_path_of("log"))
    with pytest.raises(PersistenceError) as info:
        JobStore(str(tmp_path)).save(JobRecord(spec("log", episodes=3)))  # a restart from ep_0000 would do this
    assert "holds 2 finished episodes" in str(info.value) and "never truncated" in str(info.value)
    assert os.path.getsize(store.log_path_of("log")) == size
    assert len(JobStore(str(tmp_path)).load("log").episodes) == 2


# -- the snapshot sequence -----------------------------------------------------------------------------------------
def test_every_snapshot_of_a_job_takes_the_next_sequence_and_a_restart_goes_on_from_the_last(rigs, tmp_path):
    rig = rigs(fast_mode=False)
    started = threading.Event()
    rig.station._publish = lambda s: (rig._keep(s), started.set() if "ep_0000 running" in s.message else None)
    rig.station.submit(spec("seq", episodes=3, duration_s=30.0))
    rig.station.submit(spec("other"))
    rig.station.start()
    assert started.wait(60.0)
    rig.station.cancel("other", "make room")
    assert rig.station.stop(timeout_s=30.0)  # suspended: a restarted station resumes it
    numbers = [s.sequence for s in rig.of("seq")]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 4  # CREATED .. ep_0000 running
    assert rig.store.load("seq").sequence == numbers[-1]
    assert [s.sequence for s in rig.of("other")] == [1, 2]  # each job counts its own snapshots
    again = rigs(tmp_path / "state")
    again.station.recover()
    after = [s.sequence for s in again.of("seq")]
    assert after == [numbers[-1] + 1]
    assert again.store.load("seq").sequence == numbers[-1] + 1
    assert again.station.cancel("seq", "done looking").ok  # queued (resumed): cancelled at once
    assert [s.sequence for s in again.of("seq")] == [numbers[-1] + 1, numbers[-1] + 2]


# -- round-robin across teams ---------------------------------------------------------------------------------------
def test_the_queue_takes_resumed_jobs_first_then_round_robin_across_teams():
    queue = JobQueue()
    for job_id, team in [("a1", "A"), ("a2", "A"), ("a3", "A"), ("b1", "B")]:
        queue.add(job_id, team)
    queue.add("r1", "B", resumed=True)
    assert queue.order() == ("r1", "a1", "b1", "a2", "a3")
    assert [queue.pop(), queue.pop()] == ["r1", "a1"]
    queue.add("c1", "C")  # a new team joins the back of the rotation
    assert queue.order() == ("b1", "a2", "c1", "a3")
    assert queue.remove("a2") and not queue.remove("a2")
    assert queue.places() == {"b1": 0, "a3": 1, "c1": 2}
    assert [queue.pop() for _ in range(4)] == ["b1", "a3", "c1", None]
    with pytest.raises(ValueError):
        queue.add("x", "A")
        queue.add("x", "A")


def test_jobs_run_round_robin_across_teams_and_queued_places_follow_the_order(rigs):
    rig = rigs()
    for job_id, team in [("a1", "A"), ("a2", "A"), ("a3", "A"), ("b1", "B")]:
        assert rig.station.submit(spec(job_id, team=team)).accepted
    assert rig.station.queued() == ("a1", "b1", "a2", "a3")
    assert rig.station.status("a2").message == "queued at station sim behind 2 job(s)"
    assert rig.station.submit(spec("c1", team="C")).accepted
    assert rig.station.queued() == ("a1", "b1", "c1", "a2", "a3")
    # b1 and c1 went ahead of a2 and a3: their snapshots say their new places.
    assert rig.station.status("a2").message == "queued at station sim behind 3 job(s)"
    assert rig.station.status("a3").message == "queued at station sim behind 4 job(s)"
    assert rig.store.load("a3").message == "queued at station sim behind 4 job(s)"
    rig.station.start()
    assert rig.station.wait_idle(timeout_s=120.0)
    with rig.lock:
        started = [s.job_id for s in rig.snapshots if s.state is JobState.WAITING_POLICY]
    assert started == ["a1", "b1", "c1", "a2", "a3"]
    assert all(rig.station.status(j).state is JobState.SUCCEEDED for j in started)


def test_a_job_past_the_queue_bound_is_refused_with_the_reason(tmp_path):
    operator = ScriptedOperator()
    station = Station("sim", InProcessRobot(), operator, store=JobStore(str(tmp_path)), max_queued=2)
    assert station.submit(spec("q1")).accepted and station.submit(spec("q2")).accepted
    reply = station.submit(spec("q3"))
    assert not reply.accepted and reply.message == "job refused: 2 jobs already wait at station sim (max_queued 2)"
    assert station.status("q3") is None and not os.path.exists(JobStore(str(tmp_path)).path_of("q3"))


def test_a_queue_change_renumbers_only_the_places_it_names_and_deeper_jobs_say_or_more(rigs):
    rig = rigs()
    for i in range(15):
        assert rig.station.submit(spec(f"q{i:02d}")).accepted
    assert rig.station.status("q03").message == "queued at station sim behind 3 job(s)"
    assert rig.station.status("q12").message == "queued at station sim behind 10 or more job(s)"
    before = len(rig.snapshots)
    assert rig.station.cancel("q00").ok
    renumbered = [s.job_id for s in rig.snapshots[before:] if s.job_id != "q00"]
    assert renumbered == [f"q{i:02d}" for i in range(1, 11)]  # q01..q10 moved up a place; q11.. still "or more"
    assert rig.station.status("q10").message == "queued at station sim behind 9 job(s)"
    assert rig.store.load("q10").message == "queued at station sim behind 9 job(s)"
