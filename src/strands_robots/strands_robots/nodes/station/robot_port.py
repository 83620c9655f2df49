"""The station's :class:`~strands_robots.station.ports.RobotPort` over ROS: the arm driver and the rollout node.

Per episode, as :mod:`strands_robots.station.inprocess` does in one process:

- **lease** (:mod:`.station_lease`): ``RosDriverBackend.acquire`` (the driver's ``acquire_lease``) without the
  backend's own heartbeat: this port renews the lease itself every third of its length, so a task can stop the heartbeat
  (``fault.stop_heartbeat_at_s``, the worker's heartbeat stopping) and the lease runs out at the driver. The
  lease is watched on the driver's latched ``lease_state`` and on every renewal answer: expired -> the
  rollout is stopped and the episode ends ``lease_lost``; taken by a higher-priority claim (an operator, another
  controller) -> ``authority_lost``;
- **safety stop**: never cleared by the station itself. The core waits for an operator's clear
  (``station.safety_gate``) and :meth:`RosRobotPort.clear_safety_stop` relays it: the driver's ``reset_safety``
  with the station's lease, under the operator's name;
- **start pose**: ``RosDriverBackend.move_to_start_pose`` with the plan's tolerance and timeout;
- **holder names**: the core names the rollout's lease ``station:<station_id>``; an operator's claim is named
  ``operator:<name>@<station_id>`` after it (``arm.lease``: only a claim of the same station preempts);
- **rollout**: the rollout node's ``run_episode`` action, with the station's lease token (the goal is sent under
  one goal id until the rollout node answers, see :meth:`RosRobotPort._send_goal`); the policy provider
  ``relay`` gets the job and episode in ``policy_config_json`` (the relay and the token are the rollout node's own,
  from its ``relay_credentials_file``; :mod:`strands_robots.policies.relay`).
  Feedback (rollout time) reaches the operator's progress hook. A rollout whose relay policy was lost
  (``RelayPolicyLost``) is reported ``policy_lost`` so the station waits for the policy and runs the task again;
- **takeover**: the rollout node's ``pause_rollout`` / ``resume_rollout`` services;
- **operator claim**: an ``acquire_lease`` above the rollout's priority (then released): the rollout's lease is
  revoked and the episode ends ``authority_lost``;
- **waiting for the policy** (:mod:`.station_policy`, with the goal's policy config): a policy session opened
  on the relay until the job's client attaches (or the core's deadline ends the wait);
- **preflight** (:mod:`.preflight`): on that session, before any lease, one observation of the arms as they
  stand and the cameras, its answer returned for the core to check;
- **faults**: what is the station's and not the policy's is said so, and the core keeps the episode as an
  ``infrastructure_fault`` and runs its task again: the driver not ready or not answering (lease, start pose:
  :class:`~strands_robots.station.ports.InfrastructureFault`), the rollout node not there, not answering,
  busy with an episode not ours, or dying under the goal (its action server's identity, the GIDs of its status
  publisher, is watched: replaced by a restarted node, or gone for a few seconds), and the rollout's own
  ``error_type`` (``DriverFault``, ``InferenceTimeout``) passed on for the core to judge. A goal that cannot
  be built (a value outside its field's range) raises before anything is sent.

Every method blocks and is called from the station's job thread, never from an executor callback; the node is
spun on another thread.
"""

from __future__ import annotations

import collections
import json
import math
import threading
import time
import uuid
from typing import Any, Callable, Deque, Mapping, Optional, Tuple

from action_msgs.msg import GoalStatus
from strands_robots.ros.action_client import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from strands_robots_msgs.action import RunEpisode
from strands_robots_msgs.msg import LeaseState
from strands_robots_msgs.srv import AcquireLease, ReleaseLease, RenewLease, Resume, Takeover

from strands_robots.arm.driver import REFUSED_NOT_LEASE_HOLDER
from strands_robots.conversions.station import station_task_to_msg
from strands_robots.ros.qos import LATCHED_QOS
from strands_robots.driver_link.client import RosDriverBackend
from strands_robots.nodes.station.episode_goal import REFUSED, ServerWatch, send_episode_goal, server_gids
from strands_robots.nodes.station.lease import OPERATOR_CLAIM_PRIORITY, StationLeaseCalls
from strands_robots.nodes.station.policy import RelaySettings, StationPolicyCalls
from strands_robots.nodes.station.preflight import StationPreflightCalls
from strands_robots.station.ports import InfrastructureFault, RolloutOutcome, ended_report
from strands_robots.station.job import EpisodePlan

