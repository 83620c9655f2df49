"""A job whose policy never attaches does not hold the station for other teams (``station.policy_wait``).

The real station core (``Station``, ``JobRunner``, ``JobQueue``) over the in-process simulated station and the
scripted operator; the only stand-in is when a "relay" client attaches, which the test decides (``serve``), as a
remote team would by starting its client.
"""

from __future__ import annotations

import threading
import time

from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.job_queue import JobQueue
from strands_robots.station.model import TERMINAL_STATES, JobState
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.station import Station

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]
WAIT_S = 60.0  # the bound of every wait on an event in these tests (never reached when the code is right)


def spec(job_id, team, duration_s="0.2"):
    return job_spec_from_mapping({
        "job_id": job_id, "client_id": team, "station_id": "sim_station", "episodes_total": 1, "duration_s": 1.0,
        "policy": {"provider": "scripted", "config": {"mode": "torque_ramp", "target": 1.0}},
        "tasks": [{"task_id": "t", "instruction": "do t", "parameters": {"duration_s": duration_s,
                                                                          "success_when": "end_condition == timeout"},
                   "scoring": SHEET}]})


class TeamsRobot(InProcessRobot):
    """The in-process station, where the test decides when a job's remote policy attaches.

    A job named ``unserved-*`` has a policy that attaches only once the test serves it; a job named ``long-*``
    holds its rollout until the test releases it.
    """

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self._served = {}
        self.release = threading.Event()
        self.rolling = threading.Event()  # a long-* rollout is under way

    def _attached(self, job_id):
        with self._lock:
            return self._served.setdefault(job_id, threading.Event())

    def serve(self, job_id):
        self._attached(job_id).set()

    def wait_for_policy(self, spec, cancelled):
        if spec.job_id.startswith("unserved"):
            attached = self._attached(spec.job_id)
            while not cancelled.is_set():
                if attached.wait(0.01):
                    return super().wait_for_policy(spec, cancelled)
            return False, "cancelled while waiting for the policy"
        return super().wait_for_policy(spec, cancelled)

    def run_rollout(self, plan, progress):
        if plan.task.task_id == "t" and self.current_job.startswith("long"):
            self.rolling.set()
            self.release.wait(WAIT_S)
        return super().run_rollout(plan, progress)

    current_job = ""


class Recorder:
    """Every snapshot the station published, and a bounded wait for one."""

    def __init__(self):
        self.snapshots = []
        self._cond = threading.Condition()

    def __call__(self, status):
        with self._cond:
            self.snapshots.append((time.monotonic(), status))
            self._cond.notify_all()

    def of(self, job_id):
        with self._cond:
            return [(t, s) for t, s in self.snapshots if s.job_id == job_id]

    def wait(self, job_id, predicate, what):
        with self._cond:
            ok = self._cond.wait_for(lambda: any(s.job_id == job_id and predicate(s) for _, s in self.snapshots),
                                     WAIT_S)
        assert ok, f"{job_id}: never {what}; its snapshots: {[(s.state.value, s.message) for _, s in self.of(job_id)]}"
        return next(t for t, s in self.of(job_id) if predicate(s))


def make_station(robot, attach_s, turn_s=0.2):
    recorder = Recorder()
    operator = ScriptedOperator()

    def prepare(job_id):
        robot.current_job = job_id

    station = Station("sim_station", robot, operator, publish=recorder,
                      settings=ProcedureSettings(policy_attach_timeout_s=attach_s, policy_turn_s=turn_s),
                      prepare_job=prepare)
    return station, recorder, operator


def sequences_grow(recorder, job_id):
    numbers = [s.sequence for _, s in recorder.of(job_id)]
    return all(b > a for a, b in zip(numbers, numbers[1:])), numbers


def test_a_never_served_job_of_one_team_lets_another_teams_job_run_and_still_runs_once_served():
    robot = TeamsRobot()
    station, recorder, operator = make_station(robot, attach_s=30.0)
    try:
        assert station.submit(spec("unserved-a", "team-a")).accepted
        station.start()
        waiting_since = recorder.wait("unserved-a", lambda s: s.state is JobState.WAITING_POLICY, "waited")
        assert station.submit(spec("job-b", "team-b")).accepted
        b_running = recorder.wait("job-b", lambda s: s.state is JobState.RUNNING, "ran")
        recorder.wait("job-b", lambda s: s.state is JobState.SUCCEEDED, "succeeded")
        # Team B's job ran while team A's job was still waiting, far inside A's 30 s attach deadline.
        assert station.status("unserved-a").state is JobState.WAITING_POLICY
        assert b_running - waiting_since < 15.0
        assert "meanwhile the station runs other jobs" in station.status("unserved-a").message
        assert "until 20" in station.status("unserved-a").message  # its deadline, ISO 8601 UTC
        # Team A's client attaches later: its job runs (it kept its place and its deadline).
        robot.serve("unserved-a")
        recorder.wait("unserved-a", lambda s: s.state in TERMINAL_STATES, "ended")
        final = station.status("unserved-a")
        assert final.state is JobState.SUCCEEDED and final.episodes[0].success, final.message
        grown, numbers = sequences_grow(recorder, "unserved-a")
        assert grown, numbers  # every snapshot of its turns numbered on from the one before
        assert station.wait_idle(WAIT_S)
    finally:
        station.stop()
        operator.close()


