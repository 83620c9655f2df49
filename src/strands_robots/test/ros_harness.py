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
    """Give this pytest process its own ROS_DOMAIN_ID, keep discovery on this host, take the project's DDS profile.

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
    # The project's profile, as every node process takes it (strands_robots/dds/fastdds.xml says what it sets):
    # the test process's own nodes and every process it starts run with it. A profile the user named wins.
    from strands_robots.dds.fastdds_profile import use_project_profile

    use_project_profile()


def profile_variable() -> str:
    """Name the variable this distro's Fast DDS reads its default XML profile from (the package's rule)."""
    from strands_robots.dds.fastdds_profile import profile_variable as variable

    return variable()


def dds_profile() -> str:
    """Path of the project's Fast DDS profile in this distro's Fast DDS's element names: the tests run with it."""
    from strands_robots.dds.fastdds_profile import profile_path

    return profile_path()


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
