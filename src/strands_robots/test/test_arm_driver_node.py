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

from strands_robots import convert  # noqa: E402
from strands_robots.nodes._qos import LATCHED_QOS, STATE_QOS  # noqa: E402
from strands_robots.nodes.arm_driver_node import ArmDriverNode  # noqa: E402
from strands_robots.nodes.driver_client import RosDriverBackend  # noqa: E402
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
        overrides = [Parameter(k, value=v) for k, v in params.items()]
        self.driver = self.add(ArmDriverNode(context=self.context, parameter_overrides=overrides))
        self.client = self.add(rclpy.create_node("driver_test_client", context=self.context))

    def add(self, node):
        self.nodes.append(node)
        return self.spinners.add(node)

    def make_backend(self, **kwargs) -> RosDriverBackend:
        kwargs.setdefault("action_timeout_s", 5.0)
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
            if self.backend is not None:
                self.backend.close()
        finally:
            try:
                self.spinners.shutdown(5.0)  # no executor thread touches a node while it is destroyed
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
    """An active driver, a ready backend holding the lease (priority 1, 10 s, heartbeat on)."""
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
    """The position targets the simulation holds for ``keys`` (MuJoCo ctrl by actuator name)."""
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
    released = RosDriverBackend(h.client, action_timeout_s=5.0)
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
    backend = h.make_backend(action_timeout_s=2.0)
    # unconfigured: the service does not exist yet
    verdict = backend.send_action({"left.joint_1": 0.1})
    assert verdict.error == "arm driver not available (no send_action service)"
    assert h.driver.trigger_configure() == SUCCESS
    assert backend._send.wait_for_service(timeout_sec=10.0)
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
    late = h.add(rclpy.create_node("late_safety_listener", context=h.context))
    got = []
    late.create_subscription(SafetyStop, "safety_stop", got.append, LATCHED_QOS)
    assert wait_for(lambda: got, 10.0), "late subscriber got no SafetyStop"
    msg = got[-1]
    assert msg.stopped
    assert [convert.msg_to_safety_check(c) for c in msg.checks] == list(tripped)
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
    res = h.backend.reset_safety("pytest")
    while not res.ok and time.monotonic() < deadline:
        assert res.message.startswith("still outside the safety envelope: ")
        time.sleep(0.1)
        res = h.backend.reset_safety("pytest")
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
    t0 = time.monotonic()
    res = h.backend.move_to_start_pose()
    wall = time.monotonic() - t0
    assert res.reached, res.detail
    assert res.detail == ""
    assert 0.0 <= res.max_error <= h.driver.core.config.start_pose.position_tolerance_rad
    assert 0.0 < res.elapsed_s <= h.driver.core.config.start_pose.timeout_s
    # robot time, in real time: the answer came after the move's robot time had passed on the wall clock
    assert h.driver.core.adapter.time_s() - sim0 >= res.elapsed_s - 1e-6
    assert wall >= 0.8 * res.elapsed_s
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
    assert worker.acquire("worker", 1, 0.6).granted
    time.sleep(1.5)  # 2.5 lease lengths: only the heartbeat keeps it
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
        late = h.add(rclpy.create_node("late_lease_listener", context=h.context))
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
    client = h.client.create_client(SetParameters, "/arm_driver/set_parameters")
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
    h.driver.set_parameters([Parameter("require_lease", value=True)])
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
    change = h.client.create_client(ChangeState, "/arm_driver/change_state")
    get = h.client.create_client(GetState, "/arm_driver/get_state")

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
    stamps = [convert.time_to_ns(m.header.stamp) for m in joint_states[-10:]]
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


# -- entry point -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_main_autostarts_and_exits_cleanly_on_signal(sig):
    package_root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_root), env.get("PYTHONPATH", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "strands_robots.nodes.arm_driver_node", "--autostart",
         "--ros-args", "-r", "__node:=arm_driver_signal_test", "-p", "control_rate_hz:=50"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        assert wait_for(lambda: any("active: physics" in ln for ln in lines), 30.0), "".join(lines)
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
        [sys.executable, "-m", "strands_robots.nodes.arm_driver_node", "--autostart",
         "--ros-args", "-r", "__node:=arm_driver_bad_param", "-p", "control_rate_hz:=-5.0"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stdout, proc.stdout
    assert "control_rate_hz" in proc.stdout and "out of range" in proc.stdout.lower(), proc.stdout


# -- measurement (printed, not asserted) ------------------------------------------------------------------------------
def test_send_action_round_trip_latency(active, capsys):
    h = active
    action = start_pose_action(h)
    for _ in range(20):  # warm-up
        h.backend.send_action(action)
    samples = []
    for _ in range(500):
        t0 = time.perf_counter()
        verdict = h.backend.send_action(action)
        samples.append(time.perf_counter() - t0)
        assert not verdict.is_coarse_error
    samples.sort()
    p50 = samples[len(samples) // 2] * 1e3
    p99 = samples[int(len(samples) * 0.99) - 1] * 1e3
    with capsys.disabled():
        print(f"\nSendAction round trip over DDS, 14 keys, 500 calls: p50 {p50:.3f} ms, p99 {p99:.3f} ms, "
              f"max {samples[-1] * 1e3:.3f} ms")

