"""Shared by the node and system tests: DDS isolation, waiting on a condition, spinning nodes.

No rclpy import at module level: the conftests import this before any test decides to skip.
"""

from __future__ import annotations

import os
import random
import time


def _ros_distro_is_humble() -> bool:
    """Humble predates ROS_AUTOMATIC_DISCOVERY_RANGE (Iron+); it only knows ROS_LOCALHOST_ONLY."""
    distro = os.environ.get("ROS_DISTRO", "")
    if distro:
        return distro == "humble"
    try:  # no sourced distro (the Kilted wheels in .venv): judge by rclpy's version, Humble's is 3.x
        from importlib.metadata import version

        return int(version("rclpy").split(".")[0]) < 4
    except Exception:
        return False


_HERE = os.path.dirname(os.path.abspath(__file__))


def isolate_dds() -> None:
    """Give this pytest process its own ROS_DOMAIN_ID, keep discovery on this host and quick (:func:`dds_profile`).

    The domain is 1..100, seeded by the pid; call it before anything calls ``rclpy.init`` (subprocesses inherit
    it). Values already set win, except in a pytest-xdist worker: see :func:`worker_domain`.
    """
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random(os.getpid()).randint(1, 100)))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker:
        os.environ["ROS_DOMAIN_ID"] = str(worker_domain(int(os.environ["ROS_DOMAIN_ID"]), worker))
    if _ros_distro_is_humble():
        os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
    else:
        os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    # Participants announce themselves every 0.5 s, not 3 s; writers' heartbeats every 0.1 s (the file says why).
    os.environ.setdefault(profile_variable(), dds_profile())


def _fast_dds_2() -> bool:
    """Tell whether this distro's Fast DDS is 2.x (Humble, Iron, Jazzy) rather than 3.x (Kilted and later)."""
    distro = os.environ.get("ROS_DISTRO", "")
    if distro:
        return distro in ("humble", "iron", "jazzy")
    try:  # the wheels in .venv: Kilted's rclpy is 9.x, Jazzy's 7.x, Humble's 3.x
        from importlib.metadata import version

        return int(version("rclpy").split(".")[0]) < 9
    except Exception:
        return False


def profile_variable() -> str:
    """Name the variable this distro's Fast DDS reads its default XML profile from.

    Fast DDS 3 (Kilted and later) reads FASTDDS_DEFAULT_PROFILES_FILE and warns that the old name is deprecated;
    Fast DDS 2 (Humble, Jazzy) reads only FASTRTPS_DEFAULT_PROFILES_FILE.
    """
    return "FASTRTPS_DEFAULT_PROFILES_FILE" if _fast_dds_2() else "FASTDDS_DEFAULT_PROFILES_FILE"


def dds_profile() -> str:
    """Path of the tests' Fast DDS profile in this distro's Fast DDS's element names (fastdds_tests.xml says why)."""
    return os.path.join(_HERE, "fastdds2_tests.xml" if _fast_dds_2() else "fastdds_tests.xml")


def worker_domain(domain: int, worker: str) -> int:
    """Return the ROS_DOMAIN_ID of pytest-xdist worker ``worker`` (``gw0``, ``gw1``, ...) of a run on ``domain``.

    The workers inherit the run's domain; each needs its own, or one worker's nodes answer another's (a second
    driver on the same lease topics, node counts off by the other's). ``gw0`` keeps ``domain``; ``gw<i>`` gets
    ``101 + (domain - 1 + 101 * (i - 1)) % 131``: for ``gw1`` that is ``domain + 100`` (101..201, no run's own
    0..100 domain), and all stay within Fast DDS's 0..232.
    """
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    if index == 0:
        return domain
    return 101 + (domain - 1 + 101 * (index - 1)) % 131


def wait_for(predicate, timeout_s: float = 10.0, period_s: float = 0.01) -> bool:
    """Poll ``predicate`` until it is true or ``timeout_s`` passed; its last value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(period_s)
    return bool(predicate())


class NodeSpinners:
    """One executor per node, each spun on its own thread — the way the node processes run them.

    rclpy's MultiThreadedExecutor busy-waits holding the GIL while work is pending, so a test that spun the
    driver, the rollout node and its clients in one of them measured that, not our nodes. Every node gets a
    SingleThreadedExecutor, as in its process (the rollout node's episode is a coroutine; the station node's robot
    calls wait on their own threads); ``multi=True`` gives a two-thread MultiThreadedExecutor to a test's own
    node whose callbacks must overlap (test_action_client's server).
    """

    def __init__(self, context) -> None:
        self.context = context
        self._spun: list = []  # (executor, thread)

    def add(self, node, multi: bool = False):
        from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

        from strands_robots.ros.process import spin_in_background

        executor = (MultiThreadedExecutor(num_threads=2, context=self.context) if multi
                    else SingleThreadedExecutor(context=self.context))
        executor.add_node(node)
        self._spun.append((executor, spin_in_background(executor, f"test-{node.get_name()}")))
        return node

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop every executor and wait for its thread (nothing spins a node while it is destroyed)."""
        for _, thread in self._spun:
            thread.stop(timeout_s)  # the spin ends first, then the executor is shut down (SpinThread.stop)
        self._spun.clear()
