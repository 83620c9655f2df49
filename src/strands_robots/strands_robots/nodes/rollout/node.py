"""rollout_node: the policy control loop over ROS 2.

A ``RunEpisode`` action server. Each goal runs one episode of :class:`~strands_robots.rollout.runner.PolicyRunner`
against the arm driver node (through :class:`~strands_robots.driver_link.client.RosDriverBackend`):

1. every goal field (with the parameters filling what the goal leaves empty) is validated by the shared run
   validation (:func:`~strands_robots.rollout.run_spec.validate_run`) **before anything moves**: a refused goal
   is aborted with the reason in the result's ``message``, and neither the lease nor the arms are touched;
2. the lease (the goal's token, or one acquired for the episode), then the start pose, before every episode
   (``start_pose_before_episode``; cancelling the goal cancels the move);
3. the episode, on a control thread of its own. Cancelling the goal is the cooperative stop (within one
   control period, also while the loop waits on a deadline). The stop is re-armed when a goal is accepted, so a
   cancel sent the moment the goal is accepted, before its thread runs, is never lost.

**One node, one executor.** The node is spun by a ``SingleThreadedExecutor`` (``STRANDS_ROBOTS_EXECUTOR=events``
picks rclpy's C++ EventsExecutor instead, :mod:`~strands_robots.ros.executor_choice`, which says why it is not
the default; rclpy's MultiThreadedExecutor busy-waits holding the GIL while work is pending, which starved the
control loop: bench/README.md). The
action's execute callback is a coroutine that starts the episode's thread and awaits a future the thread
completes, so the executor keeps serving joint_states, verdicts, cancels, feedback and the parameter services
while an episode runs; the control thread never runs on the executor.

**Command path** (``command_path``, read-only): ``stream`` (the default) publishes an ``ActionCommand`` per
step and never waits for its answer inside a control period: the ``ActionVerdict`` s are collected as they
arrive and each step's event is dispatched with its own verdict, in step order
(:mod:`strands_robots.rollout.pipeline`, :mod:`strands_robots.driver_link.command_stream`). At most
``command_window_s`` of commands are in flight: when the driver falls behind (a starved process) the loop holds,
its budget clock paused and the held deadlines counted as missed, until the driver answers or the dead-driver
bound ends the episode; and a command the driver reads more than ``command_window_s`` after it was sent is
refused as stale, so a backlog is never applied in a burst. ``service`` calls ``SendAction`` per step (kept for
comparison).

**Dead driver**: past ``driver_silence_s`` without joint_states or without answers the episode ends as an error
naming the driver and the silence, and no stale observation reaches the policy or the recording
(:mod:`strands_robots.rollout.driver_watch`).

**Goal fields** (:mod:`~strands_robots.nodes.rollout.goal`): a number or string left 0 / empty takes the
parameter's value. The goal's ``record`` and ``async_rtc`` are booleans with no "unset": they decide for their
goal, both ways (a goal turns recording or prefetch on or off); the ``record`` / ``async_rtc`` parameters are
what the node's own autorun episodes use.
``max_steps`` is the step budget (as ``n_steps`` in process); ``robot_name`` is reported in RunPolicyStarted;
``seed`` (>= 0) reaches the policy. Recordings are filed under this node's namespace and numbered by a
per-node episode counter. ``events_published`` / ``events_dropped`` count this goal's events.

**Relay credentials**: the ``relay`` provider reaches the relay with the station's credentials, read once at
start from the file the read-only ``relay_credentials_file`` parameter names (0600, or the node refuses to
start with one line). A goal's ``policy_config_json`` carries only the episode's options (job, episode, task,
timeouts): one naming a relay, a token or a path is refused by the key's name before anything moves, and no
parameter holds a token. Without the file a goal asking for the relay provider is refused, saying so.

Topics: ``observer_events`` (ObserverEvent), ``episode_results`` (EpisodeResult). Action: ``run_episode``.
With ``cameras`` set, every observation also holds each camera's latest ``<camera>/image_raw`` frame as
``<camera>.image`` (:mod:`strands_robots.nodes.rollout.camera_frames`); a frame older than the camera's bound ends the
episode as an error, as a stale joint state does. With ``camera_scene_node`` the simulated camera node lays out
the goal's task and seed before the episode (frames of the old layout are discarded).
The driver's names are resolved relative to ``driver_namespace`` (default: this node's namespace).

With ``autorun_episodes > 0`` the node runs that many episodes with its parameters once the driver is up (the
launch file's demo), and with ``exit_after_autorun`` it then exits: 0 when every episode ran to its end
condition, 1 otherwise.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.duration import Duration
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.task import Future
from strands_robots_msgs.action import RunEpisode
from strands_robots_msgs.msg import EpisodeResult, ObserverEvent

from strands_robots.conversions.introspection import dict_to_msg
from strands_robots.conversions.station import rollout_episode_result_msg
from strands_robots.ros import process
from strands_robots.ros.qos import EVENT_QOS
from strands_robots.driver_link.client import RosDriverBackend
from strands_robots.nodes.rollout.event_publisher import QueuedEventPublisher
from strands_robots.ros.executor_choice import make_executor
from strands_robots.ros.realtime_priority import decide_realtime
from strands_robots.nodes.rollout.goal import run_kwargs
from strands_robots.nodes.rollout.observers import EpisodeFeedback, RunTracker
from strands_robots.nodes.rollout.params import PARAMETERS, value_refusal
from strands_robots.nodes.rollout.takeover import add_takeover_services
from strands_robots.rollout.end_condition import END_START_POSE_UNREACHED, end_condition_of_result
from strands_robots.rollout.run_spec import RunRefused, validate_run
from strands_robots.rollout.runner import PolicyRunner
from strands_robots.rollout.stop import StopToken

_CLOSING_DRIVER_WAIT_S = 1.0  # at shutdown: how long a call to the arm driver (the lease's release) may wait


class RolloutNode(Node):
    """The RunEpisode action server and the observer-stream publisher (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("rollout", **kwargs)
        for name, (default, description, extra) in PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(description=description, **extra))
        bad = [r for r in (self._check(name, self.p(name)) for name in PARAMETERS) if r]
        if bad:
            raise ValueError("invalid parameters: " + "; ".join(bad))
        self.add_on_set_parameters_callback(self._validate_parameters)
        # The relay provider's relay and station token: start-time configuration, read once (never from a goal).
        self._relay_policy = None
        if self.p("relay_credentials_file"):
            from strands_robots.policies.relay import relay_policy_factory
            from strands_robots.wire.credentials import load_relay_credentials

            credentials = load_relay_credentials(self.p("relay_credentials_file"))
            self._relay_policy = relay_policy_factory(credentials)
            self.get_logger().info(f"relay policy provider: relay {credentials.target} as station "
                                   f"{credentials.station_id} (from {credentials.source})")

        self._events_pub = self.create_publisher(ObserverEvent, "observer_events", EVENT_QOS)
        self._results_pub = self.create_publisher(EpisodeResult, "episode_results", EVENT_QOS)
        self._feedback = EpisodeFeedback()
        self._last_sent = None  # monotonic time of the last event or result published
        self._events = QueuedEventPublisher(
            self._sent(self._events_pub.publish), depth=self.p("event_queue_depth"), on_event=self._feedback
        )
        self.backend = RosDriverBackend(
            self, driver_namespace=self.p("driver_namespace"), action_timeout_s=self.p("action_timeout_s"),
            wait_timeout_s=self.p("driver_timeout_s"), command_path=self.p("command_path"),
            control_frequency=self.p("control_frequency"), command_window_s=self.p("command_window_s"),
            verdict_timeout_s=self.p("verdict_timeout_s"), driver_silence_s=self.p("driver_silence_s"),
            reset_moves_to_start_pose=False,
        )
        self._observers = [RunTracker(self.backend), self._events]
        self._stop = StopToken()
        runner_backend: Any = self.backend
        if self.p("cameras").strip():  # the camera node's frames in every observation, by the stale rule
            from strands_robots.nodes.rollout.camera_frames import camera_backend
            from strands_robots.cameras.config import load_cameras

            runner_backend = camera_backend(self, self.backend, load_cameras(self.p("cameras_file"), self.p("cameras")),
                                            self.p("camera_namespace"), self.p("driver_timeout_s"),
                                            self.p("camera_scene_node"))
        self.runner = PolicyRunner(runner_backend, robot_name=self.p("robot_name"), stop=self._stop)
        self._busy = threading.Lock()
        self._goal_pending = False
        self._episodes_run = 0  # numbers the recordings: episode_0000, episode_0001, ... per node
        self._server = ActionServer(
            self, RunEpisode, "run_episode", execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
        )
        self._watch = self.create_timer(0.05, self._watch_lease)
        # Operator takeover (the station's pause / resume) and the relay policy sessions' clean-up.
        self.takeover = add_takeover_services(self, self.runner)
        self.exit_code: "int | None" = None
        self.done = threading.Event()
        self._closing = threading.Event()
        if self.p("autorun_episodes") > 0:
            threading.Thread(target=self._autorun, name="rollout-autorun", daemon=True).start()

    # -- parameters ----------------------------------------------------------------------------------------
    def p(self, name: str) -> Any:
        return self.get_parameter(name).value

    _check = staticmethod(value_refusal)  # a value the node refuses, with the reason (params.py)

    def _validate_parameters(self, params: list) -> SetParametersResult:
        for param in params:
            reason = self._check(param.name, param.value)
            if reason:
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    # -- action server (executor thread) -------------------------------------------------------------------
    def _on_goal(self, goal: RunEpisode.Goal) -> GoalResponse:
        # Every goal is accepted unless one runs: a bad field is refused by the validation in the episode
        # thread, before anything moves, and the refusal reaches the client as the result's message (a
        # REJECTED goal carries no reason).
        if self._busy.locked() or self._goal_pending or self._closing.is_set():
            self.get_logger().warning("refusing RunEpisode goal: an episode is already running")
            return GoalResponse.REJECT
        self._goal_pending = True
        # Re-armed here, on the executor thread, before the goal is accepted: a cancel can only come after this,
        # so one that lands before the episode's thread starts is kept and ends the episode at once.
        self._stop.clear()
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: Any) -> CancelResponse:
        self._stop.request("goal cancelled")
        return CancelResponse.ACCEPT

    async def _execute(self, goal_handle: Any) -> RunEpisode.Result:
        """Start the episode on its own thread and wait for it without holding the executor."""
        done: Future = Future(executor=self.executor)
        done.add_done_callback(lambda _f: None)  # its completion wakes the executor (a task is scheduled)
        threading.Thread(target=self._episode_thread, args=(goal_handle, done), name="rollout-control",
                         daemon=True).start()
        return await done

    def _episode_thread(self, goal_handle: Any, done: Future) -> None:
        result = RunEpisode.Result()
        try:
            result = self._goal_result(goal_handle)
        except Exception as exc:  # never leave the goal hanging
            self.get_logger().error(f"episode failed: {type(exc).__name__}: {exc}")
            result.message = f"episode failed: {type(exc).__name__}: {exc}"
            if goal_handle.is_active:
                goal_handle.abort()
        finally:
            self._goal_pending = False
            done.set_result(result)

    def _goal_result(self, goal_handle: Any) -> RunEpisode.Result:
        goal = goal_handle.request
        self._feedback.target = goal_handle
        published, dropped = self._events.published, self._events.dropped
        try:
            ended_dict, end_condition, message = self.run_episode(goal)
        finally:
            self._feedback.target = None
        result = RunEpisode.Result()
        if ended_dict is not None:
            result.ended = dict_to_msg("strands_robots_msgs/msg/RunPolicyEnded", ended_dict)
        result.end_condition = end_condition
        result.message = message
        result.events_published = self._events.published - published
        result.events_dropped = self._events.dropped - dropped
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif ended_dict is not None and ended_dict.get("outcome") == "ok":
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def _watch_lease(self) -> None:
        """End the episode as lease_lost when the driver no longer honours the lease (not as refusals)."""
        if self._busy.locked() and self.backend.lease_lost and not self._stop.requested:
            self.get_logger().warning(f"control lease lost ({self.backend.lease_lost}); stopping the episode")
            self._stop.request("lease_lost")

    # -- one episode (control thread) ----------------------------------------------------------------------
    def run_episode(self, goal: RunEpisode.Goal, autorun: bool = False) -> tuple["dict | None", str, str]:
        """Run one episode for ``goal`` (parameters fill what the goal leaves empty).

        :param autorun: the node's own episode: ``record`` / ``async_rtc`` come from the parameters.
        :returns: (the Ended event as a RunPolicyEnded dict, or None when no rollout ran; the end condition;
            why no rollout ran, empty when one did).
        """
        with self._busy:
            # The stop token was re-armed when this goal was accepted (or by the autorun before its episode),
            # never here: a cancel that came in between stops this episode.
            if self._closing.is_set():
                self._stop.request("shutdown")  # close() may have come between the acceptance and this
            log = self.get_logger()
            try:
                spec = validate_run(**run_kwargs(goal, self.p, self.get_namespace(), self._episodes_run,
                                                self._relay_policy, autorun))  # before anything moves
            except RunRefused as exc:
                message = f"goal refused: {exc.reason}"
                log.error(message)
                return None, "", message
            set_task = getattr(self.runner.backend, "set_task", None)
            if callable(set_task):  # cameras: the goal's task lays out the scene at the episode's reset
                try:
                    set_task(spec.task)
                except ValueError as exc:
                    message = f"goal refused: {exc}"
                    log.error(message)
                    return None, "", message
            if not self.backend.wait_until_ready(self.p("driver_timeout_s"),
                                                 should_stop=lambda: self._stop.requested or self._closing.is_set()):
                if self._stop.requested:
                    message = f"cancelled before the episode started ({self._stop.reason})"
                    log.warning(message)
                    return None, "", message
                message = (f"{self.backend.driver_name} not ready (no {self.backend.command_path} command path "
                           "or no fresh joint_states)")
                log.error(message)
                return None, "", message
            self.backend.set_control_frequency(spec.control_frequency)
            acquired = False
            borrowed = bool(goal.lease_token)  # the caller's lease (e.g. the station's): used for this goal only
            if borrowed:
                self.backend.lease_token = goal.lease_token
            elif self.p("require_lease"):
                res = self.backend.acquire(self.p("lease_holder"), self.p("lease_priority"),
                                           self.p("lease_duration_s"))
                if not res.granted:
                    message = f"control lease refused: {res.message}"
                    log.error(message)
                    return None, "lease_lost", message
                acquired = True
            try:
                if self.p("start_pose_before_episode"):
                    report = self.backend.move_to_start_pose(should_stop=lambda: self._stop.requested)
                    if self._stop.requested:
                        message = f"stopped during the start pose ({self._stop.reason})"
                        log.warning(message)
                        return None, "", message
                    if not report.reached:
                        message = f"start pose unreached: {report.detail}"
                        log.error(message)
                        self._publish_result(goal, None, END_START_POSE_UNREACHED, report.detail)
                        return None, END_START_POSE_UNREACHED, message
                log.info(f"episode {self._episodes_run}: {spec.policy_name} at {spec.control_frequency:g} Hz, "
                         f"budget {spec.n_steps} steps, command path {self.backend.command_path}")
                self._episodes_run += 1
                stream_counts = self.backend.stream.counts()
                out = self.runner.run_spec(spec, observer=self._observers)
                if self.backend.command_path == "stream":
                    log.info(f"command stream: {self.backend.stream.summary(since=stream_counts)}")
            finally:
                if acquired:  # a cancelled goal says so: real arms then hold and wait for an operator's clear
                    cancelled = self._stop.requested and self._stop.reason == "goal cancelled"
                    self.backend.release(stop_reason="the episode's goal was cancelled" if cancelled else "")
                elif borrowed:
                    self.backend.lease_token = ""
                if self._relay_policy is not None:  # before the goal is answered: the station's close finds it over
                    from strands_robots.policies.relay import episodes_over

                    episodes_over()  # a close that comes later closes this episode's session, not the next one's
            self._events.flush(5.0)
            if not out["episodes"]:
                message = f"episode refused before it started: {out.get('error_message', '')}"
                log.error(message)
                return None, "", message
            ended = out["episodes"][0]
            end_condition = end_condition_of_result(ended)
            self._publish_result(goal, ended, end_condition, ended.get("end_detail", ""))
            log.info(f"episode {ended['run_id']} ended: {ended['stopped_reason']} "
                     f"({end_condition or 'no end condition'}), {ended['applied_actions']} actions, "
                     f"{ended['missed_deadlines']} missed deadlines")
            return ended, end_condition, ""

    def _publish_result(self, goal: RunEpisode.Goal, ended: "dict | None", end_condition: str,
                        detail: str) -> None:
        self._sent(self._results_pub.publish)(rollout_episode_result_msg(ended, end_condition, detail, goal.task))

    def _sent(self, publish: Any) -> Any:
        """``publish``, noting when it last sent (what :meth:`wait_delivered` waits from)."""
        def send(msg: Any) -> None:
            publish(msg)
            self._last_sent = time.monotonic()
        return send

    # -- autorun (launch demo) -------------------------------------------------------------------------------
    def _autorun(self) -> None:
        ok = True
        try:
            self._wait_for_event_subscribers(self.p("autorun_wait_subscribers"), self.p("driver_timeout_s"))
            for _ in range(self.p("autorun_episodes")):
                if self._closing.is_set():  # close() came first: no new episode on a closing node
                    break
                goal = RunEpisode.Goal()
                goal.seed = -1
                self._stop.clear()
                ended, _, _ = self.run_episode(goal, autorun=True)
                if ended is None or ended.get("outcome") != "ok":
                    ok = False
                    break
        except Exception as exc:  # reported, and the exit code says so
            self.get_logger().error(f"autorun failed: {type(exc).__name__}: {exc}")
            ok = False
        self.exit_code = 0 if ok else 1
        if self.p("exit_after_autorun"):
            self.done.set()

    def _wait_for_event_subscribers(self, count: int, timeout_s: float) -> None:
        """Wait until ``observer_events`` is matched by ``count`` subscribers.

        Events are volatile, and DDS discovery of a subscriber that was up before this node can take seconds
        (the periodic announcement).
        """
        deadline = time.monotonic() + timeout_s
        while self._events_pub.get_subscription_count() < count:
            if self._closing.is_set():
                return
            if time.monotonic() >= deadline:
                self.get_logger().warning(
                    f"observer_events has {self._events_pub.get_subscription_count()} of {count} subscribers "
                    f"after {timeout_s:g} s; running anyway")
                return
            time.sleep(0.05)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop a running episode and let it end (its Ended published) before the publisher and clients go.

        Called while the executor still spins (the episode's end needs it); the driver clients go in
        :meth:`destroy_node`, after the executor stopped: an action client destroyed under a spinning executor
        ends its spin ("action client pointer is invalid").
        """
        self._closing.set()
        # A driver stopping at the same time (a terminal's Ctrl-C reaches every process) never answers the lease's
        # release: waited for a second at most, so the whole station stops within a launch's SIGINT grace.
        self.backend.begin_closing(_CLOSING_DRIVER_WAIT_S)
        self._stop.request("shutdown")
        if self._busy.acquire(timeout=timeout_s):
            self._busy.release()
        self._events.close(2.0)

    def wait_delivered(self) -> None:
        """Wait until every matched reader acknowledged what was published (``exit_delivery_wait_s`` from the last).

        For the process's exit, after :meth:`close`: a reliable writer repairs a lost sample only while it
        exists, and under load an Ended published just before a stop signal never reached ``up``, whose receive
        thread was not scheduled before the rollout process was gone. A reader that never answers (a process
        SIGKILLed within the DDS lease) costs the bound, nothing more. A reader acknowledges on the writer's
        heartbeat (Fast DDS's default period is 3 s: the acknowledgement came 2 s after the last sample here), so
        with the default profile the wait runs to its bound after a recent send; a node idle that long exits at once.
        """
        timeout_s = self.p("exit_delivery_wait_s")
        for publisher in (self._events_pub, self._results_pub):
            left = timeout_s - (time.monotonic() - self._last_sent) if self._last_sent is not None else 0.0
            try:
                if left > 0 and publisher.get_subscription_count():
                    publisher.wait_for_all_acked(Duration(nanoseconds=int(left * 1e9)))
            except Exception as exc:  # noqa: BLE001 -- at exit, a publisher rclpy already let go is no error
                self.get_logger().warning(f"{publisher.topic_name}: not waiting for acknowledgements: {exc}")

    def destroy_node(self) -> None:
        """Destroy the driver clients and the action server, then the node (the executor is stopped by then).

        Once: the context's shutdown destroys its nodes again (a node whose __init__ raised has no backend). The
        action server explicitly: rclpy's ``destroy_node`` leaves it to the garbage collector, which then finalized
        it after the context was gone and hung a test worker in Fast DDS (``rcl_action_server_fini``).
        """
        backend = getattr(self, "backend", None)
        if backend is not None and not getattr(self, "_backend_closed", False):
            self._backend_closed = True
            backend.close()
        server, self._server = getattr(self, "_server", None), None
        if server is not None:
            server.destroy()
        super().destroy_node()


def main(argv: "list[str] | None" = None) -> int:
    """Run the node until its autorun is done (``exit_after_autorun``) or SIGINT/SIGTERM.

    Exit code: 0 on a clean stop, 2 on invalid parameters, ``EXIT_EXECUTOR_DIED`` when the executor died.

    The signals are handled here rather than by rclpy, whose handler would shut the context down under a
    running episode: the episode is stopped first and ends (its Ended published), then the node goes.
    """
    try:  # first, decided (taken once the node is built: ros/realtime_priority.py)
        realtime = decide_realtime()
    except ValueError as exc:
        print(f"rollout_node: {exc}", file=sys.stderr)
        return 2
    node_process = process.NodeProcess(argv if argv is not None else sys.argv, realtime)
    stop = node_process.stop
    node = None
    code = 0
    try:
        executor, executor_name = make_executor()
        node_process.adopt(executor=executor)
        node = RolloutNode()
        node_process.adopt(node=node)
        node.get_logger().info(f"executor: {executor_name}")
        # Everything imported and built so far (rclpy, numpy, the messages: ~60 000 objects) is moved out of the
        # collector's reach: a full collection over it took 13 ms on this machine, a stall of the control loop
        # or its verdict callback every few seconds. Only what episodes allocate is collected from here on.
        gc.collect()
        gc.freeze()
        # Every thread now and every later one (the executor's, each episode's) runs real-time.
        spinner = node_process.run(node, executor, "rollout-executor")
        while not stop.is_set() and not node.done.wait(0.1):
            if process.executor_died(spinner) is not None:
                node.get_logger().error("the executor died; stopping")
                code = process.EXIT_EXECUTOR_DIED
                break
        if not code:
            code = node.exit_code if node.exit_code is not None and not stop.is_set() else 0
    except (KeyboardInterrupt, ExternalShutdownException):
        code = 0
    except (ValueError, ParameterException) as exc:  # invalid parameters: one line, no traceback
        print(f"rollout_node: {exc}", file=sys.stderr)
        code = process.EXIT_BAD_PARAMETERS
    finally:
        if node is not None:
            node.close()
            if not process.supervisor_gone():  # a dead supervisor's readers acknowledge nothing any more
                node.wait_delivered()
        node_process.close(spin_timeout_s=5.0)
    return code


if __name__ == "__main__":
    sys.exit(main())
