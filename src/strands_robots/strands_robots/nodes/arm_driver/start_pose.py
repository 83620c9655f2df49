"""The start-pose move, served by the driver node itself.

The cancellable action ``move_to_start_pose`` (with per-joint feedback) and, until the clients have moved to
it, the ``MoveToStartPose`` service of the same name.

The move is :meth:`~strands_robots.arm.driver.DriverCore.move_to_start_pose` (one implementation: validation,
lease, safety, settling). It runs on a thread of its own, because the driver's executor is single-threaded
(rclpy's MultiThreadedExecutor busy-waits holding the GIL, ros2/rclpy#1223) and must keep serving commands
and lease renewals during the move: the execute callback is a coroutine that awaits a future the move
thread completes, so the executor is never blocked. One move at a time; a second is refused with a reason.
:func:`move_on_runner` is the move itself against the hardware's real-time runner (robot time passes on the
runner's thread), and :func:`log_move` the line its report is logged with.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable, Optional

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.task import Future
from strands_robots_msgs.action import MoveToStartPose as MoveAction
from strands_robots_msgs.srv import MoveToStartPose as MoveService

from strands_robots.arm.start_pose import StartPoseAborted, StartPoseProgress, StartPoseReport

NAME = "move_to_start_pose"
# Feedback at most this often (the move itself checks every control period).
FEEDBACK_PERIOD_S = 0.05

# (lease_token, tolerance, timeout_s, should_stop, on_progress) -> report
MoveFn = Callable[[str, float, float, Callable[[], str], Optional[Callable[[StartPoseProgress], None]]],
                  StartPoseReport]


class StartPoseServer:
    """Serves the start-pose action and service on ``node`` (see the module docstring).

    :param node: the driver node.
    :param move: runs one move on the calling thread (the node's; it gates on being active).
    :param on_report: told the outcome of every move (logging).
    :param callback_group: for the service and the action server.
    """

    def __init__(self, node: Any, move: MoveFn, on_report: Callable[[StartPoseReport], None],
                 callback_group: Any = None) -> None:
        self._node = node
        self._move = move
        self._on_report = on_report
        self._busy = threading.Lock()
        self._action = ActionServer(node, MoveAction, NAME, execute_callback=self._execute,
                                    goal_callback=lambda _goal: GoalResponse.ACCEPT,
                                    cancel_callback=lambda _handle: CancelResponse.ACCEPT,
                                    callback_group=callback_group)
        self._service = node.create_service(MoveService, NAME, self._on_service, callback_group=callback_group)

    def destroy(self) -> None:
        self._action.destroy()
        self._node.destroy_service(self._service)

    # -- the move on its own thread ---------------------------------------------------------------------------
    def _start(self, token: str, tolerance: float, timeout_s: float, should_stop: Callable[[], str],
               on_progress: Optional[Callable[[StartPoseProgress], None]]) -> Future:
        done: Future = Future(executor=self._node.executor)
        # A done callback makes set_result schedule work on the executor, which wakes it to resume the await.
        done.add_done_callback(lambda _f: None)

        def run() -> None:
            if not self._busy.acquire(blocking=False):
                done.set_result(StartPoseReport(False, math.inf, 0.0, "another start-pose move is running"))
                return
            try:
                report = self._move(token, tolerance, timeout_s, should_stop, on_progress)
            except Exception as exc:  # the move must always answer
                report = StartPoseReport(False, math.inf, 0.0, f"move failed: {type(exc).__name__}: {exc}")
            finally:
                self._busy.release()
            self._on_report(report)
            done.set_result(report)

        threading.Thread(target=run, name="arm_driver_start_pose", daemon=True).start()
        return done

    # -- action ---------------------------------------------------------------------------------------------
    async def _execute(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        last = [0.0]

        def should_stop() -> str:
            return "cancelled" if goal_handle.is_cancel_requested else ""

        def on_progress(p: StartPoseProgress) -> None:
            now = time.monotonic()
            if now - last[0] < FEEDBACK_PERIOD_S:
                return
            last[0] = now
            fb = MoveAction.Feedback()
            fb.phase = p.phase
            fb.keys = list(p.keys)
            fb.errors = [float(e) for e in p.errors]
            fb.max_error = float(p.max_error)
            fb.elapsed_s = float(p.elapsed_s)
            goal_handle.publish_feedback(fb)

        report = await self._start(goal.lease_token, float(goal.tolerance), float(goal.timeout_s), should_stop,
                                   on_progress)
        result = MoveAction.Result()
        _fill(result, report)
        if report.reached:
            goal_handle.succeed()
        elif goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return result

    # -- service (kept until the clients use the action) ------------------------------------------------------
    async def _on_service(self, request: Any, response: Any) -> Any:
        report = await self._start(request.lease_token, float(request.tolerance), float(request.timeout_s),
                                   lambda: "", None)
        _fill(response, report)
        return response


def _fill(out: Any, report: StartPoseReport) -> None:
    out.reached = bool(report.reached)
    out.max_error = float(report.max_error) if math.isfinite(report.max_error) else -1.0
    out.elapsed_s = float(report.elapsed_s)
    out.detail = report.detail


def move_on_runner(core: Any, runner: Any, is_active: Callable[[], bool], token: str, tolerance: float,
                   timeout_s: float, should_stop: Callable[[], str],
                   on_progress: Optional[Callable[[StartPoseProgress], None]]) -> StartPoseReport:
    """Run the core's start-pose move, robot time advancing on ``runner``'s thread (the calling thread waits).

    :param is_active: whether the driver is still active; a deactivation ends the move with that reason.
    :param tolerance: 0 for the configured tolerance. :param timeout_s: 0 for the configured timeout.
    """

    def advance(dt: float) -> None:
        # Robot time passes on the runner thread; wait for it (generous wall margin for a slow machine).
        if not runner.wait_time(core.adapter.time_s() + dt, wall_timeout_s=10.0 * dt + 1.0):
            raise StartPoseAborted("driver deactivated during the move" if not runner.running
                                   else "robot time did not advance")

    def stop_reason() -> str:
        return should_stop() or ("" if is_active() else "driver deactivated during the move")

    return core.move_to_start_pose(tolerance=tolerance or None, timeout_s=timeout_s or None,
                                   lease_token=token, advance=advance, should_stop=stop_reason,
                                   on_progress=on_progress)


def log_move(log: Any, report: StartPoseReport) -> None:
    """Log a move's report on the node's logger ``log``: info when reached, a warning when not."""
    text = (f"move_to_start_pose: {'reached' if report.reached else 'not reached'} in "
            f"{report.elapsed_s:.2f} s, max error {report.max_error:.4f} rad"
            f"{': ' + report.detail if report.detail else ''}")
    if report.reached:  # rclpy keys a log call site to one severity, hence two calls
        log.info(text)
    else:
        log.warning(text)
