"""The driver's answer to one ``send_action``: a verdict for every emitted key, or one coarse error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

# Reasons an emitted key was not applied. Words, so logs and `ros2 topic echo` read as text.
REASON_UNKNOWN_KEY = "unknown_key"
REASON_NON_FINITE = "non_finite"
REASON_OUTSIDE_LIMITS = "outside_limits"
REASON_NOT_LEASE_HOLDER = "not_lease_holder"
REASON_ARM_STOPPED = "arm_stopped"
# Command stream only (strands_robots.arm.command_stream): the whole command was refused, nothing applied.
REASON_STALE = "stale"
REASON_OUT_OF_ORDER = "out_of_order"
REASONS = (
    REASON_UNKNOWN_KEY,
    REASON_NON_FINITE,
    REASON_OUTSIDE_LIMITS,
    REASON_NOT_LEASE_HOLDER,
    REASON_ARM_STOPPED,
    REASON_STALE,
    REASON_OUT_OF_ORDER,
)


@dataclass(frozen=True)
class ActionVerdict:
    """Per-key outcome of one send_action.

    Either ``error`` is non-empty (a coarse failure: nothing is known about which keys reached physical
    state, so both key tuples are empty), or every emitted key appears exactly once in ``applied_keys`` or
    ``unresolved_keys`` (with the reason at the same index in ``unresolved_reasons``).
    """

    applied_keys: tuple[str, ...] = ()
    unresolved_keys: tuple[str, ...] = ()
    unresolved_reasons: tuple[str, ...] = ()
    error: str = ""

    @classmethod
    def coarse(cls, error: str) -> "ActionVerdict":
        return cls(error=error or "unspecified driver error")

    @property
    def is_coarse_error(self) -> bool:
        return bool(self.error)

    def reasons(self) -> Mapping[str, str]:
        return dict(zip(self.unresolved_keys, self.unresolved_reasons))
