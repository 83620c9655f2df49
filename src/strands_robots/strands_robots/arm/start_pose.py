"""Start pose: ramp every joint to its configured position, then check the arms settle within tolerance.

Time is the adapter's (simulated seconds in MuJoCo, wall seconds on hardware), so a timeout means the same
thing in both. The ramp limits joint speed so reaching the pose does not itself trip the safety envelope.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

from strands_robots.arm.adapter import JointReadings

PHASE_RAMP = "ramp"      # commanding toward the pose at the limited speed
PHASE_SETTLE = "settle"  # at the pose, waiting for the joints to come to rest


@dataclass(frozen=True)
class StartPoseSettings:
    """Where the start pose is and what "settled" means.

    :param pose: target per actuator key (rad).
    :param position_tolerance_rad: max |position error| of every joint to count as reached.
    :param velocity_tolerance_rad_s: max |velocity| of every joint to count as settled.
    :param timeout_s: ramp plus settling must finish within this (adapter time).
    :param max_speed_rad_s: ramp speed of the joint that has farthest to go.
    :param control_period_s: how often targets are updated and settling is checked.
    """

    pose: Mapping[str, float] = field(default_factory=dict)
    position_tolerance_rad: float = 0.02
    velocity_tolerance_rad_s: float = 0.05
    timeout_s: float = 3.0
    max_speed_rad_s: float = 1.0
    control_period_s: float = 0.01

    def __post_init__(self) -> None:
        for name in ("position_tolerance_rad", "velocity_tolerance_rad_s", "timeout_s", "max_speed_rad_s",
                     "control_period_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"start_pose.{name} must be a finite number > 0, got {value!r}")
        for key, value in self.pose.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"start_pose.pose[{key!r}] must be a finite number, got {value!r}")


@dataclass(frozen=True)
class StartPoseReport:
    """Outcome of one move: ``reached`` only when every joint settled in time.

    ``max_error`` is the largest |position error| (rad) at the end; ``elapsed_s`` adapter time spent;
    ``detail`` says why not (empty when reached).
    """

    reached: bool
    max_error: float
    elapsed_s: float
    detail: str = ""


@dataclass(frozen=True)
class StartPoseProgress:
    """One control period of a move: the position error of every joint now (``keys`` order)."""

    phase: str
    keys: tuple[str, ...]
    errors: tuple[float, ...]
    max_error: float
    elapsed_s: float


class StartPoseAborted(Exception):
    """Raised by a ``command`` or ``step`` callback to end the move at once, not reached (the message says why)."""


def run_start_pose(
    *,
    read: Callable[[], JointReadings],
    command: Callable[[Mapping[str, float]], None],
    step: Callable[[float], None],
    stop_detail: Callable[[], str],
    settings: StartPoseSettings,
    should_stop: Optional[Callable[[], str]] = None,
    on_progress: Optional[Callable[[StartPoseProgress], None]] = None,
) -> StartPoseReport:
    """Ramp to ``settings.pose`` and wait until settled or ``settings.timeout_s`` elapses.

    :param read: current joint readings.
    :param command: set position targets (already validated keys); may raise :class:`StartPoseAborted`.
    :param step: advance time (the caller evaluates the safety envelope while stepping); may raise
        :class:`StartPoseAborted`.
    :param stop_detail: non-empty while the arms are safety-stopped (the move then fails at once).
    :param should_stop: checked every control period; a non-empty answer (e.g. "cancelled") ends the move,
        not reached, with that detail. The caller holds the arms.
    :param on_progress: called every control period with the per-joint errors.
    """
    target = dict(settings.pose)
    first = read()
    index = {k: i for i, k in enumerate(first.keys)}
    slots = [index[k] for k in target]
    start = [float(first.positions[i]) for i in slots]
    goal = [target[k] for k in target]
    keys = list(target)
    t0 = first.time_s
    distance = max((abs(g - s) for g, s in zip(goal, start)), default=0.0)
    ramp_s = distance / settings.max_speed_rad_s

    def errors(r: JointReadings) -> tuple[float, str, float, str]:
        pos_err, pos_key, speed, speed_key = 0.0, "", 0.0, ""
        for k, i, g in zip(keys, slots, goal):
            e = abs(float(r.positions[i]) - g)
            s = abs(float(r.velocities[i]))
            if e >= pos_err:
                pos_err, pos_key = e, k
            if s >= speed:
                speed, speed_key = s, k
        return pos_err, pos_key, speed, speed_key

    detail = stop_detail()
    if detail:
        err = errors(first)[0]
        return StartPoseReport(False, err, 0.0, f"arms are safety-stopped: {detail}")
    try:
        return _ramp_and_settle(read, command, step, stop_detail, settings, should_stop, on_progress,
                                first, keys, slots, start, goal, ramp_s, errors)
    except StartPoseAborted as exc:
        r = read()
        return StartPoseReport(False, errors(r)[0], r.time_s - t0, str(exc) or "move aborted")


def _ramp_and_settle(read, command, step, stop_detail, settings, should_stop, on_progress, first,
                     keys: Sequence[str], slots, start, goal, ramp_s: float, errors) -> StartPoseReport:
    t0 = first.time_s
    period = settings.control_period_s
    key_tuple = tuple(keys)
    r = first
    # Guard against an adapter whose clock does not advance: never loop forever.
    max_iterations = int(math.ceil(settings.timeout_s / period)) * 4 + 10
    for _ in range(max_iterations):
        if should_stop is not None:
            why = should_stop()
            if why:
                return StartPoseReport(False, errors(r)[0], r.time_s - t0, why)
        elapsed = r.time_s - t0
        frac = 1.0 if ramp_s <= 0.0 else min(1.0, (elapsed + period) / ramp_s)
        command({k: s + (g - s) * frac for k, s, g in zip(keys, start, goal)})
        step(period)
        r = read()
        elapsed = r.time_s - t0
        pos_err, pos_key, speed, speed_key = errors(r)
        if on_progress is not None:
            per_key = tuple(abs(float(r.positions[i]) - g) for i, g in zip(slots, goal))
            on_progress(StartPoseProgress(PHASE_RAMP if frac < 1.0 else PHASE_SETTLE, key_tuple, per_key,
                                          pos_err, elapsed))
        detail = stop_detail()
        if detail:
            return StartPoseReport(False, pos_err, elapsed, f"safety stop during the move: {detail}")
        if frac >= 1.0 and pos_err <= settings.position_tolerance_rad and speed <= settings.velocity_tolerance_rad_s:
            return StartPoseReport(True, pos_err, elapsed, "")
        if elapsed >= settings.timeout_s - 1e-9:
            return StartPoseReport(
                False,
                pos_err,
                elapsed,
                f"not settled within {settings.timeout_s:g} s: max position error {pos_err:.3f} rad at {pos_key} "
                f"(tolerance {settings.position_tolerance_rad:g}), max speed {speed:.3f} rad/s at {speed_key} "
                f"(tolerance {settings.velocity_tolerance_rad_s:g})",
            )
    return StartPoseReport(False, errors(r)[0], r.time_s - t0, "adapter time did not advance while moving")
