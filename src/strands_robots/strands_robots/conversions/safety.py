"""Safety checks <-> ``SafetyCheck`` messages, and a trip -> ``SafetyStop``."""

from __future__ import annotations

from typing import Any, Iterable

from strands_robots.conversions.messages import NS_PER_S, ros


# -- safety ---------------------------------------------------------------------------------------------------
def safety_check_to_msg(check: Any) -> Any:
    """``SafetyCheck`` message of a :class:`~strands_robots.arm.safety.SafetyCheck` (with its text form)."""
    m = ros().SafetyCheck()
    m.arm = check.arm
    m.joint = check.joint
    m.quantity = check.quantity
    m.value = float(check.value)
    m.limit = float(check.limit)
    m.unit = check.unit
    m.text = check.text()
    return m


def msg_to_safety_check(msg: Any) -> Any:
    """Return the :class:`~strands_robots.arm.safety.SafetyCheck` of a message (``text`` is derived, not stored)."""
    from strands_robots.arm.safety import QUANTITY_STOP, SafetyCheck

    reason = msg.text.partition("stopped: ")[2] if msg.quantity == QUANTITY_STOP else ""
    return SafetyCheck(arm=msg.arm, joint=msg.joint, quantity=msg.quantity, value=msg.value,
                       limit=msg.limit, unit=msg.unit, reason=reason)


def safety_stop_to_msg(checks: Iterable[Any], stopped: bool = True, stamp_ns: int = 0) -> Any:
    """``SafetyStop`` for a trip: every check, and their texts ``"; "``-joined as ``detail``.

    :param stopped: false to publish the release (then ``checks`` is usually empty).
    :param stamp_ns: when the arms were stopped (or released).
    """
    m = ros().SafetyStop()
    m.stamp.sec, m.stamp.nanosec = divmod(int(stamp_ns), NS_PER_S)
    m.stopped = bool(stopped)
    m.checks = [safety_check_to_msg(c) for c in checks]
    m.detail = "; ".join(c.text for c in m.checks)
    return m


def msg_to_safety_checks(msg: Any) -> tuple[Any, ...]:
    """Return the checks of a ``SafetyStop`` message as dataclasses."""
    return tuple(msg_to_safety_check(c) for c in msg.checks)

