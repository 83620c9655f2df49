"""launch_testing: rollout.launch.py brings up the driver and the rollout node and runs one episode.

Runs under pytest with launch_testing's plugin (a ROS distro provides it); where ``launch_testing`` is not
importable (the PyPI wheels carry no launch), the module is skipped with that reason and
``test/test_system_up.py`` covers the same bring-up through ``strands-robots up``.
"""

import os
import threading
import time
import unittest

import pytest

pytest.importorskip(
    "launch_testing", reason="launch_testing is not installed (no ROS distro; the Kilted PyPI wheels lack launch)"
)
pytest.importorskip("launch_ros", reason="launch_ros is not installed (no ROS distro)")

import launch  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
import rclpy  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
from strands_robots_msgs.msg import ObserverEvent  # noqa: E402

from strands_robots.nodes._qos import EVENT_QOS  # noqa: E402

LAUNCH_FILE = os.path.join(os.path.dirname(__file__), "..", "launch", "rollout.launch.py")
NAMESPACE = "launch_test"


@pytest.mark.launch_test
def generate_test_description():
    rollout_launch = launch.actions.IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.abspath(LAUNCH_FILE)),
        launch_arguments={
            "namespace": NAMESPACE,
            "control_frequency": "50.0",
            "policy_provider": "mock",
            "episode_duration": "1.0",
        }.items(),
    )
    return launch.LaunchDescription([rollout_launch, launch_testing.actions.ReadyToTest()])


class TestEpisodeRuns(unittest.TestCase):
    def test_observer_stream_ends_with_one_ended_event(self):
        context = rclpy.Context()
        rclpy.init(context=context)
        node = rclpy.create_node("launch_test_listener", context=context)
        events = []
        done = threading.Event()

        def on_event(msg):
            events.append(msg)
            if msg.kind == ObserverEvent.KIND_ENDED:
                done.set()

        node.create_subscription(ObserverEvent, f"/{NAMESPACE}/observer_events", on_event, EVENT_QOS)
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        try:
            deadline = time.monotonic() + 60.0
            while not done.is_set() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.1)
        finally:
            executor.shutdown()
            node.destroy_node()
            rclpy.shutdown(context=context)
        self.assertTrue(done.is_set(), "no RunPolicyEnded event within 60 s")
        ended = [e for e in events if e.kind == ObserverEvent.KIND_ENDED]
        self.assertEqual(len(ended), 1)
        self.assertEqual(ended[0].ended[0].stopped_reason, "budget")
        self.assertEqual(ended[0].ended[0].outcome, "ok")
        steps = [e for e in events if e.kind == ObserverEvent.KIND_STEP]
        self.assertTrue(steps)
        self.assertTrue(all(s.step[0].action_resolution == "full" for s in steps))


@launch_testing.post_shutdown_test()
class TestExitCodes(unittest.TestCase):
    def test_every_process_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)
