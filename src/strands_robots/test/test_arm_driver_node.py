"""The arm driver node over real DDS: verdicts, leases, safety stop, start pose, parameters, lifecycle.

Each test gets its own rclpy Context with the driver node and a client node, each on its own executor thread
spinning on a background thread; the fixture tears all of it down even when the test fails. The client side
is :class:`RosDriverBackend` (what the rollout node uses), or plain service clients where the test is about
the ROS interface itself (lifecycle, parameters).
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from lifecycle_msgs.msg import Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from rcl_interfaces.msg import Parameter as ParameterMsg  # noqa: E402
from rcl_interfaces.msg import ParameterType, ParameterValue  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from strands_robots_msgs.msg import DriverStatus, LeaseState, SafetyStop  # noqa: E402
from strands_robots_msgs.msg import SafetyCheck as SafetyCheckMsg  # noqa: E402

from strands_robots.conversions.joint_state import (  # noqa: E402
    driver_joint_state_to_observation, joint_state_robot_time_s,
)
from strands_robots.conversions.messages import time_to_ns  # noqa: E402
from strands_robots.conversions.safety import msg_to_safety_check  # noqa: E402
from strands_robots.ros.qos import LATCHED_QOS, STATE_QOS  # noqa: E402
from strands_robots.nodes.arm_driver.node import ArmDriverNode  # noqa: E402
from strands_robots.driver_link.client import COMMAND_PATH_SERVICE, RosDriverBackend  # noqa: E402
from strands_robots_msgs.srv import SendAction  # noqa: E402
from strands_robots.rollout.backend import RobotBackend  # noqa: E402

from ros_harness import NodeSpinners, wait_for  # noqa: E402

SUCCESS = TransitionCallbackReturn.SUCCESS
TEXT_FORM = re.compile(r"^(left|right): (joint \d|gripper) reads [+-]\d+\.\d (rad|rad/s|N\*m)$")


class Harness:
    """Driver node + client node in one context, each spun by its own executor thread (ros_harness.NodeSpinners)."""

    def __init__(self, **params) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.nodes = []
        self.backend = None
        self.spinners = NodeSpinners(self.context)
        # A namespace of its own: in the worker's shared domain other tests' drivers and their leftovers (a process
        # SIGKILLed within the DDS lease) hold the root-namespace names, so /arm_driver/change_state could be
        # "not available" here for 10 s.
        self.ns = f"/driver_test_{uuid.uuid4().hex[:8]}"
        overrides = [Parameter(k, value=v) for k, v in params.items()]
        self.driver = self.add(ArmDriverNode(context=self.context, namespace=self.ns, parameter_overrides=overrides))
        self.client = self.add(rclpy.create_node("driver_test_client", namespace=self.ns, context=self.context))

    def add(self, node):
        self.nodes.append(node)
        return self.spinners.add(node)

    def make_backend(self, **kwargs) -> RosDriverBackend:
        kwargs.setdefault("action_timeout_s", 5.0)
        # The service path: a verdict per call whatever the machine's load (the client's stream path gives each
        # command a one-period deadline, which a loaded test machine can miss). The stream's own semantics are
        # pinned by the StreamProbe tests with generous deadlines.
        kwargs.setdefault("command_path", COMMAND_PATH_SERVICE)
        self.backend = RosDriverBackend(self.client, **kwargs)
        return self.backend

    def call(self, client, request, timeout_s: float = 10.0):
        assert client.wait_for_service(timeout_sec=timeout_s), f"{client.srv_name} not available"
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), f"{client.srv_name}: no answer within {timeout_s} s"
        return future.result()

    def close(self) -> None:
        try:
            self.spinners.shutdown(5.0)  # no executor thread touches a node while it is destroyed
        finally:
            try:
                if self.backend is not None:  # its action client destroyed under a spin would end that spin
                    self.backend.close()
            finally:
                for node in self.nodes:
                    try:
                        node.destroy_node()
                    except Exception:
                        pass
                self.context.try_shutdown()


@pytest.fixture
def harness():
    made = []

    def make(**params) -> Harness:
        h = Harness(**params)
        made.append(h)
        return h

    try:
        yield make
    finally:
        for h in made:
            h.close()


@pytest.fixture
def active(harness):
    """Give an active driver and a ready backend holding the lease (priority 1, 10 s, heartbeat on)."""
    h = harness()
    assert h.driver.trigger_configure() == SUCCESS
    assert h.driver.trigger_activate() == SUCCESS
    backend = h.make_backend()
    assert backend.wait_until_ready(10.0), "driver services / joint_states not seen"
    grant = backend.acquire("test_worker", 1, 10.0)
    assert grant.granted, grant.message
    return h


def start_pose_action(h: Harness) -> dict:
    return dict(h.driver.core.config.start_pose.pose)


def commanded_targets(h: Harness, keys) -> dict:
    """Return the position targets the simulation holds for ``keys`` (MuJoCo ctrl by actuator name)."""
    import mujoco

    from strands_robots.arm.model import mjcf_name

    adapter = h.driver.core.adapter
    return {k: float(adapter.data.ctrl[mujoco.mj_name2id(adapter.model, mujoco.mjtObj.mjOBJ_ACTUATOR,
                                                          mjcf_name(k))]) for k in keys}


def trip_torque(h: Harness) -> None:
    """Drive right.joint_4 as the arm core documents: from the start pose, one far jump to -1.5 rad."""
    res = h.backend.move_to_start_pose()
    assert res.reached, res.detail
    verdict = h.backend.send_action({"right.joint_4": -1.5})
    assert verdict.applied_keys == ("right.joint_4",)
    assert wait_for(lambda: h.driver.core.stopped, 2.0), "the torque envelope did not trip"


def reset_safety(h: Harness, token: str, operator: str = "pytest"):
    from strands_robots_msgs.srv import ResetSafety

    client = h.client.create_client(ResetSafety, "reset_safety")
    try:
        return h.call(client, ResetSafety.Request(operator_name=operator, lease_token=token))
    finally:
        h.client.destroy_client(client)


# -- verdicts ---------------------------------------------------------------------------------------------------
def test_send_action_full_verdict_over_dds(active):
    h = active
    assert isinstance(h.backend, RobotBackend)
    specs = h.driver.core.joint_specs()
    obs = h.backend.observe()
    # every actuator, 0.01 rad from where it is, inside its limits
    action = {k: min(max(obs[f"{k}.pos"] + 0.01, s.lower), s.upper) for k, s in specs.items()}
    verdict = h.backend.send_action(action)
    assert verdict.error == ""
    assert verdict.applied_keys == tuple(action)
    assert verdict.unresolved_keys == () and verdict.unresolved_reasons == ()
    assert set(action) == set(h.backend.action_keys())
    assert commanded_targets(h, action) == pytest.approx(action)


def test_unknown_and_out_of_range_keys_partial_over_dds(active):
    h = active
    verdict = h.backend.send_action({
        "left.joint_1": 0.1,
        "left.joint_9": 0.0,
        "right.joint_4": 2.5,
        "right.gripper": math.nan,
        "torso": 1.0,
        "left.gripper": "open",
    })
    assert verdict.error == ""
    assert verdict.applied_keys == ("left.joint_1",)
    assert verdict.unresolved_keys == ("left.joint_9", "right.joint_4", "right.gripper", "torso", "left.gripper")
    assert verdict.unresolved_reasons == ("unknown_key", "outside_limits", "non_finite", "unknown_key",
                                          "non_finite")


def test_duplicate_or_mismatched_keys_are_a_coarse_error(active):
    from strands_robots_msgs.srv import SendAction

    client = active.client.create_client(SendAction, "send_action")
    req = SendAction.Request(lease_token=active.backend.lease_token, keys=["left.joint_1", "left.joint_1"],
                             values=[0.1, 0.2])
    res = active.call(client, req)
    assert res.error == "send_action repeats keys ['left.joint_1']"
    assert list(res.applied_keys) == [] and list(res.unresolved_keys) == []
    req = SendAction.Request(lease_token=active.backend.lease_token, keys=["left.joint_1"], values=[0.1, 0.2])
    assert active.call(client, req).error == "send_action has 1 keys but 2 values"


def test_foreign_lease_token_applies_nothing_over_dds(active):
    h = active
    adapter = h.driver.core.adapter
    # the SendAction path (the stream's own cases are in the command-stream tests below)
    released = RosDriverBackend(h.client, action_timeout_s=5.0, command_path=COMMAND_PATH_SERVICE)
    before = adapter.data.ctrl.copy()
    action = {"left.joint_1": 0.2, "right.joint_2": 0.3, "left.joint_9": 0.0}
    try:
        for token in ("f" * 32, "", h.backend.lease_id):
            released.lease_token = token
            verdict = released.send_action(action)
            assert verdict.applied_keys == ()
            assert verdict.unresolved_keys == ("left.joint_1", "right.joint_2", "left.joint_9")
            assert verdict.unresolved_reasons == ("not_lease_holder", "not_lease_holder", "unknown_key")
        assert (adapter.data.ctrl == before).all(), "a foreign token moved a target"
        # a stale token: the lease's own token after release
        token = h.backend.lease_token
        assert h.backend.release()
        released.lease_token = token
        assert released.send_action({"left.joint_1": 0.2}).unresolved_reasons == ("not_lease_holder",)
        assert (adapter.data.ctrl == before).all()
    finally:
        released.close()


def test_inactive_driver_returns_coarse_error(harness):
    h = harness()
    backend = h.make_backend(action_timeout_s=2.0, command_path=COMMAND_PATH_SERVICE)
    # unconfigured: the service does not exist yet
    verdict = backend.send_action({"left.joint_1": 0.1})
    assert verdict.error.startswith("arm driver not available")
    assert h.driver.trigger_configure() == SUCCESS
    probe = h.client.create_client(SendAction, "send_action")
    assert probe.wait_for_service(timeout_sec=10.0)
    h.client.destroy_client(probe)
    verdict = backend.send_action({"left.joint_1": 0.1})
    assert verdict.error == "driver not active"
    assert verdict.applied_keys == () and verdict.unresolved_keys == ()
    # active, then deactivated again
    assert h.driver.trigger_activate() == SUCCESS
    assert backend.acquire("w", 1, 10.0).granted
    assert backend.send_action({"left.joint_1": 0.1}).applied_keys == ("left.joint_1",)
    assert h.driver.trigger_deactivate() == SUCCESS
    assert backend.send_action({"left.joint_1": 0.1}).error == "driver not active"
    assert h.driver.core.status().coarse_errors == 0  # refused by the node before the core saw it


# -- safety -------------------------------------------------------------------------------------------------------
def test_torque_trip_publishes_safety_stop_naming_every_check(active):
    h = active
    trip_torque(h)
    tripped = h.driver.core.safety_checks()
    assert any(c.arm == "right" and c.joint == "joint_4" and c.quantity == "torque" for c in tripped)

    # a subscriber that arrives after the trip still gets it (transient_local)
    late = h.add(rclpy.create_node("late_safety_listener", namespace=h.ns, context=h.context))
    got = []
    late.create_subscription(SafetyStop, "safety_stop", got.append, LATCHED_QOS)
    assert wait_for(lambda: got, 10.0), "late subscriber got no SafetyStop"
    msg = got[-1]
    assert msg.stopped
    assert [msg_to_safety_check(c) for c in msg.checks] == list(tripped)
    texts = [c.text for c in msg.checks]
    assert texts == [c.text() for c in tripped]
    assert all(TEXT_FORM.match(t) for t in texts), texts
    assert msg.detail == "; ".join(texts)
    torque = next(c for c in msg.checks if c.joint == "joint_4" and c.quantity == SafetyCheckMsg.QUANTITY_TORQUE)
    assert torque.arm == "right" and torque.unit == "N*m" and abs(torque.value) > torque.limit
    assert re.match(r"^right: joint 4 reads [+-]\d+\.\d N\*m$", torque.text)
    assert h.backend.safety_stop_detail() == msg.detail

    status = []
    late.create_subscription(DriverStatus, "driver_status", status.append, LATCHED_QOS)
    assert wait_for(lambda: status and status[-1].stopped, 10.0)
    assert status[-1].safety_detail == msg.detail


def test_stopped_driver_refuses_until_reset_safety(active):
    h = active
    trip_torque(h)
    keys = ("left.joint_1", "right.joint_2")
    verdict = h.backend.send_action({"left.joint_1": 0.0, "right.joint_2": 0.6})
    assert verdict.applied_keys == ()
    assert verdict.unresolved_keys == keys and verdict.unresolved_reasons == ("arm_stopped", "arm_stopped")
    assert h.backend.safety_stop_detail()
    still = h.backend.move_to_start_pose()
    assert not still.reached and "safety-stopped" in still.detail

    # reset once the held arm has come to rest (a reset while still outside the envelope trips again)
    deadline = time.monotonic() + 5.0
    res = reset_safety(h, h.backend.lease_token)
    while not res.ok and time.monotonic() < deadline:
        assert res.message.startswith("still outside the safety envelope: ")
        time.sleep(0.1)
        res = reset_safety(h, h.backend.lease_token)
    assert res.ok, res.message
    assert wait_for(lambda: h.backend.latest_safety_stop() is not None
                    and not h.backend.latest_safety_stop().stopped, 5.0)
    assert h.backend.safety_stop_detail() == ""
    verdict = h.backend.send_action({"left.joint_1": 0.0, "right.joint_2": 0.6})
    assert verdict.applied_keys == keys and verdict.unresolved_keys == ()


# -- start pose -----------------------------------------------------------------------------------------------------
def test_move_to_start_pose_reached(active):
    h = active
    pose = start_pose_action(h)
    sim0 = h.driver.core.adapter.time_s()
    res = h.backend.move_to_start_pose()
    assert res.reached, res.detail
    assert res.detail == ""
    assert 0.0 <= res.max_error <= h.driver.core.config.start_pose.position_tolerance_rad
    assert 0.0 < res.elapsed_s <= h.driver.core.config.start_pose.timeout_s
    # the answer came after the move's robot time had passed
    assert h.driver.core.adapter.time_s() - sim0 >= res.elapsed_s - 1e-6
    obs = h.backend.observe()
    assert wait_for(lambda: h.backend.observe()["sim_time_s"] >= sim0 + res.elapsed_s, 2.0)
    obs = h.backend.observe()
    for key, target in pose.items():
        assert obs[f"{key}.pos"] == pytest.approx(target, abs=0.03), key

    foreign = RosDriverBackend(h.client, lease_token="f" * 32)
    try:
        refused = foreign.move_to_start_pose()
        assert not refused.reached and refused.detail == "not the lease holder: unknown lease token"
    finally:
        foreign.close()


# -- leases ---------------------------------------------------------------------------------------------------------
def test_lease_heartbeat_keeps_lease_and_revocation_is_published(harness):
    h = harness()
    assert h.driver.trigger_configure() == SUCCESS
    assert h.driver.trigger_activate() == SUCCESS
    worker = h.make_backend()
    assert worker.wait_until_ready(10.0)
    assert worker.acquire("worker", 1, 1.0).granted
    time.sleep(2.5)  # 2.5 lease lengths: only the heartbeat (every third of one) keeps it
    assert worker.lease_lost == ""
    assert worker.send_action({"left.joint_1": 0.0}).applied_keys == ("left.joint_1",)

    operator = RosDriverBackend(h.client)
    try:
        taken = operator.acquire("operator", 5, 10.0, heartbeat=False)
        assert taken.granted and "revoked 'worker'" in taken.message
        assert worker.send_action({"left.joint_1": 0.0}).unresolved_reasons == ("not_lease_holder",)
        assert wait_for(lambda: worker.lease_lost != "", 3.0)
        assert worker.lease_lost == "lease was revoked by 'operator' (priority 5)"

        states = []
        late = h.add(rclpy.create_node("late_lease_listener", namespace=h.ns, context=h.context))
        late.create_subscription(LeaseState, "lease_state", states.append, LATCHED_QOS)
        assert wait_for(lambda: states, 10.0)
        s = states[-1]
        assert (s.state, s.holder, s.priority, s.previous_holder) == ("held", "operator", 5, "worker")
        assert s.lease_id == taken.lease_id
        assert s.expires_unix_ms == pytest.approx(taken.expires_unix_ms, abs=50)
        assert h.driver.leases.state().holder == "operator"
    finally:
        operator.close()


# -- parameters ------------------------------------------------------------------------------------------------------
def _set_parameter(h: Harness, name: str, value: ParameterValue):
    client = h.client.create_client(SetParameters, f"{h.ns}/arm_driver/set_parameters")
    req = SetParameters.Request(parameters=[ParameterMsg(name=name, value=value)])
    return h.call(client, req).results[0]


def test_invalid_parameter_is_refused_with_reason(harness):
    h = harness()
    double = ParameterType.PARAMETER_DOUBLE
    result = _set_parameter(h, "control_rate_hz", ParameterValue(type=double, double_value=-5.0))
    assert not result.successful
    assert "control_rate_hz" in result.reason and "out of range" in result.reason

    result = _set_parameter(h, "config_file", ParameterValue(type=ParameterType.PARAMETER_STRING,
                                                              string_value="/nonexistent/arms.yaml"))
    assert not result.successful
    assert result.reason == "config_file: no such file: '/nonexistent/arms.yaml'"

    result = _set_parameter(h, "require_lease", ParameterValue(type=ParameterType.PARAMETER_STRING,
                                                                string_value="yes"))
    assert not result.successful and result.reason

    result = _set_parameter(h, "autostart", ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=True))
    assert not result.successful and "read-only" in result.reason.lower().replace("read only", "read-only")

    result = _set_parameter(h, "control_rate_hz", ParameterValue(type=double, double_value=100.0))
    assert result.successful
    assert h.driver.get_parameter("control_rate_hz").value == 100.0
    assert h.driver.get_parameter("config_file").value == ""


def test_require_lease_false_applies_without_token(harness):
    h = harness(require_lease=False)
    assert h.driver.trigger_configure() == SUCCESS
    assert h.driver.trigger_activate() == SUCCESS
    backend = h.make_backend()
    assert backend.wait_until_ready(10.0)
    assert backend.send_action({"left.joint_1": 0.1}).applied_keys == ("left.joint_1",)
    assert h.driver.trigger_deactivate() == SUCCESS  # a safety parameter changes only while inactive
    assert h.driver.set_parameters([Parameter("require_lease", value=True)])[0].successful
    assert h.driver.trigger_activate() == SUCCESS
    assert backend.send_action({"left.joint_1": 0.1}).unresolved_reasons == ("not_lease_holder",)


def test_bad_config_file_fails_configure_with_reason(harness, tmp_path):
    bad = tmp_path / "arms.yaml"
    bad.write_text("physics: {timestep_s: -1}\n")
    h = harness(config_file=str(bad))
    assert h.driver.trigger_configure() == TransitionCallbackReturn.FAILURE
    assert h.driver.core is None


# -- lifecycle ------------------------------------------------------------------------------------------------------
def test_lifecycle_transitions_configure_activate_deactivate_cleanup(harness):
    h = harness()
    change = h.client.create_client(ChangeState, f"{h.ns}/arm_driver/change_state")
    get = h.client.create_client(GetState, f"{h.ns}/arm_driver/get_state")

    def state() -> str:
        return h.call(get, GetState.Request()).current_state.label

    def transition(tid: int) -> bool:
        return h.call(change, ChangeState.Request(transition=Transition(id=tid))).success

    joint_states, statuses = [], []
    h.client.create_subscription(JointState, "joint_states", joint_states.append, STATE_QOS)
    h.client.create_subscription(DriverStatus, "driver_status", statuses.append, LATCHED_QOS)

    assert state() == "unconfigured"
    assert transition(Transition.TRANSITION_CONFIGURE) and state() == "inactive"
    assert wait_for(lambda: statuses and not statuses[-1].active, 10.0)
    time.sleep(0.3)
    assert joint_states == []  # configured is not running

    assert transition(Transition.TRANSITION_ACTIVATE) and state() == "active"
    assert wait_for(lambda: len(joint_states) >= 20, 10.0)
    assert wait_for(lambda: statuses[-1].active, 5.0)
    js = joint_states[-1]
    assert list(js.name) == list(statuses[-1].actuator_keys)
    assert len(js.position) == len(js.velocity) == len(js.effort) == 14
    stamps = [time_to_ns(m.header.stamp) for m in joint_states[-10:]]
    assert stamps == sorted(stamps) and stamps[-1] > 0  # robot time, advancing

    assert transition(Transition.TRANSITION_DEACTIVATE) and state() == "inactive"
    assert wait_for(lambda: not statuses[-1].active, 5.0)
    sim_time = h.driver.core.adapter.time_s()
    time.sleep(0.2)
    count = len(joint_states)
    time.sleep(0.3)
    assert len(joint_states) == count, "joint_states kept coming while inactive"
    assert h.driver.core.adapter.time_s() == sim_time, "physics kept running while inactive"

    assert transition(Transition.TRANSITION_CLEANUP) and state() == "unconfigured"
    assert h.driver.core is None
    # a fresh configure rebuilds everything (robot time starts over)
    assert transition(Transition.TRANSITION_CONFIGURE) and state() == "inactive"
    assert h.driver.core.adapter.time_s() == 0.0
    assert not transition(Transition.TRANSITION_CONFIGURE)  # not a transition of "inactive"
    assert transition(Transition.TRANSITION_INACTIVE_SHUTDOWN) and state() == "finalized"
    assert h.driver.core is None


def test_diagnostics_report_the_driver(active):
    from diagnostic_msgs.msg import DiagnosticArray

    got = []
    active.client.create_subscription(DiagnosticArray, "/diagnostics", got.append, 10)
    assert wait_for(lambda: got, 5.0)
    status = got[-1].status[0]
    assert status.name == "arm_driver: arms" and status.hardware_id == "mujoco"
    values = {kv.key: kv.value for kv in status.values}
    assert values["lease_holder"] == "test_worker"
    assert float(values["sim_time_s"]) > 0.0
    assert values["commands_stale"] == "0" and values["commands_out_of_order"] == "0"


# -- entry point -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_main_autostarts_and_exits_cleanly_on_signal(sig):
    package_root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_root), env.get("PYTHONPATH", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "strands_robots.nodes.arm_driver.node", "--autostart",
         "--ros-args", "-r", "__node:=arm_driver_signal_test", "-p", "control_rate_hz:=50"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        assert wait_for(lambda: any("active: mujoco" in ln for ln in lines), 30.0), "".join(lines)
        proc.send_signal(sig)
        rc = proc.wait(timeout=15.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5.0)
    output = "".join(lines)
    assert rc == 0, output
    assert "Traceback" not in output, output
    assert "joint_states 50 Hz" in output  # the integer override was taken as 50.0


def test_main_refuses_an_invalid_parameter_at_start_with_reason():
    package_root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_root), env.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "strands_robots.nodes.arm_driver.node", "--autostart",
         "--ros-args", "-r", "__node:=arm_driver_bad_param", "-p", "control_rate_hz:=-5.0"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stdout, proc.stdout
    assert "control_rate_hz" in proc.stdout and "out of range" in proc.stdout.lower(), proc.stdout


# -- command stream, the driver's side -------------------------------------------------------------------
class StreamProbe:
    """Publishes ``ActionCommand`` s on ``action_commands`` and collects the verdicts, as the rollout does."""

    def __init__(self, h: Harness) -> None:
        from strands_robots_msgs.msg import ActionCommand, ActionVerdict

        from strands_robots.ros.qos import COMMAND_QOS, VERDICT_QOS

        self.h = h
        self.cls = ActionCommand
        self.verdicts: dict = {}
        self._cond = threading.Condition()
        self.pub = h.client.create_publisher(ActionCommand, "action_commands", COMMAND_QOS)
        self.sub = h.client.create_subscription(ActionVerdict, "action_verdicts", self._on_verdict, VERDICT_QOS)
        assert wait_for(lambda: self.pub.get_subscription_count() > 0 and self.sub.get_publisher_count() > 0, 10.0)

    def _on_verdict(self, msg) -> None:
        with self._cond:
            self.verdicts[(msg.run_id, msg.step_index)] = msg
            self._cond.notify_all()

    def message(self, keys, values, token, run_id, step, apply_by_ns, sent_ns=0):
        """Return an ``ActionCommand`` as the rollout signs it (field by field: repeated keys stay repeated)."""
        from strands_robots.arm.command_auth import command_message, sign

        msg = self.cls(keys=list(keys), values=[float(v) for v in values], run_id=run_id, step_index=step)
        msg.sent.sec, msg.sent.nanosec = divmod(sent_ns, 10**9)
        msg.apply_by.sec, msg.apply_by.nanosec = divmod(apply_by_ns, 10**9)
        if len(msg.keys) == len(msg.values):
            msg.lease_proof = sign(token, command_message(run_id, step, apply_by_ns, msg.keys, msg.values))
        return msg

    def send(self, keys, values, token, run_id, step, apply_by_ns=None, timeout_s=10.0):
        now = self.h.client.get_clock().now().nanoseconds
        deadline = now + 5 * 10**9 if apply_by_ns is None else apply_by_ns
        self.pub.publish(self.message(keys, values, token, run_id, step, deadline, now))
        with self._cond:
            assert self._cond.wait_for(lambda: (run_id, step) in self.verdicts, timeout_s), (run_id, step)
            return self.verdicts[(run_id, step)]


def service_verdict(h: Harness, keys, values, token):
    from strands_robots_msgs.srv import SendAction

    client = h.client.create_client(SendAction, "send_action")
    try:
        return h.call(client, SendAction.Request(lease_token=token, keys=list(keys), values=list(values)))
    finally:
        h.client.destroy_client(client)


STREAM_CASES = {
    "full": (["left.joint_1", "right.joint_2"], [0.05, 0.45], True),
    "partial": (["left.joint_1", "left.joint_9", "right.joint_4", "right.gripper", "torso"],
                [0.05, 0.0, 2.5, math.nan, 1.0], True),
    "foreign token": (["left.joint_1", "left.joint_9"], [0.05, 0.0], False),
    "infinite": (["left.joint_2"], [math.inf], True),
    "duplicate keys": (["left.joint_1", "left.joint_1"], [0.05, 0.05], True),
    "length mismatch": (["left.joint_1"], [0.05, 0.06], True),
    "empty": ([], [], True),
}


def test_stream_gives_the_service_paths_verdict_for_every_per_key_case(active):
    h = active
    assert h.backend.move_to_start_pose().reached
    probe = StreamProbe(h)
    for i, (case, (keys, values, holder)) in enumerate(sorted(STREAM_CASES.items())):
        token = h.backend.lease_token if holder else "f" * 32
        by_service = service_verdict(h, keys, values, token)
        by_stream = probe.send(keys, values, token, f"run-{i}", 0)
        for field in ("applied_keys", "unresolved_keys", "unresolved_reasons"):
            assert list(getattr(by_stream, field)) == list(getattr(by_service, field)), (case, field)
        assert (by_stream.error, by_stream.stopped) == (by_service.error, by_service.stopped), case
        assert by_stream.sim_time_s > 0.0 or by_stream.error, case
    # a stopped arm: arm_stopped on both paths
    trip = probe.send(["right.joint_4"], [-1.5], h.backend.lease_token, "trip", 0)
    assert trip.applied_keys == ["right.joint_4"]
    assert wait_for(lambda: h.driver.core.stopped, 2.0)
    by_service = service_verdict(h, ["left.joint_1"], [0.0], h.backend.lease_token)
    by_stream = probe.send(["left.joint_1"], [0.0], h.backend.lease_token, "trip", 1)
    assert list(by_stream.unresolved_reasons) == list(by_service.unresolved_reasons) == ["arm_stopped"]
    assert by_stream.stopped and by_service.stopped


def test_a_lookahead_over_its_bound_is_refused_where_it_enters_and_a_bounded_one_is_ignored_by_simulated_arms(active):
    from strands_robots.arm.command_auth import command_message, sign
    from strands_robots.arm.lookahead import LOOKAHEAD_MAX_POINTS

    h = active
    assert h.backend.move_to_start_pose().reached
    probe = StreamProbe(h)
    token = h.backend.lease_token
    keys = ["left.joint_1"]
    before = commanded_targets(h, keys)

    def send(step, ahead):
        now = h.client.get_clock().now().nanoseconds
        msg = probe.message(keys, [0.07], token, "ahead", step, now + 5 * 10**9, now)
        msg.lookahead = [float(v) for v in ahead]
        msg.lookahead_period.nanosec = 20_000_000
        msg.lease_proof = sign(token, command_message("ahead", step, now + 5 * 10**9, msg.keys, msg.values,
                                                      msg.lookahead, 20_000_000))
        probe.pub.publish(msg)
        with probe._cond:
            assert probe._cond.wait_for(lambda: ("ahead", step) in probe.verdicts, 10.0)
            return probe.verdicts[("ahead", step)]

    refused = send(0, [0.07] * (LOOKAHEAD_MAX_POINTS + 1))
    assert refused.error.startswith("unreadable command: lookahead has 11 points; at most 10"), refused.error
    assert list(refused.applied_keys) == [] and commanded_targets(h, keys) == before  # nothing moved
    # a bounded lookahead on the simulated arms (no trajectories): the step applies, the lookahead is ignored
    applied = send(1, [0.08, 0.09])
    assert list(applied.applied_keys) == keys and applied.error == ""
    assert commanded_targets(h, keys) == pytest.approx({"left.joint_1": 0.07})


def test_stale_and_out_of_order_commands_over_dds_apply_nothing(active):
    h = active
    assert h.backend.move_to_start_pose().reached
    probe = StreamProbe(h)
    token = h.backend.lease_token
    keys = ["left.joint_1", "right.joint_1"]
    assert probe.send(keys, [0.05, -0.05], token, "r", 5).applied_keys == keys
    before = commanded_targets(h, keys)
    past = h.client.get_clock().now().nanoseconds - 10**9
    stale = probe.send(keys, [0.1, -0.1], token, "r", 6, apply_by_ns=past)
    assert list(stale.applied_keys) == [] and list(stale.unresolved_reasons) == ["stale", "stale"]
    assert list(stale.unresolved_keys) == keys and stale.error == ""
    older = probe.send(keys, [0.1, -0.1], token, "r", 4)
    assert list(older.unresolved_reasons) == ["out_of_order", "out_of_order"]
    assert commanded_targets(h, keys) == before, "a refused command moved a target"
    assert probe.send(keys, [0.06, -0.06], token, "r", 7).applied_keys == keys
    assert time_to_ns(stale.received) >= past


def test_inactive_driver_answers_every_streamed_command(active):
    h = active
    probe = StreamProbe(h)
    assert h.driver.trigger_deactivate() == SUCCESS
    v = probe.send(["left.joint_1"], [0.1], h.backend.lease_token, "r", 0)
    assert v.error == "driver not active" and list(v.applied_keys) == [] and list(v.unresolved_keys) == []


def test_deactivate_holds_the_arms_and_stays_inactive(active):
    h = active
    assert h.backend.move_to_start_pose().reached
    probe = StreamProbe(h)
    assert probe.send(["left.joint_2"], [0.5], h.backend.lease_token, "r", 0).applied_keys == ["left.joint_2"]
    assert h.driver.trigger_deactivate() == SUCCESS
    held = h.driver.core.read().positions
    targets = h.driver.core.adapter.data.ctrl.copy()
    assert targets[1] == pytest.approx(float(held[1]), abs=1e-9), "deactivate did not hold left.joint_2"
    assert probe.send(["left.joint_2"], [0.6], h.backend.lease_token, "r", 1).error == "driver not active"
    assert (h.driver.core.adapter.data.ctrl == targets).all()
    assert not h.driver.is_active and h.driver.runner is None


# -- safety parameters, reset_safety, lease lengths ----------------------------------------------
def test_require_lease_is_read_only_while_active(active, capfd):
    h = active
    result = _set_parameter(h, "require_lease", ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=False))
    assert not result.successful
    assert result.reason == ("require_lease is read-only while the driver is active (safety): "
                             "deactivate the driver first")
    assert h.driver.get_parameter("require_lease").value is True
    foreign = service_verdict(h, ["left.joint_1"], [0.0], "f" * 32)
    assert list(foreign.unresolved_reasons) == ["not_lease_holder"]
    assert wait_for(lambda: "parameter require_lease: True -> False refused" in capfd.readouterr().err, 5.0)


def test_reset_safety_needs_the_lease_holder(active):
    h = active
    trip_torque(h)
    detail = h.driver.core.safety_stop_detail()
    for token in ("", "f" * 32):
        res = reset_safety(h, token, operator="mallory")
        assert not res.ok and res.message.startswith("refused: not the lease holder: ")
    assert h.driver.core.stopped and h.driver.core.safety_stop_detail() == detail
    # an operator claims the lease at a higher priority, then may clear it
    operator = RosDriverBackend(h.client)
    try:
        assert operator.acquire("operator", 9, 10.0, heartbeat=False).granted
        deadline = time.monotonic() + 5.0
        res = reset_safety(h, operator.lease_token, operator="operator")
        while not res.ok and time.monotonic() < deadline:
            time.sleep(0.1)
            res = reset_safety(h, operator.lease_token, operator="operator")
        assert res.ok, res.message
        assert not h.driver.core.stopped
    finally:
        operator.close()


def test_a_lease_longer_than_the_maximum_is_refused_over_ros(active):
    from strands_robots_msgs.srv import AcquireLease

    client = active.client.create_client(AcquireLease, "acquire_lease")
    res = active.call(client, AcquireLease.Request(holder="greedy", priority=99, duration_s=1e12))
    assert not res.granted and res.token == ""
    assert res.message == "duration_s 1e+12 exceeds the longest lease, 60 s (keep control by renewing)"
    assert active.driver.leases.state().holder == "test_worker"


# -- parameters that apply at configure, and rates applied at once --------------------------------
def test_configure_time_parameters_are_refused_once_configured(harness, tmp_path):
    h = harness()
    string = ParameterType.PARAMETER_STRING
    other = tmp_path / "arms.yaml"
    other.write_text(Path(__file__).resolve().parents[1].joinpath("config", "arms.yaml").read_text())
    assert _set_parameter(h, "config_file", ParameterValue(type=string, string_value=str(other))).successful
    assert _set_parameter(h, "config_file", ParameterValue(type=string, string_value="")).successful
    assert h.driver.trigger_configure() == SUCCESS
    result = _set_parameter(h, "config_file", ParameterValue(type=string, string_value=str(other)))
    assert not result.successful and result.reason == "config_file applies at configure: clean the driver up first"
    result = _set_parameter(h, "publish_clock", ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=True))
    assert not result.successful and "applies at configure" in result.reason
    result = _set_parameter(h, "hardware", ParameterValue(type=string, string_value="other"))
    assert not result.successful and "read-only" in result.reason.lower().replace("read only", "read-only")


def robot_times(messages):
    return [joint_state_robot_time_s(m) for m in messages]


def test_control_rate_applies_at_once(active):
    h = active
    got = []
    h.client.create_subscription(JointState, "joint_states", got.append, STATE_QOS)
    assert wait_for(lambda: len(got) > 5, 10.0)
    assert h.driver.set_parameters([Parameter("control_rate_hz", value=20)])[0].successful  # an integer too
    mark = len(got)
    assert wait_for(lambda: len(got) > mark + 25, 10.0)
    # the publication deadlines, as the stamps (node clock at publication) show them: 50 ms apart now
    stamps = [time_to_ns(m.header.stamp) for m in got[mark + 2:]]
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
    assert gaps[len(gaps) // 2] / 1e9 == pytest.approx(1.0 / 20.0, rel=0.2)


# -- joint_states stamped with the node clock, /clock ----------------------------------------------
def test_joint_states_are_stamped_with_the_node_clock_and_carry_robot_time(active):
    h = active
    got = []
    h.client.create_subscription(JointState, "joint_states", got.append, STATE_QOS)
    before = h.driver.get_clock().now().nanoseconds
    assert wait_for(lambda: len(got) >= 10, 10.0)
    after = h.driver.get_clock().now().nanoseconds
    stamps = [time_to_ns(m.header.stamp) for m in got[:10]]
    assert all(before - 10**9 <= s <= after for s in stamps), "not the node clock"
    times = robot_times(got[:10])
    assert all(t is not None for t in times) and times == sorted(times)
    assert times[-1] <= h.driver.core.adapter.time_s() < before / 1e9  # robot time, not seconds since 1970
    obs = driver_joint_state_to_observation(got[9])
    assert obs["sim_time_s"] == times[-1]


def test_publish_clock_offers_robot_time(harness):
    from rosgraph_msgs.msg import Clock

    h = harness(publish_clock=True)
    got = []
    h.client.create_subscription(Clock, "/clock", got.append, STATE_QOS)
    assert h.driver.trigger_configure() == SUCCESS and h.driver.trigger_activate() == SUCCESS
    assert wait_for(lambda: len(got) >= 5, 10.0)
    clocks = [time_to_ns(m.clock) / 1e9 for m in got]
    assert clocks == sorted(clocks) and 0.0 < clocks[-1] <= h.driver.core.adapter.time_s()


# -- a second hardware adapter through the parameter ------------------------------------------------
def test_the_node_runs_a_second_adapter_named_by_the_hardware_parameter(harness):
    from test_driver_hardware import KINEMATIC, KinematicArms

    h = harness(hardware=KINEMATIC)
    assert h.driver.trigger_configure() == SUCCESS and h.driver.trigger_activate() == SUCCESS
    assert isinstance(h.driver.core.adapter, KinematicArms)
    backend = h.make_backend()
    assert backend.wait_until_ready(10.0)
    assert backend.acquire("w", 1, 10.0).granted
    status = []
    h.client.create_subscription(DriverStatus, "driver_status", status.append, LATCHED_QOS)
    assert wait_for(lambda: status and status[-1].active, 10.0)
    assert status[-1].hardware == KINEMATIC
    assert backend.send_action({"left.joint_1": 0.3}).applied_keys == ("left.joint_1",)
    assert wait_for(lambda: backend.observe()["left.joint_1.pos"] == pytest.approx(0.3, abs=1e-6), 10.0)


# -- start pose: one implementation, a cancellable action on the driver itself ----
def start_pose_goal(h: Harness, token: str, feedback: list, timeout_s: float = 0.0):
    from strands_robots.ros.action_client import ActionClient
    from strands_robots_msgs.action import MoveToStartPose

    client = ActionClient(h.client, MoveToStartPose, "move_to_start_pose")
    assert client.wait_for_server(timeout_sec=10.0)
    sent = threading.Event()
    future = client.send_goal_async(MoveToStartPose.Goal(lease_token=token, timeout_s=timeout_s),
                                    feedback_callback=lambda fb: feedback.append(fb.feedback))
    future.add_done_callback(lambda _f: sent.set())
    assert sent.wait(10.0)
    return client, future.result()


def goal_result(handle, timeout_s: float = 30.0):
    done = threading.Event()
    future = handle.get_result_async()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout_s), "no result"
    return future.result()


def test_start_pose_action_reaches_with_per_joint_feedback(active):
    from action_msgs.msg import GoalStatus

    h = active
    feedback = []
    client, handle = start_pose_goal(h, h.backend.lease_token, feedback)
    assert handle.accepted
    # the driver's executor is not blocked by the move: a lease claim is answered while it runs
    assert wait_for(lambda: feedback, 10.0)
    from strands_robots_msgs.srv import AcquireLease

    lease = h.client.create_client(AcquireLease, "acquire_lease")
    refused = h.call(lease, AcquireLease.Request(holder="late", priority=0, duration_s=1.0))
    assert not refused.granted and "held by 'test_worker'" in refused.message
    res = goal_result(handle)
    assert res.status == GoalStatus.STATUS_SUCCEEDED
    assert res.result.reached and res.result.detail == ""
    assert 0.0 <= res.result.max_error <= h.driver.core.config.start_pose.position_tolerance_rad
    assert feedback, "no feedback"
    assert {fb.phase for fb in feedback} <= {"ramp", "settle"} and feedback[0].phase == "ramp"
    assert list(feedback[0].keys) == list(h.driver.core.config.start_pose.pose)
    assert len(feedback[-1].errors) == len(feedback[-1].keys)
    assert max(feedback[-1].errors) == pytest.approx(feedback[-1].max_error)
    client.destroy()


def test_cancelled_start_pose_goal_ends_and_holds_the_arms(active):
    from action_msgs.msg import GoalStatus

    h = active
    feedback = []
    client, handle = start_pose_goal(h, h.backend.lease_token, feedback)
    assert wait_for(lambda: len(feedback) >= 2, 10.0)
    cancelled = threading.Event()
    handle.cancel_goal_async().add_done_callback(lambda _f: cancelled.set())
    assert cancelled.wait(10.0)
    res = goal_result(handle)
    assert res.status == GoalStatus.STATUS_CANCELED
    assert not res.result.reached and res.result.detail == "cancelled"
    core = h.driver.core
    held = core.read().positions
    ctrl = core.adapter.data.ctrl
    import mujoco

    from strands_robots.arm.model import mjcf_name

    for i, key in enumerate(core.action_keys()):  # targets are where the arms were: no ramp continues
        aid = mujoco.mj_name2id(core.adapter.model, mujoco.mjtObj.mjOBJ_ACTUATOR, mjcf_name(key))
        assert float(ctrl[aid]) == pytest.approx(float(held[i]), abs=0.05), key
    client.destroy()


def test_start_pose_goal_with_a_foreign_token_is_refused_with_reason_and_nothing_moves(active):
    from action_msgs.msg import GoalStatus

    h = active
    before = h.driver.core.adapter.data.ctrl.copy()
    client, handle = start_pose_goal(h, "f" * 32, [])
    res = goal_result(handle)
    assert res.status == GoalStatus.STATUS_ABORTED
    assert not res.result.reached and res.result.detail == "not the lease holder: unknown lease token"
    assert res.result.max_error == -1.0
    assert (h.driver.core.adapter.data.ctrl == before).all()
    client.destroy()


def test_the_driver_runs_no_side_node_and_every_node_answers_parameter_listing(active):
    from rcl_interfaces.srv import ListParameters

    names = active.client.get_node_names_and_namespaces()
    assert ("arm_driver", active.ns) in names
    assert not [n for n, _ in names if n.startswith("arm_driver_")], names
    # what `ros2 param list` does: ask every node for its parameters; none may stall
    lister = active.client.create_client(ListParameters, f"{active.ns}/arm_driver/list_parameters")
    listed = active.call(lister, ListParameters.Request(), timeout_s=5.0).result.names
    assert {"hardware", "require_lease", "control_rate_hz", "publish_clock"} <= set(listed)


# -- a bad lifecycle request or a raising callback never kills the driver --------------------------
def test_invalid_transition_is_refused_and_the_driver_keeps_serving(active):
    h = active
    change = h.client.create_client(ChangeState, f"{h.ns}/arm_driver/change_state")
    for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE, 99):
        res = h.call(change, ChangeState.Request(transition=Transition(id=transition)))
        assert not res.success, transition
    assert h.driver.is_active
    assert h.backend.send_action({"left.joint_1": 0.0}).applied_keys == ("left.joint_1",)
    # Jazzy's rclpy raises RCLError inside this callback instead (ros2/rclpy#1209): the driver's guard answers
    # such a request as refused instead of letting it reach the executor
    (service,) = [s for s in h.driver.services if s.srv_name.endswith("/change_state")]
    assert service.callback.__name__ == "guarded"
    res = service.callback(_RaisingRequest(), ChangeState.Response())
    assert res.success is False and h.driver.is_active


class _RaisingRequest:
    """A change_state request whose transition cannot be read: the inner callback raises, as Jazzy's does."""

    @property
    def transition(self):
        raise RuntimeError("transition is not registered")


