"""The rules of driving arms through ros2_control, without ROS: settings, joint mapping, commands, health.

A robot running ros2_control has a controller_manager, a joint_state_broadcaster publishing ``joint_states``
and a command controller. The ``ros2_control`` hardware (:mod:`strands_robots.nodes.arm_driver.ros2_control`,
the ROS side) reads the arms from ``joint_states`` and commands them through that controller:

- ``forward_command`` (``forward_command_controller/ForwardCommandController``, or the position_controllers
  one): a ``std_msgs/Float64MultiArray`` on ``<controller>/commands``, one value per joint in the order of the
  controller's ``joints`` parameter (:meth:`JointMap.command_order`, :func:`forward_command`);
- ``joint_trajectory`` (``joint_trajectory_controller/JointTrajectoryController``): a
  ``trajectory_msgs/JointTrajectory`` on ``<controller>/joint_trajectory``; a chunk of targets becomes one
  trajectory whose point ``i`` is reached ``(i + 1) * period`` after the start, so the controller interpolates
  between them at its own rate (:func:`chunk_trajectory`).

``arms.yaml`` names the station keys' ros2_control joints in its ``ros2_control`` section
(:class:`Ros2ControlSettings`). :class:`ControllerHealth` is the rule for when the arms may be commanded: a
controller or hardware component that is not active, a controller_manager that stops answering, or
``joint_states`` older than a bound is a driver fault, named; a safety stop (which deactivates the command
controller on purpose) is latched until an operator clears it.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

# The controller_manager the driver process drives, overriding arms.yaml's (``up --controller-manager NS``, the
# launch file's ``controller_manager`` argument).
CONTROLLER_MANAGER_ENV = "STRANDS_ROBOTS_CONTROLLER_MANAGER"

MODE_FORWARD = "forward_command"
MODE_TRAJECTORY = "joint_trajectory"
MODES = (MODE_FORWARD, MODE_TRAJECTORY)

# The lifecycle state ros2_control reports for a running controller or hardware component.
STATE_ACTIVE = "active"

_FIELDS = {"controller_manager", "controller", "mode", "joint_states_topic", "joints", "joint_states_timeout_s",
           "trajectory_period_s", "state_poll_s", "answer_timeout_s", "switch_timeout_s", "control_period_s",
           "command_silence_s"}


# A latched stop deactivates the command controller through switch_controller, and the controller_manager switches
# controllers only inside its real-time loop: at its first update after the request reached it. The hold goes to the
# controller as a topic message and the switch as a service request, and nothing orders the two inside the
# controller_manager: a controller deactivated before it applied the hold leaves the hardware at its last command.
# So the driver asks for the switch only once the hold shows applied in the controller_manager's introspection data
# (:class:`HoldWatch`), and at the latest :func:`hold_confirm_bound_s` after the latch. Where the controller_manager
# publishes no introspection data it cannot be seen, and the switch is asked :func:`hold_lead_s` after the hold: this
# many controller_manager updates (one for the controller to take the hold, one to spare), plus what the hold takes to
# reach the controller: a topic message across the host, then a turn of the controller_manager's executor, which the
# switch request itself may hold. Either way a stop takes the controller down within :func:`switch_bound_s` (the
# controller_manager's part when all goes to time) plus the driver's own part and the service's dispatch.
HOLD_LEAD_UPDATES = 2
HOLD_LEAD_DELIVERY_S = 0.003
# Without a known update rate, the lead for a controller_manager at 100 Hz.
HOLD_LEAD_UNKNOWN_S = HOLD_LEAD_UPDATES / 100.0 + HOLD_LEAD_DELIVERY_S

# How a cleared fault reads until the driver has checked the controller_manager that came back
# (:meth:`ControllerHealth.refuse_manager`).
CHECKING_MANAGER = "checking the controller_manager that came back:"

STOP_BOUND_OK = "ok"
STOP_BOUND_WARN = "warn"
STOP_BOUND_REFUSE = "refuse"


def hold_lead_s(update_rate_hz: float) -> float:
    """Return how long after the hold the switch that deactivates the command controller is asked for.

    The hold must be applied by the still-active controller first: deactivated before, the controller leaves the
    hardware at its last command. Two updates of the controller_manager (one to take the hold, one to spare) and
    :data:`HOLD_LEAD_DELIVERY_S` for the message to reach the controller.
    """
    if not (math.isfinite(update_rate_hz) and update_rate_hz > 0):
        return HOLD_LEAD_UNKNOWN_S
    return HOLD_LEAD_UPDATES / update_rate_hz + HOLD_LEAD_DELIVERY_S


def hold_point_s(update_rate_hz: float) -> float:
    """Return when a joint_trajectory_controller's hold point is due: one update of the controller_manager.

    The hold stops the arm where it was measured, as a forward command controller's hold does at its next update:
    the controller's first sample of the hold's one-point trajectory is the hold itself (the hardware's joint limits
    still apply), so the hold shows in the controller_manager's introspection data at once and a deactivation right
    after leaves the arm there, not partway along an interpolation toward it.
    """
    if not (math.isfinite(update_rate_hz) and update_rate_hz > 0):
        return 0.01
    return 1.0 / update_rate_hz


def switch_bound_s(update_rate_hz: float) -> float:
    """Return the controller_manager's part of a stop: the hold's lead, then up to one update until the switch."""
    return hold_lead_s(update_rate_hz) + 1.0 / update_rate_hz


def stop_bound(controller_manager: str, update_rate_hz: float, control_period_s: float) -> tuple[str, str]:
    """Whether a stop can deactivate the command controller within one control period at this update rate.

    Returns ``(verdict, message)``: ``refuse`` when the controller_manager's part alone (:func:`switch_bound_s`)
    is over one control period (it cannot be done); ``warn`` when it takes more than half of one, leaving the
    driver's part and the service's dispatch too little room (it may not), or when the rate cannot be read; else
    ``ok``. The message names both numbers and the rate that would do.
    """
    half = control_period_s / 2.0 - HOLD_LEAD_DELIVERY_S
    need_hz = math.ceil((HOLD_LEAD_UPDATES + 1) / half) if half > 0 else math.inf
    if not (math.isfinite(update_rate_hz) and update_rate_hz > 0):
        return STOP_BOUND_WARN, (f"controller_manager {controller_manager} reports no update_rate "
                                 f"({update_rate_hz!r}): cannot tell whether a stop deactivates the command "
                                 f"controller within one control period ({control_period_s * 1000:g} ms); it needs "
                                 f">= {need_hz:g} Hz")
    bound_ms = switch_bound_s(update_rate_hz) * 1000.0
    said = (f"controller_manager {controller_manager} runs at {update_rate_hz:g} Hz: a stop deactivates the "
            f"command controller up to {bound_ms:.3g} ms after the hold (two updates for the controller to apply the "
            f"hold, then the switch at the next), against a control period of {control_period_s * 1000:g} ms")
    advice = f"run the controller_manager at >= {need_hz:g} Hz (update_rate in its controllers file)"
    if bound_ms > control_period_s * 1000.0 + 1e-9:
        return STOP_BOUND_REFUSE, f"{said}: it cannot be done within one control period; {advice}"
    if bound_ms > control_period_s * 500.0 + 1e-9:
        return STOP_BOUND_WARN, (f"{said}: with the driver's own part it may take longer than one control period; "
                                 f"{advice}")
    return STOP_BOUND_OK, said


# Where the controller_manager publishes its introspection data (ros2_control 4.x on, through pal_statistics): after
# every update, a snapshot of each hardware command interface as the controllers wrote it and the joint limits left it
# (``command_interface.<joint>/<interface>``). The names come once per change (latched), the values after every update.
INTROSPECTION_NAMES = "introspection_data/names"
INTROSPECTION_VALUES = "introspection_data/values"
# A command counts as the hold when it is this close to it, per joint (rad): the controller copies the value.
HOLD_TOLERANCE = 1e-9


def command_interface_names(joints: Sequence[str], interface: str = "position") -> tuple[str, ...]:
    """Return the introspection names of ``joints``' command interfaces (``command_interface.j1/position``)."""
    return tuple(f"command_interface.{j}/{interface}" for j in joints)


