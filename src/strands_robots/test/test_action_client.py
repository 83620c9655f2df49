"""The action client every node uses: a goal's, result's or cancel's answer is never lost to the send race.

rclpy's ActionClient records a request only after sending it (ros2/rclpy#1123), so an executor that takes the
answer in between loses it and the caller's future never completes (Kilted's 9.1.2 also records a second future
for each goal outside its lock). Here the race is forced, not hoped for: the client handle's send waits, after
the request went out, until the executor has seen the answer ready to take. Over real DDS, with a
real action server, the client spun on its own executor thread as in the nodes.
"""

from __future__ import annotations

import threading
import uuid

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")

import rclpy  # noqa: E402
from rclpy.action import ActionServer, CancelResponse  # noqa: E402
from rclpy.context import Context  # noqa: E402
from ros_harness import NodeSpinners, wait_for  # noqa: E402
from strands_robots_msgs.action import MoveToStartPose  # noqa: E402

from strands_robots.ros.action_client import ActionClient  # noqa: E402

ANSWER_S = 5.0  # an answer that came is in hand well within this; a lost one never is


class _SendThenWaitForTheAnswer:
    """Delegates to the real client handle; ``send_<kind>_request`` returns only once its answer has arrived.

    That is the losing order: the answer is there to take before the sender records the request (rclpy's own
    ActionClient loses such answers: this file's tests fail with it, on Jazzy and on Kilted). It waits
    at most ``hold_s``: a client that takes no answer while a request is being recorded (the fix) may hold its
    executor back before the answer is seen, and is then held this long, not deadlocked.
    """

    def __init__(self, handle, kind: str, taking: threading.Event, hold_s: float = 2.0) -> None:
        self._handle = handle
        self._kind = kind
        self._taking = taking
        self._hold_s = hold_s

    def __getattr__(self, name):
        attr = getattr(self._handle, name)
        if name != f"send_{self._kind}_request":
            return attr

        def send(request):
            self._taking.clear()
            sequence_number = attr(request)
            self._taking.wait(self._hold_s)
            return sequence_number

        return send


def _force_the_race(client: ActionClient, kind: str) -> _SendThenWaitForTheAnswer:
    """Make ``kind``'s send wait until the executor sees an answer of that kind ready to take."""
    arrived = threading.Event()
    ready_flag = {"goal": "_is_goal_response_ready", "result": "_is_result_response_ready",
                  "cancel": "_is_cancel_response_ready"}[kind]
    is_ready = client.is_ready

    def seen(wait_set):
        ready = is_ready(wait_set)
        if getattr(client, ready_flag, False):
            arrived.set()
        return ready

    client.is_ready = seen  # the executor asks the waitable by name after each wake
    proxy = _SendThenWaitForTheAnswer(client._client_handle, kind, arrived)
    client._client_handle = proxy
    return proxy


@pytest.fixture
def pair():
    context = Context()
    rclpy.init(context=context)
    spinners = NodeSpinners(context)
    namespace = f"/action_client_{uuid.uuid4().hex[:8]}"
    release = threading.Event()
    server_node = rclpy.create_node("server", namespace=namespace, context=context)
    client_node = rclpy.create_node("client", namespace=namespace, context=context)

    def execute(goal_handle):
        if goal_handle.request.timeout_s > 0:  # a goal that waits to be cancelled
            release.wait(ANSWER_S)
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                return MoveToStartPose.Result(detail="cancelled")
        goal_handle.succeed()
        return MoveToStartPose.Result(reached=True, detail=f"tolerance {goal_handle.request.tolerance:g}")

    def cancel(_goal_handle):
        release.set()
        return CancelResponse.ACCEPT

    from rclpy.callback_groups import ReentrantCallbackGroup

    server = ActionServer(server_node, MoveToStartPose, "move", execute, cancel_callback=cancel,
                          callback_group=ReentrantCallbackGroup())
    client = ActionClient(client_node, MoveToStartPose, "move")
    spinners.add(server_node, multi=True)
    spinners.add(client_node)
    try:
        assert client.wait_for_server(timeout_sec=10.0), "the action server never appeared"
        yield client
    finally:
        release.set()
        spinners.shutdown()
        client.destroy()
        server.destroy()
        client_node.destroy_node()
        server_node.destroy_node()
        rclpy.try_shutdown(context=context)


def _done(future, timeout_s: float = ANSWER_S) -> bool:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    return done.wait(timeout_s)


class _FeedbackRegistryThatWaits(dict):
    """``_feedback_callbacks`` whose registration waits (at most ``hold_s``) until a goal answer was taken.

    Kilted's rclpy registers a goal's feedback callback after the send's locked block and before recording the
    goal's second future: an answer taken there completes the first future, which no caller holds.
    """

    def __init__(self, taken: threading.Event, hold_s: float = 1.0) -> None:
        super().__init__()
        self._taken = taken
        self._hold_s = hold_s

    def __setitem__(self, key, value) -> None:
        self._taken.wait(self._hold_s)
        super().__setitem__(key, value)