def test_a_raising_callback_does_not_kill_the_drivers_executor():
    from rclpy.executors import SingleThreadedExecutor

    from strands_robots.nodes.arm_driver.spin import SpinThread

    context = Context()
    rclpy.init(context=context)
    driver = ArmDriverNode(context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(driver)
    spin = SpinThread(executor, driver.get_logger()).start()
    try:
        fired = []

        def boom():
            fired.append(1)
            timer.cancel()
            raise RuntimeError("a callback bug")

        timer = driver.create_timer(0.01, boom)
        assert wait_for(lambda: spin.callback_errors == 1, 10.0)
        assert spin.is_alive() and not spin.died
        assert driver.trigger_configure() == SUCCESS
        client = rclpy.create_node("raising_probe", context=context)
        probe = SingleThreadedExecutor(context=context)
        probe.add_node(client)
        from strands_robots.ros.process import spin_in_background

        thread = spin_in_background(probe, "probe")
        get = client.create_client(GetState, "/arm_driver/get_state")
        assert get.wait_for_service(timeout_sec=10.0)
        done = threading.Event()
        future = get.call_async(GetState.Request())
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(10.0) and future.result().current_state.label == "inactive"
        probe.shutdown()
        thread.join(5.0)
        client.destroy_node()
        assert fired == [1]
    finally:
        spin.stop(5.0)
        driver.destroy_node()
        context.try_shutdown()


def test_an_executor_thread_that_dies_is_recorded_for_the_exit_code():
    from rclpy.executors import SingleThreadedExecutor

    from strands_robots.nodes.arm_driver.spin import SpinThread

    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("dying_executor", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        def fatal():
            timer.cancel()
            raise SystemExit(3)  # not an Exception: it ends the thread

        timer = node.create_timer(0.01, fatal)
        spin = SpinThread(executor, node.get_logger()).start()
        assert wait_for(lambda: not spin.is_alive(), 10.0)
        assert spin.died and isinstance(spin.error, SystemExit)
    finally:
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()


def test_joint_states_follow_simulation_time_with_use_sim_time(harness):
    h = harness(publish_clock=True, use_sim_time=True)
    got = []
    h.client.create_subscription(JointState, "joint_states", got.append, STATE_QOS)
    assert h.driver.trigger_configure() == SUCCESS and h.driver.trigger_activate() == SUCCESS
    # the node clock follows the /clock the driver offers: stamps become robot time (a tick or so behind)
    assert wait_for(lambda: len(got) > 20 and time_to_ns(got[-1].header.stamp) > 0, 10.0)
    msg = got[-1]
    stamp_s = time_to_ns(msg.header.stamp) / 1e9
    robot = joint_state_robot_time_s(msg)
    assert 0.0 < stamp_s <= robot + 1e-9
    assert robot - stamp_s < 0.5


def test_the_start_pose_service_still_answers_on_the_same_core_move(active):
    from strands_robots_msgs.srv import MoveToStartPose

    h = active
    client = h.client.create_client(MoveToStartPose, "move_to_start_pose")
    res = h.call(client, MoveToStartPose.Request(lease_token=h.backend.lease_token), timeout_s=30.0)
    assert res.reached and res.detail == "" and res.elapsed_s > 0.0
    refused = h.call(client, MoveToStartPose.Request(lease_token="f" * 32, tolerance=-1.0))
    assert not refused.reached and refused.max_error == -1.0
    assert "position_tolerance_rad must be a finite number > 0" in refused.detail  # validated before the lease


def test_a_burst_of_commands_gets_every_verdict_in_order(active):
    h = active
    probe = StreamProbe(h)
    token = h.backend.lease_token
    keys = list(h.driver.core.action_keys())
    here = h.driver.core.read().positions.tolist()
    deadline = h.client.get_clock().now().nanoseconds + 60 * 10**9
    for step in range(500):  # as fast as this process can publish: the driver drains its queue in batches
        probe.pub.publish(probe.message(keys, here, token, "burst", step, deadline))
    assert wait_for(lambda: sum(1 for (run, _) in list(probe.verdicts) if run == "burst") == 500, 60.0), \
        sum(1 for (run, _) in list(probe.verdicts) if run == "burst")
    verdicts = [probe.verdicts[("burst", step)] for step in range(500)]
    assert all(list(v.applied_keys) == keys for v in verdicts)
    received = [time_to_ns(v.received) for v in verdicts]
    assert received == sorted(received)  # applied in the order sent
