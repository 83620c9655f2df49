"""The arm driver node seen through ROS as the rollout loop's :class:`~strands_robots.rollout.backend.RobotBackend`.

:class:`RosDriverBackend` lives on a node that an executor spins on **another thread**: its blocking calls
(``observe`` before the first joint state, ``send_action``, ``acquire``, ...) wait on ``threading.Event`` s
that subscription and response callbacks set, so calling them from a callback of a single-threaded executor
spinning that node would deadlock. The rollout node calls them from its control thread.

- ``observe()`` converts the latest cached ``joint_states`` message (never waits once one has arrived);
- ``send_action()`` is one ``SendAction`` call with a timeout; a timeout or a missing driver is a coarse
  verdict, never an exception, so the loop records it as ``unknown``;
- ``advance()`` and ``reset()`` do nothing: the driver runs on its own clock, and moving to the start pose is
  an explicit step of the station (:meth:`RosDriverBackend.move_to_start_pose`);
- the lease token is sent with every action; :meth:`RosDriverBackend.acquire` also keeps the lease alive with
  a heartbeat every third of its duration.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from array import array
from typing import Any, Mapping, Optional

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState
from strands_robots_msgs.msg import DriverStatus, SafetyStop
from strands_robots_msgs.srv import (
    AcquireLease,
    MoveToStartPose,
    ReleaseLease,
    RenewLease,
    ResetSafety,
    SendAction,
)

from strands_robots import convert
from strands_robots.arm.verdict import ActionVerdict
from strands_robots.nodes._qos import LATCHED_QOS, STATE_QOS

# How long safety_stop_detail() waits for the SafetyStop message after a response said "stopped".
_STOP_DETAIL_WAIT_S = 0.2


class RosDriverBackend:
    """A ``RobotBackend`` over the arm driver node's topics and services.

    :param node: the node to create subscriptions, clients and the heartbeat timer on; spun elsewhere.
    :param driver_namespace: prefix of the driver's names (``""``: relative to ``node``'s namespace, e.g.
        ``send_action``; ``"/arms"``: ``/arms/send_action``).
    :param action_timeout_s: ``send_action`` deadline; past it the verdict is coarse.
    :param wait_timeout_s: how long ``observe()``/``action_keys()`` wait for the first message.
    :param lease_token: token to send with every action (e.g. one the station acquired); ``acquire()``
        replaces it.
    :param joint_limits: ``{key: (lower, upper)}`` as the driver is configured; handed to the policy through
        :meth:`joint_limits` (the driver still enforces its own).
    """

    def __init__(
        self,
        node: Node,
        driver_namespace: str = "",
        action_timeout_s: float = 0.5,
        wait_timeout_s: float = 5.0,
        lease_token: str = "",
        joint_limits: "Mapping[str, tuple[float, float]] | None" = None,
    ) -> None:
        for name, value in (("action_timeout_s", action_timeout_s), ("wait_timeout_s", wait_timeout_s)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        self._node = node
        self._action_timeout_s = float(action_timeout_s)
        self._wait_timeout_s = float(wait_timeout_s)
        self.lease_token = lease_token
        self._joint_limits = {k: (float(lo), float(hi)) for k, (lo, hi) in (joint_limits or {}).items()}
        self._lock = threading.Lock()
        # Service answers and the heartbeat: reentrant, so a slow one never holds up another.
        self._group = ReentrantCallbackGroup()
        # The control-rate joint_states stream gets a mutually exclusive group of its own: in a reentrant
        # group, rclpy's MultiThreadedExecutor re-dispatches a 200 Hz subscription faster than its threads
        # drain it, and service answers waited behind it (send_action p99 7 ms -> 70..400 ms, measured).
        self._stream_group = MutuallyExclusiveCallbackGroup()
        self._state_group = MutuallyExclusiveCallbackGroup()
        prefix = driver_namespace.rstrip("/")

        def name(n: str) -> str:
            return f"{prefix}/{n}" if prefix else n

        self._joint_state: Optional[JointState] = None
        self._joint_state_received = threading.Event()
        self._obs_cache: tuple[Optional[JointState], dict] = (None, {})
        self._status: Optional[DriverStatus] = None
        self._status_received = threading.Event()
        self._safety: Optional[SafetyStop] = None
        self._safety_changed = threading.Condition()
        # A send_action answer said "stopped" and no SafetyStop has arrived since (guarded by _safety_changed).
        self._stop_unexplained = False
        self._step_index = 0

        self._subs = [
            node.create_subscription(JointState, name("joint_states"), self._on_joint_state, STATE_QOS,
                                     callback_group=self._stream_group),
            node.create_subscription(DriverStatus, name("driver_status"), self._on_status, LATCHED_QOS,
                                     callback_group=self._state_group),
            node.create_subscription(SafetyStop, name("safety_stop"), self._on_safety, LATCHED_QOS,
                                     callback_group=self._state_group),
        ]
        g = self._group
        self._send = node.create_client(SendAction, name("send_action"), callback_group=g)
        self._acquire = node.create_client(AcquireLease, name("acquire_lease"), callback_group=g)
        self._renew = node.create_client(RenewLease, name("renew_lease"), callback_group=g)
        self._release = node.create_client(ReleaseLease, name("release_lease"), callback_group=g)
        self._reset_safety = node.create_client(ResetSafety, name("reset_safety"), callback_group=g)
        self._move = node.create_client(MoveToStartPose, name("move_to_start_pose"), callback_group=g)

        self._heartbeat = None
        self._heartbeat_duration_s = 0.0
        self._lease_lost = ""
        self._lease_id = ""

    # -- subscriptions (executor threads; keep them short) -----------------------------------------------------
    def _on_joint_state(self, msg: JointState) -> None:
        self._joint_state = msg
        self._joint_state_received.set()

    def _on_status(self, msg: DriverStatus) -> None:
        self._status = msg
        self._status_received.set()

    def _on_safety(self, msg: SafetyStop) -> None:
        with self._safety_changed:
            self._safety = msg
            self._stop_unexplained = False
            self._safety_changed.notify_all()

    # -- RobotBackend ------------------------------------------------------------------------------------------
    def action_keys(self) -> tuple[str, ...]:
        """Every key the driver can apply (``DriverStatus.actuator_keys``, waiting for the first status).

        :raises TimeoutError: no ``driver_status`` within ``wait_timeout_s`` (driver not configured?).
        """
        if not self._status_received.wait(self._wait_timeout_s):
            raise TimeoutError(f"no driver_status from the arm driver within {self._wait_timeout_s:g} s "
                               "(is it running and configured?)")
        return tuple(self._status.actuator_keys)

    def joint_limits(self) -> dict[str, tuple[float, float]]:
        """The command range per key as the running driver announces it (``DriverStatus``), else as given at
        construction; the runner tells the policy. The driver enforces its own limits either way."""
        status = self._status
        if status is not None and len(status.lower_limits) == len(status.actuator_keys) == len(status.upper_limits) \
                and status.actuator_keys:
            return {k: (float(lo), float(hi))
                    for k, lo, hi in zip(status.actuator_keys, status.lower_limits, status.upper_limits)}
        return dict(self._joint_limits)

    def observe(self) -> dict[str, Any]:
        """The latest joint state as an observation dict (``sim_time_s`` = the message's robot-time stamp).

        :raises TimeoutError: no ``joint_states`` within ``wait_timeout_s`` (driver not active?).
        """
        msg = self._joint_state
        if msg is None:
            if not self._joint_state_received.wait(self._wait_timeout_s):
                raise TimeoutError(f"no joint_states from the arm driver within {self._wait_timeout_s:g} s "
                                   "(is it active?)")
            msg = self._joint_state
        cached_msg, cached_obs = self._obs_cache
        if cached_msg is not msg:
            cached_obs = convert.joint_state_to_observation(msg)
            self._obs_cache = (msg, cached_obs)
        return dict(cached_obs)

    def send_action(self, action: Mapping[str, float]) -> ActionVerdict:
        """One ``SendAction`` call; a verdict for every key, or a coarse error (timeout, no driver, bad input)."""
        if not isinstance(action, Mapping):
            return ActionVerdict.coarse(
                f"action must be a mapping of actuator key to float, got {type(action).__name__}")
        for key in action:
            if not isinstance(key, str):
                return ActionVerdict.coarse(f"action keys must be strings, got {type(key).__name__} {key!r}")
        if not self._send.service_is_ready():
            return ActionVerdict.coarse("arm driver not available (no send_action service)")
        with self._lock:
            step_index = self._step_index
            self._step_index += 1
        req = SendAction.Request()
        req.lease_token = self.lease_token
        req.step_index = step_index
        req.keys = list(action)
        # A value that is not a real number cannot cross the wire; NaN makes the driver say non_finite.
        req.values = array("d", (_as_wire_float(v) for v in action.values()))
        res = self._call(self._send, req, self._action_timeout_s)
        if res is None:
            return ActionVerdict.coarse(f"send_action timed out after {self._action_timeout_s:g} s")
        if res.stopped:
            with self._safety_changed:
                if self._safety is None or not self._safety.stopped:
                    self._stop_unexplained = True
        return convert.response_to_verdict(res)

    def advance(self, dt: float) -> None:
        """Nothing: the driver steps its physics in real time on its own thread."""

    def reset(self, seed: "int | None" = None) -> None:
        """Nothing: the physics reset is not exposed over ROS; the station moves to the start pose instead."""

    def safety_stop_detail(self) -> str:
        """Every tripped check's text (``"; "``-joined) from the latest ``SafetyStop``; empty while free.

        When the last ``send_action`` answer said the arms are stopped but the latched ``SafetyStop`` has not
        arrived yet, waits briefly for it rather than report a stop without its reason.
        """
        with self._safety_changed:
            if self._stop_unexplained:
                self._safety_changed.wait_for(lambda: not self._stop_unexplained, timeout=_STOP_DETAIL_WAIT_S)
                if self._stop_unexplained:
                    return "safety stop in force (the driver's SafetyStop message has not arrived)"
            msg = self._safety
        if msg is None or not msg.stopped:
            return ""
        return msg.detail or "safety stop in force"

    # -- beyond RobotBackend: driver status, leases, start pose, reset ----------------------------------------
    def latest_status(self) -> Optional[DriverStatus]:
        return self._status

    def latest_safety_stop(self) -> Optional[SafetyStop]:
        return self._safety

    def wait_until_ready(self, timeout_s: float = 5.0) -> bool:
        """Whether the driver's services are up and a joint state has arrived within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        if not self._send.wait_for_service(timeout_sec=timeout_s):
            return False
        return self._joint_state_received.wait(max(0.0, deadline - time.monotonic()))

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

    def release(self, timeout_s: float = 2.0) -> bool:
        """Give the lease back (stops the heartbeat first). False when the driver refused or did not answer."""
        self._stop_heartbeat()
        token, self.lease_token = self.lease_token, ""
        if not token:
            return False
        req = ReleaseLease.Request()
        req.token = token
        res = self._call(self._release, req, timeout_s, wait_for_service=True)
        return bool(res is not None and res.ok)

    def move_to_start_pose(self, tolerance: float = 0.0, timeout_s: float = 0.0,
                           call_timeout_s: "float | None" = None) -> MoveToStartPose.Response:
        """Ask the driver to move to its start pose with the current lease token, and wait for the outcome.

        :param tolerance: rad; 0 uses the driver's configured tolerance.
        :param timeout_s: robot-time settle deadline; 0 uses the configured one.
        :param call_timeout_s: wall-clock wait for the answer (default: ``timeout_s`` or 3 s, plus 5 s).
        :raises TimeoutError: no answer in time.
        """
        req = MoveToStartPose.Request()
        req.lease_token = self.lease_token
        req.tolerance = float(tolerance)
        req.timeout_s = float(timeout_s)
        wait = call_timeout_s if call_timeout_s is not None else (timeout_s or 3.0) + 5.0
        res = self._call(self._move, req, wait, wait_for_service=True)
        if res is None:
            raise TimeoutError(f"move_to_start_pose: no answer within {wait:g} s")
        return res

    def reset_safety(self, operator_name: str, timeout_s: float = 2.0) -> ResetSafety.Response:
        """Clear a safety stop (an explicit operator action). :raises TimeoutError: no answer in time."""
        req = ResetSafety.Request()
        req.operator_name = operator_name
        res = self._call(self._reset_safety, req, timeout_s, wait_for_service=True)
        if res is None:
            raise TimeoutError(f"reset_safety: no answer within {timeout_s:g} s")
        return res

    def close(self) -> None:
        """Stop the heartbeat and destroy the subscriptions and clients (the node stays)."""
        self._stop_heartbeat()
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._subs = []
        for client in (self._send, self._acquire, self._renew, self._release, self._reset_safety, self._move):
            self._node.destroy_client(client)

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

    def _call(self, client: Any, request: Any, timeout_s: float, wait_for_service: bool = False) -> Any:
        """Call and wait (on an Event set by the response) at most ``timeout_s``; None on timeout."""
        deadline = time.monotonic() + timeout_s
        if wait_for_service and not client.wait_for_service(timeout_sec=timeout_s):
            return None
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(max(0.0, deadline - time.monotonic())):
            remove = getattr(client, "remove_pending_request", None)
            if remove is not None:
                remove(future)
            future.cancel()
            return None
        try:
            return future.result()
        except Exception:
            return None


def _as_wire_float(value: Any) -> float:
    """The value as a float64 for the request; anything that is not a real number (bool included) -> NaN."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # 0-d numpy array
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return math.nan
    return float(value)
