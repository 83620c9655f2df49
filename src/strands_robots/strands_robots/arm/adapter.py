"""The hardware adapter: what a real arm implements so the driver (and its node) can run it unchanged.

The MuJoCo simulation (:class:`strands_robots.arm.mujoco_sim.MujocoArms`) is one implementation. The driver
core talks only to this protocol: it never imports MuJoCo or rclpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class JointReadings:
    """One read of every joint, aligned with ``keys`` (``left.joint_1`` … ``right.gripper``).

    ``positions`` in rad, ``velocities`` in rad/s, ``efforts`` in N*m (the torque the actuator applies).
    The arrays belong to the reader; callers must not modify them.
    """

    keys: tuple[str, ...]
    positions: np.ndarray
    velocities: np.ndarray
    efforts: np.ndarray
    time_s: float


@runtime_checkable
class HardwareAdapter(Protocol):
    """A pair of arms, simulated or real, driven by position targets."""

    def arm_names(self) -> tuple[str, ...]:
        """Return the arms, e.g. ``("left", "right")``."""

    def joint_names(self, arm: str) -> tuple[str, ...]:
        """Return the joints of one arm in actuator order, e.g. ``("joint_1", …, "joint_6", "gripper")``."""

    def keys(self) -> tuple[str, ...]:
        """Every actuator key ``<arm>.<joint>`` in read order (arm by arm, joints in actuator order)."""

    @property
    def timestep_s(self) -> float:
        """Smallest time ``step`` advances by (simulation: the physics timestep; hardware: its control period)."""

    def read(self) -> JointReadings:
        """Positions, velocities and efforts of every joint, now."""

    def command(self, targets: Mapping[str, float]) -> None:
        """Set position targets for the given keys (already validated); other joints keep their targets."""

    def hold(self, arms: "tuple[str, ...] | None" = None) -> None:
        """Freeze the given arms (default all) at their current position: targets := current positions."""

    def step(self, dt: float) -> None:
        """Let ``dt`` seconds pass (simulation: whole physics steps; hardware: no-op or wait)."""

    def reset(self, seed: int | None = None) -> None:
        """Back to the initial state (simulation: the model's home pose; hardware: no-op)."""

    def time_s(self) -> float:
        """Seconds of simulated (or hardware) time since the last reset."""


# Optional members a real arm's adapter may have (the driver core asks with getattr; MuJoCo has none):
#
# - ``fault() -> str``: the hardware's own fault, named ("controller X is inactive", "joint_states stale"), empty
#   while it can be commanded. While it is non-empty the node publishes no ``joint_states`` (the rollout ends
#   the episode as a driver fault, as for a silent driver) and ``command`` raises (nothing is sent).
# - ``latch_stop(reason: str) -> None``: a stop was latched (envelope trip, lost lease), after ``hold``; real
#   hardware takes its command path down (ros2_control: deactivates the command controller).
# - ``resume() -> str``: the operator cleared the stop; bring the command path back and restart from the
#   measured state. Empty on success, else why not (the stop then stays).
# - ``stops_on_lease_loss: bool``: a lease that expires or is revoked latches a stop (real arms).
# - ``stops_on_cancel: bool``: a lease released on a cancel (``ReleaseLease.stop_reason``) latches a stop (real
#   arms): the hold at the measured position, then ``latch_stop``.
# - ``close() -> None``: release what the adapter holds (its ROS node), at the driver's cleanup.
