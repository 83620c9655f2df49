"""The hot-path executor choice (ros/executor_choice.py) and the spin thread that runs either executor.

The rule is tested without ROS; then each executor rclpy has is built from the environment and spun by
``process.SpinThread`` while the main thread keeps running: rclpy's EventsExecutor.spin() holds the GIL while it
waits (every other thread stalls), so the thread must spin with bounded spin_once calls, and stop() must end it.
"""

from __future__ import annotations

import threading
import time

import pytest

from strands_robots.ros.executor_choice import EXECUTOR_ENV, resolve_executor


def test_single_is_the_default_and_events_is_chosen_by_name():
    assert resolve_executor("", events_available=True) == "single"
    assert resolve_executor(" Single ", events_available=True) == "single"
    assert resolve_executor("events", events_available=True) == "events"
    assert resolve_executor("", events_available=False) == "single"


def test_events_without_an_events_executor_and_an_unknown_name_are_refused_naming_the_variable():
    with pytest.raises(ValueError, match=f"{EXECUTOR_ENV}=events: this distro's rclpy has no"):
        resolve_executor("events", events_available=False)
    with pytest.raises(ValueError, match=f"{EXECUTOR_ENV} must be one of single, events, got 'multi'"):
        resolve_executor("multi", events_available=True)


rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")


@pytest.mark.parametrize("choice", ["single", "events"])
def test_the_chosen_executor_delivers_messages_while_the_main_thread_runs_and_stops_at_once(choice):
    from std_msgs.msg import String

    from strands_robots.ros import process
    from strands_robots.ros.executor_choice import events_executor_class, make_executor

    if choice == "events" and events_executor_class() is None:
        pytest.skip("this rclpy has no EventsExecutor")
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(f"executor_choice_{choice}", context=context)
    try:
        from rclpy.executors import SingleThreadedExecutor

        executor, name = make_executor(environ={EXECUTOR_ENV: choice}, context=context)
        assert name == choice
        assert isinstance(executor, SingleThreadedExecutor) == (choice == "single")
        received = []
        arrived = threading.Event()

        def on_message(msg):
            received.append(msg.data)
            if len(received) >= 20:
                arrived.set()

        node.create_subscription(String, "chatter", on_message, 50)
        pub = node.create_publisher(String, "chatter", 50)
        executor.add_node(node)
        spin = process.spin_in_background(executor, f"test-{choice}")
        ticks = 0
        deadline = time.monotonic() + 10.0
        sent = 0
        while not arrived.is_set() and time.monotonic() < deadline:
            pub.publish(String(data=str(sent)))
            sent += 1
            ticks += 1  # the main thread runs: a spin holding the GIL would stall this loop
            arrived.wait(0.01)
        assert arrived.is_set(), f"{choice}: {len(received)} of {sent} messages in 10 s"
        assert received[:3] == ["0", "1", "2"]
        t0 = time.monotonic()
        spin.stop(2.0)
        assert not spin.is_alive() and not spin.died
        assert time.monotonic() - t0 < 1.0  # one spin_once bound (0.2 s), never the whole join timeout
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)