__all__ = ["RosRobotPort", "PARAM_STOP_HEARTBEAT_AT_S", "OPERATOR_CLAIM_PRIORITY", "POLICY_LOST_ERROR"]

PARAM_STOP_HEARTBEAT_AT_S = "fault.stop_heartbeat_at_s"  # the same names as station.inprocess uses
POLICY_LOST_ERROR = "RelayPolicyLost"
POLICY_LOST_MARKER = "relay policy lost"  # policies/relay.py's LOST_MARKER (that module imports grpc on use)
_CALL_TIMEOUT_S = 5.0
# Once the station node is shutting down (its job suspended, nothing more persisted), the rollout node's answers
# are waited for this long at most: the rollout node is stopping too, and a whole station stops within a launch's
# SIGINT grace (5 s) without a SIGTERM.
_CLOSING_WAIT_S = 1.0
_SERVER_CHECK_S = 0.25  # how often a running goal's action server is looked up in the ROS graph


def _recording_sha256(path: str) -> str:
    """Return the SHA-256 of the rollout's recording (this station's file), empty when none was written."""
    if not path:
        return ""
    from strands_robots.station.provenance import file_sha256

    try:
        return file_sha256(path)
    except OSError:  # the rollout node is on another host, or the file went away: not this station's to hash
        return ""


def _name(prefix: str, name: str) -> str:
    prefix = prefix.rstrip("/")
    return f"{prefix}/{name}" if prefix else name


