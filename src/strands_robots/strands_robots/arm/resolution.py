"""Per-key action resolution: which emitted keys may move the arms, and why the others may not.

Pure: no adapter access. The driver commands exactly ``Resolution.targets`` and nothing else, so an
unresolved key never moves anything.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

import numpy as np

from strands_robots.arm.model import JointSpec
from strands_robots.arm.verdict import (
    REASON_ARM_STOPPED,
    REASON_NON_FINITE,
    REASON_NOT_LEASE_HOLDER,
    REASON_OUTSIDE_LIMITS,
    REASON_UNKNOWN_KEY,
    ActionVerdict,
)


@dataclass(frozen=True)
class Resolution:
    """The verdict, and the targets to command (the applied keys with their values, in emission order)."""

    verdict: ActionVerdict
    targets: Mapping[str, float] = field(default_factory=dict)


def _as_finite_float(value: Any) -> "float | None":
    """Return the value as a float if it is a finite real number (bool and str are not), else None."""
    if type(value) is float:  # the common case (also what the ROS path delivers): no ABC check on the hot path
        return value if math.isfinite(value) else None
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def resolve_action(
    action: Any,
    joint_specs: Mapping[str, JointSpec],
    *,
    lease_valid: bool = True,
    stopped_arms: Collection[str] = (),
) -> Resolution:
    """Resolve every emitted key of ``action`` to applied or unresolved-with-a-reason.

    A key gets the first reason that applies, in this order: ``unknown_key`` (not an actuator key),
    ``non_finite`` (not a finite real number; NaN, inf, None, strings and bools included),
    ``outside_limits`` (outside the joint's [lower, upper]; never clamped), ``not_lease_holder`` (the lease
    token is stale or foreign: nothing applies), ``arm_stopped`` (the key's arm is held by a safety stop).
    Problems of the key or value itself come first because they stay wrong whoever holds the lease.

    Input that is not a mapping of string keys is a coarse error: no key tuples at all.

    :param action: the emitted action, ``{"left.joint_1": 0.1, …}``.
    :param joint_specs: every actuator key with its ratings (the command range is checked).
    :param lease_valid: False marks every otherwise-valid key ``not_lease_holder``.
    :param stopped_arms: arms whose keys are ``arm_stopped``.
    """
    if not isinstance(action, Mapping):
        return Resolution(
            ActionVerdict.coarse(f"action must be a mapping of actuator key to float, got {type(action).__name__}")
        )
    try:
        items = list(action.items())
    except Exception as exc:  # a broken Mapping implementation
        return Resolution(ActionVerdict.coarse(f"action could not be read: {type(exc).__name__}: {exc}"))
    for key, _ in items:
        if not isinstance(key, str):
            return Resolution(ActionVerdict.coarse(f"action keys must be strings, got {type(key).__name__} {key!r}"))

    applied: list[str] = []
    targets: dict[str, float] = {}
    unresolved: list[str] = []
    reasons: list[str] = []
    for key, raw in items:
        spec = joint_specs.get(key)
        if spec is None:
            reason = REASON_UNKNOWN_KEY
        else:
            value = _as_finite_float(raw)
            if value is None:
                reason = REASON_NON_FINITE
            elif not spec.lower <= value <= spec.upper:
                reason = REASON_OUTSIDE_LIMITS
            elif not lease_valid:
                reason = REASON_NOT_LEASE_HOLDER
            elif stopped_arms and key.partition(".")[0] in stopped_arms:
                reason = REASON_ARM_STOPPED
            else:
                applied.append(key)
                targets[key] = value
                continue
        unresolved.append(key)
        reasons.append(reason)
    return Resolution(ActionVerdict(tuple(applied), tuple(unresolved), tuple(reasons)), targets)