def hold_confirm_bound_s(update_rate_hz: float, control_period_s: float) -> float:
    """Return how long after the latch the switch waits for the hold to be seen applied before it is asked anyway.

    The rest of the control period, less the update the switch itself waits for and the hold's delivery; never less
    than :func:`hold_lead_s`, what the switch waits where the hold cannot be seen. A hold that does not show by then
    is late (a loaded host, a controller_manager that skipped updates): the controller is deactivated anyway, since an
    active controller keeps following the last command (a joint_trajectory_controller the rest of its trajectory),
    while a deactivated one leaves the hardware at the last checked command.
    """
    period = 1.0 / update_rate_hz if (math.isfinite(update_rate_hz) and update_rate_hz > 0) else 0.01
    return max(hold_lead_s(update_rate_hz), control_period_s - period - HOLD_LEAD_DELIVERY_S)


class CommandSnapshots:
    """The command controller's joints in the controller_manager's introspection snapshots.

    :param wanted: the introspection names of the controller's command interfaces, in the controller's joint order
        (:func:`command_interface_names`).
    """

    def __init__(self, wanted: Sequence[str]) -> None:
        self.wanted = tuple(wanted)
        self._version: Optional[int] = None
        self._index = np.zeros(0, dtype=np.intp)
        self.missing: tuple[str, ...] = self.wanted

    def names(self, names: Sequence[str], version: int) -> None:
        """Take a names message: where each wanted interface sits in the values of ``version``."""
        where = {n: i for i, n in enumerate(names)}
        self.missing = tuple(w for w in self.wanted if w not in where)
        if self.missing:
            self._version = None
            return
        self._index = np.asarray([where[w] for w in self.wanted], dtype=np.intp)
        self._version = int(version)

    @property
    def ready(self) -> bool:
        """True once names that hold every wanted interface are known."""
        return self._version is not None

    def read(self, values: Sequence[float], version: int) -> Optional[np.ndarray]:
        """Return the wanted interfaces' values from a values message; None when its names are not the known ones."""
        if self._version is None or int(version) != self._version:
            return None
        values = np.asarray(values, dtype=float)
        if values.size <= int(self._index.max(initial=-1)):
            return None
        return values[self._index]


