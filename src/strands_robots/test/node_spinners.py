"""Test helper: spin each node on its own executor thread, as the node processes do."""

from __future__ import annotations


class NodeSpinners:
    """One executor per node, each spun on its own thread — the way the node processes run them.

    rclpy's MultiThreadedExecutor busy-waits holding the GIL while work is pending, so a test that spun the
    driver, the rollout node and its clients in one of them measured that, not our nodes. ``multi=True`` gives a
    node a two-thread MultiThreadedExecutor (the rollout node: its action server runs an episode in a callback).
    """

    def __init__(self, context) -> None:
        self.context = context
        self._spun: list = []  # (executor, thread)

    def add(self, node, multi: bool = False):
        from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

        from strands_robots.nodes.process import spin_in_background

        executor = (MultiThreadedExecutor(num_threads=2, context=self.context) if multi
                    else SingleThreadedExecutor(context=self.context))
        executor.add_node(node)
        self._spun.append((executor, spin_in_background(executor, f"test-{node.get_name()}")))
        return node

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop every executor and wait for its thread (nothing spins a node while it is destroyed)."""
        for executor, _ in self._spun:
            executor.shutdown(timeout_sec=timeout_s)
        for _, thread in self._spun:
            thread.join(timeout_s)
        self._spun.clear()
