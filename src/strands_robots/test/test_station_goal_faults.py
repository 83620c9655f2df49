"""The station's robot port when the processes under it die: each is the station's fault, said so, bounded.

The arm driver and the rollout node run as their own processes (killed for real with SIGKILL and started again,
as a supervisor would); the station's :class:`RosRobotPort` is on a node in this process. What the core does
with these outcomes (keep the episode as ``infrastructure_fault``, run its task again) is pinned in
test_station_procedure.py; the whole station under the same kills in test/test_station_crash.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from action_msgs.msg import GoalStatusArray  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.qos import qos_profile_action_status_default  # noqa: E402
from ros_harness import NodeSpinners, wait_for  # noqa: E402

from strands_robots.station.ports import InfrastructureFault, fault_of  # noqa: E402
from strands_robots.station.job import EpisodePlan  # noqa: E402
from strands_robots.station.job_file import task_from_mapping  # noqa: E402

RATE_HZ = 50.0
POLICY = {"mode": "torque_ramp", "joint": "right.joint_4", "target": 1.0}


def _plan(episode_id: str, duration_s: float, seed=None) -> EpisodePlan:
    task = task_from_mapping({"task_id": "hold", "instruction": "hold", "layout": "table",
                              "parameters": {"duration_s": str(duration_s)},
                              "scoring": [{"name": "done", "question": "Held?", "answer_type": "yes_no",
                                           "max_points": 1, "success_answer": "yes"}]}, 0)
    return EpisodePlan(episode_id=episode_id, slot=0, attempt=0, task=task, policy_provider="scripted",
                       policy_config=dict(POLICY), duration_s=duration_s, control_frequency=RATE_HZ, seed=seed)


class Processes:
    """The driver and the rollout node as processes in one namespace, each restartable; ended by PID."""

    def __init__(self, namespace: str) -> None:
        from strands_robots.cli.station_demo import config_file

        self.namespace = namespace
        self.params = config_file("rollout.yaml")
        self.procs: dict = {}

    def start(self, name: str) -> subprocess.Popen:
        module, overrides = {
            "arm_driver": ("strands_robots.nodes.arm_driver.node",
                           {"control_rate_hz": f"{RATE_HZ:.1f}", "autostart": "true"}),
            "rollout": ("strands_robots.nodes.rollout.node",
                        {"control_frequency": f"{RATE_HZ:.1f}", "start_pose_before_episode": "false",
                         "record": "false", "policy_provider": "mock", "driver_silence_s": "0.5"}),
        }[name]
        argv = [sys.executable, "-m", module, "--ros-args", "-r", f"__node:={name}", "-r",
                f"__ns:={self.namespace}", "--params-file", self.params]
        for key, value in overrides.items():
            argv += ["-p", f"{key}:={value}"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.procs[name] = proc
        return proc

    def kill(self, name: str) -> int:
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(10.0)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGINT)
                    proc.wait(10.0)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10.0)
        assert all(p.poll() is not None for p in self.procs.values())


@pytest.fixture(scope="module")
def processes_and_port():
    """Start the driver and rollout node processes and the station's port once for the module's tests.

    A fresh pair per test is not what these tests are about: the ones that kill a process start it again, as a
    supervisor would, and :func:`rig` starts any a failed test left dead.
    """
    from strands_robots.nodes.station.robot_port import RosRobotPort

    namespace = f"/goal_faults_{uuid.uuid4().hex[:8]}"
    procs = Processes(namespace)
    context = Context()
    rclpy.init(context=context)
    spinners = NodeSpinners(context)
    node = rclpy.create_node("station", namespace=namespace, context=context)
    # A dead driver is the station's fault after 1 s here (the node's default is 10 s: a supervisor's restart)
    port = RosRobotPort(node, driver_ready_timeout_s=1.0)
    spinners.add(node)
    statuses: dict = {}
    lock = threading.Lock()

    def on_status(msg) -> None:
        with lock:
            for st in msg.status_list:
                statuses[bytes(st.goal_info.goal_id.uuid).hex()] = st.status

    node.create_subscription(GoalStatusArray, "run_episode/_action/status", on_status,
                             qos_profile_action_status_default)
    port.all_statuses = lambda: dict(statuses)
    port.procs = procs
    try:
        procs.start("arm_driver")
        procs.start("rollout")
        assert port.backend.wait_until_ready(90.0), "the arm driver never became ready"
        assert port._run.wait_for_server(timeout_sec=90.0), "run_episode never appeared"
        yield port
    finally:
        try:
            port.close()
        finally:
            procs.stop_all()
            spinners.shutdown()
            node.destroy_node()
            rclpy.try_shutdown(context=context)


@pytest.fixture
def rig(processes_and_port):
    """Yield the module's port with both processes up, its ``statuses()`` the goals held since this test began."""
    port = processes_and_port
    dead = [name for name, proc in port.procs.procs.items() if proc.poll() is not None]
    for name in dead:
        port.procs.start(name)
    assert port.backend.wait_until_ready(90.0), "the arm driver never became ready"
    assert port._run.wait_for_server(timeout_sec=90.0), "run_episode never appeared"
    before = set(port.all_statuses())
    port.statuses = lambda: {goal: st for goal, st in port.all_statuses().items() if goal not in before}
    try:
        yield port
    finally:
        port.release_lease()  # nothing to give up when the test released it (a failed test may not have)


