"""The rollout node's episode goal: sent so that it starts at most one rollout, and its server watched.

:func:`send_episode_goal` sends the ``run_episode`` goal under one goal id until the rollout node answers (an
answer can be lost), adopting a refused id until its result says whether the server holds it;
:class:`ServerWatch` tells from the ROS graph (:func:`server_gids`) when the action server that accepted a goal
was replaced or went away, so a goal that died with its rollout node is not waited on for ever. Used by
:class:`~strands_robots.nodes.station.robot_port.RosRobotPort`.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Deque, Optional, Tuple

from rclpy.action.client import ClientGoalHandle
from strands_robots_msgs.action import RunEpisode
from unique_identifier_msgs.msg import UUID

__all__ = ["send_episode_goal", "ServerWatch", "server_gids", "REFUSED", "GOAL_ANSWER_S", "GOAL_SENDS",
           "ROLLOUT_GONE_S"]

ROLLOUT_GONE_S = 3.0  # a run_episode server unseen this long mid-episode: the rollout node died
# A goal answer can be lost: the server may see our goal request before it has matched our response reader, and
# Fast DDS drops the answer after 100 ms ("client will not receive response"). The goal is sent again under the
# same id (the server refuses an id it already holds) every GOAL_ANSWER_S, at most GOAL_SENDS times.
GOAL_ANSWER_S = 1.0
GOAL_SENDS = 8


def server_gids(node: Any, status_topic: str) -> frozenset:
    """Identify the run_episode action server now: the GIDs of its status publishers in the ROS graph."""
    try:
        infos = node.get_publishers_info_by_topic(status_topic)
    except Exception:  # noqa: BLE001  (a graph query that fails says nothing about the server)
        return frozenset()
    return frozenset(bytes(info.endpoint_gid) for info in infos)


def send_episode_goal(client: Any, goal: Any, id_bytes: bytes, on_feedback: Callable[[Any], None], log: Any,
                      goal_log: "Deque[str]") -> Tuple[Any, str]:
    """Send the episode goal on the ``run_episode`` action ``client`` until the rollout node answers.

    Returns ``(handle, "")``, ``(handle, "adopted")`` or ``(None, reason)``. Every send carries the same goal
    id, and the action server refuses an id it already holds, so a send after a lost answer never starts a
    second rollout. A refusal is therefore not taken at its word: it may be the server refusing our own id,
    accepted by a send whose answer was lost. The goal is then adopted under that id, and its result decides
    (STATUS_UNKNOWN: the server never held it, the goal was refused). No answer to any send: the id is
    cancelled, in case a send started a rollout whose answers were all lost.
    """
    goal_id = UUID(uuid=list(id_bytes))
    hex_id = bytes(goal_id.uuid).hex()[:8]
    futures: list = []
    for send in range(1, GOAL_SENDS + 1):
        try:
            futures.append(client.send_goal_async(goal, feedback_callback=on_feedback, goal_uuid=goal_id))
        except Exception as exc:  # noqa: BLE001  (rclpy raises SystemError for a field its C side refuses)
            if send == 1:  # nothing went out: say why, and nothing is left running
                raise ValueError(f"the run_episode goal {hex_id} could not be sent (nothing was sent): "
                                 f"{type(exc).__name__}: {exc}") from None
            break  # an earlier send went out: its answer (or the cancel below) decides
        deadline = time.monotonic() + GOAL_ANSWER_S
        while time.monotonic() < deadline:
            handles = [(k, f.result()) for k, f in enumerate(futures, 1) if f.done() and f.exception() is None]
            for k, handle in handles:
                if handle is not None and handle.accepted:
                    goal_log.append(f"goal {hex_id} accepted (the answer to send {k}; {send} of "
                                         f"{GOAL_SENDS} sent)")
                    return handle, ""
            if handles:
                goal_log.append(f"goal {hex_id} refused (send {send} of {GOAL_SENDS}): adopted "
                                     f"until its result says whether the server holds it")
                log.info(f"run_episode goal {hex_id} refused after {send} send(s): asking the rollout node "
                         f"for its result in case an earlier send was accepted and its answer lost")
                response = RunEpisode.Impl.SendGoalService.Response()
                response.accepted = True
                return ClientGoalHandle(client, goal_id, response), "adopted"
            time.sleep(0.02)
        if send < GOAL_SENDS:
            log.warning(f"run_episode goal {hex_id}: no answer within {GOAL_ANSWER_S:g} s (send {send} of "
                        f"{GOAL_SENDS}); sending it again under the same id")
    response = RunEpisode.Impl.SendGoalService.Response()
    response.accepted = True
    ClientGoalHandle(client, goal_id, response).cancel_goal_async()
    goal_log.append(f"goal {hex_id} unanswered after {GOAL_SENDS} sends: cancelled")

    # A server that was stalled (stopped, starved) takes its queued requests in no set order once it runs again:
    # the cancel can come before the sends, find no such goal, and the goal it then accepts would run with
    # nobody watching. So a send answered "accepted" from now on is cancelled on that answer.
    def cancel_if_accepted(future: Any) -> None:
        handle = future.result() if future.exception() is None else None
        if handle is not None and handle.accepted:
            goal_log.append(f"goal {hex_id} accepted after it was cancelled: cancelled again")
            handle.cancel_goal_async()

    for future in futures:
        future.add_done_callback(cancel_if_accepted)
    return None, (f"the rollout node did not answer the run_episode goal {hex_id} ({GOAL_SENDS} sends over "
                  f"{GOAL_SENDS * GOAL_ANSWER_S:g} s); the goal was cancelled in case it started")


REFUSED = "the rollout node refused the episode goal (it refuses a goal while an episode runs there)"


class ServerWatch:
    """Whether a goal's action server is still the one that accepted it, from graph samples (no ROS here).

    :param first: the server's GIDs when the goal was accepted (may be empty: the graph has not caught up).
    """

    def __init__(self, first: frozenset, now: float) -> None:
        self.ours = set(first)
        self.gone_since: Optional[float] = None if first else now

    def check(self, gids: frozenset, now: float) -> str:
        """Return why the goal died (its server replaced, or gone for ``ROLLOUT_GONE_S``); empty while it lives."""
        if not self.ours:  # nothing known yet: the first server seen is ours
            self.ours = set(gids)
        elif gids - self.ours:
            return "its run_episode action server was replaced by a new one (the rollout node restarted)"
        if gids & self.ours:
            self.gone_since = None
            return ""
        if self.gone_since is None:
            self.gone_since = now
        elif now - self.gone_since > ROLLOUT_GONE_S:
            return f"no run_episode action server for {ROLLOUT_GONE_S:g} s (the rollout node went away)"
        return ""
