"""The arm driver node seen through ROS as the rollout loop's :class:`~strands_robots.rollout.backend.RobotBackend`.

:class:`RosDriverBackend` lives on a node that an executor spins on **another thread**: its blocking calls
(``observe`` before the first joint state, ``send_action``, ``acquire``, ...) wait on ``threading.Event`` s
that subscription and response callbacks set, so calling them from a callback of a single-threaded executor
spinning that node would deadlock. The rollout node calls them from its control thread.

- ``observe()`` converts the latest cached ``joint_states`` message (never waits once one has arrived) and
  refuses (:class:`DriverSilent`) one older than the driver silence bound: a stale reading is never handed to
  the policy or recorded as fresh;
- the **command path** (``command_path``): on ``stream`` (the default) :meth:`RosDriverBackend.command_window`
  gives the control loop an asynchronous path: each step's ``ActionCommand`` is published and the loop goes on,
  the ``ActionVerdict`` s are collected as they arrive, and a step's event waits for its own verdict, with at
  most ``command_window_s`` of commands in flight (:mod:`strands_robots.rollout.pipeline`,
  :mod:`strands_robots.driver_link.command_stream`). ``send_action()`` is the single blocking call (publish, wait for
  that verdict). ``service`` is one ``SendAction`` call per step with a timeout (kept for comparison and for
  single calls). A timeout or a missing driver is a coarse verdict, never an exception, so the loop records it
  as ``unknown``;
- ``fault_detail()`` is empty while the driver is heard and names the driver and the silence once it is not
  (:mod:`strands_robots.rollout.driver_watch`): the runner then ends the episode as an error;
- ``advance()`` does nothing (the driver runs on its own clock); ``reset()`` moves the arms to the start pose
  (``reset_moves_to_start_pose``; the rollout node moves them itself, before the episode, to report
  ``start_pose_unreached``);
- the start pose is the driver's ``move_to_start_pose`` action (cancellable, with feedback), or its service
  where the driver offers no action server;
- the lease token is sent with every action and with ``reset_safety``; :meth:`RosDriverBackend.acquire` also
  keeps the lease alive with a heartbeat every third of its duration (the lease, start-pose and safety-reset
  calls are :mod:`.driver_arms`).
"""

from __future__ import annotations

import math
import numbers
import threading
import time
import uuid
from array import array
from typing import Any, Callable, Mapping, Optional, Sequence

from strands_robots.ros.action_client import ActionClient
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState
from strands_robots_msgs.action import MoveToStartPose as MoveToStartPoseAction
from strands_robots_msgs.msg import DriverStatus, SafetyStop
from strands_robots_msgs.srv import (
    AcquireLease,
    MoveToStartPose,
    ReleaseLease,
    RenewLease,
    ResetSafety,
    SendAction,
)

from strands_robots.conversions.actions import response_to_verdict, verdict_msg_to_verdict
from strands_robots.conversions.joint_state import driver_joint_state_to_observation
from strands_robots.arm.lookahead import flatten
from strands_robots.arm.verdict import ActionVerdict
from strands_robots.ros.qos import LATCHED_QOS, STATE_QOS
from strands_robots.driver_link.command_stream import CommandStream
from strands_robots.driver_link.arms import DriverArmCalls
from strands_robots.driver_link.stream_window import StreamWindow
from strands_robots.rollout.driver_watch import DriverWatch, default_silence_s
from strands_robots.rollout.pipeline import DEFAULT_WINDOW_S, window_steps

# How long safety_stop_detail() waits for the SafetyStop message after a response said "stopped".
_STOP_DETAIL_WAIT_S = 0.2

COMMAND_PATH_STREAM = "stream"
COMMAND_PATH_SERVICE = "service"
COMMAND_PATHS = (COMMAND_PATH_STREAM, COMMAND_PATH_SERVICE)
# Stream path: commands in flight at most, as time (rollout/pipeline.py says why 50 ms); it is also how long
# after sending a command the driver still applies it (apply_by): past that it is stale and the arms hold, so a
# starved driver never applies more than this much of the trajectory late, in a burst.
DEFAULT_COMMAND_WINDOW_S = DEFAULT_WINDOW_S
COMMAND_WINDOW_MIN_S = 0.005
COMMAND_WINDOW_MAX_S = 0.5


class DriverSilent(RuntimeError):
    """The arm driver has not been heard for longer than the silence bound (its text names the driver)."""


