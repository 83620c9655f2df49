"""The lookahead of a streamed command: the chunk's next steps, so a trajectory controller gets a chunk as one.

A policy answers with a chunk of actions; the rollout sends one ``ActionCommand`` per control step. Hardware that
takes trajectories (a joint_trajectory_controller) would then only ever see one-point trajectories and could not
interpolate through the chunk. So each command also carries the rest of its chunk after this step (the
*lookahead*: at most :data:`LOOKAHEAD_MAX_POINTS` points, flattened in the command's key order, and the period
between them). The driver applies the step as every other command (stale, out of order, lease proof, per-key
verdicts) and, on hardware that takes trajectories, sends the step and the lookahead points it accepts as one
trajectory, which the next command replaces. Other hardware ignores the lookahead.

Every rule of a single step holds for every point that reaches the controller (:func:`plan_lookahead`):

- the lookahead is signed with the rest of the command (:mod:`strands_robots.arm.command_auth`): a changed one
  applies nothing;
- only a step whose every key was applied carries its lookahead on (a refused key moves nothing, now or later);
- each point passes the per-key rules of a step (known key, finite, inside the joint limits, arm not stopped);
- the speed from one point to the next stays within the envelope's velocity limit of every joint;
- no point is due later than the driver's silence bound after the command arrived: if the rollout falls silent
  mid-chunk (it died), the arm stands still at most that long after its last command.

The trajectory ends at the point before the first one that fails a rule (the controller then holds there), and
the rule that cut it is named. Pure, no ROS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Collection, Mapping, Sequence

from strands_robots.arm.model import JointSpec
from strands_robots.arm.resolution import resolve_action

# Points a command may carry after its own step. Ten periods span 0.2 s at 50 Hz, the driver's default silence
# bound; a command stays under 2 KiB with 14 keys (its lease proof is an HMAC over it, made at the control rate).
LOOKAHEAD_MAX_POINTS = 10


class LookaheadError(ValueError):
    """A command's lookahead does not fit its keys or the bound (the message says how)."""


def split_points(keys: Sequence[str], lookahead: Sequence[float], period_ns: int) -> tuple[tuple[float, ...], ...]:
    """Return the lookahead's points (each in ``keys`` order), checking it where it enters.

    :raises LookaheadError: more than :data:`LOOKAHEAD_MAX_POINTS` points, a length that is not a whole number of
        points, a lookahead without keys, or one without a period > 0.
    """
    n = len(lookahead)
    if not n:
        return ()
    width = len(keys)
    if not width:
        raise LookaheadError(f"a lookahead of {n} values needs keys; the command has none")
    if n % width:
        raise LookaheadError(f"lookahead has {n} values, not a whole number of points of {width} keys")
    if n // width > LOOKAHEAD_MAX_POINTS:
        raise LookaheadError(f"lookahead has {n // width} points; at most {LOOKAHEAD_MAX_POINTS} are allowed")
    if period_ns <= 0:
        raise LookaheadError("a lookahead needs lookahead_period > 0")
    return tuple(tuple(float(v) for v in lookahead[i:i + width]) for i in range(0, n, width))


def flatten(keys: Sequence[str], rest: Sequence[Mapping[str, float]]) -> list[float]:
    """Return the chunk's next actions as a command's lookahead, in ``keys`` order (the rollout's side).

    Taken while an action has exactly this step's keys, up to :data:`LOOKAHEAD_MAX_POINTS` (a point of other keys
    would be read in the wrong order; the trajectory simply ends before it). A value that is not a real number
    becomes NaN, which the driver refuses (``non_finite``) and so ends the trajectory there.
    """
    keys = tuple(keys)
    want = set(keys)
    out: list[float] = []
    for action in rest[:LOOKAHEAD_MAX_POINTS]:
        if len(action) != len(keys) or set(action) != want:
            break
        for key in keys:
            value = action[key]
            try:
                out.append(float(value) if not isinstance(value, bool) else math.nan)
            except (TypeError, ValueError):
                out.append(math.nan)
    return out


@dataclass(frozen=True)
class LookaheadPlan:
    """The lookahead points that may reach the controller (targets per key, after the step's own), and why it ends.

    ``cut`` is empty when every point was taken.
    """

    points: tuple[Mapping[str, float], ...]
    cut: str = ""


def plan_lookahead(step_targets: Mapping[str, float], keys: Sequence[str], points: Sequence[Sequence[float]],
                   period_s: float, specs: Mapping[str, JointSpec], max_speed: Mapping[str, float],
                   stopped_arms: Collection[str], horizon_s: float) -> LookaheadPlan:
    """Return the lookahead points after a step with targets ``step_targets`` that may go to the controller.

    :param keys: the command's keys (each point's order); the step's every key was applied.
    :param points: :func:`split_points` of the command.
    :param period_s: the time between two points (point ``j`` is due ``(j + 1) * period_s`` after the step's).
    :param specs: the joints' command ranges (the per-key rules).
    :param max_speed: the envelope's velocity limit per key (rad/s).
    :param stopped_arms: arms held by a safety stop.
    :param horizon_s: the driver's silence bound: no point is due later than this after the step.
    """
    taken: list[Mapping[str, float]] = []
    previous = dict(step_targets)
    for j, values in enumerate(points):
        due = (j + 2) * period_s  # the step's own point is due one period after the command, point j after it
        if due > horizon_s + 1e-9:
            return LookaheadPlan(tuple(taken), f"point {j + 1} is due {due:.3f} s ahead, past the driver's "
                                               f"silence bound of {horizon_s:g} s")
        resolution = resolve_action(dict(zip(keys, values)), specs, lease_valid=True, stopped_arms=stopped_arms)
        verdict = resolution.verdict
        if verdict.is_coarse_error:
            return LookaheadPlan(tuple(taken), f"point {j + 1}: {verdict.error}")
        if verdict.unresolved_keys:
            return LookaheadPlan(tuple(taken), f"point {j + 1}: {verdict.unresolved_keys[0]} "
                                               f"{verdict.unresolved_reasons[0]}")
        target = resolution.targets
        for key, value in target.items():
            limit = max_speed.get(key, math.inf)
            speed = abs(value - previous.get(key, value)) / period_s
            if speed > limit:
                return LookaheadPlan(tuple(taken), f"point {j + 1}: {key} would move at {speed:.2f} rad/s, "
                                                   f"over the envelope's {limit:.2f} rad/s")
        taken.append(target)
        previous.update(target)
    return LookaheadPlan(tuple(taken))