class HoldWatch:
    """Whether the command controller has applied a hold, from consecutive snapshots of its command interfaces.

    The hold is the measured position of one ``joint_states`` message, and the commands passed through that position
    before it was measured: only snapshots taken after that message (both are stamped by the controller_manager's
    clock) can show the hold. Of those, the hold shows applied when a snapshot's commands equal it (within
    ``tolerance`` per joint), or came closer to it than the snapshot before: the hardware's joint limits may let a
    command reach the hold over a few updates, and a joint_trajectory_controller interpolates to it. Until the hold
    lands, the commands lead the measured position it was taken at, so they keep their distance or move away from it;
    a controller that had just turned its arm back toward where the hold is may read as applied a little early, which
    leaves the hardware at a command that was checked anyway.

    :param target: the hold, in the controller's joint order.
    :param after_ns: the stamp of the ``joint_states`` message the hold was measured from (> 0).
    """

    def __init__(self, target: Sequence[float], after_ns: int, tolerance: float = HOLD_TOLERANCE) -> None:
        self.target = np.asarray(target, dtype=float)
        self.after_ns = int(after_ns)
        self.tolerance = float(tolerance)
        self._last: Optional[float] = None
        self.snapshots = 0

    def observe(self, commands: Sequence[float], stamp_ns: int) -> bool:
        """Take one snapshot's commands (controller order) and stamp; True once the hold shows applied."""
        if int(stamp_ns) <= self.after_ns:
            return False
        commands = np.asarray(commands, dtype=float)
        if commands.shape != self.target.shape or not np.all(np.isfinite(commands)):
            return False
        self.snapshots += 1
        off = np.abs(commands - self.target)
        if float(off.max(initial=0.0)) <= self.tolerance:
            return True
        distance = float(np.linalg.norm(off))
        last, self._last = self._last, distance
        return last is not None and distance < last - self.tolerance


