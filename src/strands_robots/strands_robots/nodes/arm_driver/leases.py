"""The arm driver's lease services: ``acquire_lease``, ``renew_lease``, ``release_lease``.

They adapt :class:`~strands_robots.arm.lease.LeaseManager`, which holds every rule.

Grants and refusals are logged (renewal refusals throttled); every call publishes ``lease_state`` if it changed.
A release that carries a ``stop_reason`` (its holder cancelled) is handed to ``on_cancel`` once the lease is given
back, in the same callback, so no command slips in between.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from strands_robots_msgs.srv import AcquireLease, ReleaseLease, RenewLease

from strands_robots.arm.lease import STATE_HELD, LeaseManager
from strands_robots.nodes.arm_driver.publish import expires_unix_ms


class LeaseServices:
    """Serves the three lease services on ``node``.

    :param leases: the driver's lease manager.
    :param on_change: publishes ``lease_state`` when it changed.
    :param callback_group: the driver's command group (serialised with the commands).
    :param on_cancel: ``(holder, stop_reason)`` after a release that says its holder cancelled.
    """

    def __init__(self, node: Any, leases: LeaseManager, on_change: Callable[[], None], callback_group: Any,
                 on_cancel: Optional[Callable[[str, str], None]] = None) -> None:
        self._node = node
        self._leases = leases
        self._on_change = on_change
        self._on_cancel = on_cancel
        g = callback_group
        self._services = [
            node.create_service(AcquireLease, "acquire_lease", self._on_acquire, callback_group=g),
            node.create_service(RenewLease, "renew_lease", self._on_renew, callback_group=g),
            node.create_service(ReleaseLease, "release_lease", self._on_release, callback_group=g),
        ]

    def destroy(self) -> None:
        for srv in self._services:
            self._node.destroy_service(srv)
        self._services.clear()

    def _on_acquire(self, req: AcquireLease.Request, res: AcquireLease.Response) -> AcquireLease.Response:
        grant = self._leases.acquire(req.holder, int(req.priority), float(req.duration_s))
        res.granted = grant.granted
        res.token = grant.token
        res.lease_id = grant.lease_id
        res.expires_unix_ms = expires_unix_ms(self._leases, grant.expires_at) if grant.granted else 0
        res.message = grant.message
        logger = self._node.get_logger()
        if grant.granted:
            logger.info(f"lease {grant.lease_id} granted to {req.holder!r} (priority {req.priority})"
                        + (f", revoking {grant.revoked_holder!r}" if grant.revoked_holder else ""))
        else:
            logger.info(f"lease refused to {req.holder!r}: {grant.message}")
        self._on_change()
        return res

    def _on_renew(self, req: RenewLease.Request, res: RenewLease.Response) -> RenewLease.Response:
        renewal = self._leases.renew(req.token, float(req.duration_s))
        res.ok = renewal.ok
        res.expires_unix_ms = expires_unix_ms(self._leases, renewal.expires_at) if renewal.ok else 0
        res.message = renewal.message
        if not renewal.ok:
            self._node.get_logger().warning(f"lease renewal refused: {renewal.message}", throttle_duration_sec=1.0)
        self._on_change()
        return res

    def _on_release(self, req: ReleaseLease.Request, res: ReleaseLease.Response) -> ReleaseLease.Response:
        stop_reason = req.stop_reason.strip()
        before = self._leases.state()
        released = self._leases.release(req.token)
        res.ok = released.ok
        res.message = released.message
        if released.ok and stop_reason and self._on_cancel is not None:
            holder = before.holder if before.state == STATE_HELD else ""
            self._on_cancel(holder, stop_reason)
        self._on_change()
        return res

