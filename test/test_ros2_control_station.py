"""Evaluation jobs through the relay on a ros2_control robot (a real controller_manager, mock hardware).

The station's nodes and a local relay run as ``strands-robots up`` runs them (``station_demo.LocalStation``),
with the arm driver on ``hardware:=ros2_control`` against ``ros2_control_node`` running the package's demo
description. A job submitted and served through the relay runs to SUCCEEDED with the forward command controller
and again with the joint_trajectory_controller, the mock hardware following the policy's commands (read from the
broadcaster's ``/joint_states``). Killing the controller_manager mid-episode ends that episode as an
infrastructure fault naming the driver; the job goes on once the controller_manager is back and SUCCEEDS.
Cancelling a job mid-episode holds the arms and deactivates the command controller (a latched stop, named
for the cancel) until the operator's clear, which the next job's episode waits for and then runs.

Runs where ros2_control is (``src/strands_robots/test/ros2_control_harness.py``); elsewhere it skips saying why.
Every process is ended by PID in ``finally``.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("grpc", reason="grpcio is not installed")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "strands_robots" / "test"))
from ros2_control_harness import ControllerManager, RobotDescription, ros2_control_env, wait_until  # noqa: E402
from suite_harness import submit_suite, write_suite  # noqa: E402

ENV, SKIP_REASON = ros2_control_env()
pytestmark = pytest.mark.skipif(ENV is None, reason=SKIP_REASON or "ros2_control is not here")

from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from strands_robots.cli.station_demo import LocalStation  # noqa: E402
from strands_robots.policies.demo import DemoPolicy  # noqa: E402
from strands_robots.ros.process import spin_in_background  # noqa: E402

from test_ros2_control import CONTROLLERS, arms_file  # noqa: E402

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
JOB_TIMEOUT_S = 240.0
SHEET = [{"name": "task_done", "question": "Did the arm do what the instruction asked?", "answer_type": "yes_no",
          "max_points": 1, "success_answer": "yes"}]
# The scripted policy ramps right.joint_4 from its start pose (0.9) to 1.0 and holds it there.
SCRIPTED = {"mode": "torque_ramp", "joint": "right.joint_4", "target": 1.0}


def task(task_id: str, duration_s: str = "2", **params: str) -> dict:
    return {"task_id": task_id, "instruction": f"instruction of {task_id}", "layout": "table",
            "parameters": {"duration_s": duration_s, "control_frequency": "50",
                           "success_when": "right.joint_4.pos > 0.95", **params},
            "scoring": SHEET}


SUITE = "ros2_control"
# Every task the module's jobs name: the station's own suite (its predicates and fault settings).
HOLD = [task("hold_a"), task("hold_b"), task("hold_c")]
KILLED = [task("a", "3"), task("b", "3"), task("c", "3")]
# the station stops renewing its lease half a second in: the lease runs out at the driver
LOST = [task("lost", "3", **{"fault.stop_heartbeat_at_s": "0.5"}), task("after")]
CANCELLED = [task("long", "30")]
SUITE_TASKS = HOLD + KILLED + LOST + CANCELLED


class TeamPolicy(DemoPolicy):
    """The team's policy on the client: the scripted ramp, noting the episodes the station asked actions of."""

    def __init__(self) -> None:
        super().__init__("scripted", SCRIPTED)
        self._cond = threading.Condition()
        self.acted_in: set = set()

    def act(self, observation):
        with self._cond:
            self.acted_in.add(self.episode.episode_id)
            self._cond.notify_all()
        return super().act(observation)

    def wait_acting(self, episode_id: str, timeout_s: float) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: episode_id in self.acted_in, timeout_s), sorted(self.acted_in)


