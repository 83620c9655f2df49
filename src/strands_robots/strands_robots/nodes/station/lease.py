"""The station's control lease over ROS, for :class:`~strands_robots.nodes.station.robot_port.RosRobotPort`.

The lease is acquired through the driver client without its own heartbeat and renewed here every third of its
length (so a task can stop the heartbeat: ``fault.stop_heartbeat_at_s``) from a thread of its own
(:class:`RenewalThread`), never from the node's executor: a callback that takes a while (a relay call, a job
file's fsync, a status publish under load) would hold every timer behind it, and one second behind is a lost
lease. The thread only sends the request (``call_async`` needs no executor); the executor takes the answer
whenever it gets to it, and the driver's ``lease_state`` says the same. It is watched on the driver's latched
``lease_state`` and on every renewal answer: expired -> the rollout is cancelled and the episode ends
``lease_lost``; taken by a higher-priority claim -> ``authority_lost``. An operator's claim of the arms is an
``acquire_lease`` above the rollout's priority, released at once.

A mixin of the port: it uses the port's node, lock, backend, goal handle and lease clients (made in the port's
``__init__``).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Tuple

from strands_robots_msgs.msg import LeaseState
from strands_robots_msgs.srv import AcquireLease, ReleaseLease, RenewLease

from strands_robots.arm.lease import operator_holder, station_of
from strands_robots.rollout.end_condition import END_AUTHORITY_LOST, END_LEASE_LOST
from strands_robots.station.ports import InfrastructureFault

OPERATOR_CLAIM_PRIORITY = 100
_JOIN_S = 1.0  # a renewal is a non-blocking send: the thread ends within that of being asked


class RenewalThread:
    """Call ``renew`` every ``period_s`` on a thread of its own until :meth:`stop`; the first call one period in.

    ``renew`` must not block (it sends and returns); an error of one call is given to ``on_error`` and the next
    period comes all the same.
    """

    def __init__(self, period_s: float, renew: Callable[[], None], on_error: Callable[[str], None],
                 name: str = "station-lease") -> None:
        if not period_s > 0:
            raise ValueError(f"the renewal period must be > 0 s, got {period_s!r}")
        self.period_s = float(period_s)
        self._renew = renew
        self._on_error = on_error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> "RenewalThread":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._renew()
            except Exception as exc:  # noqa: BLE001  (one failed send never ends the renewals of a live holder)
                self._on_error(f"lease renewal not sent: {type(exc).__name__}: {exc}")

    def stop(self) -> None:
        """Stop renewing; waits for the thread unless called from it."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(_JOIN_S)


def _stop_renewals(renewals: Optional[RenewalThread]) -> None:
    if renewals is not None:
        renewals.stop()


class StationLeaseCalls:
    """Acquire, renew, watch and release the station's lease; an operator's claim of the arms."""

    def acquire_lease(self, holder: str, priority: int, duration_s: float) -> Tuple[bool, str]:
        bound = self.driver_ready_timeout_s
        if not self.backend.wait_until_ready(bound):
            raise InfrastructureFault(f"{self.backend.driver_name} is not ready "
                                      f"(no fresh joint_states for {bound:g} s)")
        try:
            res = self.backend.acquire(holder, priority, duration_s, heartbeat=False)
        except TimeoutError as exc:
            raise InfrastructureFault(f"{self.backend.driver_name} did not answer acquire_lease: {exc}") from None
        if not res.granted:
            return False, res.message
        with self._lock:
            # A stop that raced the end of the previous rollout belongs to that episode, not to this one.
            self._pending_stop = ""
            self._lease_id = res.lease_id
            self._holder = holder
            self._lease_priority = int(priority)
            self._lease_duration_s = float(duration_s)
            self._heartbeat = True
            self._lease_end = ("", "")
            previous, self._renewals = self._renewals, RenewalThread(
                float(duration_s) / 3.0, self._renew_now, self._node.get_logger().warning).start()
        _stop_renewals(previous)
        return True, res.message or f"lease {res.lease_id} granted"

    def reclaim_lease(self) -> bool:
        """Acquire the episode's lease again after it ran out (its holder, priority and length); False: refused.

        A stop latched on real arms waits for an operator, and the lease can run out meanwhile (a loaded machine
        renews late): a clear relayed with a dead token would be refused for good.
        """
        with self._lock:
            holder, priority, duration = self._holder, self._lease_priority, self._lease_duration_s
        if not holder:
            return False
        try:
            return self.acquire_lease(holder, priority, duration)[0]
        except InfrastructureFault:
            return False

    def release_lease(self, stop_reason: str = "") -> None:
        with self._lock:
            renewals, self._renewals = self._renewals, None
            self._lease_id = ""
        _stop_renewals(renewals)
        # refused when already expired or revoked: nothing to give up
        self.backend.release(stop_reason=stop_reason)

    def stop_heartbeat(self) -> None:
        """Stop renewing the lease (fault injection): it runs out at the driver and the episode ends lease_lost."""
        with self._lock:
            self._heartbeat = False

    def _renew_now(self) -> None:
        with self._lock:
            token, beat = self.backend.lease_token, self._heartbeat
        if not token or not beat or not self._renew.service_is_ready():
            return
        req = RenewLease.Request()
        req.token = token
        req.duration_s = self._lease_duration_s
        self._renew.call_async(req).add_done_callback(lambda f, token=token: self._on_renewed(f, token))

    def _on_renewed(self, future: Any, token: str) -> None:
        try:
            res = future.result()
        except Exception:
            return
        if res is None or res.ok or token != self.backend.lease_token:
            return
        condition = END_AUTHORITY_LOST if "revoked" in res.message else END_LEASE_LOST
        self._lease_lost(condition, res.message or "lease not renewed")

    def _on_lease_state(self, msg: Any) -> None:
        with self._lock:
            ours, holder = self._lease_id, self._holder
        if not ours:
            return
        if msg.lease_id == ours and msg.state == LeaseState.STATE_EXPIRED:
            self._lease_lost(END_LEASE_LOST, f"lease {ours} of {holder} expired without renewal")
        elif msg.lease_id == ours and msg.state == LeaseState.STATE_REVOKED:
            self._lease_lost(END_AUTHORITY_LOST, f"lease {ours} of {holder} was revoked by a higher-priority claim")
        elif msg.lease_id != ours and msg.lease_id and msg.state == LeaseState.STATE_HELD \
                and msg.previous_holder == holder:
            self._lease_lost(END_AUTHORITY_LOST, f"lease {ours} of {holder} revoked by {msg.holder} "
                                                 f"(priority {msg.priority})")

    def _lease_lost(self, condition: str, detail: str) -> None:
        with self._lock:
            if self._lease_end[0] or not self._lease_id:
                return
            self._lease_end = (condition, detail)
            handle = self._goal_handle
        self._node.get_logger().warning(f"control lease lost ({condition}): {detail}")
        if handle is not None:
            handle.cancel_goal_async()

    def claim_arms(self, holder: str) -> Tuple[bool, str]:
        with self._lock:
            station = station_of(self._holder)
        req = AcquireLease.Request()
        req.holder = operator_holder(holder, station) if station else holder
        req.priority = OPERATOR_CLAIM_PRIORITY
        req.duration_s = 60.0
        res = self._call(self._claim, req)
        if res is None:
            return False, "acquire_lease did not answer"
        if not res.granted:
            return False, res.message
        self.claims.append((holder, res.message))
        rel = ReleaseLease.Request()
        rel.token = res.token
        self._call(self._release, rel)  # the claim is the point; the arms are free for the next episode
        return True, res.message or f"{holder} holds the arms"
