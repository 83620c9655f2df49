"""The arm driver as its own process over real DDS: its command stream, its lifecycle and its exit.

The command stream gives the service path's verdict for every per-key case; stale and out-of-order commands
are refused and nothing moves; an invalid lifecycle request is refused and the driver keeps serving; it exits
0 on SIGTERM.

The driver runs as ``python -m strands_robots.nodes.arm_driver.node --autostart`` in a namespace of its own and
is ended by PID in ``finally``; the test side is a plain rclpy node in this process.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from lifecycle_msgs.msg import Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from strands_robots_msgs.msg import ActionCommand, ActionVerdict  # noqa: E402
from strands_robots_msgs.srv import AcquireLease, SendAction  # noqa: E402

from strands_robots.conversions.joint_state import joint_state_robot_time_s  # noqa: E402
from strands_robots.arm.command_auth import command_message, sign  # noqa: E402
from strands_robots.ros.qos import COMMAND_QOS, STATE_QOS, VERDICT_QOS  # noqa: E402
from strands_robots.ros.process import spin_in_background  # noqa: E402

from ros_harness import wait_for  # noqa: E402


def driver_env() -> dict:
    """Return the environment of a driver process: this package and its tests importable (test adapter)."""
    here = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(here.parent), str(here), env.get("PYTHONPATH", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


class DriverProcess:
    """The driver in its own process, in namespace ``ns``, and a client node here to talk to it."""

    def __init__(self, *ros_args: str) -> None:
        self.ns = f"/h2_{uuid.uuid4().hex[:8]}"
        self.lines: list = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "strands_robots.nodes.arm_driver.node", "--autostart",
             "--ros-args", "-r", f"__ns:={self.ns}", *ros_args],
            env=driver_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self._reader.start()
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("h2_driver_probe", namespace=self.ns, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = spin_in_background(self.executor, "h2_probe")
        self.joint_states: list = []
        self.verdicts: dict = {}
        self._cond = threading.Condition()
        self.node.create_subscription(JointState, "joint_states", self.joint_states.append, STATE_QOS)
        self.verdict_sub = self.node.create_subscription(ActionVerdict, "action_verdicts", self._on_verdict,
                                                         VERDICT_QOS)
        self.commands = self.node.create_publisher(ActionCommand, "action_commands", COMMAND_QOS)
        self.send_action = self.node.create_client(SendAction, "send_action")
        self.token = ""

    def _on_verdict(self, msg) -> None:
        with self._cond:
            self.verdicts[(msg.run_id, msg.step_index)] = msg
            self._cond.notify_all()

    def output(self) -> str:
        return "".join(self.lines)

    def call(self, client, request, timeout_s: float = 30.0):  # generous: other jobs share this machine
        assert client.wait_for_service(timeout_sec=timeout_s), f"{client.srv_name} not available\n{self.output()}"
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), f"{client.srv_name}: no answer"
        return future.result()

    def ready(self) -> None:
        # both directions matched before the first command: a verdict published before our subscription
        # matched would be gone (volatile)
        assert wait_for(lambda: len(self.joint_states) > 3 and self.commands.get_subscription_count() > 0
                        and self.verdict_sub.get_publisher_count() > 0, 60.0), self.output()
        acquire = self.node.create_client(AcquireLease, "acquire_lease")
        grant = self.call(acquire, AcquireLease.Request(holder="h2", priority=1, duration_s=30.0))
        assert grant.granted, grant.message
        self.token = grant.token

    def command(self, keys, values, token, run_id, step, apply_by_ns=None):
        now = self.node.get_clock().now().nanoseconds
        deadline = now + 5 * 10**9 if apply_by_ns is None else apply_by_ns
        # Built field by field (not conversions.actions.stream_command_msg) so repeated keys and mismatched
        # lists reach the driver as sent; the lease proof is the rollout's, over the same fields.
        msg = ActionCommand(keys=list(keys), values=[float(v) for v in values], run_id=run_id, step_index=step)
        msg.sent.sec, msg.sent.nanosec = divmod(now, 10**9)
        msg.apply_by.sec, msg.apply_by.nanosec = divmod(deadline, 10**9)
        if len(msg.keys) == len(msg.values):
            msg.lease_proof = sign(token, command_message(run_id, step, deadline, msg.keys, msg.values))
        self.commands.publish(msg)
        with self._cond:
            assert self._cond.wait_for(lambda: (run_id, step) in self.verdicts, 30.0), (run_id, step)
            return self.verdicts[(run_id, step)]

    def service(self, keys, values, token):
        return self.call(self.send_action, SendAction.Request(lease_token=token, keys=list(keys), values=list(values)))

    def positions_after(self, robot_time_s: float) -> dict:
        """Return the positions of the first joint state ``robot_time_s`` of robot time after the latest one."""
        start = joint_state_robot_time_s(self.joint_states[-1])
        assert wait_for(lambda: joint_state_robot_time_s(self.joint_states[-1]) >= start + robot_time_s,
                        20.0)
        msg = self.joint_states[-1]
        return dict(zip(msg.name, msg.position))

    def close(self) -> int:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                return self.proc.wait(timeout=15.0)
            return self.proc.returncode
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.executor.shutdown()
            self.thread.join(5.0)
            self.node.destroy_node()
            self.context.try_shutdown()


@pytest.fixture
def driver():
    d = DriverProcess()
    try:
        d.ready()
        yield d
    finally:
        d.close()


CASES = [  # 0.05 stands for "a valid target near the joint" (replaced by its position + 0.01 rad)
    (["left.joint_1", "right.joint_2"], [0.05, 0.05], True),
    (["left.joint_1", "left.joint_9", "right.joint_4", "right.gripper", "torso"], [0.05, 0.0, 2.5, math.nan, 1.0],
     True),
    (["left.joint_1", "left.joint_9"], [0.05, 0.0], False),
    (["left.joint_2"], [math.inf], True),
    (["left.joint_1", "left.joint_1"], [0.05, 0.05], True),
    (["left.joint_1"], [0.05, 0.06], True),
]


def test_stream_and_service_give_the_same_verdicts_with_the_driver_in_its_own_process(driver):
    # valid targets within 0.01 rad of where the joints are, so no case trips the envelope between the two paths
    here = dict(zip(driver.joint_states[-1].name, driver.joint_states[-1].position))
    for i, (keys, values, holder) in enumerate(CASES):
        values = [here[k] + 0.01 if k in here and v == 0.05 else v for k, v in zip(keys, values)] \
            + values[len(keys):]  # the length-mismatch case keeps its extra value
        token = driver.token if holder else "f" * 32
        by_service = driver.service(keys, values, token)
        by_stream = driver.command(keys, values, token, "cases", i)
        for field in ("applied_keys", "unresolved_keys", "unresolved_reasons"):
            assert list(getattr(by_stream, field)) == list(getattr(by_service, field)), (i, field)
        assert by_stream.error == by_service.error, i


def test_stale_and_out_of_order_commands_move_nothing_with_the_driver_in_its_own_process(driver):
    keys = ["left.joint_1", "right.joint_1"]
    assert list(driver.command(keys, [0.0, 0.0], driver.token, "r", 10).applied_keys) == keys
    held = driver.positions_after(0.3)
    past = driver.node.get_clock().now().nanoseconds - 10**9
    stale = driver.command(keys, [0.15, -0.15], driver.token, "r", 11, apply_by_ns=past)
    assert list(stale.unresolved_reasons) == ["stale", "stale"] and list(stale.applied_keys) == []
    older = driver.command(keys, [0.15, -0.15], driver.token, "r", 9)
    assert list(older.unresolved_reasons) == ["out_of_order", "out_of_order"]
    after = driver.positions_after(0.3)
    for key in keys:
        assert after[key] == pytest.approx(held[key], abs=2e-3), f"{key} moved after a refused command"
    assert list(driver.command(keys, [0.01, -0.01], driver.token, "r", 12).applied_keys) == keys


def test_what_a_reader_of_the_command_stream_sees_neither_holds_the_lease_nor_moves_the_arms(driver):
    # Another participant on the domain reads action_commands, as `ros2 topic echo` or a recorder would.
    seen: list = []
    driver.node.create_subscription(ActionCommand, "action_commands", seen.append, COMMAND_QOS)
    assert wait_for(lambda: driver.commands.get_subscription_count() >= 2, 10.0)
    keys = ["left.joint_1", "right.joint_1"]
    here = dict(zip(driver.joint_states[-1].name, driver.joint_states[-1].position))
    target = [here[k] + 0.01 for k in keys]
    assert list(driver.command(keys, target, driver.token, "read", 0).applied_keys) == keys
    assert wait_for(lambda: len(seen) >= 1, 10.0)
    copied = seen[-1]
    texts = [copied.run_id, copied.lease_proof, *copied.keys]
    assert all(driver.token not in t for t in texts), "the lease token is readable on action_commands"

    # what it read renews, releases and resets nothing
    from strands_robots_msgs.srv import ReleaseLease, RenewLease, ResetSafety

    renew = driver.call(driver.node.create_client(RenewLease, "renew_lease"),
                        RenewLease.Request(token=copied.lease_proof, duration_s=30.0))
    release = driver.call(driver.node.create_client(ReleaseLease, "release_lease"),
                          ReleaseLease.Request(token=copied.lease_proof))
    reset = driver.call(driver.node.create_client(ResetSafety, "reset_safety"),
                        ResetSafety.Request(operator_name="reader", lease_token=copied.lease_proof))
    assert not renew.ok and not release.ok and not reset.ok, (renew.message, release.message, reset.message)

    # a copy re-published with other values (and a newer step, fresh deadline) applies nothing
    held = driver.positions_after(0.3)
    forged = ActionCommand(keys=list(copied.keys), values=[v + 0.3 for v in copied.values], run_id="read",
                           step_index=1, lease_proof=copied.lease_proof)
    now = driver.node.get_clock().now().nanoseconds
    forged.sent.sec, forged.sent.nanosec = divmod(now, 10**9)
    forged.apply_by.sec, forged.apply_by.nanosec = divmod(now + 5 * 10**9, 10**9)
    driver.commands.publish(forged)
    with driver._cond:
        assert driver._cond.wait_for(lambda: ("read", 1) in driver.verdicts, 30.0)
        verdict = driver.verdicts[("read", 1)]
    assert list(verdict.applied_keys) == [] and list(verdict.unresolved_reasons) == ["not_lease_holder"] * 2
    after = driver.positions_after(0.3)
    for key in keys:
        assert after[key] == pytest.approx(held[key], abs=2e-3), f"{key} moved after a forged command"
    # and the holder still commands: the refused step 1 did not advance the run's order past step 0
    assert driver.verdicts.pop(("read", 1)) is verdict
    assert list(driver.command(keys, target, driver.token, "read", 1).applied_keys) == keys


def test_invalid_transition_is_refused_and_the_driver_process_keeps_serving_and_exits_zero(driver):
    change = driver.node.create_client(ChangeState, "arm_driver/change_state")
    get = driver.node.create_client(GetState, "arm_driver/get_state")
    for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_CLEANUP, 42):
        assert not driver.call(change, ChangeState.Request(transition=Transition(id=transition))).success
    assert driver.call(get, GetState.Request()).current_state.label == "active"
    assert list(driver.service(["left.joint_1"], [0.0], driver.token).applied_keys) == ["left.joint_1"]
    assert driver.proc.poll() is None
    rc = driver.close()
    assert rc == 0, driver.output()
    assert "Traceback" not in driver.output(), driver.output()


def test_the_driver_process_runs_the_adapter_its_hardware_parameter_names():
    from strands_robots_msgs.msg import DriverStatus

    from strands_robots.ros.qos import LATCHED_QOS

    d = DriverProcess("-p", "hardware:=test_driver_hardware:kinematic_hardware")
    try:
        status = []
        d.node.create_subscription(DriverStatus, "driver_status", status.append, LATCHED_QOS)
        d.ready()
        assert wait_for(lambda: status and status[-1].active, 20.0), d.output()
        assert status[-1].hardware == "test_driver_hardware:kinematic_hardware"
        assert "configured: test_driver_hardware:kinematic_hardware arms left, right" in d.output()
        assert list(d.command(["left.joint_1"], [0.3], d.token, "k", 0).applied_keys) == ["left.joint_1"]
        assert wait_for(lambda: abs(dict(zip(d.joint_states[-1].name, d.joint_states[-1].position))["left.joint_1"]
                                    - 0.3) < 1e-6, 20.0)  # the kinematic arm integrated the command
    finally:
        assert d.close() == 0, d.output()


def test_an_unknown_hardware_name_is_refused_at_start_with_reason():
    proc = subprocess.run(
        [sys.executable, "-m", "strands_robots.nodes.arm_driver.node", "--autostart", "--ros-args",
         "-r", f"__ns:=/h2_{uuid.uuid4().hex[:8]}", "-p", "hardware:=no_such_arm"],
        env=driver_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stdout, proc.stdout
    assert "unknown hardware 'no_such_arm'" in proc.stdout, proc.stdout
