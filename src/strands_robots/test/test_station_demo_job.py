"""The demo job (mixed end conditions, a kept takeover, a discarded re-run) runs unattended in process.

DEMO_JOB is the job given to the lead for ``config/demo_job.yaml``; when that file exists it is run too.
"""

import os

import pytest

from strands_robots.station.episodes import JobRunner
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.job_model.team_job import load_team_job
from strands_robots.station.job_file import job_spec_from_yaml
from strands_robots.station.suite_file import load_suites
from strands_robots.station.suite_job import job_spec_for
from strands_robots.station.model import JobState
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.record import JobRecord
from strands_robots.station.status import aggregate

DEMO_JOB = """\
# Demo evaluation job for the simulated station (scripted policy, scripted operator).
job_id: demo_job
client_id: demo
station_id: sim_station
episodes_total: 6
duration_s: 2.0
control_frequency: 50
max_discards: 2
policy:
  provider: scripted
  config: {mode: torque_ramp, joint: right.joint_4, target: 1.0}   # holds right.joint_4 near its start pose
tasks:
  - task_id: hold_pose
    instruction: hold the right wrist steady
    layout: empty table
    parameters: {success_when: "right.joint_4.pos > 0.95"}                      # -> timeout, success
    scoring: &sheet
      - {name: task_done, question: "Did the arm do what the instruction asked?", answer_type: yes_no,
         max_points: 2, success_answer: "yes"}
      - {name: motion, question: "How smooth was the motion?", answer_type: choice, max_points: 1,
         choices: [jerky, acceptable, smooth], choice_points: [0, 0.5, 1]}
      - {name: touches, question: "How many times did the gripper touch the bracket?", answer_type: count,
         max_points: 0, points_per_unit: 0}
  - task_id: short_reach
    instruction: reach, then stop
    layout: empty table
    parameters: {policy.end_after_steps: 40, answer.motion: smooth}              # -> policy_completed
    scoring: *sheet
  - task_id: push_to_limit
    instruction: push the right wrist to its limit
    layout: cable bracket mounted
    parameters: {policy.target: 2.0, duration_s: 3, success_when: "end_condition == timeout",
                 answer.touches: 1}                                              # -> safety_stop
    scoring: *sheet
  - task_id: assisted_hold
    instruction: hold the right wrist steady (operator assists)
    layout: empty table
    parameters: {operator_takeover_at_s: 0.5, success_when: "end_condition == timeout"}  # taken over, kept
    scoring: *sheet
  - task_id: redo_after_discard
    instruction: hold the right wrist steady (first try discarded)
    layout: empty table
    parameters: {operator_takeover_at_s: 0.3, operator_discard: true,
                 success_when: "end_condition == timeout"}                       # discarded, re-run, kept
    scoring: *sheet
  - task_id: blocked_start
    instruction: start from a pose that cannot settle in time
    layout: empty table
    parameters: {start_pose_timeout_s: 0.05}                                      # -> start_pose_unreached
    scoring: *sheet
"""


def run_demo(spec):
    operator = ScriptedOperator()
    runner = JobRunner(JobRecord(spec), InProcessRobot(), operator)
    try:
        return runner.run(), runner
    finally:
        operator.close()


def check_demo(final, runner):
    assert final.state is JobState.SUCCEEDED
    rows = [(e.episode_id, e.task.task_id, e.end_condition, e.scored, e.success, e.taken_over)
            for e in final.episodes]
    assert rows == [
        ("ep_0000", "hold_pose", "timeout", True, True, False),
        ("ep_0001", "short_reach", "policy_completed", True, True, False),
        ("ep_0002", "push_to_limit", "safety_stop", True, False, False),
        ("ep_0003", "assisted_hold", "timeout", True, True, True),
        ("ep_0005", "redo_after_discard", "timeout", True, True, True),
        ("ep_0006", "blocked_start", "start_pose_unreached", False, False, False),
    ]
    assert runner.record.discarded == ("ep_0004",)
    assert "N*m" in final.episodes[2].end_detail
    agg = aggregate(final.episodes)
    assert (agg.counted, agg.successes) == (3, 2)  # two taken over and one unscored are left out
    assert agg.success_rate == pytest.approx(2 / 3)


def test_demo_job_runs_every_path_unattended():
    check_demo(*run_demo(job_spec_from_yaml(DEMO_JOB)))


CONFIG = os.path.join(os.path.dirname(__file__), "..", "config")


def test_shipped_demo_job_on_the_demo_suite_runs_to_succeeded():
    """The demo team's job file names the demo station's suite tasks; the station fills them in from its suite."""
    spec = job_spec_for(load_team_job(os.path.join(CONFIG, "demo_job.yaml")),
                        load_suites(os.path.join(CONFIG, "suites"), "simulated"), station_id="sim_station",
                        profile="simulated", allow_free_form_tasks=True, job_id="demo_job", client_id="demo")
    final, runner = run_demo(spec)
    assert final.state is JobState.SUCCEEDED
    rows = [(e.episode_id, e.task.task_id, e.end_condition, e.scored, e.success, e.taken_over)
            for e in final.episodes]
    assert rows[:6] == [
        ("ep_0000", "hold_pose", "timeout", True, True, False),
        ("ep_0001", "short_reach", "policy_completed", True, True, False),
        ("ep_0002", "push_to_limit", "safety_stop", True, False, False),
        ("ep_0003", "assisted_hold", "timeout", True, True, True),
        ("ep_0005", "redo_after_discard", "timeout", True, True, True),
        ("ep_0006", "blocked_start", "start_pose_unreached", False, False, False),
    ]
    assert [(e.task.task_id, e.end_condition) for e in final.episodes[6:]] == [
        ("reach_cube", "timeout"), ("reach_cube_blind", "timeout")]
    assert runner.record.discarded == ("ep_0004",)
    assert [e.task.parameters["seed"] for e in final.episodes] == ["0"] * 8  # trial 0: the suite's first seed
