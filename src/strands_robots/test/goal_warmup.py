"""Before a test's first RunEpisode goal: one goal answered and its result delivered, so both paths are matched.

A rollout node's action server seen in the graph has not always matched its reply writers to a new client's
readers, so the answer to the first goal (or to its result request) can be lost: a test goal sent right after
start-up can go unanswered for 30 s, on Jazzy and on Kilted. :func:`warm_goal_path` sends a goal the node
refuses in validation (an unknown policy provider: nothing moves, no episode is counted) until one is answered
with its result; a send whose answer was lost is simply sent again. The station's own goals handle the same
race in ``nodes/station/episode_goal.py``.
"""

from __future__ import annotations

import threading
import time

from strands_robots_msgs.action import RunEpisode

REFUSED = "goal refused: policy_provider='no_such_policy'"


def warm_goal_path(action, control_frequency: float, timeout_s: float = 30.0) -> int:
    """Send refused goals through ``action`` (an ActionClient) until one's result arrives; return the sends made."""
    deadline = time.monotonic() + timeout_s
    sends = 0

    def left() -> float:
        return min(5.0, max(0.0, deadline - time.monotonic()))

    while True:
        assert time.monotonic() < deadline, f"no warm-up goal answered with its result ({sends} sent)"
        goal = RunEpisode.Goal()
        goal.seed = -1
        goal.control_frequency = control_frequency
        goal.policy_provider = "no_such_policy"
        sends += 1
        answered = threading.Event()
        future = action.send_goal_async(goal)
        future.add_done_callback(lambda _f: answered.set())
        if not answered.wait(left()) or not future.result().accepted:
            continue
        got = threading.Event()
        result = future.result().get_result_async()
        result.add_done_callback(lambda _f: got.set())
        if not got.wait(left()):
            continue
        message = result.result().result.message
        assert message.startswith(REFUSED), message
        return sends
