"""launch_testing: rollout.launch.py brings up the whole station and runs the demo job to SUCCEEDED.

Run by pytest through launch_testing's plugin (``@pytest.mark.launch_test``), or alone with
``launch_test src/strands_robots/test/test_rollout_launch_testing.py``. The launch runs with
``exit_when_done:=false`` so the station stays up while the active test reads the job's end from the station's
``job_status`` topic and the observer stream; launch_testing then shuts it down and the post-shutdown test checks
every process's exit code (the job's client exited 0 on its own; the relay and the nodes exit 0 on SIGINT).

Where ``launch_testing`` is not importable the module is skipped with that reason; the same scenario runs
through ``strands-robots up`` in ``test/test_station_demo_main.py``.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
import unittest
import uuid
from pathlib import Path

import pytest

pytest.importorskip(
    "launch.launch_service", reason="launch is not installed (no ROS distro; the Kilted PyPI wheels lack launch)"
)
pytest.importorskip("launch_ros", reason="launch_ros is not installed (no ROS distro)")
pytest.importorskip("launch_testing.asserts", reason="launch_testing is not installed (no ROS distro)")

import launch  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402

ROLLOUT_LAUNCH = Path(__file__).resolve().parent.parent / "launch" / "rollout.launch.py"
JOB_TIMEOUT_S = 180.0
NAMESPACE = f"launch_testing_{uuid.uuid4().hex[:8]}"
STATE_DIR = tempfile.mkdtemp(prefix="launch_testing_state_")  # this run's own station state (never shared)
atexit.register(shutil.rmtree, STATE_DIR, True)


@pytest.mark.launch_test
def generate_test_description():
    station = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(ROLLOUT_LAUNCH)),
        launch_arguments={"namespace": NAMESPACE, "exit_when_done": "false", "state_dir": STATE_DIR}.items(),
    )
    return launch.LaunchDescription([station, launch_testing.actions.ReadyToTest()]), {"namespace": NAMESPACE}


class TestTheDemoJob(unittest.TestCase):
    """While the station runs: the job reaches SUCCEEDED and every episode's stream is whole."""

    def test_the_job_succeeds_with_a_gapless_stream_and_one_ended_per_episode(self, proc_output, namespace):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from strands_robots_msgs.msg import JobStatus, ObserverEvent

        from strands_robots.ros.qos import EVENT_QOS, LATCHED_QOS

        context = rclpy.Context()
        rclpy.init(context=context)
        node = rclpy.create_node("launch_testing_listener", context=context)
        statuses: list = []
        events: list = []
        node.create_subscription(JobStatus, f"/{namespace}/job_status", statuses.append, LATCHED_QOS)
        node.create_subscription(ObserverEvent, f"/{namespace}/observer_events", events.append, EVENT_QOS)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        try:
            deadline = time.monotonic() + JOB_TIMEOUT_S
            while time.monotonic() < deadline and not (
                    statuses and statuses[-1].state in ("SUCCEEDED", "FAILED", "CANCELLED")):
                executor.spin_once(timeout_sec=0.1)
            for _ in range(20):  # the last events of the last rollout may still be on their way
                executor.spin_once(timeout_sec=0.05)
        finally:
            executor.shutdown()
            node.destroy_node()
            rclpy.try_shutdown(context=context)
        self.assertTrue(statuses, "no JobStatus from the station")
        final = statuses[-1]
        self.assertEqual(final.state, "SUCCEEDED", final.message)
        self.assertEqual([(e.episode_id, e.end_condition) for e in final.episodes], [
            ("ep_0000", "timeout"), ("ep_0001", "policy_completed"), ("ep_0002", "safety_stop"),
            ("ep_0003", "timeout"), ("ep_0005", "timeout"), ("ep_0006", "start_pose_unreached"),
            ("ep_0007", "timeout"), ("ep_0008", "timeout")])
        by_run: dict = {}
        for event in events:
            by_run.setdefault(event.run_id, []).append(event)
        rolled = [e.run_id for e in final.episodes if e.run_id]
        self.assertEqual(len(rolled), 7)  # ep_0006 never rolled out (its start pose was not reached)
        self.assertLessEqual(set(rolled), set(by_run))
        for run_id, run_events in by_run.items():
            seqs = [e.event_seq for e in run_events]
            self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))), f"event_seq gap in run {run_id}")
            self.assertEqual([e.kind for e in run_events].count(ObserverEvent.KIND_ENDED), 1, run_id)
        # The job's client printed its progress and the summary, and exited on its own.
        proc_output.assertWaitFor(f"job {final.job_id} SUCCEEDED: ", timeout=30, stream="stdout")


@launch_testing.post_shutdown_test()
class TestExitCodes(unittest.TestCase):
    """After shutdown: every process of the station exited 0 (nothing was killed, nothing failed)."""

    def test_every_process_exited_zero(self, proc_info):
        names = sorted(proc_info.process_names())
        self.assertEqual(len(names), 6, names)  # relay, arm driver, camera, rollout, station, demo_job
        self.assertTrue(any(name.startswith("demo_job") for name in names), names)
        launch_testing.asserts.assertExitCodes(proc_info)
