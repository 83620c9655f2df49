"""The arm-authority calls of :class:`~strands_robots.driver_link.client.RosDriverBackend`.

The lease (claimed, kept alive by a heartbeat, released), the start pose (the driver's action, or its service)
and a safety reset.

A mixin of the backend: it uses the backend's node, its service and action clients (made in the backend's
``__init__``) and its ``lease_token``, which every action the backend sends carries.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from strands_robots_msgs.action import MoveToStartPose as MoveToStartPoseAction
from strands_robots_msgs.srv import AcquireLease, MoveToStartPose, ReleaseLease, RenewLease, ResetSafety

# How long move_to_start_pose looks for the driver's action server before it falls back to the service.
_START_POSE_DISCOVERY_S = 2.0


@dataclass(frozen=True)
class StartPoseOutcome:
    """What a start-pose move came to (the action's result or the service's response).

    :ivar via: ``action`` or ``service``; ``""`` when nothing was asked (no driver, cancelled before).
    """

    reached: bool
    max_error: float = -1.0
    elapsed_s: float = 0.0
    detail: str = ""
    via: str = ""


class DriverArmCalls:
    """Lease, start pose and safety reset over the driver's services and action (mixed into the backend)."""

    @property
    def lease_id(self) -> str:
        return self._lease_id

    @property
    def lease_lost(self) -> str:
        """Why the heartbeat stopped (expired, revoked by whom); empty while the lease is kept alive."""
        return self._lease_lost

    def acquire(self, holder: str, priority: int, duration_s: float, timeout_s: float = 2.0,
                heartbeat: bool = True) -> AcquireLease.Response:
        """Claim the arms; on success the token is sent with every action and renewed every ``duration_s/3``.

        :raises TimeoutError: no answer from the driver within ``timeout_s``.
        """
        req = AcquireLease.Request()
        req.holder = holder
        req.priority = int(priority)
        req.duration_s = float(duration_s)
        res = self._call(self._acquire, req, timeout_s, wait_for_service=True)
        if res is None:
            raise TimeoutError(f"acquire_lease: no answer within {timeout_s:g} s")
        if res.granted:
            self._stop_heartbeat()
            self.lease_token = res.token
            self._lease_id = res.lease_id
            self._lease_lost = ""
            if heartbeat:
                self._heartbeat_duration_s = float(duration_s)
                self._heartbeat = self._node.create_timer(float(duration_s) / 3.0, self._renew_now,
                                                          callback_group=self._group)
        return res

    def release(self, timeout_s: float = 2.0, stop_reason: str = "") -> bool:
        """Give the lease back (stops the heartbeat first). False when the driver refused or did not answer.

        ``stop_reason`` (non-empty): the holder gives the arms back on a cancel; on real arms the driver then holds
        them at their measured position and latches a stop an operator clears (``ReleaseLease.stop_reason``).

        A driver silent past its silence bound (dead or stalled: it is what ended the episode) is sent the release
        without waiting for an answer: a SIGKILLed driver's service stays in the ROS graph a while and a request
        to it is never answered, so waiting held the caller ``timeout_s`` for nothing. A stalled driver gets the
        release when it resumes; one that never does lets the unrenewed lease run out by itself.
        """
        self._stop_heartbeat()
        token, self.lease_token = self.lease_token, ""
        if not token:
            return False
        req = ReleaseLease.Request()
        req.token = token
        req.stop_reason = stop_reason
        if self._watch.joint_state_age_s() > self._watch.silence_s and self._release.service_is_ready():
            self._release.remove_pending_request(self._release.call_async(req))  # sent; no answer awaited
            return False
        res = self._call(self._release, req, timeout_s, wait_for_service=True)
        return bool(res is not None and res.ok)

    def move_to_start_pose(self, tolerance: float = 0.0, timeout_s: float = 0.0,
                           call_timeout_s: "float | None" = None,
                           should_stop: "Callable[[], bool] | None" = None) -> StartPoseOutcome:
        """Ask the driver to move to its start pose with the current lease token, and wait for the outcome.

        Uses the driver's ``move_to_start_pose`` action (cancelled when ``should_stop()`` turns true while
        waiting: the arms hold where they are); a driver without the action server is asked by its service.

        :param tolerance: rad; 0 uses the driver's configured tolerance.
        :param timeout_s: robot-time settle deadline; 0 uses the configured one.
        :param call_timeout_s: wall-clock wait for the answer (default: ``timeout_s`` or 3 s, plus 5 s).
        :param should_stop: polled while waiting; true cancels the move (``reached`` false, ``detail``
            ``cancelled``).
        :raises TimeoutError: no answer in time.
        """
        wait = call_timeout_s if call_timeout_s is not None else (timeout_s or 3.0) + 5.0
        asked_stop = should_stop or (lambda: False)

        def stop() -> bool:
            return asked_stop() or self._closing_passed()

        discovery_end = time.monotonic() + min(_START_POSE_DISCOVERY_S, wait)
        while not self._move_action.server_is_ready() and not self._move.service_is_ready():
            if time.monotonic() >= discovery_end or stop():
                break
            time.sleep(0.01)
        if self._move_action.server_is_ready():
            return self._start_pose_by_action(tolerance, timeout_s, wait, stop)
        req = MoveToStartPose.Request()
        req.lease_token = self.lease_token
        req.tolerance = float(tolerance)
        req.timeout_s = float(timeout_s)
        res = self._call(self._move, req, wait, wait_for_service=True)
        if res is None:
            raise TimeoutError(f"move_to_start_pose: no answer within {wait:g} s")
        return StartPoseOutcome(bool(res.reached), float(res.max_error), float(res.elapsed_s), res.detail,
                                "service")

    def _start_pose_by_action(self, tolerance: float, timeout_s: float, wait: float,
                              stop: Callable[[], bool]) -> StartPoseOutcome:
        goal = MoveToStartPoseAction.Goal()
        goal.lease_token = self.lease_token
        goal.tolerance = float(tolerance)
        goal.timeout_s = float(timeout_s)
        deadline = time.monotonic() + wait
        sent = threading.Event()
        goal_future = self._move_action.send_goal_async(goal, feedback_callback=self._on_start_pose_feedback)
        goal_future.add_done_callback(lambda _f: sent.set())
        while not sent.wait(0.02):
            if stop():
                return StartPoseOutcome(False, -1.0, 0.0, "cancelled", "action")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"move_to_start_pose: goal not answered within {wait:g} s")
        handle = goal_future.result()
        if handle is None or not handle.accepted:
            return StartPoseOutcome(False, -1.0, 0.0, "the driver refused the start-pose goal", "action")
        done = threading.Event()
        result_future = handle.get_result_async()
        result_future.add_done_callback(lambda _f: done.set())
        while not done.wait(0.02):
            if stop():
                handle.cancel_goal_async()
                # the driver holds the arms and answers the cancelled goal (unless it is stopping as well)
                done.wait(0.0 if self._closing_passed() else 2.0)
                return StartPoseOutcome(False, -1.0, 0.0, "cancelled", "action")
            if time.monotonic() >= deadline:
                handle.cancel_goal_async()
                raise TimeoutError(f"move_to_start_pose: no result within {wait:g} s")
        res = result_future.result().result
        return StartPoseOutcome(bool(res.reached), float(res.max_error), float(res.elapsed_s), res.detail, "action")

    def _on_start_pose_feedback(self, feedback_msg: Any) -> None:
        self.start_pose_feedback = feedback_msg.feedback

    def reset_safety(self, operator_name: str, timeout_s: float = 2.0) -> ResetSafety.Response:
        """Clear a safety stop (an explicit operator action) as the current lease holder (its token is sent).

        :raises TimeoutError: no answer in time.
        """
        req = ResetSafety.Request()
        req.operator_name = operator_name
        req.lease_token = self.lease_token
        res = self._call(self._reset_safety, req, timeout_s, wait_for_service=True)
        if res is None:
            raise TimeoutError(f"reset_safety: no answer within {timeout_s:g} s")
        return res

    # -- internals ---------------------------------------------------------------------------------------------
    def _renew_now(self) -> None:
        """Heartbeat timer (executor thread): fire the renewal, never wait for it."""
        token = self.lease_token
        if not token or not self._renew.service_is_ready():
            return
        req = RenewLease.Request()
        req.token = token
        req.duration_s = self._heartbeat_duration_s
        future = self._renew.call_async(req)
        future.add_done_callback(lambda f, token=token: self._on_renewed(f, token))

    def _on_renewed(self, future: Any, token: str) -> None:
        try:
            res = future.result()
        except Exception as exc:  # the call failed on our side; the next heartbeat tries again
            self._node.get_logger().warning(f"lease renewal failed: {exc}", throttle_duration_sec=1.0)
            return
        if res is None or res.ok or token != self.lease_token:
            return
        self._lease_lost = res.message or "lease not renewed"
        self._stop_heartbeat()
        self._node.get_logger().warning(f"lease {self._lease_id} lost: {self._lease_lost}")

    def _stop_heartbeat(self) -> None:
        timer, self._heartbeat = self._heartbeat, None
        if timer is not None:
            self._node.destroy_timer(timer)

    def begin_closing(self, wait_s: float) -> None:
        """Bound every call from now on to ``wait_s`` from now: the process is shutting down.

        A driver stopping at the same time never answers; its arms hold on its own stop.
        """
        self._closing_deadline = min(getattr(self, "_closing_deadline", float("inf")), time.monotonic() + wait_s)

    def _closing_passed(self) -> bool:
        """Whether the deadline :meth:`begin_closing` set has passed."""
        return time.monotonic() >= getattr(self, "_closing_deadline", float("inf"))

    def _call(self, client: Any, request: Any, timeout_s: float, wait_for_service: bool = False) -> Any:
        """Call and wait (on an Event set by the response) at most ``timeout_s``; None on timeout.

        After :meth:`begin_closing` (even one made while this call waits), at most until its deadline.
        """
        deadline = time.monotonic() + timeout_s

        def left() -> float:
            return min(deadline, getattr(self, "_closing_deadline", float("inf"))) - time.monotonic()

        if wait_for_service:
            while not client.service_is_ready():
                if left() <= 0.0:
                    return None
                time.sleep(min(0.05, left()))
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        while not done.wait(min(0.05, max(0.0, left()))) and left() > 0.0:
            pass
        if not done.is_set():
            remove = getattr(client, "remove_pending_request", None)
            if remove is not None:
                remove(future)
            future.cancel()
            return None
        try:
            return future.result()
        except Exception:
            return None