def _force_an_answer_taken_at_the_feedback_registration(client: ActionClient) -> None:
    taken = threading.Event()
    take = client.take_data

    def take_data():
        data = take()
        if "goal" in data:
            taken.set()
        return data

    client.take_data = take_data
    client._feedback_callbacks = _FeedbackRegistryThatWaits(taken)


@pytest.mark.parametrize("where", ["before_the_record", "at_the_feedback_registration"])
def test_a_goal_answered_before_the_send_returns_is_still_answered(pair, where):
    client = pair
    if where == "before_the_record":
        _force_the_race(client, "goal")
    else:
        _force_an_answer_taken_at_the_feedback_registration(client)
    feedback: list = []
    for tolerance in (0.1, 0.2, 0.3):
        future = client.send_goal_async(MoveToStartPose.Goal(tolerance=tolerance), feedback_callback=feedback.append)
        assert _done(future), f"goal (tolerance {tolerance}) never answered: the answer was taken before its record"
        handle = future.result()
        assert handle.accepted
        result = handle.get_result_async()
        assert _done(result), "result never answered"
        assert result.result().result.detail == f"tolerance {tolerance:g}"
    assert not client._pending_goal_requests and not client._goal_sequence_number_to_goal_id


def test_a_result_answered_before_the_send_returns_is_still_answered(pair):
    client = pair
    future = client.send_goal_async(MoveToStartPose.Goal(tolerance=0.5))
    assert _done(future)
    handle = future.result()
    assert wait_for(lambda: handle.status == 4, ANSWER_S)  # STATUS_SUCCEEDED: the result is ready at the server
    _force_the_race(client, "result")
    result = handle.get_result_async()
    assert _done(result), "the result was taken before its request was recorded, and lost"
    assert result.result().result.detail == "tolerance 0.5"
    assert not client._pending_result_requests and not client._result_sequence_number_to_goal_id


def test_a_cancel_answered_before_the_send_returns_is_still_answered(pair):
    client = pair
    future = client.send_goal_async(MoveToStartPose.Goal(timeout_s=30.0))
    assert _done(future)
    handle = future.result()
    _force_the_race(client, "cancel")
    cancelled = handle.cancel_goal_async()
    assert _done(cancelled), "the cancel's answer was taken before its request was recorded, and lost"
    assert len(cancelled.result().goals_canceling) == 1
    result = handle.get_result_async()
    assert _done(result)
    assert result.result().result.detail == "cancelled"


def test_a_client_made_on_a_node_its_executor_already_spins_leaves_that_executor_running():
    """The executor asks a new client for its entities before rclpy's constructor has returned (ros2/rclpy#1589).

    Forced: the node's ``add_waitable`` (which wakes its executor) waits until the executor thread has asked the
    client for its entities. rclpy's own class on Kilted dies there (``AttributeError: ... '_lock'``) and the node
    is served no more; ours answers a goal afterwards on the same executor.
    """
    from rclpy.executors import SingleThreadedExecutor

    from strands_robots.ros.process import spin_in_background

    context = Context()
    rclpy.init(context=context)
    namespace = f"/action_client_{uuid.uuid4().hex[:8]}"
    server_node = rclpy.create_node("server", namespace=namespace, context=context)
    client_node = rclpy.create_node("client", namespace=namespace, context=context)
    server = client = None
    asked = threading.Event()
    add_waitable = client_node.add_waitable

    def add_and_wait_for_the_executor(waitable):
        entities = waitable.get_num_entities

        def counted():
            asked.set()
            return entities()

        waitable.get_num_entities = counted  # the executor asks the waitable by name
        add_waitable(waitable)
        asked.wait(ANSWER_S)

    def execute(goal_handle):
        goal_handle.succeed()
        return MoveToStartPose.Result(reached=True, detail="made while spinning")

    client_node.add_waitable = add_and_wait_for_the_executor
    executors = [SingleThreadedExecutor(context=context) for _ in range(2)]
    executors[0].add_node(server_node)
    executors[1].add_node(client_node)
    threads = [spin_in_background(e, f"test-{i}") for i, e in enumerate(executors)]
    try:
        server = ActionServer(server_node, MoveToStartPose, "move", execute)
        client = ActionClient(client_node, MoveToStartPose, "move")
        assert asked.is_set(), "the executor never asked the new client for its entities"
        assert client.wait_for_server(timeout_sec=10.0), "the action server never appeared"
        future = client.send_goal_async(MoveToStartPose.Goal(tolerance=0.1))
        assert _done(future), f"goal never answered; the client's executor: {threads[1].error!r}"
        result = future.result().get_result_async()
        assert _done(result) and result.result().result.detail == "made while spinning"
        assert threads[1].error is None and threads[1].is_alive()
    finally:
        for executor in executors:
            executor.shutdown(timeout_sec=5.0)
        for thread in threads:
            thread.join(5.0)
        for entity in (client, server):
            if entity is not None:
                entity.destroy()
        client_node.destroy_node()
        server_node.destroy_node()
        rclpy.try_shutdown(context=context)