class Ros2ControlConfigError(ValueError):
    """The ``ros2_control`` section of the driver config was refused; the message names the field."""


def _positive(raw: Mapping[str, Any], name: str, default: float) -> float:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise Ros2ControlConfigError(f"ros2_control.{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _name(raw: Mapping[str, Any], name: str, default: str) -> str:
    value = raw.get(name, default)
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
        raise Ros2ControlConfigError(f"ros2_control.{name} must be a ROS name without spaces, got {value!r}")
    return value.strip()


def default_joint_name(key: str) -> str:
    """Return the joint a key maps to when ``joints`` does not say: ``left.joint_1`` -> ``left_joint_1``."""
    return key.replace(".", "_")


@dataclass(frozen=True)
class Ros2ControlSettings:
    """The ``ros2_control`` section of ``arms.yaml``.

    :param controller_manager: the controller_manager's node name (``/controller_manager``,
        ``/robot1/controller_manager``).
    :param controller: the command controller's name (its topics are ``<controller_manager ns>/<controller>/...``).
    :param mode: ``forward_command`` or ``joint_trajectory`` (module docstring).
    :param joints: station key -> ros2_control joint name, for every key the driver has.
    :param joint_states_topic: the joint_state_broadcaster's topic (relative names resolve in the
        controller_manager's namespace).
    :param joint_states_timeout_s: ``joint_states`` older than this is a driver fault (the arms stop as for a
        silent driver).
    :param trajectory_period_s: the station's control period (the rollout's): the time between two points of a
        trajectory, and the time a safety stop has to deactivate the command controller in (:func:`stop_bound`).
    :param control_period_s: the driver's control loop: how often the state and the stop rules are evaluated.
    :param state_poll_s: how often the controller_manager is asked for its controllers' and components' states.
    :param answer_timeout_s: a controller_manager that answers no question for this long is a driver fault.
    :param switch_timeout_s: how long a ``switch_controller`` call may take.
    :param command_silence_s: ``joint_trajectory``: the driver's silence bound for the rollout's commands. A
        trajectory (a step and its chunk's lookahead, :mod:`strands_robots.arm.lookahead`) never reaches further
        ahead than this, so if the rollout falls silent mid-chunk the arm stands still at most this long after its
        last command.
    """

    controller: str
    joints: Mapping[str, str]
    controller_manager: str = "/controller_manager"
    mode: str = MODE_FORWARD
    joint_states_topic: str = "/joint_states"
    joint_states_timeout_s: float = 0.25
    trajectory_period_s: float = 0.02
    control_period_s: float = 0.01
    state_poll_s: float = 0.2
    answer_timeout_s: float = 1.0
    switch_timeout_s: float = 1.0
    command_silence_s: float = 0.2

    @classmethod
    def from_mapping(cls, raw: Any, keys: Sequence[str]) -> "Ros2ControlSettings":
        """Validate the section for a driver with ``keys``; every key gets a joint (default :func:`default_joint_name`).

        :raises Ros2ControlConfigError: a missing section, an unknown field or key, a joint named twice, a bad value.
        """
        if raw is None:
            raise Ros2ControlConfigError("the driver config has no ros2_control section (controller, mode, joints)")
        if not isinstance(raw, Mapping):
            raise Ros2ControlConfigError(f"ros2_control must be a mapping, got {type(raw).__name__}")
        unknown = sorted(str(k) for k in raw if k not in _FIELDS)
        if unknown:
            raise Ros2ControlConfigError(f"ros2_control: unknown field(s) {unknown}; allowed: {sorted(_FIELDS)}")
        if "controller" not in raw:
            raise Ros2ControlConfigError("ros2_control.controller is required (the command controller's name)")
        mode = raw.get("mode", MODE_FORWARD)
        if mode not in MODES:
            raise Ros2ControlConfigError(f"ros2_control.mode must be one of {list(MODES)}, got {mode!r}")
        given = raw.get("joints") or {}
        if not isinstance(given, Mapping):
            raise Ros2ControlConfigError(f"ros2_control.joints must map station keys to joint names, got {given!r}")
        extra = sorted(str(k) for k in given if k not in keys)
        if extra:
            raise Ros2ControlConfigError(f"ros2_control.joints: unknown station key(s) {extra}; keys are {list(keys)}")
        joints = {}
        for key in keys:
            joint = given.get(key, default_joint_name(key))
            if not isinstance(joint, str) or not joint.strip():
                raise Ros2ControlConfigError(f"ros2_control.joints.{key} must be a joint name, got {joint!r}")
            joints[key] = joint.strip()
        seen: dict[str, str] = {}
        for key, joint in joints.items():
            if joint in seen:
                raise Ros2ControlConfigError(f"ros2_control.joints: {seen[joint]} and {key} both name joint {joint!r}")
            seen[joint] = key
        cm = _name(raw, "controller_manager", cls.controller_manager)
        return cls(
            controller=_name(raw, "controller", ""), joints=joints, controller_manager=cm, mode=mode,
            joint_states_topic=_name(raw, "joint_states_topic", cls.joint_states_topic),
            joint_states_timeout_s=_positive(raw, "joint_states_timeout_s", cls.joint_states_timeout_s),
            trajectory_period_s=_positive(raw, "trajectory_period_s", cls.trajectory_period_s),
            control_period_s=_positive(raw, "control_period_s", cls.control_period_s),
            state_poll_s=_positive(raw, "state_poll_s", cls.state_poll_s),
            answer_timeout_s=_positive(raw, "answer_timeout_s", cls.answer_timeout_s),
            switch_timeout_s=_positive(raw, "switch_timeout_s", cls.switch_timeout_s),
            command_silence_s=_positive(raw, "command_silence_s", cls.command_silence_s),
        )

    def with_controller_manager(self, name: str) -> "Ros2ControlSettings":
        """Return these settings against another controller_manager (``up --controller-manager NS``); empty: unchanged.

        A namespace (``/robot1``) names that namespace's ``controller_manager``; a full node name is kept.
        """
        name = (name or "").strip()
        if not name:
            return self
        if any(c.isspace() for c in name):
            raise Ros2ControlConfigError(f"controller_manager must be a ROS name without spaces, got {name!r}")
        if not name.startswith("/"):
            name = "/" + name
        if not name.rstrip("/").endswith("controller_manager"):
            name = name.rstrip("/") + "/controller_manager"
        return replace(self, controller_manager=name)

    @property
    def namespace(self) -> str:
        """The controller_manager's namespace (``/`` for ``/controller_manager``)."""
        ns = self.controller_manager.rpartition("/")[0]
        return ns or "/"

    def resolve(self, name: str) -> str:
        """Resolve a topic or node name in the controller_manager's namespace (absolute names are kept)."""
        if name.startswith("/"):
            return name
        ns = self.namespace.rstrip("/")
        return f"{ns}/{name}"

    @property
    def command_topic(self) -> str:
        suffix = "commands" if self.mode == MODE_FORWARD else "joint_trajectory"
        return self.resolve(f"{self.controller}/{suffix}")

    @property
    def controller_node(self) -> str:
        """The command controller's node (its ``joints`` parameter lives there)."""
        return self.resolve(self.controller)


class JointMapError(ValueError):
    """``joint_states`` or a controller's joints do not fit the station keys (the message says which)."""


class JointMap:
    """Station keys <-> ros2_control joints: reading ``joint_states`` in key order, ordering commands."""

    def __init__(self, keys: Sequence[str], joints: Mapping[str, str]) -> None:
        self.keys = tuple(keys)
        missing = [k for k in self.keys if k not in joints]
        if missing:
            raise JointMapError(f"no ros2_control joint for key(s) {missing}")
        self.joints = tuple(joints[k] for k in self.keys)
        self._slot = {j: i for i, j in enumerate(self.joints)}
        self._key_slot = {k: i for i, k in enumerate(self.keys)}
        self._cache: tuple[tuple[str, ...], np.ndarray] = ((), np.zeros(0, dtype=np.intp))

    def key_slot(self, key: str) -> int:
        return self._key_slot[key]

    def read(self, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float],
             efforts: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One ``JointState`` in key order: positions, velocities, efforts (0.0 where the hardware gives none).

        Joints the station does not drive are skipped.

        :raises JointMapError: a mapped joint is missing, or the position array does not match the names.
        """
        names = tuple(names)
        if len(positions) != len(names):
            raise JointMapError(f"joint_states has {len(names)} names but {len(positions)} positions")
        cached_names, index = self._cache
        if names != cached_names:
            where = {n: i for i, n in enumerate(names)}
            absent = [j for j in self.joints if j not in where]
            if absent:
                raise JointMapError(f"joint_states lacks joint(s) {absent} (it has {list(names)})")
            index = np.asarray([where[j] for j in self.joints], dtype=np.intp)
            self._cache = (names, index)
        pos = np.asarray(positions, dtype=float)[index]
        vel = np.asarray(velocities, dtype=float)[index] if len(velocities) == len(names) else np.zeros(len(index))
        eff = np.asarray(efforts, dtype=float)[index] if len(efforts) == len(names) else np.zeros(len(index))
        return pos, vel, eff

    def command_order(self, controller_joints: Sequence[str]) -> np.ndarray:
        """Slots (in key order) of the controller's joints, in the controller's order.

        :raises JointMapError: the controller names a joint the station does not map, or leaves out one it does
            (a command would then move a joint the station never commanded, or miss one it did).
        """
        controller_joints = tuple(controller_joints)
        unknown = [j for j in controller_joints if j not in self._slot]
        left_out = [j for j in self.joints if j not in controller_joints]
        if unknown or left_out or len(set(controller_joints)) != len(controller_joints):
            raise JointMapError(
                "the controller's joints do not match arms.yaml's ros2_control.joints: "
                + "; ".join(part for part in (
                    f"not mapped {unknown}" if unknown else "",
                    f"not in the controller {left_out}" if left_out else "",
                    "a joint repeats" if len(set(controller_joints)) != len(controller_joints) else "") if part))
        return np.asarray([self._slot[j] for j in controller_joints], dtype=np.intp)


def forward_command(targets: np.ndarray, order: np.ndarray) -> list[float]:
    """Return a forward command controller's ``Float64MultiArray.data``: ``targets`` (key order) in its order."""
    return [float(v) for v in np.asarray(targets, dtype=float)[order]]


@dataclass(frozen=True)
class TrajectoryPlan:
    """A ``JointTrajectory``: ``points[i]`` (in ``joint_names`` order) is reached ``times_s[i]`` after the start."""

    joint_names: tuple[str, ...]
    points: tuple[tuple[float, ...], ...]
    times_s: tuple[float, ...]


def chunk_trajectory(joint_names: Sequence[str], chunk: Sequence[np.ndarray], order: np.ndarray,
                     period_s: float) -> TrajectoryPlan:
    """One trajectory for a chunk of targets (each in key order): point ``i`` at ``(i + 1) * period_s``.

    :raises ValueError: an empty chunk or a period that is not > 0.
    """
    if not chunk:
        raise ValueError("a trajectory needs at least one point")
    if not (math.isfinite(period_s) and period_s > 0):
        raise ValueError(f"period_s must be > 0, got {period_s!r}")
    points = tuple(tuple(float(v) for v in np.asarray(t, dtype=float)[order]) for t in chunk)
    times = tuple((i + 1) * float(period_s) for i in range(len(points)))
    return TrajectoryPlan(tuple(joint_names), points, times)


def within_horizon(n_points: int, period_s: float, horizon_s: float) -> int:
    """How many of a trajectory's ``n_points`` (point ``i`` due ``(i + 1) * period_s``) are due within ``horizon_s``.

    The first point (the step itself) always goes: it is what a one-point command would send.
    """
    if n_points <= 0:
        return 0
    fit = int(math.floor(horizon_s / period_s + 1e-9)) if period_s > 0 else n_points
    return max(1, min(n_points, fit))


def duration_parts(seconds: float) -> tuple[int, int]:
    """``builtin_interfaces/Duration`` (sec, nanosec) of ``seconds`` >= 0."""
    ns = int(round(max(0.0, seconds) * 1e9))
    return ns // 1_000_000_000, ns % 1_000_000_000


@dataclass(frozen=True)
class NamedState:
    """A controller or hardware component and its lifecycle state label (``active``, ``inactive``, ...)."""

    name: str
    state: str
    kind: str = "controller"  # or "hardware component"


@dataclass
class _Seen:
    joint_states_s: float = 0.0
    answer_s: float = 0.0
    states: tuple[NamedState, ...] = ()
    states_known: bool = False
    asked_s: float = 0.0
    unanswered_since_s: float = 0.0


class ControllerHealth:
    """When the arms may be commanded: the controller_manager's state, ``joint_states``' age, the stop latch.

    Thread-safe (the ROS callbacks note, the control loop asks). ``clock`` is monotonic seconds.

    A driver fault (:meth:`fault`): no ``joint_states`` yet or none for ``joint_states_timeout_s``; a
    controller_manager that answers no state question for ``answer_timeout_s``; the command controller not
    loaded, or not ``active`` while no safety stop is latched; a hardware component not ``active``; a
    controller_manager that came back, until it is checked, or at an update rate too slow for a stop
    (:meth:`refuse_manager`). A latched
    stop (:meth:`latch`) deactivates the command controller on purpose, so its inactivity is then expected,
    not a fault; it stays until :meth:`clear`.
    """

    def __init__(self, settings: Ros2ControlSettings, clock: Callable[[], float]) -> None:
        self._settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._seen = _Seen()
        self._started_s = clock()
        self._stop_reason = ""
        self._manager_refusal = ""

    # -- what arrived -------------------------------------------------------------------------------------
    def joint_states(self) -> None:
        with self._lock:
            self._seen.joint_states_s = self._clock()

    def asked(self) -> None:
        """Note that a state question went to the controller_manager."""
        with self._lock:
            now = self._clock()
            self._seen.asked_s = now
            if not self._seen.unanswered_since_s:
                self._seen.unanswered_since_s = now

    def answered(self, states: Sequence[NamedState]) -> None:
        """Note the controller_manager's controllers and hardware components, as it just reported them."""
        with self._lock:
            now = self._clock()
            self._seen.answer_s = now
            self._seen.unanswered_since_s = 0.0
            self._seen.states = tuple(states)
            self._seen.states_known = True

    def switched(self, name: str, state: str) -> None:
        """Note a controller's new state as a successful ``switch_controller`` answer just gave it.

        The answer comes before the controller_manager's next activity or state answer does: without this, a
        controller just re-activated on a clear would read as still inactive (a driver fault) until then.
        """
        with self._lock:
            if self._seen.states_known:
                self._seen.states = tuple(NamedState(x.name, state, x.kind) if x.kind == "controller" and x.name == name
                                          else x for x in self._seen.states)

    def forget_states(self) -> None:
        """Forget the states: the controller_manager went away, what it said no longer holds."""
        with self._lock:
            self._seen.states = ()
            self._seen.states_known = False

    # -- the stop latch -----------------------------------------------------------------------------------
    def latch(self, reason: str) -> bool:
        """Latch a safety stop (the first reason is kept); True when this call latched it."""
        with self._lock:
            if self._stop_reason:
                return False
            self._stop_reason = reason or "safety stop"
            return True

    def clear(self) -> str:
        """Clear the latch; returns the reason it had (empty: none was latched)."""
        with self._lock:
            was, self._stop_reason = self._stop_reason, ""
            return was

    @property
    def stop_reason(self) -> str:
        with self._lock:
            return self._stop_reason

    # -- the rule -----------------------------------------------------------------------------------------
    def state_of(self, name: str) -> Optional[str]:
        with self._lock:
            for s in self._seen.states:
                if s.name == name and s.kind == "controller":
                    return s.state
        return None

    def refuse_manager(self, message: str) -> None:
        """Hold the controller_manager as a driver fault (``message`` says why); empty: it has been checked.

        After any other fault the controller_manager may be another one (restarted), so once that fault clears it is
        a fault of its own (:data:`CHECKING_MANAGER`, naming it) until the driver has read its update rate and the
        controller's joints again and says so here: empty, or why it is refused (too slow for a stop within one
        control period, as configure refuses such a one). No command goes out in between.
        """
        with self._lock:
            self._manager_refusal = message

    def fault(self) -> str:
        """Empty while the arms may be commanded (apart from a latched stop); else the named driver fault."""
        other = self._state_fault()
        with self._lock:
            if other:
                s = self._settings
                self._manager_refusal = (f"{CHECKING_MANAGER} {s.controller_manager}: reading its update_rate and "
                                         f"{s.controller}'s joints")
                return other
            return self._manager_refusal

    def _state_fault(self) -> str:
        s = self._settings
        now = self._clock()
        with self._lock:
            seen = self._seen
            stopped = bool(self._stop_reason)
            if not seen.joint_states_s:
                waited = now - self._started_s
                return f"no joint_states on {s.joint_states_topic} yet ({waited:.2f} s)"
            age = now - seen.joint_states_s
            if age > s.joint_states_timeout_s:
                return (f"joint_states on {s.joint_states_topic} stale: none for {age:.2f} s "
                        f"(limit {s.joint_states_timeout_s:g} s)")
            if seen.unanswered_since_s and now - seen.unanswered_since_s > s.answer_timeout_s:
                return (f"controller_manager {s.controller_manager} does not answer "
                        f"(no state for {now - seen.unanswered_since_s:.2f} s)")
            if not seen.states_known:
                return f"controller_manager {s.controller_manager}: controller states not known yet"
            states = seen.states
        bad_hw = [f"{x.name} is {x.state}" for x in states if x.kind != "controller" and x.state != STATE_ACTIVE]
        if bad_hw:
            return f"hardware component {'; '.join(bad_hw)} (controller_manager {s.controller_manager})"
        mine = [x for x in states if x.kind == "controller" and x.name == s.controller]
        if not mine:
            return f"controller {s.controller} is not loaded in {s.controller_manager}"
        state = mine[0].state
        if state != STATE_ACTIVE and not stopped:
            return f"controller {s.controller} is {state} in {s.controller_manager}"
        return ""

    def refusal(self) -> str:
        """Why no command may go out now (a fault or a latched stop); empty when one may."""
        fault = self.fault()
        if fault:
            return fault
        reason = self.stop_reason
        return f"safety stop latched ({reason}): the command controller is deactivated" if reason else ""


@dataclass
class CommandTargets:
    """The position targets the adapter keeps for every key (the controller gets all joints each time)."""

    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    seeded: bool = False

    def seed(self, measured: np.ndarray) -> None:
        """Restart from the measured state (first contact, after a fault, after a clear)."""
        self.values = np.array(measured, dtype=float, copy=True)
        self.seeded = True

    def set(self, slots: Sequence[int], values: Sequence[float]) -> None:
        self.values[np.asarray(slots, dtype=np.intp)] = np.asarray(values, dtype=float)

    def chunk(self, steps: Sequence[tuple[Sequence[int], Sequence[float]]]) -> list[np.ndarray]:
        """Apply a chunk of actions in turn (each ``(slots, values)`` on top of the one before); every step's targets.

        The targets end at the last step's. :raises ValueError: an empty chunk (nothing is changed).
        """
        if not steps:
            raise ValueError("a chunk needs at least one action")
        out = []
        for slots, values in steps:
            self.set(slots, values)
            out.append(self.values.copy())
        return out

    def hold(self, slots: Sequence[int], measured: np.ndarray) -> None:
        """Targets of ``slots`` := their measured positions."""
        idx = np.asarray(slots, dtype=np.intp)
        self.values[idx] = np.asarray(measured, dtype=float)[idx]