class RosRobotPort(StationLeaseCalls, StationPolicyCalls, StationPreflightCalls):
    """The robot side of the station node (see the module docstring).

    :param node: the station node (spun on another thread).
    :param driver_namespace: the arm driver's namespace ("" = the node's).
    :param rollout_namespace: the rollout node's namespace ("" = the node's).
    :param link: the station's :class:`~strands_robots.station_link.link.StationLink` (None: no relay; only
        in-process providers such as ``mock`` can run).
    :param camera_set: the station's cameras (cameras.yaml's ``CameraSet``) the preflight takes a frame of; None:
        none.
    :param camera_namespace: where their ``<camera>/image_raw`` topics are ("" = the node's namespace).
    """

    #: each episode of a comparison job reaches the policy of its slot (its own relay policy session)
    serves_slots = True

    def __init__(self, node: Any, *, driver_namespace: str = "", rollout_namespace: str = "",
                 robot_name: str = "sim_arms", relay: Optional[RelaySettings] = None, link: Any = None,
                 action_horizon: int = 8, operator_name: str = "station-operator", async_rtc: bool = False,
                 rtc_inference_timeout_s: float = 0.0, record: bool = False, driver_ready_timeout_s: float = 10.0,
                 new_goal_id: Callable[[], bytes] = lambda: uuid.uuid4().bytes,
                 on_recording: Optional[Callable[[str, EpisodePlan, str, str, str], None]] = None,
                 camera_set: Any = None, camera_namespace: str = "") -> None:
        if isinstance(driver_ready_timeout_s, bool) or not isinstance(driver_ready_timeout_s, (int, float)) \
                or not math.isfinite(driver_ready_timeout_s) or driver_ready_timeout_s <= 0:
            raise ValueError(f"driver_ready_timeout_s must be a finite number > 0, got {driver_ready_timeout_s!r}")
        # how long a lease (an episode's start) waits for the driver to be ready before it is the station's fault
        self.driver_ready_timeout_s = float(driver_ready_timeout_s)
        self._node = node
        # (job_id, plan, run_id, path, sha256) of each recording, on the job thread before the episode is
        # persisted as finished: the station keeps a relay job's recording pending on disk from here
        self._on_recording = on_recording
        self._new_goal_id = new_goal_id  # 16 bytes per episode goal (injectable: a test sends that id first)
        self._relay = relay
        self._link = link
        self.robot_name = robot_name
        self.action_horizon = int(action_horizon)
        self.operator_name = operator_name
        self.async_rtc = bool(async_rtc)
        self.rtc_inference_timeout_s = float(rtc_inference_timeout_s)
        self.record = bool(record)  # each rollout recorded to MCAP in the rollout node's recording_dir
        # run_id -> the recording the rollout node wrote; the station node sends it to the job's team
        self.recordings: dict = {}
        group = ReentrantCallbackGroup()
        self.backend = RosDriverBackend(node, driver_namespace=driver_namespace, reset_moves_to_start_pose=False,
                                        wait_timeout_s=5.0)
        self._renew = node.create_client(RenewLease, _name(driver_namespace, "renew_lease"), callback_group=group)
        self._claim = node.create_client(AcquireLease, _name(driver_namespace, "acquire_lease"),
                                         callback_group=group)
        self._release = node.create_client(ReleaseLease, _name(driver_namespace, "release_lease"),
                                           callback_group=group)
        self._lease_sub = node.create_subscription(LeaseState, _name(driver_namespace, "lease_state"),
                                                   self._on_lease_state, LATCHED_QOS, callback_group=group)
        self._run = ActionClient(node, RunEpisode, _name(rollout_namespace, "run_episode"), callback_group=group)
        self._run_status_topic = _resolve(node, _name(rollout_namespace, "run_episode")) + "/_action/status"
        self._pause = node.create_client(Takeover, _name(rollout_namespace, "pause_rollout"), callback_group=group)
        self._resume = node.create_client(Resume, _name(rollout_namespace, "resume_rollout"), callback_group=group)
        self._close_sessions = node.create_client(Resume, _name(rollout_namespace, "close_policy_sessions"),
                                                  callback_group=group)
        from rclpy.parameter_client import AsyncParameterClient

        self._rollout_params = AsyncParameterClient(node, _resolve(node, _name(rollout_namespace, "rollout")),
                                                    callback_group=group)
        self._lock = threading.Lock()
        self._renewals: Any = None  # the lease's RenewalThread while one is held
        self._heartbeat = True
        self._lease_duration_s = 1.0
        self._lease_id = ""
        self._holder = ""
        self._lease_priority = 0
        self._lease_end: Tuple[str, str] = ("", "")
        self._goal_handle: Any = None
        self._running = False
        self._pending_stop = ""
        self._closing_at: Optional[float] = None  # monotonic time of begin_closing()
        self._taken_over = False
        self.claims: list = []  # (holder, message) of granted operator claims, newest last
        self._declared: dict = {}  # job id -> its attached policy's PolicySpec (compatibility gate, provenance)
        self._declared_slots: dict = {}  # job id -> {slot: PolicySpec or None} of a comparison (the gate's)
        self._init_preflight(camera_set, camera_namespace)  # sessions kept for the preflight, its camera frames
        # How the newest episode goals were answered ("accepted (the answer to send 1; 2 of 8 sent)", ...).
        self.goal_log: Deque[str] = collections.deque(maxlen=64)

    # -- lease ----------------------------------------------------------------------------------------------
    # -- safety stop (cleared only on an operator's request, relayed by the core) ----------------------------
    def safety_stop_detail(self) -> str:
        stop = self.backend.latest_safety_stop()
        status = self.backend.latest_status()
        if stop is None and status is not None and status.stopped:
            # The driver says stopped before its first latched SafetyStop reached us: give it a moment to say why.
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and stop is None:
                time.sleep(0.05)
                stop = self.backend.latest_safety_stop()
            if stop is None:
                return "the driver reports the arms stopped (no SafetyStop detail received)"
        if stop is None or not stop.stopped:
            return ""
        return stop.detail or "the driver stopped the arms without naming a check"

    def clear_safety_stop(self, operator_name: str) -> Tuple[bool, str]:
        try:
            res = self.backend.reset_safety(operator_name)  # with this station's lease token, naming the operator
            if not res.ok and res.message.startswith(REFUSED_NOT_LEASE_HOLDER) and self.reclaim_lease():
                res = self.backend.reset_safety(operator_name)  # the lease ran out while the stop waited
        except TimeoutError as exc:
            return False, str(exc)
        deadline = time.monotonic() + 2.0  # the driver publishes the released stop right after answering
        while res.ok and time.monotonic() < deadline:
            stop = self.backend.latest_safety_stop()
            if stop is None or not stop.stopped:
                break
            time.sleep(0.05)
        return bool(res.ok), res.message

    # -- start pose -----------------------------------------------------------------------------------------
    def move_to_start_pose(self, plan: EpisodePlan) -> Tuple[bool, str]:
        try:
            report = self.backend.move_to_start_pose(tolerance=plan.start_pose_tolerance_rad,
                                                     timeout_s=plan.start_pose_timeout_s)
        except TimeoutError as exc:  # the driver did not answer: it is not the arms that failed to settle
            raise InfrastructureFault(f"{self.backend.driver_name} did not answer move_to_start_pose: {exc}") \
                from None
        if report.reached:
            return True, f"start pose reached (max error {report.max_error:.4f} rad in {report.elapsed_s:.2f} s)"
        return False, report.detail

    # -- rollout --------------------------------------------------------------------------------------------
    def run_rollout(self, plan: EpisodePlan, progress: Callable[[float], None]) -> RolloutOutcome:
        with self._lock:
            if self._pending_stop:
                reason, self._pending_stop = self._pending_stop, ""
                return RolloutOutcome(stopped_reason="cancelled", end_detail=reason)
            token = self.backend.lease_token
            self._taken_over = False
        try:
            goal = self._goal(plan, token)
        except (AssertionError, ValueError, TypeError, OverflowError) as exc:  # rosidl's setters assert ranges
            raise ValueError(f"{plan.episode_id}: the run_episode goal could not be built (nothing was sent): "
                             f"{type(exc).__name__}: {exc}") from None
        stop_heartbeat_at = _seconds_param(plan.task.parameters, PARAM_STOP_HEARTBEAT_AT_S)

        latest = [-1.0]  # rollout time of the newest feedback (set on the executor, read on this thread)

        def on_feedback(msg: Any) -> None:
            latest[0] = float(msg.feedback.elapsed_s)

        # The rollout node not there, not answering or busy with an episode not ours is the station's fault, not
        # the policy's: the episode is an infrastructure fault and its task runs again (bounded, in the core).
        deadline = time.monotonic() + 10.0
        while not self._run.server_is_ready():
            if self._closing_left() == 0.0:  # the station is shutting down: the job is suspended, not ended
                return RolloutOutcome(stopped_reason="cancelled", end_detail="the station is shutting down")
            if time.monotonic() >= deadline:
                gone = "the rollout node's run_episode action is not available"
                return RolloutOutcome(stopped_reason="error", end_detail=gone, infrastructure=gone)
            time.sleep(0.05)
        handle, how = self._send_goal(goal, on_feedback)
        if handle is None:
            return RolloutOutcome(stopped_reason="error", end_detail=how, infrastructure=how)
        # A goal adopted after a refusal has no proof yet that the server holds it: its result says (an unknown id
        # is STATUS_UNKNOWN). That first answer (or the goal's feedback) is awaited before the episode counts as
        # running, so a goal really refused never lets the operator pause an episode that is not this one; until
        # feedback shows it running, the question is asked again now and then, in case an answer was lost.
        adopted = how == "adopted"
        done = threading.Event()
        result_futures = [handle.get_result_async()]
        result_futures[0].add_done_callback(lambda _f: done.set())
        asked = time.monotonic()
        while adopted and latest[0] < 0 and not done.wait(0.02) and time.monotonic() - asked < _CALL_TIMEOUT_S:
            pass
        if adopted and result_futures[0].done() and result_futures[0].result().status == GoalStatus.STATUS_UNKNOWN:
            self.goal_log.append(f"goal {bytes(handle.goal_id.uuid).hex()[:8]}: unknown to the rollout node, "
                                 f"really refused")
            return RolloutOutcome(stopped_reason="error", end_detail=REFUSED, infrastructure=REFUSED,
                                  final_observation=self._final_observation())
        with self._lock:
            self._goal_handle = handle
            self._running = True
            pending = self._pending_stop
            lease_gone = bool(self._lease_end[0])
        if pending or lease_gone:
            handle.cancel_goal_async()
        seen = -1.0
        # The goal lives as long as the action server that accepted it: that server's identity (the GIDs of its
        # status publishers) is watched, and a goal whose server is replaced (the rollout node restarted: a new
        # GID) or gone for episode_goal.ROLLOUT_GONE_S died with it. A SIGKILLed server's old entry can linger in
        # the graph for the DDS lease (20 s), so a new server seen beside it is enough.
        watch = ServerWatch(self._server_gids(), time.monotonic())
        checked = time.monotonic()
        hex_id = bytes(handle.goal_id.uuid).hex()[:8]
        while not done.wait(0.02):
            now = time.monotonic()
            if self._closing_left() == 0.0:  # the station is shutting down: its job is suspended, not ended
                with self._lock:
                    self._goal_handle = None
                    self._running = False
                    taken_over = self._taken_over
                self.goal_log.append(f"goal {hex_id}: not waited for (the station is shutting down)")
                return RolloutOutcome(stopped_reason="cancelled", end_detail="the station is shutting down",
                                      taken_over=taken_over)
            if adopted and latest[0] < 0 and now - asked > _CALL_TIMEOUT_S:
                again = handle.get_result_async()
                again.add_done_callback(lambda _f: done.set())
                result_futures.append(again)
                asked = now
            if now - checked >= _SERVER_CHECK_S:
                checked = now
                died = watch.check(self._server_gids(), now)
                if died:
                    with self._lock:
                        self._goal_handle = None
                        self._running = False
                        taken_over = self._taken_over
                    self.goal_log.append(f"goal {hex_id}: {died}")
                    if plan.policy_provider == "relay":
                        self.close_policy_sessions()
                    return RolloutOutcome(stopped_reason="error", infrastructure=(
                        f"the rollout node died during the episode: {died}; goal {hex_id} died with it"),
                        taken_over=taken_over, final_observation=self._final_observation())
            t = latest[0]
            if t == seen or t < 0:
                continue
            seen = t
            if stop_heartbeat_at is not None and t >= stop_heartbeat_at:
                self.stop_heartbeat()
            try:
                progress(t)  # the operator's hook, on this (the job's) thread: it may call services
            except BaseException:
                with self._lock:
                    self._goal_handle = None
                    self._running = False
                handle.cancel_goal_async()  # an error of this episode never leaves its rollout running
                raise
        with self._lock:
            self._goal_handle = None
            self._running = False
            lease_condition, lease_detail = self._lease_end
            taken_over = self._taken_over
            stop_reason, self._pending_stop = self._pending_stop, ""
        final = self._final_observation()
        if plan.policy_provider == "relay":
            self.close_policy_sessions()  # the episode is over: the next one opens its own session
        response = next(f.result() for f in result_futures if f.done())
        if response.status == GoalStatus.STATUS_UNKNOWN:  # an adopted goal the server never held
            return RolloutOutcome(stopped_reason="error", end_detail=REFUSED, infrastructure=REFUSED,
                                  taken_over=taken_over, final_observation=final)
        res = response.result
        ended = res.ended
        run_id = ended.run_id
        if run_id and ended.recording_path:
            with self._lock:
                self.recordings[run_id] = ended.recording_path
        sha = _recording_sha256(ended.recording_path)
        if run_id and ended.recording_path and self._on_recording is not None:
            self._on_recording(self._job_id, plan, run_id, ended.recording_path, sha)
        report = ended_report(ended) if run_id else {}
        if lease_condition:
            return RolloutOutcome(stopped_reason="cancelled", end_condition=lease_condition, end_detail=lease_detail,
                                  run_id=run_id, taken_over=taken_over, final_observation=final,
                                  recording_sha256=sha, **report)
        if stop_reason:
            return RolloutOutcome(stopped_reason="cancelled", end_detail=stop_reason, run_id=run_id,
                                  taken_over=taken_over, final_observation=final, recording_sha256=sha, **report)
        if not run_id:  # no rollout ran: the message says why
            lost = POLICY_LOST_ERROR in res.message or POLICY_LOST_MARKER in res.message
            return RolloutOutcome(stopped_reason="error", end_detail=res.message or "no rollout ran",
                                  policy_lost=lost, taken_over=taken_over, final_observation=final)
        if ended.error_type == POLICY_LOST_ERROR or (ended.stopped_reason == "error"
                                                    and POLICY_LOST_MARKER in ended.error_message):
            return RolloutOutcome(stopped_reason="error", end_detail=ended.error_message, run_id=run_id,
                                  policy_lost=True, taken_over=taken_over, final_observation=final)
        detail = ended.end_detail
        if ended.stopped_reason == "error" and ended.error_message:
            detail = f"{ended.error_type or 'Error'}: {ended.error_message}"
        return RolloutOutcome(stopped_reason=ended.stopped_reason, end_condition=res.end_condition,
                              end_detail=detail, run_id=run_id, taken_over=taken_over, final_observation=final,
                              error_type=ended.error_type if ended.stopped_reason == "error" else "",
                              recording_sha256=sha, **report)

    def take_recording(self, run_id: str) -> str:
        """Return (and forget) the recording the rollout node wrote for ``run_id``; "" when none."""
        with self._lock:
            return self.recordings.pop(run_id, "")

    def _goal(self, plan: EpisodePlan, token: str) -> Any:
        goal = RunEpisode.Goal()
        goal.task = station_task_to_msg(plan.task)
        goal.robot_name = self.robot_name
        goal.policy_provider = plan.policy_provider
        goal.policy_config_json = json.dumps(self._policy_config(plan))
        goal.control_frequency = float(plan.control_frequency)
        goal.duration_s = float(plan.duration_s)
        goal.action_horizon = self.action_horizon
        goal.async_rtc = self.async_rtc  # prefetch the next chunk while this one plays (a remote policy's round trip)
        goal.rtc_inference_timeout_s = self.rtc_inference_timeout_s
        goal.record = self.record or plan.record  # the station's own choice, or the job asked
        goal.lease_token = token
        seed = -1 if plan.seed is None else int(plan.seed)
        if not -2**63 <= seed < 2**63:  # rosidl's setter takes it; the send would raise in C, mid-episode
            raise ValueError(f"seed {seed} does not fit the goal's int64 seed")
        goal.seed = seed
        return goal

    def _server_gids(self) -> frozenset:
        return server_gids(self._node, self._run_status_topic)

    def _send_goal(self, goal: Any, on_feedback: Callable[[Any], None]) -> Tuple[Any, str]:
        """Send the episode goal until the rollout node answers (:func:`.episode_goal.send_episode_goal`)."""
        return send_episode_goal(self._run, goal, self._new_goal_id(), on_feedback, self._node.get_logger(),
                                 self.goal_log)

    def _final_observation(self) -> Mapping[str, Any]:
        try:
            return self.backend.observe()
        except Exception:
            return {}

    def pause_rollout(self) -> Tuple[bool, str]:
        with self._lock:
            if not self._running:
                return False, "no rollout is running"
        req = Takeover.Request()
        req.operator_name = self.operator_name
        req.reason = "operator takeover"
        res = self._call(self._pause, req)
        if res is None:
            return False, "pause_rollout did not answer"
        if res.ok:
            with self._lock:
                self._taken_over = True
        return bool(res.ok), res.message

    def resume_rollout(self) -> Tuple[bool, str]:
        req = Resume.Request()
        req.operator_name = self.operator_name
        res = self._call(self._resume, req)
        if res is None:
            return False, "resume_rollout did not answer"
        return bool(res.ok), res.message

    def begin_closing(self) -> None:
        """Bound the job thread's waits to ``_CLOSING_WAIT_S`` from now: the station node is shutting down.

        A rollout's end and every call to the rollout node and driver are bounded by it; the job is suspended
        (its state stays as persisted), so what an answer would have said is not needed.
        """
        with self._lock:
            if self._closing_at is None:
                self._closing_at = time.monotonic()
        self.backend.begin_closing(_CLOSING_WAIT_S)

    def _closing_left(self) -> Optional[float]:
        """Seconds left of the closing bound (None while not closing)."""
        closing_at = self._closing_at
        return None if closing_at is None else max(0.0, closing_at + _CLOSING_WAIT_S - time.monotonic())

    def stop_rollout(self, reason: str) -> None:
        with self._lock:
            self._pending_stop = reason or "cancelled"
            handle = self._goal_handle
        if handle is not None:
            handle.cancel_goal_async()

    # -- internals ------------------------------------------------------------------------------------------
    def _call(self, client: Any, request: Any, timeout_s: float = _CALL_TIMEOUT_S) -> Any:
        """Call from the job thread (or an operator thread), waiting on an Event the response sets.

        Bounded by what is left of ``_CLOSING_WAIT_S`` once the station is shutting down (:meth:`begin_closing`,
        even when it comes while this call waits).
        """
        deadline = time.monotonic() + timeout_s

        def left() -> float:
            closing = self._closing_left()
            return min(deadline - time.monotonic(), closing if closing is not None else float("inf"))

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
            future.cancel()
            return None
        try:
            return future.result()
        except Exception:
            return None

    def close(self) -> None:
        with self._lock:
            renewals, self._renewals = self._renewals, None
        if renewals is not None:
            renewals.stop()
        self.backend.close()


def _resolve(node: Any, name: str) -> str:
    """Return the fully qualified name of ``name`` as ``node`` resolves it (Humble's rclpy has no resolver)."""
    resolve = getattr(node, "resolve_topic_name", None)
    if resolve is not None:
        try:
            return resolve(name)
        except Exception:  # noqa: BLE001  (fall back to the plain rule below)
            pass
    if name.startswith("/"):
        return name
    namespace = node.get_namespace().rstrip("/")
    return f"{namespace}/{name}"


def _seconds_param(params: Mapping[str, str], name: str) -> Optional[float]:
    if name not in params:
        return None
    try:
        return float(params[name])
    except ValueError:
        raise ValueError(f"task parameter {name} must be a number, got {params[name]!r}") from None

