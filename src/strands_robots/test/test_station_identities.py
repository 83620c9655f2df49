"""Operators and stations are who they say (station core, in process, no ROS).

- A takeover is resumed only by the operator who took over, or by a supervisor (ProcedureSettings.supervisors);
  a foreign resume is refused with the reason and the rollout stays held.
- The rollout's lease is named ``station:<station_id>``; arms another station holds are waited for (bounded),
  and an episode is only recorded once the station had the arms and played it.
"""

from __future__ import annotations

import threading

from strands_robots.arm.lease import station_holder
from strands_robots.station.episodes import JobRunner
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.model import JobState
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.record import JobRecord

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]


def spec(episodes=1, duration_s=1.0):
    return job_spec_from_mapping({
        "job_id": "id-job", "client_id": "team", "station_id": "lab_a", "episodes_total": episodes,
        "duration_s": duration_s, "policy": {"provider": "scripted", "config": {"mode": "torque_ramp", "target": 1.0}},
        "tasks": [{"task_id": "hold", "instruction": "hold", "scoring": SHEET,
                   "parameters": {"success_when": "end_condition == timeout"}}]})


class Takeovers(ScriptedOperator):
    """op2 takes over at 0.2 s; then each name in ``resumers`` tries to resume, in order, until one may."""

    def __init__(self, resumers):
        super().__init__(name="op2")
        self.resumers = resumers
        self.tried = []
        self.fired = False

    def rollout_progress(self, plan, t, console):
        if t < 0.2 or self.fired:
            return
        self.fired = True
        self.tried.append(("op2 takeover", console.takeover("op2", "adjust the cube")))
        for name in self.resumers:
            reply = console.resume(name)
            self.tried.append((name, reply))
            if reply.ok:
                return


def test_a_foreign_resume_is_refused_with_the_reason_and_the_taker_resumes():
    operator = Takeovers(["op3", "op2"])
    final = JobRunner(JobRecord(spec()), InProcessRobot(), operator,
                      settings=ProcedureSettings(supervisors=("sue",))).run()
    replies = dict(operator.tried)
    assert replies["op2 takeover"].ok
    assert not replies["op3"].ok
    assert replies["op3"].message == ("op3 may not resume op2's takeover of ep_0000: only op2 or a supervisor (sue) "
                                      "may")
    assert replies["op2"].ok and replies["op2"].message == "op2 handed ep_0000 back to the policy"
    assert final.state is JobState.SUCCEEDED and final.episodes[0].taken_over
    assert final.episodes[0].end_condition == "timeout"


def test_a_supervisor_resumes_anyone_and_the_reply_says_so():
    operator = Takeovers(["op3", "sue"])
    final = JobRunner(JobRecord(spec()), InProcessRobot(), operator,
                      settings=ProcedureSettings(supervisors=("sue",))).run()
    replies = dict(operator.tried)
    assert not replies["op3"].ok
    assert replies["sue"].ok and "(taken over by op2; resumed as a supervisor)" in replies["sue"].message
    assert final.state is JobState.SUCCEEDED


def test_without_supervisors_only_the_taker_resumes():
    operator = Takeovers(["op3", "op2"])
    JobRunner(JobRecord(spec()), InProcessRobot(), operator).run()
    assert "a supervisor (none configured)" in dict(operator.tried)["op3"].message


def test_the_rollout_lease_is_named_by_the_station_and_arms_another_station_holds_are_waited_for():
    robot = InProcessRobot()
    other = robot.lease.acquire(station_holder("lab_b"), 10, 30.0)  # another station holds the arms
    snapshots = []
    runner = JobRunner(JobRecord(spec(duration_s=0.3)), robot, ScriptedOperator(), publish=snapshots.append,
                       settings=ProcedureSettings(lease_priority=50, lease_wait_s=60.0))
    done = threading.Event()
    finals = []
    thread = threading.Thread(target=lambda: (finals.append(runner.run()), done.set()), daemon=True)
    thread.start()
    try:
        from ros_harness import wait_for

        assert wait_for(lambda: "ep_0000 waiting for the arms" in runner.status().message, 10.0)
        assert "held by 'station:lab_b' (station 'lab_b')" in runner.status().message
        assert runner.status().episodes == () and robot.lease.validate(other.token)  # not revoked, nothing recorded
        assert robot.lease.release(other.token).ok  # the other station is done with them
        assert done.wait(60.0)
    finally:
        runner.cancel("test over")
    final = finals[0]
    assert final.state is JobState.SUCCEEDED and [e.end_condition for e in final.episodes] == ["timeout"]
    assert final.episodes[0].run_id and robot.lease.state().holder == "station:lab_a"


class LongTexts(ScriptedOperator):
    """At 0.2 s tries a takeover with a 1 MiB reason, then one under a 200-character name, then a normal one."""

    def __init__(self):
        super().__init__(name="op2")
        self.tried = []

    def rollout_progress(self, plan, t, console):
        if t < 0.2 or self.tried:
            return
        self.tried.append(console.takeover("op2", "r" * (1024 * 1024)))
        self.tried.append(console.takeover("o" * 200, "short"))
        self.tried.append(console.takeover("op2", "short"))
        self.tried.append(console.resume("op2"))


def test_an_operators_overlong_name_or_reason_is_refused_naming_the_limit_and_the_episode_goes_on():
    operator = LongTexts()
    final = JobRunner(JobRecord(spec()), InProcessRobot(), operator).run()
    huge, long_name, ok, resumed = operator.tried
    assert not huge.ok and huge.message == "reason is 1048576 characters long; at most 1024 are allowed"
    assert not long_name.ok and long_name.message == "operator_name is 200 characters long; at most 128 are allowed"
    assert ok.ok and resumed.ok
    assert final.state is JobState.SUCCEEDED and final.episodes[0].taken_over
    assert all(len(e.end_detail) < 4096 for e in final.episodes)