def _run_in_background(port, plan) -> dict:
    out: dict = {"progress": []}

    def run() -> None:
        try:
            out["outcome"] = port.run_rollout(plan, out["progress"].append)
        except BaseException as exc:  # noqa: BLE001  (the test reads it)
            out["error"] = exc
        out["ended_at"] = time.monotonic()

    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def _wait_running(port, run: dict, timeout_s: float = 60.0) -> None:
    """Wait until the goal's feedback says the rollout runs (0.3 s of rollout time), or its thread ended.

    The failure says what the port knew: the run's end (outcome or error), the last feedback time, the goal's log
    and the statuses seen ("the rollout never ran" alone would not say why).
    """
    running = wait_for(lambda: (run["progress"] and run["progress"][-1] > 0.3) or not run["thread"].is_alive(),
                       timeout_s)
    assert running and run["thread"].is_alive(), (
        f"the rollout never ran ({'ended' if running else f'no feedback past 0.3 s in {timeout_s:g} s'}): "
        f"outcome={run.get('outcome')!r} error={run.get('error')!r} last feedback="
        f"{run['progress'][-1] if run['progress'] else None} goal log={list(port.goal_log)} "
        f"statuses={port.statuses()}")


def test_rollout_node_killed_mid_episode_and_restarted_ends_the_goal_as_a_station_fault_and_the_next_runs(rig):
    ok, detail = rig.acquire_lease("station", 10, 2.0)
    assert ok, detail
    run = _run_in_background(rig, _plan("ep_0000", duration_s=60.0))
    _wait_running(rig, run)
    assert rig.procs.kill("rollout") == -signal.SIGKILL
    rig.procs.start("rollout")  # the supervisor's restart
    restarted_at = time.monotonic()
    run["thread"].join(90.0)
    assert not run["thread"].is_alive(), "the port never noticed that its goal died"
    outcome = run["outcome"]
    assert fault_of(outcome) == "infrastructure", outcome
    assert "the rollout node died during the episode" in outcome.infrastructure, outcome
    assert "replaced by a new one" in outcome.infrastructure or "went away" in outcome.infrastructure, outcome
    assert not outcome.run_id  # no result of that rollout ever came
    print(f"goal death noticed {run['ended_at'] - restarted_at:.2f} s after the restart was started")
    rig.release_lease()

    # The restarted rollout node runs the task again under a new goal, to its end.
    ok, detail = rig.acquire_lease("station", 10, 2.0)
    assert ok, detail
    again = rig.run_rollout(_plan("ep_0001", duration_s=0.5), lambda _t: None)
    rig.release_lease()
    assert again.run_id and again.stopped_reason == "budget", again


def test_driver_killed_mid_episode_is_a_driver_fault_and_while_it_is_down_the_arms_cannot_be_claimed(rig):
    ok, detail = rig.acquire_lease("station", 10, 2.0)
    assert ok, detail
    run = _run_in_background(rig, _plan("ep_0000", duration_s=60.0))
    _wait_running(rig, run)
    assert rig.procs.kill("arm_driver") == -signal.SIGKILL
    run["thread"].join(60.0)
    assert not run["thread"].is_alive()
    outcome = run["outcome"]
    rig.release_lease()
    assert outcome.error_type == "DriverFault" and outcome.run_id, outcome
    assert fault_of(outcome) == "infrastructure"
    assert "arm driver" in outcome.end_detail, outcome

    with pytest.raises(InfrastructureFault, match=r"is not ready \(no fresh joint_states for 1 s\)"):
        rig.acquire_lease("station", 10, 2.0)  # no driver: the station's fault, never "authority_lost"

    rig.procs.start("arm_driver")
    assert rig.backend.wait_until_ready(90.0)
    ok, detail = rig.acquire_lease("station", 10, 2.0)
    assert ok, detail
    reached, detail = rig.move_to_start_pose(_plan("ep_0001", duration_s=0.5))
    assert reached, detail
    again = rig.run_rollout(_plan("ep_0001", duration_s=0.5), lambda _t: None)
    rig.release_lease()
    assert again.run_id and again.stopped_reason == "budget", again


def test_a_goal_that_cannot_be_built_raises_before_anything_is_sent_and_the_next_goal_runs(rig):
    ok, detail = rig.acquire_lease("station", 10, 2.0)
    assert ok, detail
    try:
        with pytest.raises(ValueError, match=r"ep_0000: the run_episode goal could not be built \(nothing was sent\)"):
            rig.run_rollout(_plan("ep_0000", duration_s=0.5, seed=12345678901234567890), lambda _t: None)
        assert rig.statuses() == {}  # the rollout node never held a goal
        again = rig.run_rollout(_plan("ep_0001", duration_s=0.5, seed=7), lambda _t: None)
    finally:
        rig.release_lease()
    assert again.run_id and again.stopped_reason == "budget", again
    assert len(rig.statuses()) == 1


def test_an_error_in_the_episodes_progress_hook_cancels_its_goal_and_the_next_goal_runs(rig):
    from action_msgs.msg import GoalStatus

    def progress(t):
        if t > 0.2:
            raise RuntimeError("the operator's hook failed")

    ok, detail = rig.acquire_lease("station", 10, 2.0)
    assert ok, detail
    try:
        with pytest.raises(RuntimeError, match="the operator's hook failed"):
            rig.run_rollout(_plan("ep_0000", duration_s=30.0), progress)
        assert wait_for(lambda: GoalStatus.STATUS_CANCELED in rig.statuses().values(), 20.0), rig.statuses()
        assert rig.pause_rollout() == (False, "no rollout is running")
        again = rig.run_rollout(_plan("ep_0001", duration_s=0.5), lambda _t: None)
    finally:
        rig.release_lease()
    assert again.run_id and again.stopped_reason == "budget", again
