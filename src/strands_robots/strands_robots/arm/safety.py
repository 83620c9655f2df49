"""The safety envelope: per-joint position, velocity and torque limits, and the latch that stops the arms.

Limits come from the joint ratings (:class:`~strands_robots.arm.model.JointSpec`) and the configured
margins:

- position: the command range widened by ``position_rad`` (a joint commanded to its limit may overshoot
  a little; beyond that something pushed it there);
- velocity: ``max_velocity * (1 - velocity_fraction)``;
- torque: ``max_torque * (1 - torque_fraction)`` (the envelope trips before the rating is reached).

``evaluate`` returns every check that is over its limit. ``check`` also latches: the first non-empty
result stops the arms (all of them, or only the tripped ones with ``stop_scope="arm"``) until ``reset()``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from strands_robots.arm.adapter import JointReadings
from strands_robots.arm.model import ArmSpec, actuator_key

QUANTITY_POSITION = "position"
QUANTITY_VELOCITY = "velocity"
QUANTITY_TORQUE = "torque"
QUANTITY_STOP = "stop"  # a stop that is not a reading: a lost lease on hardware that stops on it
UNITS = {QUANTITY_POSITION: "rad", QUANTITY_VELOCITY: "rad/s", QUANTITY_TORQUE: "N*m"}

STOP_SCOPE_ALL = "all"
STOP_SCOPE_ARM = "arm"
STOP_SCOPES = (STOP_SCOPE_ALL, STOP_SCOPE_ARM)


def joint_label(joint: str) -> str:
    """How the spec names a joint in text: ``joint_4`` -> ``joint 4``; ``gripper`` -> ``gripper``."""
    prefix, sep, number = joint.rpartition("_")
    if sep and prefix == "joint" and number.isdigit():
        return f"joint {int(number)}"
    return joint.replace("_", " ")


@dataclass(frozen=True)
class SafetyCheck:
    """One tripped check: ``arm``'s ``joint`` read ``value`` of ``quantity`` against ``limit`` (in ``unit``)."""

    arm: str
    joint: str
    quantity: str
    value: float
    limit: float
    unit: str
    reason: str = ""  # a stop that is not a reading (quantity ``stop``): why, e.g. "lease lost: expired"

    def text(self) -> str:
        """Return the spec's text form, e.g. ``right: joint 4 reads +3.4 N*m`` (signed, one decimal).

        A stop that is not a reading reads ``left: stopped: lease lost: expired``.
        """
        if self.quantity == QUANTITY_STOP:
            return f"{self.arm}: stopped: {self.reason}"
        return f"{self.arm}: {joint_label(self.joint)} reads {self.value:+.1f} {self.unit}"


@dataclass(frozen=True)
class SafetyMargins:
    """How far inside (velocity, torque: fraction of the rating) or outside (position: rad) limits sit."""

    position_rad: float = 0.05
    velocity_fraction: float = 0.1
    torque_fraction: float = 0.1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.position_rad) and self.position_rad >= 0.0):
            raise ValueError(f"margins.position_rad must be a finite number >= 0, got {self.position_rad!r}")
        for name in ("velocity_fraction", "torque_fraction"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 <= value < 1.0):
                raise ValueError(f"margins.{name} must be in [0, 1), got {value!r}")


@dataclass(frozen=True)
class JointLimits:
    """The envelope of one joint, after margins."""

    position_lower: float
    position_upper: float
    velocity: float
    torque: float


def format_checks(checks: Iterable[SafetyCheck]) -> str:
    """Every check in text form, '; '-joined (empty when none)."""
    return "; ".join(c.text() for c in checks)


