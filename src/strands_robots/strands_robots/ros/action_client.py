"""rclpy's ActionClient with every request recorded before its answer can be taken (ros2/rclpy#1123).

rclpy's ActionClient sends a goal, result or cancel request and only then records its sequence number. An
executor thread that takes the answer in between finds no record ("Ignoring unexpected goal response") and the
request's future never completes: the caller waits out its whole deadline for an answer that came. Our callers
send from their own threads (the station's job thread, the rollout node's episode thread) while the executor
spins in another, so the window is real on a loaded machine.

- Jazzy's rclpy (7.1) takes no lock at all between the send and the record.
- Kilted's (9.1.2) holds a lock from the send to the record, but its ``send_goal_async`` then records a *second*
  future for the same sequence number outside the lock (a block left twice in the file). An answer taken before
  that second record completes the first future, which no caller holds, so the goal is never answered; one
  taken between the record and its ``add_future`` raises ``ValueError: list.remove(x): x not in list`` in the
  sending thread, which ends an episode before it starts ("autorun failed: ValueError: list.remove(x): x not in
  list").

:class:`ActionClient` holds one lock of its own from each send until its sequence number is recorded, and
around ``take_data`` (where the executor takes answers), so no answer is taken before it can be matched: the fix
of ros2/rclpy#1308 (#1519), on every rclpy we run. A goal's feedback callback is registered before the goal is
sent, so its first feedback is never dropped either.

Kilted's rclpy also hands the client to the node's executor (``add_waitable``, which wakes it) before it makes
the ``_lock`` that the executor's ``get_num_entities`` takes (ros2/rclpy#1589): a client made on a node that is
already spinning can kill that executor with ``AttributeError: 'ActionClient' object has no attribute '_lock'``,
and nothing of the node is served after it (the driver client's start-pose client would leave the lease call in
the same node unanswered). :class:`ActionClient` makes that lock before rclpy's
constructor runs. Everything else is rclpy's.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from action_msgs.srv import CancelGoal
from rclpy.action import ActionClient as _RclpyActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.task import Future

__all__ = ["ActionClient"]


class ActionClient(_RclpyActionClient):
    """``rclpy.action.ActionClient`` whose goal, result and cancel requests are safe to send from any thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Before rclpy's __init__: the node hands this waitable to a spinning executor as soon as it is made, and
        # the executor takes ``_lock`` (Kilted) to ask for its entities; rclpy makes it only after that (#1589).
        self._send_lock = threading.RLock()
        self._lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def _handle_lock(self) -> Any:
        """Return the lock around the client handle (Kilted's rclpy takes it too; Jazzy's never does)."""
        return self._lock

    def take_data(self) -> Any:
        with self._send_lock:  # an answer is taken only once its request is recorded
            return super().take_data()

    def send_goal_async(self, goal: Any, feedback_callback: "Optional[Callable[[Any], None]]" = None,
                        goal_uuid: Any = None) -> Future:
        if not isinstance(goal, self._action_type.Goal):
            raise TypeError(f"Expected goal type ({type(self._action_type.Goal)}) but received ({type(goal)})")
        request = self._action_type.Impl.SendGoalService.Request()
        request.goal_id = self._generate_random_uuid() if goal_uuid is None else goal_uuid
        request.goal = goal
        future = Future()
        uuid = bytes(request.goal_id.uuid)
        with self._send_lock, self._handle_lock():
            if feedback_callback is not None:
                self._feedback_callbacks[uuid] = feedback_callback
            try:
                sequence_number = self._client_handle.send_goal_request(request)
            except BaseException:
                self._feedback_callbacks.pop(uuid, None)
                raise
            if sequence_number in self._pending_goal_requests:
                raise RuntimeError(f"Sequence ({sequence_number}) conflicts with pending goal request")
            self._pending_goal_requests[sequence_number] = future
            self._goal_sequence_number_to_goal_id[sequence_number] = request.goal_id
            future.add_done_callback(self._remove_pending_goal_request)
            self.add_future(future)  # so the executor is aware of it
        return future

    def _cancel_goal_async(self, goal_handle: ClientGoalHandle) -> Future:
        if not isinstance(goal_handle, ClientGoalHandle):
            raise TypeError(f"Expected type ClientGoalHandle but received {type(goal_handle)}")
        request = CancelGoal.Request()
        request.goal_info.goal_id = goal_handle.goal_id
        future = Future()
        with self._send_lock, self._handle_lock():
            sequence_number = self._client_handle.send_cancel_request(request)
            if sequence_number in self._pending_cancel_requests:
                raise RuntimeError(f"Sequence ({sequence_number}) conflicts with pending cancel request")
            self._pending_cancel_requests[sequence_number] = future
            future.add_done_callback(self._remove_pending_cancel_request)
            self.add_future(future)
        return future

    def _get_result_async(self, goal_handle: ClientGoalHandle) -> Future:
        if not isinstance(goal_handle, ClientGoalHandle):
            raise TypeError(f"Expected type ClientGoalHandle but received {type(goal_handle)}")
        request = self._action_type.Impl.GetResultService.Request()
        request.goal_id = goal_handle.goal_id
        future = Future()
        with self._send_lock, self._handle_lock():
            sequence_number = self._client_handle.send_result_request(request)
            if sequence_number in self._pending_result_requests:
                raise RuntimeError(f"Sequence ({sequence_number}) conflicts with pending result request")
            self._pending_result_requests[sequence_number] = future
            self._result_sequence_number_to_goal_id[sequence_number] = request.goal_id
            future.add_done_callback(self._remove_pending_result_request)
            self.add_future(future)
        return future