class RosDriverBackend(DriverArmCalls):
    """A ``RobotBackend`` over the arm driver node's topics, services and actions.

    :param node: the node to create subscriptions, clients and the heartbeat timer on; spun elsewhere.
    :param driver_namespace: prefix of the driver's names (``""``: relative to ``node``'s namespace, e.g.
        ``send_action``; ``"/arms"``: ``/arms/send_action``).
    :param action_timeout_s: ``SendAction`` deadline on the service path; past it the verdict is coarse.
    :param wait_timeout_s: how long ``observe()``/``action_keys()`` wait for the first message.
    :param lease_token: token to send with every action (e.g. one the station acquired); ``acquire()``
        replaces it.
    :param joint_limits: ``{key: (lower, upper)}`` as the driver is configured; handed to the policy through
        :meth:`joint_limits` (the driver still enforces its own).
    :param command_path: ``stream`` (ActionCommand / ActionVerdict topics) or ``service`` (``SendAction``).
    :param control_frequency: the rollout's rate; sets the command window in steps and the default silence
        bound (:meth:`set_control_frequency` changes it per episode).
    :param command_window_s: stream path: at most this much of commands in flight (at least 2), and each
        command's ``apply_by`` (sent + this); see :mod:`strands_robots.rollout.pipeline`.
    :param verdict_timeout_s: stream path: a step whose verdict has not come this long after its command is
        ``unknown`` (0: the dead-driver bound).
    :param driver_silence_s: the dead-driver bound; 0 derives it from the control period
        (:func:`~strands_robots.rollout.driver_watch.default_silence_s`).
    :param reset_moves_to_start_pose: ``reset()`` moves the arms to the start pose (raises when unreached).
    """

    def __init__(
        self,
        node: Node,
        driver_namespace: str = "",
        action_timeout_s: float = 0.5,
        wait_timeout_s: float = 5.0,
        lease_token: str = "",
        joint_limits: "Mapping[str, tuple[float, float]] | None" = None,
        command_path: str = COMMAND_PATH_STREAM,
        control_frequency: float = 50.0,
        command_window_s: float = DEFAULT_COMMAND_WINDOW_S,
        verdict_timeout_s: float = 0.0,
        driver_silence_s: float = 0.0,
        reset_moves_to_start_pose: bool = True,
    ) -> None:
        for name_, value in (("action_timeout_s", action_timeout_s), ("wait_timeout_s", wait_timeout_s),
                             ("control_frequency", control_frequency)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name_} must be a finite number > 0, got {value!r}")
        if command_path not in COMMAND_PATHS:
            raise ValueError(f"command_path must be one of {', '.join(COMMAND_PATHS)}, got {command_path!r}")
        if not (isinstance(command_window_s, (int, float)) and math.isfinite(command_window_s)
                and COMMAND_WINDOW_MIN_S <= command_window_s <= COMMAND_WINDOW_MAX_S):
            raise ValueError(f"command_window_s must be in [{COMMAND_WINDOW_MIN_S:g}, {COMMAND_WINDOW_MAX_S:g}] s, "
                             f"got {command_window_s!r}")
        self._node = node
        self.command_path = command_path
        self._action_timeout_s = float(action_timeout_s)
        self._wait_timeout_s = float(wait_timeout_s)
        self._command_window_s = float(command_window_s)
        if not (isinstance(verdict_timeout_s, (int, float)) and math.isfinite(verdict_timeout_s)
                and verdict_timeout_s >= 0):
            raise ValueError(f"verdict_timeout_s must be a finite number >= 0, got {verdict_timeout_s!r}")
        self._verdict_timeout_s = float(verdict_timeout_s)
        self._silence_override_s = float(driver_silence_s or 0.0)
        self.reset_moves_to_start_pose = bool(reset_moves_to_start_pose)
        self.lease_token = lease_token
        self._joint_limits = {k: (float(lo), float(hi)) for k, (lo, hi) in (joint_limits or {}).items()}
        self._lock = threading.Lock()
        # Service answers and the heartbeat: reentrant, so a slow one never holds up another.
        self._group = ReentrantCallbackGroup()
        # The control-rate streams (joint_states, verdicts) get mutually exclusive groups of their own, so under a
        # MultiThreadedExecutor a service answer never waits behind them.
        self._stream_group = MutuallyExclusiveCallbackGroup()
        self._state_group = MutuallyExclusiveCallbackGroup()
        prefix = driver_namespace.rstrip("/")

        def name(n: str) -> str:
            return f"{prefix}/{n}" if prefix else n

        where = prefix or node.get_namespace()
        self.driver_name = f"arm driver {where if where != '/' else '(root namespace)'}"
        self._watch = DriverWatch(self.driver_name, default_silence_s(1.0 / 50.0))
        self._period_s = 1.0 / 50.0
        self.set_control_frequency(control_frequency)

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
        self._run_id = ""
        self._window_run = ""  # the run id the last command window was made for

        self._subs = [
            node.create_subscription(JointState, name("joint_states"), self._on_joint_state, STATE_QOS,
                                     callback_group=self._stream_group),
            node.create_subscription(DriverStatus, name("driver_status"), self._on_status, LATCHED_QOS,
                                     callback_group=self._state_group),
            node.create_subscription(SafetyStop, name("safety_stop"), self._on_safety, LATCHED_QOS,
                                     callback_group=self._state_group),
        ]
        self._stream = CommandStream(node, name("action_commands"), name("action_verdicts"),
                                     callback_group=self._stream_group, on_verdict=self._on_verdict)
        g = self._group
        # The per-step service only on the service path: every entity of the node is in each executor wait.
        self._send = (node.create_client(SendAction, name("send_action"), callback_group=g)
                      if command_path == COMMAND_PATH_SERVICE else None)
        self._acquire = node.create_client(AcquireLease, name("acquire_lease"), callback_group=g)
        self._renew = node.create_client(RenewLease, name("renew_lease"), callback_group=g)
        self._release = node.create_client(ReleaseLease, name("release_lease"), callback_group=g)
        self._reset_safety = node.create_client(ResetSafety, name("reset_safety"), callback_group=g)
        self._move = node.create_client(MoveToStartPose, name("move_to_start_pose"), callback_group=g)
        self._move_action = ActionClient(node, MoveToStartPoseAction, name("move_to_start_pose"), callback_group=g)
        self.start_pose_feedback: Any = None

        self._heartbeat = None
        self._heartbeat_duration_s = 0.0
        self._lease_lost = ""
        self._lease_id = ""

    # -- configuration per episode -----------------------------------------------------------------------------
    def set_control_frequency(self, hz: float) -> None:
        """Set the rollout's rate for the next episode: the command window in steps, default silence bound."""
        hz = float(hz)
        if not (math.isfinite(hz) and hz > 0):
            raise ValueError(f"control frequency must be a finite number > 0, got {hz!r}")
        self._period_s = 1.0 / hz
        self._watch.set_silence(self._silence_override_s or default_silence_s(self._period_s))

    @property
    def silence_s(self) -> float:
        """The dead-driver bound in force (s)."""
        return self._watch.silence_s

    @property
    def verdict_bound_s(self) -> float:
        """Stream path: a step whose verdict has not come this long after its command is unknown (s)."""
        return min(self._verdict_timeout_s, self._watch.silence_s) if self._verdict_timeout_s \
            else self._watch.silence_s

    @property
    def stale_after_s(self) -> float:
        """Stream path: how long after sending a command the driver still applies it (``apply_by``, s)."""
        return self._command_window_s

    @property
    def window_steps(self) -> int:
        """Stream path: commands in flight at most at the current rate."""
        return window_steps(self._command_window_s, self._period_s)

    def command_window(self) -> "StreamWindow | None":
        """Return the control loop's asynchronous command path for one episode (None on the service path)."""
        if self.command_path != COMMAND_PATH_STREAM:
            return None
        with self._lock:
            fresh = bool(self._run_id) and self._run_id != self._window_run
        if not fresh:  # no begin_run for this episode (a caller without the rollout node's tracker): one of its own
            self.begin_run(f"run-{uuid.uuid4().hex}")
        with self._lock:
            self._window_run = self._run_id
        return StreamWindow(self)

    @property
    def stream(self) -> CommandStream:
        """The command stream (its counters: sent, answered, late; command-to-verdict latencies)."""
        return self._stream

    def begin_run(self, run_id: str) -> None:
        """Begin a new episode (lifecycle ``run_id``).

        Commands carry the run id, step indices count from 0 again, and the last episode's unanswered commands
        no longer count toward the silence.
        """
        with self._lock:
            self._run_id = str(run_id)
            self._step_index = 0
        self._stream.begin_run(run_id)
        self._watch.begin()

    # -- subscriptions (executor threads; keep them short) -----------------------------------------------------
    def _on_joint_state(self, msg: JointState) -> None:
        self._joint_state = msg
        self._watch.joint_state()
        self._joint_state_received.set()

    def _on_status(self, msg: DriverStatus) -> None:
        self._status = msg
        self._watch.status()
        self._status_received.set()

    def _on_safety(self, msg: SafetyStop) -> None:
        with self._safety_changed:
            self._safety = msg
            self._stop_unexplained = False
            self._safety_changed.notify_all()

    def _on_verdict(self) -> None:
        stream = self._stream
        self._watch.answered(stream.last_error if stream is not None else "")

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
        """Return the command range per key as the running driver announces it (``DriverStatus``).

        Else as given at construction; the runner tells the policy. The driver enforces its own limits either way.
        """
        status = self._status
        if status is not None and len(status.lower_limits) == len(status.actuator_keys) == len(status.upper_limits) \
                and status.actuator_keys:
            return {k: (float(lo), float(hi))
                    for k, lo, hi in zip(status.actuator_keys, status.lower_limits, status.upper_limits)}
        return dict(self._joint_limits)

    def observe(self) -> dict[str, Any]:
        """Return the latest joint state as an observation dict (``sim_time_s``: the message's robot time).

        :raises TimeoutError: no ``joint_states`` within ``wait_timeout_s`` (driver not active?).
        :raises DriverSilent: the latest ``joint_states`` is older than the silence bound: it is not handed out
            as a fresh observation.
        """
        msg = self._joint_state
        if msg is None:
            if not self._joint_state_received.wait(self._wait_timeout_s):
                raise TimeoutError(f"no joint_states from the arm driver within {self._wait_timeout_s:g} s "
                                   "(is it active?)")
            msg = self._joint_state
        stale = self._watch.stale_observation()
        if stale:
            raise DriverSilent(stale)
        cached_msg, cached_obs = self._obs_cache
        if cached_msg is not msg:
            cached_obs = driver_joint_state_to_observation(msg)
            self._obs_cache = (msg, cached_obs)
        return dict(cached_obs)

    def fault_detail(self) -> str:
        """Empty while the driver is heard; else why the episode must end (names the driver and the silence)."""
        return self._watch.fault()

    def send_action(self, action: Mapping[str, float]) -> ActionVerdict:
        """Apply one action by the command path.

        :returns: a verdict for every key, or a coarse error (no verdict in time, no driver, bad input).
        """
        refused = _malformed(action)
        if refused is not None:
            return refused
        if self.command_path == COMMAND_PATH_STREAM:
            return self._send_streamed(action)
        return self._send_service(action)

    def _next_step(self) -> tuple[str, int]:
        with self._lock:
            step_index = self._step_index
            self._step_index += 1
            return self._run_id, step_index

    def _send_streamed(self, action: Mapping[str, float]) -> ActionVerdict:
        """Send one command and wait for its verdict (the control loop uses :meth:`command_window` instead)."""
        if not self._stream.driver_listening():
            return ActionVerdict.coarse(_NOT_LISTENING)
        run_id, step_index = self._next_step()
        wait_s = self.verdict_bound_s
        self._watch.command_sent()
        msg = self._stream.send(_wire(action), run_id, step_index, self.lease_token, wait_s,
                                stale_after_s=self.stale_after_s)
        if msg is None:
            return ActionVerdict.coarse(f"no verdict from the {self.driver_name} within {wait_s:g} s "
                                        f"(step {step_index})")
        self._note_stopped(msg.stopped)
        return verdict_msg_to_verdict(msg)

    def _publish_streamed(self, action: Mapping[str, float],
                          lookahead: "Sequence[Mapping[str, Any]]" = ()) -> "int | ActionVerdict":
        """Publish one step's command and return its step index; a coarse verdict when nothing was sent.

        ``lookahead``: the rest of the step's chunk, carried on (flattened, signed) for hardware that takes
        trajectories (:mod:`strands_robots.arm.lookahead`), one control period apart.
        """
        refused = _malformed(action)
        if refused is not None:
            return refused
        if not self._stream.driver_listening():
            return ActionVerdict.coarse(_NOT_LISTENING)
        run_id, step_index = self._next_step()
        self._watch.command_sent()
        wire = _wire(action)
        ahead = flatten(tuple(wire), lookahead) if lookahead else []
        self._stream.publish(wire, run_id, step_index, self.lease_token, self.stale_after_s, ahead,
                             self._period_s)
        return step_index

    def _send_service(self, action: Mapping[str, float]) -> ActionVerdict:
        if not self._send.service_is_ready():
            return ActionVerdict.coarse("arm driver not available (no send_action service)")
        _, step_index = self._next_step()
        req = SendAction.Request()
        req.lease_token = self.lease_token
        req.step_index = step_index
        req.keys = list(action)
        # A value that is not a real number cannot cross the wire; NaN makes the driver say non_finite.
        req.values = array("d", (_as_wire_float(v) for v in action.values()))
        self._watch.command_sent()
        res = self._call(self._send, req, self._action_timeout_s)
        if res is None:
            return ActionVerdict.coarse(f"send_action timed out after {self._action_timeout_s:g} s")
        self._watch.answered(res.error)
        self._note_stopped(res.stopped)
        return response_to_verdict(res)

    def _note_stopped(self, stopped: bool) -> None:
        if stopped:
            with self._safety_changed:
                if self._safety is None or not self._safety.stopped:
                    self._stop_unexplained = True

    def advance(self, dt: float) -> None:
        """Nothing: the driver steps its physics in real time on its own thread."""

    def reset(self, seed: "int | None" = None) -> None:
        """Before every episode: move the arms to the start pose (when ``reset_moves_to_start_pose``).

        The physics itself is not reset over ROS (the driver keeps running); the seed reaches the policy, not
        the driver. :raises RuntimeError: the start pose was not reached.
        """
        if not self.reset_moves_to_start_pose:
            return
        outcome = self.move_to_start_pose()
        if not outcome.reached:
            raise RuntimeError(f"start pose unreached: {outcome.detail}")

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

    def latest_joint_state(self) -> Optional[JointState]:
        """Return the latest ``joint_states`` message as received (None before the first)."""
        return self._joint_state

    def latest_safety_stop(self) -> Optional[SafetyStop]:
        return self._safety

    def wait_until_ready(self, timeout_s: float = 5.0, should_stop: "Callable[[], bool] | None" = None) -> bool:
        """Wait until the driver is ready; False when it was not within ``timeout_s`` (or ``should_stop()``).

        Ready: the command path is up (the command stream matched, or the ``send_action`` service) and a fresh
        joint state (younger than the silence bound) has arrived.
        """
        deadline = time.monotonic() + timeout_s
        asked_stop = should_stop or (lambda: False)

        def stop() -> bool:
            return asked_stop() or self._closing_passed()  # a closing process waits no longer (begin_closing)

        while True:
            if self.command_path == COMMAND_PATH_SERVICE:
                path_up = self._send.service_is_ready()
            else:
                path_up = self._stream.driver_listening()
            if path_up and self._watch.joint_state_age_s() <= self._watch.silence_s:
                return True
            if time.monotonic() >= deadline or stop():
                return False
            time.sleep(0.01)

    def close(self) -> None:
        """Stop the heartbeat and destroy the subscriptions, clients and the command stream (the node stays)."""
        self._stop_heartbeat()
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._subs = []
        self._stream.close()
        for client in (self._send, self._acquire, self._renew, self._release, self._reset_safety, self._move):
            if client is not None:
                self._node.destroy_client(client)
        self._move_action.destroy()

_NOT_LISTENING = ("arm driver not available (no subscriber on action_commands or no publisher of "
                  "action_verdicts)")


def _malformed(action: Any) -> "ActionVerdict | None":
    """Return the coarse verdict for an action that is not a mapping of string keys (None when it is)."""
    if not isinstance(action, Mapping):
        return ActionVerdict.coarse(f"action must be a mapping of actuator key to float, got {type(action).__name__}")
    for key in action:
        if not isinstance(key, str):
            return ActionVerdict.coarse(f"action keys must be strings, got {type(key).__name__} {key!r}")
    return None


def _wire(action: Mapping[str, Any]) -> dict:
    """Return the action as float64 values: a value that is not a real number is NaN (the driver says non_finite)."""
    return {k: _as_wire_float(v) for k, v in action.items()}


def _as_wire_float(value: Any) -> float:
    """Return the value as a float64 for the wire; anything that is not a real number (bool included) is NaN."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # 0-d numpy array
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return math.nan
    return float(value)
