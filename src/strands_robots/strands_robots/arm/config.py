"""Driver configuration: joint ratings, safety margins, start pose, physics rate (``config/arms.yaml``).

``DriverConfig.default()`` is the same configuration as the shipped ``config/arms.yaml`` (a test keeps them
equal), so the core runs without the file; ``DriverConfig.from_yaml(path)`` / ``from_dict(data)`` validate
and refuse bad values with a message naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from strands_robots.arm.model import (
    ARM_NAMES,
    DEFAULT_JOINT_SPECS,
    PHYSICS_TIMESTEP_S,
    ArmSpec,
    JointSpec,
    actuator_key,
    joint_specs_by_key,
)
from strands_robots.arm.safety import STOP_SCOPE_ALL, STOP_SCOPES, SafetyMargins
from strands_robots.arm.start_pose import StartPoseSettings


class ConfigError(ValueError):
    """A configuration value was refused; the message names the field and the reason."""


# The start pose: shoulder forward, elbow bent, wrist pointing down-forward, gripper half open; the gripper
# is ~0.27 m above the table, so motion of +/-0.2 rad on every joint touches neither table nor bracket.
DEFAULT_START_POSE_BY_JOINT: Mapping[str, float] = {
    "joint_1": 0.0, "joint_2": 0.4, "joint_3": 1.0, "joint_4": 0.9, "joint_5": 0.0, "joint_6": 0.0,
    "gripper": 0.3,
}


@dataclass(frozen=True)
class DriverConfig:
    """Everything the driver core needs besides the adapter.

    :param arms: per arm, its joints' ratings (command range, max velocity, max torque).
    :param timestep_s: physics timestep (must equal the MJCF's for the simulation).
    :param safety_check_period_s: the envelope is evaluated at least this often while stepping.
    :param margins: safety margins (see :mod:`strands_robots.arm.safety`).
    :param stop_scope: ``all`` (a trip stops both arms) or ``arm`` (only the tripped arm).
    :param start_pose: the start pose and settling criteria.
    :param home: simulation reset pose per key (missing keys: 0.0).
    :param reset_noise_rad: simulation reset noise (seeded by ``reset(seed)``).
    :param ros2_control: the ``ros2_control`` section as written (None: absent); the ``ros2_control`` hardware
        validates it (:class:`strands_robots.arm.ros2_control.Ros2ControlSettings`), other hardware ignores it.
    """

    arms: tuple[ArmSpec, ...]
    timestep_s: float = PHYSICS_TIMESTEP_S
    safety_check_period_s: float = PHYSICS_TIMESTEP_S
    margins: SafetyMargins = SafetyMargins()
    stop_scope: str = STOP_SCOPE_ALL
    start_pose: StartPoseSettings = field(default_factory=StartPoseSettings)
    home: Mapping[str, float] = field(default_factory=dict)
    reset_noise_rad: float = 0.0
    ros2_control: "Mapping[str, Any] | None" = None

    def joint_specs(self) -> Mapping[str, JointSpec]:
        return joint_specs_by_key(self.arms)

    @classmethod
    def default(cls) -> "DriverConfig":
        arms = tuple(ArmSpec(a, DEFAULT_JOINT_SPECS) for a in ARM_NAMES)
        pose = {actuator_key(a, j): v for a in ARM_NAMES for j, v in DEFAULT_START_POSE_BY_JOINT.items()}
        return cls(arms=arms, start_pose=StartPoseSettings(pose=pose))

    @classmethod
    def from_yaml(cls, path: str) -> "DriverConfig":
        import yaml

        try:
            with open(path, "r", encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        try:
            return cls.from_dict(data)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None

    @classmethod
    def from_dict(cls, data: Any) -> "DriverConfig":
        """Build from the parsed YAML document (see ``config/arms.yaml`` for the schema)."""
        try:
            return _parse(data)
        except ConfigError:
            raise
        except (ValueError, TypeError) as exc:
            raise ConfigError(str(exc)) from None


_TOP_LEVEL = {"physics", "arms", "joints", "arm_overrides", "margins", "stop_scope", "start_pose", "home",
              "reset_noise_rad", "ros2_control"}


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def _only(section: Mapping[str, Any], allowed: set, where: str) -> None:
    unknown = sorted(str(k) for k in section if k not in allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def _number(value: Any, where: str, *, positive: bool = False, non_negative: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ConfigError(f"{where} must be > 0, got {value!r}")
    if non_negative and value < 0:
        raise ConfigError(f"{where} must be >= 0, got {value!r}")
    return float(value)


def _joint_spec(name: str, raw: Any, where: str, base: "JointSpec | None" = None) -> JointSpec:
    section = _mapping(raw, where)
    fields = ("lower", "upper", "max_velocity", "max_torque")
    _only(section, set(fields), where)
    values = {}
    for f in fields:
        if f in section:
            values[f] = _number(section[f], f"{where}.{f}")
        elif base is not None:
            values[f] = getattr(base, f)
        else:
            raise ConfigError(f"{where}.{f} is required")
    try:
        return JointSpec(name, **values)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _parse(data: Any) -> DriverConfig:
    default = DriverConfig.default()
    doc = _mapping(data, "the configuration")
    _only(doc, _TOP_LEVEL, "the configuration")

    physics = _mapping(doc.get("physics"), "physics")
    _only(physics, {"timestep_s", "safety_check_period_s"}, "physics")
    timestep = _number(physics.get("timestep_s", default.timestep_s), "physics.timestep_s", positive=True)
    period = _number(physics.get("safety_check_period_s", timestep), "physics.safety_check_period_s",
                     positive=True)
    if period < timestep - 1e-12:
        raise ConfigError(f"physics.safety_check_period_s ({period}) must be >= physics.timestep_s ({timestep})")

    arm_names = doc.get("arms", list(ARM_NAMES))
    if not isinstance(arm_names, list) or not arm_names or not all(isinstance(a, str) and a for a in arm_names):
        raise ConfigError(f"arms must be a non-empty list of arm names, got {arm_names!r}")
    if len(set(arm_names)) != len(arm_names):
        raise ConfigError(f"arms must not repeat a name, got {arm_names!r}")
    for a in arm_names:
        if "." in a:
            raise ConfigError(f"arm name {a!r} must not contain '.'")

    joints_raw = doc.get("joints")
    if joints_raw is None:
        template = DEFAULT_JOINT_SPECS
    else:
        joints = _mapping(joints_raw, "joints")
        if not joints:
            raise ConfigError("joints must name at least one joint")
        template = tuple(_joint_spec(str(n), raw, f"joints.{n}") for n, raw in joints.items())
        for j in template:
            if "." in j.name:
                raise ConfigError(f"joint name {j.name!r} must not contain '.'")

    overrides = _mapping(doc.get("arm_overrides"), "arm_overrides")
    arms = []
    for a in arm_names:
        per_arm = _mapping(overrides.get(a), f"arm_overrides.{a}")
        names = {j.name for j in template}
        unknown = sorted(set(per_arm) - names)
        if unknown:
            raise ConfigError(f"arm_overrides.{a}: unknown joint(s) {unknown}")
        arms.append(ArmSpec(a, tuple(
            _joint_spec(j.name, per_arm[j.name], f"arm_overrides.{a}.{j.name}", base=j) if j.name in per_arm else j
            for j in template)))
    unknown_arms = sorted(set(overrides) - set(arm_names))
    if unknown_arms:
        raise ConfigError(f"arm_overrides: unknown arm(s) {unknown_arms}")
    arms_t = tuple(arms)
    specs = joint_specs_by_key(arms_t)

    m = _mapping(doc.get("margins"), "margins")
    _only(m, {"position_rad", "velocity_fraction", "torque_fraction"}, "margins")
    try:
        margins = SafetyMargins(
            position_rad=_number(m.get("position_rad", default.margins.position_rad), "margins.position_rad"),
            velocity_fraction=_number(m.get("velocity_fraction", default.margins.velocity_fraction),
                                      "margins.velocity_fraction"),
            torque_fraction=_number(m.get("torque_fraction", default.margins.torque_fraction),
                                    "margins.torque_fraction"),
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None

    stop_scope = doc.get("stop_scope", STOP_SCOPE_ALL)
    if stop_scope not in STOP_SCOPES:
        raise ConfigError(f"stop_scope must be one of {list(STOP_SCOPES)}, got {stop_scope!r}")

    def per_key_pose(raw: Any, where: str, fill: bool) -> dict[str, float]:
        """Entries ``joint_2: 0.6`` (every arm) or ``right.joint_2: 0.6`` (one arm, wins)."""
        section = _mapping(raw, where)
        out: dict[str, float] = {k: 0.0 for k in specs} if fill else {}
        joint_names = {j.name for j in template}
        for k, v in section.items():
            if isinstance(k, str) and k in joint_names:
                for a in arm_names:
                    out[actuator_key(a, k)] = _number(v, f"{where}.{k}")
        for k, v in section.items():
            if isinstance(k, str) and k in joint_names:
                continue
            if k not in specs:
                raise ConfigError(f"{where}: unknown joint or key {k!r}; use a joint name or '<arm>.<joint>'")
            out[k] = _number(v, f"{where}.{k}")
        for k, v in out.items():
            spec = specs[k]
            if not spec.contains(v):
                raise ConfigError(f"{where}: {k} = {v} is outside the joint's limits [{spec.lower}, {spec.upper}]")
        return out

    sp = _mapping(doc.get("start_pose"), "start_pose")
    sp_fields = {"pose", "position_tolerance_rad", "velocity_tolerance_rad_s", "timeout_s", "max_speed_rad_s",
                 "control_period_s"}
    _only(sp, sp_fields, "start_pose")
    if "pose" in sp:
        pose = per_key_pose(sp["pose"], "start_pose.pose", fill=True)
    else:
        pose = {k: v for k, v in default.start_pose.pose.items() if k in specs}
        pose.update({k: 0.0 for k in specs if k not in pose})
    d = default.start_pose
    start_pose = StartPoseSettings(
        pose=pose,
        position_tolerance_rad=_number(sp.get("position_tolerance_rad", d.position_tolerance_rad),
                                       "start_pose.position_tolerance_rad", positive=True),
        velocity_tolerance_rad_s=_number(sp.get("velocity_tolerance_rad_s", d.velocity_tolerance_rad_s),
                                         "start_pose.velocity_tolerance_rad_s", positive=True),
        timeout_s=_number(sp.get("timeout_s", d.timeout_s), "start_pose.timeout_s", positive=True),
        max_speed_rad_s=_number(sp.get("max_speed_rad_s", d.max_speed_rad_s), "start_pose.max_speed_rad_s",
                                positive=True),
        control_period_s=_number(sp.get("control_period_s", d.control_period_s), "start_pose.control_period_s",
                                 positive=True),
    )

    home = per_key_pose(doc.get("home"), "home", fill=False)
    noise = _number(doc.get("reset_noise_rad", 0.0), "reset_noise_rad", non_negative=True)
    ros2_control = doc.get("ros2_control")
    if ros2_control is not None:
        ros2_control = dict(_mapping(ros2_control, "ros2_control"))
    return DriverConfig(arms=arms_t, timestep_s=timestep, safety_check_period_s=period, margins=margins,
                        stop_scope=stop_scope, start_pose=start_pose, home=home, reset_noise_rad=noise,
                        ros2_control=ros2_control)
