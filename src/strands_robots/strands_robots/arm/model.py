"""The arms as the driver knows them: names, actuator keys, joint ratings, and the bundled MJCF.

Actuator keys are ``<arm>.<joint>`` (``left.joint_1`` … ``right.gripper``) everywhere outside MuJoCo; the
MJCF names the same things ``<arm>/<joint>``. Ratings (:class:`JointSpec`) are the hardware's: the command
range, the velocity and the torque the joint may reach. The safety envelope derives its limits from them
with the configured margins; the MJCF's actuator force range is deliberately larger than ``max_torque`` so
that an over-limit torque is physically reachable in simulation and the envelope, not the motor, stops it.

The MJCF is package data: ``strands_robots/arm/assets/two_arms.xml`` (setup.py must list
``arm/assets/*.xml`` in ``package_data``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Mapping

ARM_NAMES: tuple[str, ...] = ("left", "right")
JOINT_NAMES: tuple[str, ...] = ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_6", "gripper")

MODEL_PATH: str = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets", "two_arms.xml")
"""The bundled MJCF of the two arms (package data)."""

PHYSICS_TIMESTEP_S: float = 0.002
"""Fixed physics timestep of the bundled MJCF (500 Hz)."""


def actuator_key(arm: str, joint: str) -> str:
    """``("right", "joint_4")`` -> ``"right.joint_4"``."""
    return f"{arm}.{joint}"


def split_key(key: str) -> tuple[str, str]:
    """``"right.joint_4"`` -> ``("right", "joint_4")``; raises ValueError for a key without one dot."""
    arm, sep, joint = key.partition(".")
    if not sep or not arm or not joint or "." in joint:
        raise ValueError(f"not an actuator key of the form '<arm>.<joint>': {key!r}")
    return arm, joint


def mjcf_name(key: str) -> str:
    """``"right.joint_4"`` -> ``"right/joint_4"`` (joint and actuator name in the MJCF)."""
    arm, joint = split_key(key)
    return f"{arm}/{joint}"


@dataclass(frozen=True)
class JointSpec:
    """Ratings of one joint: command range [lower, upper] (rad), max |velocity| (rad/s), max |torque| (N*m)."""

    name: str
    lower: float
    upper: float
    max_velocity: float
    max_torque: float

    def __post_init__(self) -> None:
        for field_name in ("lower", "upper", "max_velocity", "max_torque"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"joint {self.name!r}: {field_name} must be a finite number, got {value!r}")
        if not self.lower < self.upper:
            raise ValueError(f"joint {self.name!r}: lower ({self.lower}) must be below upper ({self.upper})")
        if self.max_velocity <= 0:
            raise ValueError(f"joint {self.name!r}: max_velocity must be > 0, got {self.max_velocity}")
        if self.max_torque <= 0:
            raise ValueError(f"joint {self.name!r}: max_torque must be > 0, got {self.max_torque}")

    def contains(self, value: float) -> bool:
        return self.lower <= value <= self.upper


@dataclass(frozen=True)
class ArmSpec:
    """One arm: its name and its joints in actuator order."""

    name: str
    joints: tuple[JointSpec, ...]

    def keys(self) -> tuple[str, ...]:
        return tuple(actuator_key(self.name, j.name) for j in self.joints)

    def joint(self, name: str) -> JointSpec:
        for j in self.joints:
            if j.name == name:
                return j
        raise KeyError(f"arm {self.name!r} has no joint {name!r}")


# Ratings shared by both arms. The command ranges equal the MJCF joint ranges; torque ratings sit well below
# the MJCF actuator force ranges (30/50/40/15/8/8/5 N*m) so the envelope trips before the motor saturates.
DEFAULT_JOINT_SPECS: tuple[JointSpec, ...] = (
    JointSpec("joint_1", -2.8, 2.8, max_velocity=3.0, max_torque=12.0),
    JointSpec("joint_2", -1.8, 1.8, max_velocity=3.0, max_torque=20.0),
    JointSpec("joint_3", -2.4, 2.4, max_velocity=3.0, max_torque=15.0),
    JointSpec("joint_4", -2.0, 2.0, max_velocity=4.0, max_torque=5.0),
    JointSpec("joint_5", -1.8, 1.8, max_velocity=4.0, max_torque=3.0),
    JointSpec("joint_6", -2.8, 2.8, max_velocity=4.0, max_torque=3.0),
    JointSpec("gripper", 0.0, 0.8, max_velocity=3.0, max_torque=2.0),
)


def default_arm_specs() -> tuple[ArmSpec, ...]:
    """Both arms with :data:`DEFAULT_JOINT_SPECS`."""
    return tuple(ArmSpec(arm, DEFAULT_JOINT_SPECS) for arm in ARM_NAMES)


def joint_specs_by_key(arms: "tuple[ArmSpec, ...] | list[ArmSpec]") -> Mapping[str, JointSpec]:
    """``{"left.joint_1": JointSpec, …}`` in arm, then joint order."""
    return {actuator_key(a.name, j.name): j for a in arms for j in a.joints}


def load_model(path: str | None = None):
    """Compile the MJCF (default: the bundled two-arm model) into a ``mujoco.MjModel``."""
    import mujoco  # local: the rest of this module is useful without MuJoCo installed

    return mujoco.MjModel.from_xml_path(path or MODEL_PATH)
