"""rollout_node: the policy control loop over ROS 2.

A ``RunEpisode`` action server. Each goal runs one episode of :class:`~strands_robots.rollout.runner.PolicyRunner`
against the arm driver node (through :class:`~strands_robots.nodes.driver_client.RosDriverBackend`) on the
action's execute thread; cancelling the goal is the cooperative stop (within one control period, also while the
loop waits on a deadline). Every observer event is published on ``observer_events`` (one ordered stream, so a
gap in ``event_seq`` is visible) by a queue-and-thread observer that never blocks the loop; each finished
episode is also published on ``episode_results`` and returned as the action result.

Topics: ``observer_events`` (ObserverEvent), ``episode_results`` (EpisodeResult). Action: ``run_episode``.
The driver's names are resolved relative to ``driver_namespace`` (default: this node's namespace).

With ``autorun_episodes > 0`` the node runs that many episodes with its parameters once the driver is up (the
launch file's demo), and with ``exit_after_autorun`` it then exits: 0 when every episode ran to its end
condition, 1 otherwise.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from typing import Any

import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from strands_robots_msgs.action import RunEpisode
from strands_robots_msgs.msg import EpisodeResult, ObserverEvent

from strands_robots import convert
from strands_robots.nodes._qos import EVENT_QOS
from strands_robots.nodes.driver_client import RosDriverBackend
from strands_robots.nodes.event_publisher import QueuedEventPublisher
from strands_robots.nodes.process import StopSignals, init_without_signal_handlers, spin_in_background
from strands_robots.rollout.end_condition import END_START_POSE_UNREACHED, end_condition_of_result
from strands_robots.rollout.runner import PolicyRunner
from strands_robots.rollout.stop import StopToken


def _float_range(lo: float, hi: float) -> list:
    return [FloatingPointRange(from_value=lo, to_value=hi, step=0.0)]


def _int_range(lo: int, hi: int) -> list:
    return [IntegerRange(from_value=lo, to_value=hi, step=1)]


# name: (default, description, extra descriptor fields)
PARAMETERS: dict[str, tuple[Any, str, dict]] = {
    "robot_name": ("sim_arms", "robot name reported in RunPolicyStarted", {}),
    "driver_namespace": ("", "namespace of the arm driver's topics/services; empty: this node's namespace", {}),
    "control_frequency": (50.0, "control rate in Hz", {"floating_point_range": _float_range(1.0, 2000.0)}),
    "policy_provider": ("mock", "policy provider: mock, replay, scripted", {}),
    "policy_config_json": ("", "policy provider options as a JSON object; empty for none", {}),
    "instruction": ("wave both arms", "language instruction for the policy", {}),
    "duration_s": (5.0, "episode budget in seconds", {"floating_point_range": _float_range(0.0, 86400.0)}),
    "max_steps": (0, "step budget; 0 derives it from duration_s", {"integer_range": _int_range(0, 2**31 - 1)}),
    "action_horizon": (8, "maximum actions per chunk", {"integer_range": _int_range(1, 10000)}),
    "async_rtc": (False, "prefetch chunks asynchronously", {}),
    "rtc_inference_timeout_s": (2.0, "async inference deadline (s)",
                                {"floating_point_range": _float_range(0.001, 600.0)}),
    "record": (False, "record every episode to MCAP", {}),
    "recording_dir": ("/tmp/strands_robots/recordings", "where MCAP recordings go", {}),
    "event_queue_depth": (8192, "observer publish queue bound; a full queue drops (counted)",
                          {"integer_range": _int_range(1, 1_000_000)}),
    "require_lease": (True, "acquire a control lease from the driver when a goal brings none", {}),
    "lease_holder": ("rollout", "holder name used when acquiring a lease", {}),
    "lease_priority": (10, "priority used when acquiring a lease", {"integer_range": _int_range(0, 1000)}),
    "lease_duration_s": (2.0, "lease length; renewed every third of it",
                         {"floating_point_range": _float_range(0.1, 3600.0)}),
    "start_pose_before_episode": (True, "move the arms to the start pose before each episode", {}),
    "driver_timeout_s": (15.0, "how long to wait for the arm driver to come up",
                         {"floating_point_range": _float_range(0.1, 3600.0)}),
    "action_timeout_s": (0.5, "SendAction deadline (s); past it the step is a coarse error",
                         {"floating_point_range": _float_range(0.001, 60.0)}),
    "seed": (-1, "policy/simulation seed; negative for none", {}),
    "autorun_episodes": (0, "episodes to run at start-up with these parameters",
                         {"integer_range": _int_range(0, 1_000_000)}),
    "exit_after_autorun": (False, "exit once the autorun episodes are done", {}),
    "autorun_wait_subscribers": (0, "before the autorun episodes, wait (at most driver_timeout_s) until "
                                    "observer_events has this many subscribers, so a watcher started with the "
                                    "node sees the whole stream", {"integer_range": _int_range(0, 1000)}),
}


class RolloutNode(Node):
    """The RunEpisode action server and the observer-stream publisher (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("rollout", **kwargs)
        for name, (default, description, extra) in PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(description=description, **extra))
        self.add_on_set_parameters_callback(self._validate_parameters)
        bad = [r for r in (self._check(p.name, p.value) for p in self._parameters.values()) if r]
        if bad:
            raise ValueError("invalid parameters: " + "; ".join(bad))

        self._events_pub = self.create_publisher(ObserverEvent, "observer_events", EVENT_QOS)
        self._results_pub = self.create_publisher(EpisodeResult, "episode_results", EVENT_QOS)
        self._feedback_target: Any = None
        self._feedback_last = 0.0
        self._events = QueuedEventPublisher(
            self._events_pub.publish, depth=self.p("event_queue_depth"), on_event=self._feedback_from_event
        )
        # The control path (joint_states, send_action, lease heartbeat) gets a node and a single-threaded
        # executor of its own: its callbacks only set events the control thread waits on, and it never queues
        # behind the action server. rclpy's MultiThreadedExecutor busy-waits holding the GIL while work is
        # pending; on the control path that starved the loop (bench/README.md).
        self._control_node = rclpy.create_node(
            f"{self.get_name()}_control", namespace=self.get_namespace(), context=self.context,
            use_global_arguments=False, start_parameter_services=False)
        self._control_executor = SingleThreadedExecutor(context=self.context)
        self._control_executor.add_node(self._control_node)
        self._control_thread = spin_in_background(self._control_executor, f"{self.get_name()}_control")
        self.backend = RosDriverBackend(
            self._control_node, driver_namespace=self.p("driver_namespace"),
            action_timeout_s=self.p("action_timeout_s"), wait_timeout_s=self.p("driver_timeout_s"),
        )
        self._stop = StopToken()
        self.runner = PolicyRunner(self.backend, robot_name=self.p("robot_name"), stop=self._stop)
        self._busy = threading.Lock()
        self._action_group = ReentrantCallbackGroup()
        self._server = ActionServer(
            self, RunEpisode, "run_episode", execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel, callback_group=self._action_group,
        )
        self._watch = self.create_timer(0.05, self._watch_lease, callback_group=MutuallyExclusiveCallbackGroup())
        self.exit_code: "int | None" = None
        self.done = threading.Event()
        self._closing = threading.Event()
        if self.p("autorun_episodes") > 0:
            threading.Thread(target=self._autorun, name="rollout-autorun", daemon=True).start()

    # -- parameters ----------------------------------------------------------------------------------------
    def p(self, name: str) -> Any:
        return self.get_parameter(name).value

    @staticmethod
    def _check(name: str, value: Any) -> str:
        if name == "policy_config_json" and value:
            try:
                if not isinstance(json.loads(value), dict):
                    return "policy_config_json must be a JSON object"
            except ValueError as exc:
                return f"policy_config_json is not JSON: {exc}"
        if name == "policy_provider" and not str(value).strip():
            return "policy_provider must not be empty"
        if name in ("control_frequency", "duration_s", "lease_duration_s") and not math.isfinite(float(value)):
            return f"{name} must be finite"
        return ""

    def _validate_parameters(self, params: list) -> SetParametersResult:
        for param in params:
            reason = self._check(param.name, param.value)
            if reason:
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    # -- action server -------------------------------------------------------------------------------------
    def _on_goal(self, goal: RunEpisode.Goal) -> GoalResponse:
        if self._busy.locked():
            self.get_logger().warning("refusing RunEpisode goal: an episode is already running")
            return GoalResponse.REJECT
        if goal.control_frequency < 0 or not math.isfinite(goal.control_frequency):
            self.get_logger().warning(f"refusing RunEpisode goal: control_frequency {goal.control_frequency}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: Any) -> CancelResponse:
        self._stop.request("goal cancelled")
        return CancelResponse.ACCEPT

    def _execute(self, goal_handle: Any) -> RunEpisode.Result:
        goal = goal_handle.request
        self._feedback_target = goal_handle
        try:
            ended_dict, end_condition, message = self.run_episode(goal)
        finally:
            self._feedback_target = None
        result = RunEpisode.Result()
        if ended_dict is not None:
            result.ended = convert.dict_to_msg("strands_robots_msgs/msg/RunPolicyEnded", ended_dict)
        result.end_condition = end_condition
        result.message = message
        result.events_published = self._events.published
        result.events_dropped = self._events.dropped
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif ended_dict is not None and ended_dict.get("outcome") == "ok":
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def _feedback_from_event(self, event: Any) -> None:
        """Publisher thread: turn step events into action feedback, at most 10 per second."""
        handle = self._feedback_target
        if handle is None or not hasattr(event, "applied_action_index"):
            return
        now = time.monotonic()
        if now - self._feedback_last < 0.1:
            return
        self._feedback_last = now
        fb = RunEpisode.Feedback()
        fb.run_id = event.run_id
        fb.applied_actions = event.applied_action_index + 1
        fb.elapsed_s = float(event.elapsed_s)
        fb.last_resolution = event.action_resolution
        handle.publish_feedback(fb)

    def _watch_lease(self) -> None:
        """A lease the driver no longer honours ends the episode as lease_lost, not as a run of refusals."""
        if self._busy.locked() and self.backend.lease_lost and not self._stop.requested:
            self.get_logger().warning(f"control lease lost ({self.backend.lease_lost}); stopping the episode")
            self._stop.request("lease_lost")

    # -- one episode ---------------------------------------------------------------------------------------
    def run_episode(self, goal: RunEpisode.Goal) -> tuple["dict | None", str, str]:
        """Run one episode for ``goal`` (parameters fill what the goal leaves empty).

        :returns: (the Ended event as a RunPolicyEnded dict, or None when no rollout ran; the end condition;
            why no rollout ran, empty when one did).
        """
        with self._busy:
            self._stop.clear()
            log = self.get_logger()
            if not self.backend.wait_until_ready(self.p("driver_timeout_s")):
                message = "arm driver not ready (no send_action service or joint_states)"
                log.error(message)
                return None, "", message
            acquired = False
            if goal.lease_token:
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
                    report = self.backend.move_to_start_pose()
                    if not report.reached:
                        message = f"start pose unreached: {report.detail}"
                        log.error(message)
                        self._publish_result(goal, None, END_START_POSE_UNREACHED, report.detail)
                        return None, END_START_POSE_UNREACHED, message
                try:
                    kwargs = self._run_kwargs(goal)
                except ValueError as exc:  # e.g. policy_config_json that is not a JSON object
                    message = f"goal refused: {exc}"
                    log.error(message)
                    return None, "", message
                log.info(f"episode: {kwargs['policy_provider']} at {kwargs['control_frequency']:g} Hz, "
                         f"budget {kwargs.get('n_steps') or kwargs['duration']} "
                         f"{'steps' if kwargs.get('n_steps') else 's'}")
                out = self.runner.run(observer=self._events, n_episodes=1, **kwargs)
            finally:
                if acquired:
                    self.backend.release()
            self._events.flush(5.0)
            if not out["episodes"]:
                message = f"episode refused before it started: {out.get('error_message', '')}"
                log.error(message)
                return None, "", message
            ended = out["episodes"][0]
            end_condition = end_condition_of_result(ended)
            self._publish_result(goal, ended, end_condition, ended.get("end_detail", ""))
            log.info(f"episode {ended['run_id']} ended: {ended['stopped_reason']} ({end_condition or 'no end condition'})"
                     f", {ended['applied_actions']} actions, {ended['missed_deadlines']} missed deadlines")
            return ended, end_condition, ""

    def _run_kwargs(self, goal: RunEpisode.Goal) -> dict:
        config_json = goal.policy_config_json or self.p("policy_config_json")
        seed = goal.seed if goal.seed >= 0 else self.p("seed")
        policy_config = json.loads(config_json) if config_json else None
        if policy_config is not None and not isinstance(policy_config, dict):
            raise ValueError("policy_config_json must be a JSON object")
        kwargs: dict[str, Any] = {
            "policy_provider": goal.policy_provider or self.p("policy_provider"),
            "policy_config": policy_config,
            "instruction": goal.task.instruction or self.p("instruction"),
            "control_frequency": goal.control_frequency or self.p("control_frequency"),
            "duration": goal.duration_s or self.p("duration_s"),
            "action_horizon": goal.action_horizon or self.p("action_horizon"),
            "async_rtc": bool(goal.async_rtc or self.p("async_rtc")),
            "rtc_inference_timeout_s": goal.rtc_inference_timeout_s or self.p("rtc_inference_timeout_s"),
            "record": bool(goal.record or self.p("record")),
            "seed": seed if seed >= 0 else None,
        }
        max_steps = goal.max_steps or self.p("max_steps")
        if max_steps:
            kwargs["n_steps"] = int(max_steps)
        if kwargs["record"]:
            kwargs["recording_dir"] = goal.recording_dir or self.p("recording_dir")
        params = {kv.key: kv.value for kv in goal.task.parameters}
        if goal.task.task_id or params or goal.task.layout:
            kwargs["task"] = {"task_id": goal.task.task_id, "layout": goal.task.layout, "parameters": params}
        return kwargs

    def _publish_result(self, goal: RunEpisode.Goal, ended: "dict | None", end_condition: str,
                        detail: str) -> None:
        msg = EpisodeResult()
        msg.end_condition = end_condition
        msg.end_detail = detail or ""
        msg.task = goal.task
        msg.scored = False
        msg.run_id = ended["run_id"] if ended else ""
        self._results_pub.publish(msg)

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
                ended, _, _ = self.run_episode(goal)
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
        """Wait until ``observer_events`` is matched by ``count`` subscribers; events are volatile, and DDS
        discovery of a subscriber that was up before this node can take seconds (the periodic announcement)."""
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
        """Stop a running episode and let it end (its Ended published) before the publisher and clients go."""
        self._closing.set()
        self._stop.request("shutdown")
        if self._busy.acquire(timeout=timeout_s):
            self._busy.release()
        self._events.close(2.0)
        self.backend.close()
        self._control_executor.shutdown(timeout_sec=2.0)
        self._control_thread.join(2.0)
        self._control_node.destroy_node()


def main(argv: "list[str] | None" = None) -> int:
    """Run the node until its autorun is done (``exit_after_autorun``) or SIGINT/SIGTERM; 0 on a clean stop.

    The signals are handled here rather than by rclpy, whose handler would shut the context down under a
    running episode: the episode is stopped first and ends (its Ended published), then the node goes.
    """
    signals = StopSignals.install()
    stop = signals.event
    init_without_signal_handlers(argv if argv is not None else sys.argv)
    node = None
    # The action server's execute callback runs a whole episode, so this executor needs a second thread for
    # goals, cancels and the lease watch; the control path has its own (see RolloutNode.__init__).
    executor = MultiThreadedExecutor(num_threads=2)
    spinner = None
    code = 0
    try:
        node = RolloutNode()
        executor.add_node(node)
        spinner = spin_in_background(executor, "rollout-executor")
        while not stop.is_set() and not node.done.wait(0.1):
            pass
        code = node.exit_code if node.exit_code is not None and not stop.is_set() else 0
    except (KeyboardInterrupt, ExternalShutdownException):
        code = 0
    except ValueError as exc:  # invalid parameters
        print(f"rollout_node: {exc}", file=sys.stderr)
        code = 2
    finally:
        if node is not None:
            node.close()
        executor.shutdown()
        if spinner is not None:
            spinner.join(2.0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        signals.restore()
    return code


if __name__ == "__main__":
    sys.exit(main())
