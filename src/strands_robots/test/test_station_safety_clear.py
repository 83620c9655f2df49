"""A safety stop is cleared by a person: the next episode waits until an operator clears it (station.safety_gate).

JobRunner over a real in-process station (InProcessRobot: MuJoCo arms, the driver core's safety envelope and a
real lease); the "push" task ramps the right wrist into its torque limit, so its episode ends ``safety_stop`` and
the arms stay stopped until someone clears them.
"""

from __future__ import annotations

import threading

from ros_harness import wait_for

from strands_robots.station.episodes import JobRunner
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.model import JobState
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.record import JobRecord
from strands_robots.station.safety_gate import WAITING_PREFIX, SafetyGate

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]
TORQUE_TRIP = r"right: joint 4 reads +"


def push_then_hold():
    return job_spec_from_mapping({
        "job_id": "safety-job", "client_id": "team", "station_id": "sim_station", "episodes_total": 2,
        "duration_s": 1.0, "policy": {"provider": "scripted", "config": {"mode": "torque_ramp", "target": 1.0}},
        "tasks": [{"task_id": "push", "instruction": "push", "scoring": SHEET,
                   "parameters": {"policy.target": "2.0", "duration_s": "3"}},
                  {"task_id": "hold", "instruction": "hold", "scoring": SHEET,
                   "parameters": {"success_when": "end_condition == timeout"}}]})


class AbsentOperator(ScriptedOperator):
    """Scores like the scripted operator, but nobody clears a safety stop (a person away from the arms)."""

    def __init__(self):
        super().__init__(name="nobody", max_safety_clears=0)


class Running:
    """A JobRunner on its own thread, its snapshots kept."""

    def __init__(self, operator, robot=None):
        self.robot = robot or InProcessRobot()
        self.snapshots = []
        self.runner = JobRunner(JobRecord(push_then_hold()), self.robot, operator, publish=self.snapshots.append)
        self.final = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.final = self.runner.run()

    def messages(self):
        return [s.message for s in list(self.snapshots)]

    def waiting(self):
        return self.runner.status().message.startswith(WAITING_PREFIX)

    def join(self, timeout_s=60.0):
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"job still running: {self.runner.status().message}"
        return self.final


def test_the_next_episode_waits_for_an_operator_and_only_their_clear_lets_it_go_on():
    job = Running(AbsentOperator())
    try:
        assert wait_for(job.waiting, 60.0), job.messages()
        status = job.runner.status()
        # The stop of ep_0000 is in force and nobody cleared it: the job says so and waits, RUNNING.
        assert status.state is JobState.RUNNING and [e.end_condition for e in status.episodes] == ["safety_stop"]
        assert status.message.startswith(f"{WAITING_PREFIX}: {TORQUE_TRIP}"), status.message
        assert job.robot.core.stopped and job.runner.record.running.episode_id == "ep_0001"
        # The wait holds no lock: the runner answers and the console refuses what does not fit, at once.
        assert not job.runner.console.takeover("ann").ok
        assert not job.runner.console.clear_safety_stop(" ").ok
        reply = job.runner.console.clear_safety_stop("ann")
        assert reply.ok and "ann asked to clear the safety stop (right: joint 4" in reply.message
        final = job.join()
    finally:
        job.runner.cancel("test over")
    assert final.state is JobState.SUCCEEDED
    assert [e.end_condition for e in final.episodes] == ["safety_stop", "timeout"]
    cleared = [m for m in job.messages() if "cleared the safety stop" in m]
    assert cleared and cleared[0].startswith(f"ep_0001 starting: ann cleared the safety stop: {TORQUE_TRIP}")
    assert not job.robot.core.stopped


def test_without_a_clear_the_job_stays_waiting_and_a_cancel_ends_it_with_the_stop_still_in_force():
    job = Running(AbsentOperator())
    assert wait_for(job.waiting, 60.0), job.messages()
    seen = len(job.snapshots)
    # However long it waits, nothing clears the stop: the robot side is never asked to (checked on its core).
    assert not wait_for(lambda: not job.robot.core.stopped or not job.waiting(), 1.0)
    assert len(job.snapshots) == seen  # waiting publishes nothing new either
    assert job.runner.cancel("operator went home").ok
    final = job.join()
    assert final.state is JobState.CANCELLED and "operator went home" in final.message
    assert [e.episode_id for e in final.episodes] == ["ep_0000"] and job.runner.record.interrupted == ("ep_0001",)
    assert job.robot.core.stopped  # still stopped: cancelling is not clearing
    assert not job.runner.console.clear_safety_stop("ann").ok  # nobody waits on it any more


def test_the_scripted_operator_clears_the_stop_explicitly_under_its_own_name():
    job = Running(ScriptedOperator(name="scripted_operator"))
    final = job.join()
    assert final.state is JobState.SUCCEEDED
    messages = job.messages()
    waited = [m for m in messages if m.startswith(WAITING_PREFIX)]
    cleared = [m for m in messages if "cleared the safety stop" in m]
    assert waited and waited[0].startswith(f"{WAITING_PREFIX}: {TORQUE_TRIP}")
    assert cleared == [f"ep_0001 starting: scripted_operator cleared the safety stop: {waited[0].split(': ', 1)[1]}"]
    # The message order: the wait is said before the clear, the clear before the episode's rollout.
    assert messages.index(waited[0]) < messages.index(cleared[0])


def test_a_clear_the_driver_refuses_keeps_the_job_waiting_with_the_reason():
    class RefusingRobot(InProcessRobot):
        refusals = 1

        def clear_safety_stop(self, operator_name):
            if self.refusals:
                self.refusals -= 1
                return False, "still outside the safety envelope: right: joint 4 reads +9.9 N*m"
            return super().clear_safety_stop(operator_name)

    job = Running(AbsentOperator(), robot=RefusingRobot())
    try:
        assert wait_for(job.waiting, 60.0)
        assert job.runner.console.clear_safety_stop("ann").ok
        assert wait_for(lambda: "ann could not clear it: still outside" in job.runner.status().message, 10.0), \
            job.messages()
        assert job.waiting() and job.robot.core.stopped
        assert job.runner.console.clear_safety_stop("bob").ok  # a new request is taken
        final = job.join()
    finally:
        job.runner.cancel("test over")
    assert final.state is JobState.SUCCEEDED
    assert any("bob cleared the safety stop" in m for m in job.messages())


def test_the_gate_takes_one_request_at_a_time_and_only_while_a_stop_is_waited_on():
    gate = SafetyGate()
    assert "no episode waits on a safety stop" in gate.request_clear("ann").message
    gate.open("left: joint 2 reads +3.1 N*m")
    assert gate.request_clear("x" * 129).message.startswith("operator_name is 129 characters long")
    assert gate.request_clear("ann").ok
    assert "ann already asked" in gate.request_clear("bob").message
    request = gate.wait(timeout_s=1.0)
    assert (request.operator_name, request.detail) == ("ann", "left: joint 2 reads +3.1 N*m")
    assert gate.wait(timeout_s=0.01) is None  # taken: the next wait needs a new request
    gate.cancel()
    assert gate.wait() is None and not gate.request_clear("ann").ok