class RobotState:
    """The broadcaster's ``/joint_states``, as this process hears it (the mock hardware's state)."""

    def __init__(self) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("strands_test_robot_state", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = spin_in_background(self.executor, "robot_state")
        self.max_right_joint_4 = -10.0
        self.count = 0
        self.node.create_subscription(JointState, "/joint_states", self._on, 10)

    def _on(self, msg) -> None:
        self.count += 1
        value = msg.position[list(msg.name).index("right_joint_4")]
        self.max_right_joint_4 = max(self.max_right_joint_4, value)

    def close(self) -> None:
        self.executor.shutdown()
        self.thread.join(5.0)
        self.node.destroy_node()
        self.context.try_shutdown()


@pytest.fixture(scope="module", params=["forward_command", "joint_trajectory"])
def robot_station(request, tmp_path_factory):
    mode = request.param
    tmp = tmp_path_factory.mktemp(f"rc_station_{mode}")
    controller = CONTROLLERS[mode]
    other = [c for c in CONTROLLERS.values() if c != controller][0]
    state = RobotState()
    description = RobotDescription(state.context)
    cm = ControllerManager(ENV, tmp)
    lines: list = []
    suites = write_suite(tmp / "suites", SUITE, SUITE_TASKS).parent
    station = LocalStation(str(tmp / "station"), namespace=f"rc_station_{int(time.time())}",
                           out=lambda name, line: lines.append(f"[{name}] {line}"),
                           station_params={"suites_dir": str(suites)},
                           driver_params={"hardware": "ros2_control", "config_file": str(arms_file(tmp, mode))},
                           driver_env=dict(ENV))
    station.lines = lines
    station.cm, station.mode, station.controller, station.other, station.state = cm, mode, controller, other, state

    def start_robot() -> None:
        cm.start()
        cm.spawn("joint_state_broadcaster", controller)
        cm.spawn(other, inactive=True)

    station.start_robot = start_robot
    try:
        start_robot()
        wait_until(lambda: state.count > 10, 60.0)
        station.start_relay()
        station.start_nodes()
        yield station
    finally:
        station.stop()
        cm.stop()
        description.close()
        state.close()


def run_job(station, tasks, on_running=None):
    client = station.client()
    station.last_client = client
    job_id = submit_suite(client, station.station_id, SUITE, tasks, len(tasks))
    station.last_job_id = job_id
    policy = TeamPolicy()
    served: dict = {}

    def serve():
        try:
            served["final"] = client.serve_policy(job_id, policy)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            served["error"] = exc

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    if on_running is not None:
        on_running(policy)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    status = None
    while time.monotonic() < deadline:
        status = client.get_status(job_id)
        if status.state in TERMINAL:
            break
        time.sleep(0.2)
    thread.join(10.0)
    assert status is not None and status.state in TERMINAL, f"{status}\n" + "\n".join(station.lines[-80:])
    return status


def test_a_job_through_the_relay_succeeds_on_ros2_control_and_the_mock_hardware_follows(robot_station):
    s = robot_station
    s.state.max_right_joint_4 = -10.0
    started = time.monotonic()
    final = run_job(s, HOLD)
    took = time.monotonic() - started
    rows = [(e.episode_id, e.end_condition, e.success, e.end_detail) for e in final.episodes]
    print(f"\n[{s.mode}] job {final.state} in {took:.1f} s: {rows}")
    assert final.state == "SUCCEEDED", f"{final}\n" + "\n".join(s.lines[-80:])
    assert [e.end_condition for e in final.episodes] == ["timeout"] * 3, rows
    assert all(e.success for e in final.episodes), rows
    # the policy's commands reached the controller: the robot itself (the broadcaster) went past 0.95
    assert s.state.max_right_joint_4 > 0.95, s.state.max_right_joint_4


def test_a_killed_controller_manager_ends_its_episode_as_a_driver_fault_and_the_job_goes_on(robot_station):
    s = robot_station

    def kill_mid_episode(policy) -> None:
        policy.wait_acting("ep_0001", 120.0)
        time.sleep(0.5)  # mid-episode: its rollout is half a second in (duration 3 s)
        s.cm.kill()
        time.sleep(1.0)  # the controller_manager stays away for a second, then comes back
        s.start_robot()

    final = run_job(s, KILLED, on_running=kill_mid_episode)
    rows = [(e.episode_id, e.task.task_id, e.end_condition, e.end_detail) for e in final.episodes]
    print(f"\n[{s.mode}] job {final.state}: " + "\n  ".join(map(str, rows)))
    assert final.state == "SUCCEEDED", f"{final}\n" + "\n".join(s.lines[-80:])
    faulted = [e for e in final.episodes if e.end_condition == "infrastructure_fault"]
    assert faulted and faulted[0].episode_id == "ep_0001", rows
    detail = faulted[0].end_detail
    assert detail.startswith("DriverFault: arm driver"), detail
    # named: the driver's own answer, quoted, says what ros2_control lost
    assert "(an error: adapter command failed: RuntimeError: joint_states on /joint_states stale" in detail, detail
    # its task ran again as a new episode, and every task ended in full
    done = [e.task.task_id for e in final.episodes if e.end_condition == "timeout"]
    assert sorted(done) == ["a", "b", "c"], rows


def test_a_lease_lost_mid_episode_latches_a_stop_that_the_operator_clears_and_the_job_goes_on(robot_station):
    s = robot_station
    final = run_job(s, LOST)
    rows = [(e.episode_id, e.task.task_id, e.end_condition, e.end_detail) for e in final.episodes]
    print(f"\n[{s.mode}] job {final.state}: " + "\n  ".join(map(str, rows)))
    assert final.state == "SUCCEEDED", f"{final}\n" + "\n".join(s.lines[-80:])
    assert [(e.task.task_id, e.end_condition) for e in final.episodes] == [("lost", "lease_lost"),
                                                                         ("after", "timeout")], rows
    # the driver latched the stop and took the controller down; the scripted operator's clear brought it back
    driver = "\n".join(line for line in s.lines if line.startswith("[arm_driver]"))
    assert "SAFETY STOP: left: stopped: lease of 'station:sim_station' expired" in driver, driver[-3000:]
    assert f"{s.controller} deactivated" in driver, driver[-3000:]
    assert f"{s.controller} active again" in driver, driver[-3000:]


def test_a_cancelled_job_holds_the_arms_and_takes_the_controller_down_until_the_operators_clear(robot_station):
    s = robot_station

    def cancel_mid_episode(policy) -> None:
        policy.wait_acting("ep_0000", 120.0)
        time.sleep(0.5)  # mid-episode: its rollout is half a second into its 30 s
        assert s.last_client.cancel(s.last_job_id, "the team stopped it")

    final = run_job(s, CANCELLED, on_running=cancel_mid_episode)
    print(f"\n[{s.mode}] cancelled job {final.state}: {final.message}")
    assert final.state == "CANCELLED", f"{final}\n" + "\n".join(s.lines[-80:])
    driver = "\n".join(line for line in s.lines if line.startswith("[arm_driver]"))
    # the station's release said why; the driver held the arms and took the command controller down
    assert "SAFETY STOP: left: stopped: cancelled by 'station:sim_station': the job was cancelled" in driver, \
        driver[-3000:]
    deactivated = f"{s.controller} deactivated"
    assert deactivated in driver, driver[-3000:]
    print(f"[{s.mode}] " + next(line for line in s.lines if deactivated in line))
    # the next job's episode waits for the operator's clear (the scripted operator gives it), then runs
    final = run_job(s, [HOLD[0]])
    assert final.state == "SUCCEEDED", f"{final}\n" + "\n".join(s.lines[-80:])
    assert [e.end_condition for e in final.episodes] == ["timeout"], final.episodes
    driver = "\n".join(line for line in s.lines if line.startswith("[arm_driver]"))
    assert f"{s.controller} active again" in driver, driver[-3000:]
