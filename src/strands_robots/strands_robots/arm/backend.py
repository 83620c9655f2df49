"""The arm driver core as the rollout loop's :class:`~strands_robots.rollout.backend.RobotBackend`, in process."""

from __future__ import annotations

from typing import Any, Mapping

from strands_robots.arm.driver import DriverCore
from strands_robots.arm.verdict import ActionVerdict


class InProcessBackend:
    """Drives a :class:`DriverCore` directly (implements ``RobotBackend``).

    :param core: the driver core.
    :param lease_token: sent with every action (only matters when the core enforces leases); may be
        changed between episodes by assigning ``lease_token``.
    """

    def __init__(self, core: DriverCore, lease_token: str = "") -> None:
        self._core = core
        self.lease_token = lease_token

    @property
    def core(self) -> DriverCore:
        return self._core

    def action_keys(self) -> tuple[str, ...]:
        return self._core.action_keys()

    def observe(self) -> dict[str, Any]:
        return self._core.observe()

    def send_action(self, action: Mapping[str, float]) -> ActionVerdict:
        return self._core.send_action(action, self.lease_token)

    def reset(self, seed: "int | None" = None) -> None:
        self._core.reset(seed)

    def advance(self, dt: float) -> None:
        self._core.step(dt)

    def safety_stop_detail(self) -> str:
        return "; ".join(check.text() for check in self._core.safety_checks())