class SafetyEnvelope:
    """Limits for every joint of every arm, evaluated on :class:`JointReadings` in ``keys`` order.

    :param arms: the arms and their joint ratings.
    :param margins: see the module docstring.
    :param keys: the order readings come in (default: arm by arm, joints in spec order).
    :param stop_scope: ``"all"`` (a trip stops every arm) or ``"arm"`` (only arms with a tripped check).
    """

    def __init__(
        self,
        arms: Sequence[ArmSpec],
        margins: SafetyMargins = SafetyMargins(),
        keys: "Sequence[str] | None" = None,
        stop_scope: str = STOP_SCOPE_ALL,
    ) -> None:
        if stop_scope not in STOP_SCOPES:
            raise ValueError(f"stop_scope must be one of {STOP_SCOPES}, got {stop_scope!r}")
        specs = {actuator_key(a.name, j.name): (a.name, j) for a in arms for j in a.joints}
        self._keys = tuple(keys) if keys is not None else tuple(specs)
        if set(self._keys) != set(specs) or len(self._keys) != len(specs):
            raise ValueError(
                f"envelope keys {sorted(self._keys)} do not match the configured joints {sorted(specs)}"
            )
        self._arm_names = tuple(a.name for a in arms)
        self._where = tuple(specs[k] for k in self._keys)  # (arm, JointSpec) per slot
        self._margins = margins
        self._stop_scope = stop_scope
        lo, hi, vel, tq = [], [], [], []
        for _, j in self._where:
            lo.append(j.lower - margins.position_rad)
            hi.append(j.upper + margins.position_rad)
            vel.append(j.max_velocity * (1.0 - margins.velocity_fraction))
            tq.append(j.max_torque * (1.0 - margins.torque_fraction))
        self._lo = np.asarray(lo)
        self._hi = np.asarray(hi)
        self._vel = np.asarray(vel)
        self._tq = np.asarray(tq)
        self._bad = np.zeros(len(self._keys), dtype=bool)
        self._tmp = np.zeros(len(self._keys), dtype=bool)
        self._tripped: tuple[SafetyCheck, ...] = ()
        self._stopped_arms: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return self._keys

    def limits(self, key: str) -> JointLimits:
        i = self._keys.index(key)
        return JointLimits(float(self._lo[i]), float(self._hi[i]), float(self._vel[i]), float(self._tq[i]))

    def evaluate(self, state: JointReadings) -> tuple[SafetyCheck, ...]:
        """Every check over its limit in ``state`` (in key order, then position, velocity, torque)."""
        if state.keys != self._keys:
            raise ValueError("readings are not in the envelope's key order")
        p, v, e = state.positions, state.velocities, state.efforts
        # Fast path (every physics step): a few vectorised compares into preallocated buffers.
        bad, tmp = self._bad, self._tmp
        np.less(p, self._lo, out=bad)
        np.greater(p, self._hi, out=tmp)
        bad |= tmp
        np.greater(np.abs(v), self._vel, out=tmp)
        bad |= tmp
        np.greater(np.abs(e), self._tq, out=tmp)
        bad |= tmp
        if not bad.any():
            return ()
        checks: list[SafetyCheck] = []
        for i in np.flatnonzero(bad):
            arm, spec = self._where[i]
            pos, vel, eff = float(p[i]), float(v[i]), float(e[i])
            if pos < self._lo[i]:
                checks.append(SafetyCheck(arm, spec.name, QUANTITY_POSITION, pos, float(self._lo[i]), "rad"))
            elif pos > self._hi[i]:
                checks.append(SafetyCheck(arm, spec.name, QUANTITY_POSITION, pos, float(self._hi[i]), "rad"))
            if abs(vel) > self._vel[i]:
                checks.append(SafetyCheck(arm, spec.name, QUANTITY_VELOCITY, vel, float(self._vel[i]), "rad/s"))
            if abs(eff) > self._tq[i]:
                checks.append(SafetyCheck(arm, spec.name, QUANTITY_TORQUE, eff, float(self._tq[i]), "N*m"))
        return tuple(checks)

    # -- the latch ------------------------------------------------------------------------------------------
    def check(self, state: JointReadings) -> tuple[SafetyCheck, ...]:
        """Evaluate and latch. Returns the checks only when this call newly stopped arms, else ()."""
        if self._tripped:
            return ()
        checks = self.evaluate(state)
        if checks:
            self._tripped = checks
            if self._stop_scope == STOP_SCOPE_ALL:
                self._stopped_arms = self._arm_names
            else:
                self._stopped_arms = tuple(a for a in self._arm_names if any(c.arm == a for c in checks))
        return checks

    @property
    def stopped(self) -> bool:
        return bool(self._tripped)

    @property
    def stopped_arms(self) -> tuple[str, ...]:
        return self._stopped_arms

    @property
    def tripped(self) -> tuple[SafetyCheck, ...]:
        """The checks of the trip that stopped the arms (empty while not stopped)."""
        return self._tripped

    def trip(self, reason: str) -> tuple[SafetyCheck, ...]:
        """Latch a stop of every arm that is not a reading (a lost lease): as :meth:`check`, () when already stopped."""
        if self._tripped:
            return ()
        self._tripped = tuple(SafetyCheck(a, "", QUANTITY_STOP, 0.0, 0.0, "", reason or "stopped")
                              for a in self._arm_names)
        self._stopped_arms = self._arm_names
        return self._tripped

    def restore(self, checks: tuple[SafetyCheck, ...]) -> None:
        """Latch ``checks`` again (a clear the hardware refused): the stop stands as it was."""
        self._tripped = tuple(checks)
        if self._stop_scope == STOP_SCOPE_ALL or any(c.quantity == QUANTITY_STOP for c in checks):
            self._stopped_arms = self._arm_names
        else:
            self._stopped_arms = tuple(a for a in self._arm_names if any(c.arm == a for c in checks))

    def reset(self) -> None:
        """Release the stop. The next evaluation trips again if the arms are still outside the envelope."""
        self._tripped = ()
        self._stopped_arms = ()
