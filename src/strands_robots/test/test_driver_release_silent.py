"""RosDriverBackend.release to a driver gone silent: the release is sent, no answer is awaited.

A SIGKILLed driver's ``release_lease`` service stays in the ROS graph a while and a request to it is never
answered; the station releases its lease right after the episode the dead driver ended, so waiting for that
answer held the station the whole call bound before it could report the fault. Here the driver runs in its own
process and is SIGSTOPped: it neither publishes ``joint_states`` nor answers while its services stay in the graph,
and is SIGCONTed later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from strands_robots_msgs.msg import LeaseState  # noqa: E402

from ros_harness import wait_for  # noqa: E402
from test_driver_process import driver_env  # noqa: E402

from strands_robots.arm.lease import STATE_FREE, STATE_HELD  # noqa: E402
from strands_robots.ros.qos import LATCHED_QOS  # noqa: E402
from strands_robots.driver_link.client import COMMAND_PATH_SERVICE, RosDriverBackend  # noqa: E402
from strands_robots.ros.process import spin_in_background  # noqa: E402


@pytest.fixture
def rig():
    """Start the driver in its own process (own session, ended by its PID); a backend on a client node here."""
    ns = f"/release_{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([sys.executable, "-m", "strands_robots.nodes.arm_driver.node", "--autostart",
                             "--ros-args", "-r", f"__ns:={ns}"], env=driver_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("release_test_client", namespace=ns, context=context)
    leases: list = []
    node.create_subscription(LeaseState, "lease_state", lambda m: leases.append(m.state), LATCHED_QOS)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    thread = spin_in_background(executor, "release_test")
    backend = RosDriverBackend(node, action_timeout_s=5.0, command_path=COMMAND_PATH_SERVICE)
    try:
        assert backend.wait_until_ready(60.0), "driver services / joint_states not seen"
        yield proc, backend, leases
    finally:
        try:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(10.0)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10.0)
        finally:
            executor.shutdown(timeout_sec=5.0)
            thread.join(5.0)
            backend.close()
            node.destroy_node()
            context.try_shutdown()


def release_in_thread(backend, timeout_s: float) -> dict:
    out: dict = {"done": threading.Event()}

    def run():
        out["ok"] = backend.release(timeout_s=timeout_s)
        out["done"].set()

    threading.Thread(target=run, daemon=True).start()
    return out


def test_a_live_driver_answers_the_release_and_frees_the_arms(rig):
    _, backend, leases = rig
    assert backend.acquire("worker", 1, 30.0, heartbeat=False).granted
    assert wait_for(lambda: leases and leases[-1] == STATE_HELD, 15.0), leases
    assert backend.release() is True
    assert wait_for(lambda: leases[-1] == STATE_FREE, 15.0), leases


def test_a_silent_driver_is_sent_the_release_without_the_caller_waiting_for_an_answer(rig):
    proc, backend, leases = rig
    assert backend.acquire("worker", 1, 30.0, heartbeat=False).granted  # 30 s: it cannot run out in this test
    assert wait_for(lambda: leases and leases[-1] == STATE_HELD, 15.0), leases
    os.killpg(proc.pid, signal.SIGSTOP)  # stalled: no joint_states, no answers; its services still in the graph
    try:
        assert wait_for(lambda: not backend.wait_until_ready(0.0), 10.0), "the driver never went silent"
        # A 60 s call bound: had release() waited for the answer, it would still be waiting when checked.
        out = release_in_thread(backend, 60.0)
        assert out["done"].wait(15.0), "release() waited for an answer the stalled driver cannot give"
        assert out["ok"] is False  # nothing confirmed
        assert backend.lease_token == ""  # the backend no longer holds (nor renews) the lease
        assert leases[-1] == STATE_HELD  # the driver has not answered anything yet
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
    # The request was sent: the resumed driver frees the arms (a release, not the 30 s lease running out).
    assert wait_for(lambda: leases[-1] == STATE_FREE, 15.0), leases
