"""Shared test set-up.

DDS isolation: every pytest process (every pytest-xdist worker) gets its own ROS_DOMAIN_ID and keeps
discovery on this host, so parallel test runs (and anything else on the network) never see each other's
topics. This runs at conftest import, before any test calls ``rclpy.init``. A value already in the
environment wins (the run's domain: worker gw0 keeps it, the others derive theirs from it,
ros_harness.worker_domain), so a developer can still pin a domain.
"""

from __future__ import annotations

import os

import pytest
from fast_tests import ignore_in_fast_run
from rerun_reasons import register as register_rerun_reasons
from ros_harness import isolate_dds

isolate_dds()
# gRPC's fork support off before any test module imports grpc (strands_robots/__init__.py says why): the tests
# fork restarts beside busy relay channels, and with it a restarted process could die before its exec.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


def pytest_configure(config):
    """Every rerun's reason printed at the end of the run (rerun_reasons.py)."""
    register_rerun_reasons(config)


def pytest_ignore_collect(collection_path, config):
    """``make test-fast`` (STRANDS_ROBOTS_TEST_FAST=1): the core unit tests only (fast_tests.py)."""
    return True if ignore_in_fast_run(collection_path) else None


@pytest.fixture(scope="module")
def ros_context():
    """Yield an initialised rclpy Context of its own for one test module; shut down after the module.

    Skips the requesting tests when rclpy cannot be imported (no ROS install and no .venv wheels).
    """
    try:
        import rclpy
        from rclpy.context import Context
    except ImportError as exc:
        pytest.skip(f"rclpy is not importable ({exc}); source scripts/env.sh or a ROS 2 distro")
    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


@pytest.fixture
def dds_echo(ros_context):
    """``echo(msg) -> received``: publish ``msg`` over DDS on a topic of its type and take it back.

    One node per test, in this module's context. The subscription is matched before the first publish and
    the message is re-sent every 0.5 s until one arrives (10 s limit), so discovery timing cannot flake it.
    """
    import time

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    node = rclpy.create_node("strands_robots_dds_echo", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)

    def echo(msg, timeout_s: float = 10.0):
        cls = type(msg)
        topic = f"/strands_robots_test/{cls.__module__.split('.')[0]}/{cls.__name__}"
        received = []
        sub = node.create_subscription(cls, topic, received.append, qos)
        pub = node.create_publisher(cls, topic, qos)
        try:
            deadline = time.monotonic() + timeout_s
            next_send = 0.0
            while not received and time.monotonic() < deadline:
                now = time.monotonic()
                if now >= next_send and pub.get_subscription_count() > 0:
                    pub.publish(msg)
                    next_send = now + 0.5
                executor.spin_once(timeout_sec=0.05)
        finally:
            node.destroy_publisher(pub)
            node.destroy_subscription(sub)
        assert received, f"no {cls.__name__} came back on {topic} within {timeout_s} s"
        return received[0]

    try:
        yield echo
    finally:
        executor.remove_node(node)
        executor.shutdown()
        node.destroy_node()



@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker hook reads the marks into the node ids
def pytest_collection_modifyitems(config, items):
    """With pytest-xdist workers: a group per file (or per shared session fixture), longest first (xdist_groups.py)."""
    from xdist_groups import assign

    assign(items)
