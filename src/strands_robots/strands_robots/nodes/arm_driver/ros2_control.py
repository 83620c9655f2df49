"""The ``ros2_control`` hardware: the arm driver drives a robot through its controller_manager.

Selected by the driver's ``hardware`` parameter (``ros2_control``, the entry point of the group
``strands_robots.hardware`` in ``setup.py``). The rules are in :mod:`strands_robots.arm.ros2_control`; this is the
ROS side: a node of its own in the driver's process, spun on its own thread, that

- reads the arms from the joint_state_broadcaster's ``joint_states`` (positions, velocities, efforts where
  given) into the station's keys;
- commands through the controller ``arms.yaml`` names: a ``Float64MultiArray`` on ``<controller>/commands``
  (forward command controller) or a ``JointTrajectory`` on ``<controller>/joint_trajectory``
  (joint_trajectory_controller), the joints in the order of the controller's ``joints`` parameter (asked from
  the controller's node, again whenever the controller comes back);
- watches the controller_manager: ``list_controllers`` and ``list_hardware_components`` every
  ``state_poll_s``, and its ``~/activity`` topic (on every change) where the distro has it;
- on a latched stop (envelope trip, lost lease, a lease released on a cancel) sends a hold at the measured
  position, then deactivates the command controller with ``switch_controller``; an operator's clear
  re-activates it and restarts from the measured state.

controller_manager_msgs is not a PyPI wheel: it comes with ros2_control (a distro's
``ros-<distro>-controller-manager-msgs``, or a ros2_control workspace sourced). Without it the hardware refuses
to start and says so.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from strands_robots.arm.adapter import JointReadings
from strands_robots.arm.config import ConfigError, DriverConfig
from strands_robots.arm.hardware import Hardware, HardwareError
from strands_robots.arm.model import actuator_key
from strands_robots.arm.ros2_control import (
    CHECKING_MANAGER,
    CONTROLLER_MANAGER_ENV,
    INTROSPECTION_NAMES,
    INTROSPECTION_VALUES,
    MODE_FORWARD,
    MODE_TRAJECTORY,
    CommandTargets,
    CommandSnapshots,
    ControllerHealth,
    HoldWatch,
    JointMap,
    JointMapError,
    NamedState,
    Ros2ControlConfigError,
    Ros2ControlSettings,
    chunk_trajectory,
    command_interface_names,
    duration_parts,
    STATE_ACTIVE,
    STOP_BOUND_REFUSE,
    STOP_BOUND_WARN,
    forward_command,
    hold_confirm_bound_s,
    hold_lead_s,
    hold_point_s,
    stop_bound,
    within_horizon,
)

NAME = "ros2_control"
# How long configure waits for the controller_manager: the first joint_states, the controllers' states and the
# command controller's joints.
STARTUP_TIMEOUT_S = 15.0
# How long configure waits, after the rest, for the controller_manager's introspection names.
NAMES_WAIT_S = 2.0
# The lifecycle state ids of lifecycle_msgs/State, as ros2_control's services report components.
_LIFECYCLE_LABELS = {0: "unknown", 1: "unconfigured", 2: "inactive", 3: "active", 4: "finalized"}


def _cm_interfaces() -> Any:
    try:
        import controller_manager_msgs.msg as msg
        import controller_manager_msgs.srv as srv
    except ImportError as exc:
        raise HardwareError(
            "hardware 'ros2_control' needs controller_manager_msgs, which comes with ros2_control, not with the "
            "PyPI wheels: install ros-<distro>-controller-manager-msgs (or ros2_control) from your distro, or "
            f"source a ros2_control workspace ({exc})") from exc
    return msg, srv


def _introspection_interfaces() -> Any:
    """pal_statistics_msgs (the controller_manager's introspection data), or None where it is not installed."""
    try:
        import pal_statistics_msgs.msg as msg
    except ImportError:
        return None
    return msg


@dataclass
class _PendingStop:
    """A latched stop whose switch is not asked yet: asked once the hold shows applied, or at ``bound_s``."""

    latched: float  # monotonic
    bound_s: float
    watch: Optional[HoldWatch]  # None: the hold cannot be seen, the switch goes at ``bound_s``
    fired: bool = False


def hardware(config: DriverConfig) -> Hardware:
    """Build the ``ros2_control`` hardware for ``config`` (its ``ros2_control`` section; module docstring).

    ``STRANDS_ROBOTS_CONTROLLER_MANAGER`` (set by ``strands-robots up --controller-manager NS`` and the launch
    file's ``controller_manager`` argument) overrides the section's ``controller_manager``.
    """
    keys = tuple(actuator_key(a.name, j.name) for a in config.arms for j in a.joints)
    try:
        settings = Ros2ControlSettings.from_mapping(config.ros2_control, keys)
        settings = settings.with_controller_manager(os.environ.get(CONTROLLER_MANAGER_ENV, ""))
    except Ros2ControlConfigError as exc:
        raise ConfigError(str(exc)) from None
    arms = Ros2ControlArms(config, settings)
    try:
        arms.start(STARTUP_TIMEOUT_S)
    except BaseException:
        arms.close()
        raise
    return Hardware(NAME, arms)


class Ros2ControlArms:
    """Two arms behind a controller_manager (implements ``HardwareAdapter`` and its optional members)."""

    stops_on_lease_loss = True
    stops_on_cancel = True

    def __init__(self, config: DriverConfig, settings: Ros2ControlSettings) -> None:
        self._cm_msg, self._cm_srv = _cm_interfaces()
        from rcl_interfaces.srv import GetParameters

        self._settings = settings
        self._arms = tuple(a.name for a in config.arms)
        self._joints = {a.name: tuple(j.name for j in a.joints) for a in config.arms}
        self._keys = tuple(actuator_key(a, j) for a in self._arms for j in self._joints[a])
        self._arm_slots = {a: [i for i, k in enumerate(self._keys) if k.startswith(a + ".")] for a in self._arms}
        self._map = JointMap(self._keys, settings.joints)
        self._timestep = float(config.timestep_s)
        self._health = ControllerHealth(settings, time.monotonic)
        self._lock = threading.Lock()  # readings, targets, the controller's joint order
        n = len(self._keys)
        self._pos, self._vel, self._eff = np.zeros(n), np.zeros(n), np.zeros(n)
        self._pos_stamp_ns = 0  # the controller_manager's stamp of the joint_states self._pos is from
        self._hold_stamp_ns = 0  # ... and of the one the last hold was measured from
        self._have_state = threading.Event()
        self._t0 = time.monotonic()
        self._targets = CommandTargets()
        self._order: Optional[np.ndarray] = None
        self._controller_joints: tuple[str, ...] = ()
        self._last_fault = "starting"
        self._switching = False
        self._pending: dict[str, tuple[Any, float]] = {}  # in-flight state questions
        self._snapshots = CommandSnapshots(())  # the controller's command interfaces, once its joints are known
        self._names_msg: Optional[tuple[tuple[str, ...], int]] = None  # the last introspection names
        self._stop_lock = threading.Lock()
        self._pending_stop: Optional[_PendingStop] = None
        self._closed = False
        self.update_rate_hz = float("nan")  # the controller_manager's, as it reported it at the start

        # Not the process's remaps: the driver's ``__node:=arm_driver`` would make this a second node of its name.
        self._node = rclpy.create_node(f"strands_ros2_control_{os.getpid()}", use_global_arguments=False)
        node = self._node
        self._log = node.get_logger()
        state_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT,
                               durability=DurabilityPolicy.VOLATILE)
        from sensor_msgs.msg import JointState

        self._sub = node.create_subscription(JointState, settings.joint_states_topic, self._on_joint_states,
                                             state_qos)
        if settings.mode == MODE_FORWARD:
            from std_msgs.msg import Float64MultiArray as CommandType
        else:
            from trajectory_msgs.msg import JointTrajectory as CommandType
        self._command_type = CommandType
        self._pub = node.create_publisher(CommandType, settings.command_topic, 10)
        cm = settings.controller_manager
        self._list = node.create_client(self._cm_srv.ListControllers, f"{cm}/list_controllers")
        self._components = node.create_client(self._cm_srv.ListHardwareComponents, f"{cm}/list_hardware_components")
        self._switch = node.create_client(self._cm_srv.SwitchController, f"{cm}/switch_controller")
        self._params = node.create_client(GetParameters, f"{settings.controller_node}/get_parameters")
        self._cm_params = node.create_client(GetParameters, f"{cm}/get_parameters")
        activity = getattr(self._cm_msg, "ControllerManagerActivity", None)
        if activity is not None:  # not in every distro: polling alone then
            latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
            node.create_subscription(activity, f"{cm}/activity", self._on_activity, latched)
        self._introspection = _introspection_interfaces()
        if self._introspection is not None:  # ros2_control 4.x on: the hold is seen applied before the switch
            names_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                   durability=DurabilityPolicy.TRANSIENT_LOCAL)
            values_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT,
                                    durability=DurabilityPolicy.TRANSIENT_LOCAL)
            node.create_subscription(self._introspection.StatisticsNames, f"{cm}/{INTROSPECTION_NAMES}",
                                     self._on_introspection_names, names_qos)
            # Raw: a snapshot comes after every update of the controller_manager and is read only while a stop waits.
            node.create_subscription(self._introspection.StatisticsValues, f"{cm}/{INTROSPECTION_VALUES}",
                                     self._on_introspection_values, values_qos, raw=True)
        self._timer = node.create_timer(settings.state_poll_s, self._poll)
        self._executor = SingleThreadedExecutor()
        self._executor.add_node(node)
        self._spin = threading.Thread(target=self._run_executor, name="ros2_control_link", daemon=True)
        self._spin.start()

    # -- start and stop -----------------------------------------------------------------------------------
    def start(self, timeout_s: float) -> None:
        """Wait for the controller_manager: joint_states, the controllers' states, the controller's joints.

        :raises HardwareError: any of them missing by ``timeout_s``, or the controller's joints do not fit.
        """
        s = self._settings
        deadline = time.monotonic() + timeout_s
        if not self._have_state.wait(timeout_s):
            raise HardwareError(f"ros2_control: no joint_states on {s.joint_states_topic} within {timeout_s:g} s "
                                f"(is the controller_manager {s.controller_manager} running with a "
                                "joint_state_broadcaster?)")
        while self._health.state_of(s.controller) is None:
            if time.monotonic() > deadline:
                raise HardwareError(f"ros2_control: controller {s.controller} is not loaded in "
                                    f"{s.controller_manager} (after {timeout_s:g} s)")
            time.sleep(0.05)
        self._load_order(max(0.5, deadline - time.monotonic()))
        self._check_update_rate(max(0.5, deadline - time.monotonic()))
        self._health.refuse_manager("")  # this controller_manager has just been checked
        with self._lock:
            self._targets.seed(self._pos)
        fault = self._health.fault()
        self._last_fault = fault
        if fault:
            self._log.warning(f"ros2_control: started with a driver fault: {fault}")
        self._log.info(f"ros2_control: {s.mode} through {s.controller} ({', '.join(self._controller_joints)}) "
                       f"on {s.command_topic}; state from {s.joint_states_topic}")
        # the names are latched and come with discovery; a controller_manager that publishes none is not waited on
        self._say_hold_confirmation(min(NAMES_WAIT_S, max(0.1, deadline - time.monotonic())))

    def _say_hold_confirmation(self, timeout_s: float) -> None:
        """Log how a stop's switch will wait for the hold: seen applied, or a time lead (module docstring)."""
        s = self._settings
        bound = hold_confirm_bound_s(self.update_rate_hz, s.trajectory_period_s)
        if self._introspection is None:
            self._log.warning(f"ros2_control: pal_statistics_msgs is not installed, so a stop cannot see the hold "
                              f"applied: the switch is asked {hold_lead_s(self.update_rate_hz) * 1000:.3g} ms after "
                              "the hold")
            return
        end = time.monotonic() + timeout_s
        while not self._snapshots_ready() and time.monotonic() < end:
            time.sleep(0.02)
        with self._lock:
            missing = self._snapshots.missing
        if missing:
            self._log.warning(f"ros2_control: {s.controller_manager}/{INTROSPECTION_NAMES} does not name "
                              f"{', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}, so a stop cannot see "
                              f"the hold applied: the switch is asked {hold_lead_s(self.update_rate_hz) * 1000:.3g} "
                              "ms after the hold")
        else:
            self._log.info(f"ros2_control: a stop deactivates {s.controller} once the controller_manager's "
                           f"introspection data shows the hold applied, at the latest {bound * 1000:.3g} ms after "
                           "the stop")

    def _snapshots_ready(self) -> bool:
        with self._lock:
            return self._snapshots.ready

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(timeout_sec=1.0)
        self._spin.join(2.0)
        try:
            self._node.destroy_node()
        except Exception:  # the context may be gone at process exit
            pass

    def _run_executor(self) -> None:
        while not self._closed and rclpy.ok(context=self._node.context):
            try:
                self._executor.spin_once(timeout_sec=0.1)
            except Exception as exc:  # a callback error must not end the link silently
                if self._closed:
                    return
                self._log.error(f"ros2_control link: {type(exc).__name__}: {exc}")

    def _load_order(self, timeout_s: float) -> None:
        """Ask the controller's node for its ``joints`` parameter and fit it to the station keys."""
        from rcl_interfaces.srv import GetParameters

        s = self._settings
        if not self._params.wait_for_service(timeout_sec=timeout_s):
            raise HardwareError(f"ros2_control: the controller node {s.controller_node} does not answer "
                                "get_parameters")
        req = GetParameters.Request()
        req.names = ["joints"]
        future = self._params.call_async(req)
        if not _wait(future, timeout_s):
            self._params.remove_pending_request(future)
            raise HardwareError(f"ros2_control: no answer for {s.controller_node}'s joints within {timeout_s:g} s")
        values = future.result().values
        joints = tuple(values[0].string_array_value) if values else ()
        if not joints:
            raise HardwareError(f"ros2_control: {s.controller_node} has no joints parameter")
        try:
            order = self._map.command_order(joints)
        except JointMapError as exc:
            raise HardwareError(f"ros2_control: {s.controller}: {exc}") from None
        with self._lock:
            self._order, self._controller_joints = order, joints
            self._snapshots = CommandSnapshots(command_interface_names(joints))
            if self._names_msg is not None:
                self._snapshots.names(*self._names_msg)

    def _check_update_rate(self, timeout_s: float) -> None:
        """Refuse a controller_manager too slow to take the command controller down within one control period.

        :raises HardwareError: its update period is a control period or more (:func:`stop_bound`); a rate that
            only may be too slow, or one that cannot be read, is logged as a warning naming both numbers.
        """
        from rcl_interfaces.srv import GetParameters

        s = self._settings
        rate = float("nan")
        if self._cm_params.wait_for_service(timeout_sec=timeout_s):
            req = GetParameters.Request()
            req.names = ["update_rate"]
            future = self._cm_params.call_async(req)
            if _wait(future, timeout_s):
                values = future.result().values
                if values and values[0].type == 2:  # PARAMETER_INTEGER
                    rate = float(values[0].integer_value)
                elif values and values[0].type == 3:  # PARAMETER_DOUBLE
                    rate = float(values[0].double_value)
            else:
                self._cm_params.remove_pending_request(future)
        verdict, message = stop_bound(s.controller_manager, rate, s.trajectory_period_s)
        self.update_rate_hz = rate
        if verdict == STOP_BOUND_REFUSE:
            raise HardwareError(f"ros2_control: {message}")
        if verdict == STOP_BOUND_WARN:
            self._log.warning(f"ros2_control: {message}")
        else:
            self._log.info(f"ros2_control: {message}")

    # -- ROS callbacks (the link's executor thread) ---------------------------------------------------------
    def _on_joint_states(self, msg: Any) -> None:
        try:
            pos, vel, eff = self._map.read(msg.name, msg.position, msg.velocity, msg.effort)
        except JointMapError as exc:
            self._log.error(f"ros2_control: {exc}", throttle_duration_sec=5.0)
            return
        stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        with self._lock:
            self._pos, self._vel, self._eff = pos, vel, eff
            self._pos_stamp_ns = stamp_ns
        self._health.joint_states()
        self._have_state.set()

    def _on_introspection_names(self, msg: Any) -> None:
        names = (tuple(msg.names), int(msg.names_version))
        with self._lock:
            self._names_msg = names
            self._snapshots.names(*names)

    def _on_introspection_values(self, raw: bytes) -> None:
        pending = self._pending_stop
        if pending is None or pending.watch is None or pending.fired:
            return
        from rclpy.serialization import deserialize_message

        msg = deserialize_message(raw, self._introspection.StatisticsValues)
        stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        with self._lock:
            commands = self._snapshots.read(msg.values, msg.names_version)
        if commands is not None and pending.watch.observe(commands, stamp_ns):
            self._fire_switch(pending, seen=True)

    def _on_activity(self, msg: Any) -> None:
        states = [NamedState(c.name, c.state.label) for c in msg.controllers]
        states += [NamedState(h.name, h.state.label, "hardware component") for h in msg.hardware_components]
        self._health.answered(states)

    def _poll(self) -> None:
        """Ask for the controllers' and the components' states (one question of each in flight at a time)."""
        now = time.monotonic()
        for name, (future, asked) in list(self._pending.items()):
            if future.done():
                continue
            if now - asked > self._settings.answer_timeout_s:  # a controller_manager that went away never answers
                client = self._list if name == "list" else self._components
                client.remove_pending_request(future)
                del self._pending[name]
        if "list" in self._pending or "components" in self._pending:
            return
        if not self._list.service_is_ready():
            self._health.asked()  # unanswered from now on: a fault after answer_timeout_s
            self._health.forget_states()
            return
        self._health.asked()
        lists = self._list.call_async(self._cm_srv.ListControllers.Request())
        comps = self._components.call_async(self._cm_srv.ListHardwareComponents.Request())
        self._pending = {"list": (lists, now), "components": (comps, now)}
        lists.add_done_callback(lambda _f: self._answered())
        comps.add_done_callback(lambda _f: self._answered())

    def _answered(self) -> None:
        pending = self._pending
        if not pending or not all(f.done() for f, _ in pending.values()):
            return
        self._pending = {}
        try:
            controllers = pending["list"][0].result().controller
            components = pending["components"][0].result().component
        except Exception as exc:
            self._log.warning(f"ros2_control: state question failed: {exc}", throttle_duration_sec=5.0)
            return
        states = [NamedState(c.name, c.state) for c in controllers]
        states += [NamedState(h.name, h.state.label or _LIFECYCLE_LABELS.get(h.state.id, str(h.state.id)),
                              "hardware component") for h in components]
        self._health.answered(states)

    # -- HardwareAdapter --------------------------------------------------------------------------------------
    def arm_names(self) -> tuple[str, ...]:
        return self._arms

    def joint_names(self, arm: str) -> tuple[str, ...]:
        return self._joints[arm]

    def keys(self) -> tuple[str, ...]:
        return self._keys

    @property
    def timestep_s(self) -> float:
        return self._timestep

    @property
    def settings(self) -> Ros2ControlSettings:
        return self._settings

    def read(self) -> JointReadings:
        with self._lock:
            return JointReadings(self._keys, self._pos, self._vel, self._eff, self.time_s())

    def command(self, targets: Mapping[str, float]) -> None:
        refusal = self._health.refusal()
        if refusal:
            raise RuntimeError(refusal)
        slot = self._map.key_slot
        with self._lock:
            self._targets.set([slot(k) for k in targets], list(targets.values()))
            self._publish_locked()

    @property
    def takes_trajectories(self) -> bool:
        """A joint_trajectory_controller takes a step and its chunk's lookahead as one trajectory."""
        return self._settings.mode == MODE_TRAJECTORY

    @property
    def trajectory_horizon_s(self) -> float:
        """No trajectory point is due later than this after its command (the driver's silence bound)."""
        return self._settings.command_silence_s

    def command_trajectory(self, points: "list[Mapping[str, float]]", period_s: float) -> None:
        """Send a step and the lookahead points after it (each already validated) as one trajectory.

        Point ``i`` is due ``(i + 1) * period_s`` after the trajectory starts, so the joint_trajectory_controller
        passes through every point at the control rate and interpolates between them at its own; the next command's
        trajectory replaces this one. Each point's keys apply on top of the one before (the other joints keep their
        targets); the targets kept afterwards are the first point's (the step's own), so a hold or the next command
        starts from the step, not from the end of a lookahead that may never be commanded. Points due past
        ``command_silence_s`` are not sent.

        :raises RuntimeError: not in ``joint_trajectory`` mode (a forward command controller takes one target at a
            time), or why no command may go out now (a fault, a latched stop).
        :raises ValueError: no point, or a period that is not > 0.
        """
        if self._settings.mode != MODE_TRAJECTORY:
            raise RuntimeError(f"a trajectory goes to a joint_trajectory_controller; {self._settings.controller} "
                               f"is commanded in {self._settings.mode} mode, one action at a time")
        if not points:
            raise ValueError("a trajectory needs at least one point")
        if not (np.isfinite(period_s) and period_s > 0):
            raise ValueError(f"period_s must be > 0, got {period_s!r}")
        refusal = self._health.refusal()
        if refusal:
            raise RuntimeError(refusal)
        within = within_horizon(len(points), period_s, self._settings.command_silence_s)
        slot = self._map.key_slot
        with self._lock:
            steps = self._targets.chunk([([slot(k) for k in p], list(p.values())) for p in points[:within]])
            self._targets.values = steps[0].copy()
            self._publish_locked(steps, period_s)

    def hold(self, arms: "tuple[str, ...] | None" = None) -> None:
        """Targets of ``arms`` := their measured positions, sent at once unless the hardware is in fault.

        A joint_trajectory_controller gets the hold as a point due one controller_manager update later
        (:func:`hold_point_s`).
        """
        slots = [i for a in (arms if arms is not None else self._arms) for i in self._arm_slots[a]]
        with self._lock:
            self._targets.hold(slots, self._pos)
            self._hold_stamp_ns = self._pos_stamp_ns
            if not self._health.fault():
                self._publish_locked(period_s=hold_point_s(self.update_rate_hz))

    def step(self, dt: float) -> None:
        """Follow the hardware's health, once per control period (the generic real-time stepper paces it).

        When a fault clears (the controller_manager is back, the controller active again) the controller_manager is
        checked before anything is commanded (:meth:`ControllerHealth.refuse_manager`): the controller's joint order
        and the update rate are asked again. Once it passes, the targets restart from the measured state.
        """
        fault = self._health.fault()
        last, self._last_fault = self._last_fault, fault
        if fault == last:
            return
        if fault.startswith(CHECKING_MANAGER):
            threading.Thread(target=self._reload_order, name="ros2_control_order", daemon=True).start()
            return
        if fault:
            if not last or last.startswith(CHECKING_MANAGER):
                self._log.error(f"ros2_control driver fault: {fault}; no command is sent until it clears")
            return
        with self._lock:
            self._targets.seed(self._pos)
        self._log.info(f"ros2_control: fault cleared (was: {last}); commands restart from the measured state")

    def _reload_order(self) -> None:
        """Ask a controller_manager that came back for the controller's joints and its update rate again.

        The rate bounds a stop; one too slow for a stop within one control period is a driver fault, named, until
        that controller_manager goes away (configure refuses it the same way).
        """
        try:
            self._load_order(self._settings.answer_timeout_s * 2)
        except HardwareError as exc:
            self._log.error(str(exc))
        try:
            self._check_update_rate(self._settings.answer_timeout_s * 2)
        except HardwareError as exc:
            self._health.refuse_manager(str(exc))
            return
        self._health.refuse_manager("")

    def reset(self, seed: "int | None" = None) -> None:
        """Real arms have no reset: the start-pose move brings them back."""

    def time_s(self) -> float:
        return time.monotonic() - self._t0

    # -- optional members: fault, latched stop, resume --------------------------------------------------------
    def fault(self) -> str:
        return self._health.fault()

    def latch_stop(self, reason: str) -> None:
        """Deactivate the command controller once the hold the core just sent is applied; latched until resume.

        The hold goes to the controller as a topic message and the switch as a service request: nothing orders the
        two inside the controller_manager, which switches at its next update, and a controller deactivated before it
        applied the hold leaves the hardware at its last command. So the switch is asked once the controller_manager's
        introspection data shows the hold in the hardware's command interfaces (:class:`HoldWatch`), at the latest
        :func:`hold_confirm_bound_s` after the latch; where that data is not published, :func:`hold_lead_s` after
        the hold (two updates of the controller_manager). The control loop never waits for it. Meanwhile the stop is
        latched: nothing else is sent.
        """
        if not self._health.latch(reason):
            return
        latched = time.monotonic()
        with self._lock:
            order = self._order
            watch = None
            if order is not None and self._snapshots.ready and self._hold_stamp_ns > 0:
                watch = HoldWatch(np.asarray(self._targets.values, dtype=float)[order], self._hold_stamp_ns)
        if watch is not None:
            bound = hold_confirm_bound_s(self.update_rate_hz, self._settings.trajectory_period_s)
        else:
            bound = hold_lead_s(self.update_rate_hz)
        pending = _PendingStop(latched, bound, watch)
        with self._stop_lock:
            self._pending_stop = pending
        timer = threading.Timer(bound, self._fire_switch, args=(pending, False))
        timer.daemon = True
        timer.start()

    def _fire_switch(self, pending: _PendingStop, seen: bool) -> None:
        """Ask for a pending stop's switch, once: the hold was ``seen`` applied, or its bound passed."""
        with self._stop_lock:
            if pending.fired:
                return
            pending.fired = True
            if self._pending_stop is pending:
                self._pending_stop = None
        if not self._health.stop_reason or self._closed:  # cleared meanwhile
            return
        waited = (time.monotonic() - pending.latched) * 1000.0
        if seen:
            how = f"the hold seen applied after {waited:.1f} ms"
        elif pending.watch is not None:
            how = (f"the hold not seen applied within {pending.bound_s * 1000:.3g} ms "
                   f"({pending.watch.snapshots} snapshots): switched anyway")
            self._log.error(f"ros2_control: {how}; {self._settings.controller} keeps the last command it applied")
        else:
            how = f"the switch asked {waited:.1f} ms after the hold"
        self._request_switch(activate=False, since=pending.latched, how=how)

    def resume(self) -> str:
        """Re-activate the command controller and restart from the measured state; empty on success."""
        if not self._health.stop_reason:
            return ""
        with self._stop_lock:  # a clear before the stop's switch went out: it never goes
            if self._pending_stop is not None:
                self._pending_stop.fired = True
                self._pending_stop = None
        fault = self._health.fault()
        if fault:
            return f"the hardware is in fault: {fault}"
        ok, message = self._switch_and_wait(activate=True)
        if not ok:
            return f"switch_controller could not activate {self._settings.controller}: {message}"
        self._health.switched(self._settings.controller, STATE_ACTIVE)
        self._health.clear()
        with self._lock:
            self._targets.seed(self._pos)
            self._publish_locked()
        self._log.info(f"ros2_control: {self._settings.controller} active again; commands restart from the "
                       "measured state")
        return ""

    # -- sending ----------------------------------------------------------------------------------------------
    def _publish_locked(self, steps: "Optional[list[np.ndarray]]" = None, period_s: float = 0.0) -> None:
        """Send the targets (or a trajectory's ``steps``, each a full target vector, ``period_s`` apart)."""
        order = self._order
        if order is None:
            return
        if self._settings.mode == MODE_FORWARD:
            msg = self._command_type()
            msg.data = forward_command(self._targets.values, order)
        else:
            plan = chunk_trajectory(self._controller_joints, steps or [self._targets.values], order,
                                    period_s or self._settings.trajectory_period_s)
            msg = _trajectory_msg(self._command_type, plan)
        self._pub.publish(msg)

    def _switch_request(self, activate: bool) -> Any:
        req = self._cm_srv.SwitchController.Request()
        names = [self._settings.controller]
        req.activate_controllers = names if activate else []
        req.deactivate_controllers = [] if activate else names
        req.strictness = self._cm_srv.SwitchController.Request.BEST_EFFORT
        req.activate_asap = True
        req.timeout.sec, req.timeout.nanosec = duration_parts(self._settings.switch_timeout_s)
        return req

    def _request_switch(self, activate: bool, since: float = 0.0, how: str = "") -> None:
        """Send the switch without waiting (a stop is latched from the control loop, which must not block).

        ``since``: when the stop was latched (monotonic), for the log line; default now. ``how``: what the switch
        waited for, for the log line.
        """
        asked = since or time.monotonic()
        future = self._switch.call_async(self._switch_request(activate))
        verb = "activate" if activate else "deactivate"

        def done(f: Any) -> None:
            try:
                res = f.result()
                ok, message = bool(res.ok), getattr(res, "message", "")
            except Exception as exc:
                ok, message = False, str(exc)
            took = time.monotonic() - asked
            if ok:
                self._log.warning(f"ros2_control: {self._settings.controller} {verb}d ({took * 1000:.0f} ms after "
                                  f"the stop{'; ' + how if how else ''}): {self._health.stop_reason}")
            else:
                self._log.error(f"ros2_control: switch_controller could not {verb} {self._settings.controller}: "
                                f"{message}")

        future.add_done_callback(done)

    def _switch_and_wait(self, activate: bool) -> tuple[bool, str]:
        timeout = self._settings.switch_timeout_s + 1.0
        if not self._switch.wait_for_service(timeout_sec=timeout):
            return False, f"{self._settings.controller_manager}/switch_controller is not available"
        future = self._switch.call_async(self._switch_request(activate))
        if not _wait(future, timeout):
            self._switch.remove_pending_request(future)
            return False, f"no answer within {timeout:g} s"
        res = future.result()
        return bool(res.ok), getattr(res, "message", "") or ("ok" if res.ok else "refused")


def _wait(future: Any, timeout_s: float) -> bool:
    """Wait for a future another thread's executor completes; False at the deadline."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    return done.wait(timeout_s) or future.done()


def _trajectory_msg(cls: Any, plan: Any) -> Any:
    from trajectory_msgs.msg import JointTrajectoryPoint

    msg = cls()
    msg.joint_names = list(plan.joint_names)  # header stamp 0: start now
    for positions, t in zip(plan.points, plan.times_s):
        point = JointTrajectoryPoint()
        point.positions = list(positions)
        point.time_from_start.sec, point.time_from_start.nanosec = duration_parts(t)
        msg.points.append(point)
    return msg