def test_a_never_served_job_fails_at_its_own_deadline_while_another_teams_job_runs():
    robot = TeamsRobot()
    station, recorder, operator = make_station(robot, attach_s=1.0)
    try:
        assert station.submit(spec("unserved-a", "team-a")).accepted
        assert station.submit(spec("long-b", "team-b")).accepted
        station.start()
        waiting_since = recorder.wait("unserved-a", lambda s: s.state is JobState.WAITING_POLICY, "waited")
        assert robot.rolling.wait(WAIT_S)
        failed_at = recorder.wait("unserved-a", lambda s: s.state is JobState.FAILED, "failed")
        # It FAILed at its own deadline, not at the end of team B's job: B's rollout is still held.
        assert station.status("long-b").state is JobState.RUNNING and not robot.release.is_set()
        assert failed_at - waiting_since >= 1.0
        failed = station.status("unserved-a")
        assert "no policy client attached within 1 s (policy_attach_timeout_s)" in failed.message
        assert failed.episodes == ()
        robot.release.set()
        recorder.wait("long-b", lambda s: s.state in TERMINAL_STATES, "ended")
        assert station.status("long-b").state is JobState.SUCCEEDED
        robot.serve("unserved-a")  # too late: a FAILED job never runs again
        assert station.wait_idle(WAIT_S)
        assert station.status("unserved-a").state is JobState.FAILED
        assert sequences_grow(recorder, "unserved-a")[0]
    finally:
        robot.release.set()
        station.stop()
        operator.close()


def test_a_job_served_while_another_runs_is_seen_at_its_deadline_and_runs_next():
    robot = TeamsRobot()
    station, recorder, operator = make_station(robot, attach_s=1.5)
    try:
        assert station.submit(spec("unserved-a", "team-a")).accepted
        assert station.submit(spec("long-b", "team-b")).accepted
        station.start()
        recorder.wait("unserved-a", lambda s: "meanwhile" in s.message, "stepped aside")
        assert robot.rolling.wait(WAIT_S)
        robot.serve("unserved-a")  # the team starts its client while B's job holds the arms
        recorder.wait("unserved-a", lambda s: "seen at its attach deadline" in s.message, "looked at")
        assert station.status("unserved-a").state is JobState.WAITING_POLICY  # not FAILED: its client is there
        assert station.queued()[0] == "unserved-a"  # it runs next
        robot.release.set()
        recorder.wait("unserved-a", lambda s: s.state in TERMINAL_STATES, "ended")
        assert station.status("unserved-a").state is JobState.SUCCEEDED, station.status("unserved-a").message
        assert station.status("long-b").state is JobState.SUCCEEDED
        assert sequences_grow(recorder, "unserved-a")[0]
    finally:
        robot.release.set()
        station.stop()
        operator.close()


def test_a_teams_later_job_never_passes_its_own_waiting_job():
    robot = TeamsRobot()
    station, recorder, operator = make_station(robot, attach_s=0.5)
    try:
        assert station.submit(spec("unserved-a1", "team-a")).accepted
        assert station.submit(spec("job-a2", "team-a")).accepted
        station.start()
        failed_at = recorder.wait("unserved-a1", lambda s: s.state is JobState.FAILED, "failed")
        ran_at = recorder.wait("job-a2", lambda s: s.state is JobState.RUNNING, "ran")
        assert ran_at >= failed_at  # the team's jobs start in the order the team submitted them
        assert station.wait_idle(WAIT_S)
        assert station.status("job-a2").state is JobState.SUCCEEDED
    finally:
        station.stop()
        operator.close()


def test_a_waiting_job_that_stepped_aside_is_cancelled_at_once_and_never_runs():
    robot = TeamsRobot()
    station, recorder, operator = make_station(robot, attach_s=30.0)
    try:
        assert station.submit(spec("unserved-a", "team-a")).accepted
        assert station.submit(spec("long-b", "team-b")).accepted
        station.start()
        assert robot.rolling.wait(WAIT_S)
        assert station.status("unserved-a").state is JobState.WAITING_POLICY
        reply = station.cancel("unserved-a", "the team gave up")
        assert reply.ok, reply.message
        cancelled = station.status("unserved-a")
        assert cancelled.state is JobState.CANCELLED
        assert cancelled.message == "cancelled while it waited for its policy: the team gave up"
        robot.serve("unserved-a")
        robot.release.set()
        assert station.wait_idle(WAIT_S)
        assert station.status("unserved-a").state is JobState.CANCELLED
        assert station.status("long-b").state is JobState.SUCCEEDED
    finally:
        robot.release.set()
        station.stop()
        operator.close()


def test_a_parked_job_keeps_its_place_at_the_head_of_its_team_and_others_go_first():
    queue = JobQueue()
    for job_id, team in (("a1", "A"), ("a2", "A"), ("b1", "B")):
        queue.add(job_id, team)
    assert queue.pop() == "a1"  # team A's turn; A goes to the back of the rotation
    assert queue.others_ahead_of("A")  # team B's job would run first
    queue.park("a1", "A")
    assert queue.order() == ("b1", "a1", "a2")
    assert queue.pop() == "b1"
    assert queue.others_ahead_of("B")  # were b1 waiting for its policy, team A's jobs would go first
    assert queue.pop() == "a1"
    assert not queue.others_ahead_of("A")  # a2 is the team's own: it never passes a1
    queue.add("r", "C", resumed=True)
    assert queue.others_ahead_of("A")  # a job that had started goes first
