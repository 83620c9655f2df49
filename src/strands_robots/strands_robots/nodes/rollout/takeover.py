"""Operator takeover of a running rollout over ROS: ``pause_rollout`` / ``resume_rollout`` services.

:func:`add_takeover_services` puts two services on a node that owns a
:class:`~strands_robots.rollout.runner.PolicyRunner` (the rollout node):

- ``pause_rollout`` (``strands_robots_msgs/srv/Takeover``): the loop holds and its budget clock stands still
  (``PolicyRunner.pause()``); refused when no episode runs or a takeover is already in force;
- ``resume_rollout`` (``strands_robots_msgs/srv/Resume``): the policy's ``resume()`` runs with a fresh
  observation and control restarts from the arms' current state (``PolicyRunner.resume()``); refused when no
  takeover is in force;
- ``close_policy_sessions`` (``Resume`` type, reused): close the ``relay`` provider's policy sessions still open
  in this process whose episode is over (the station calls it after each episode and when it finds a session of
  its job left open by a previous station process). A running episode's session is never closed by it: the
  request may arrive late, after the next episode opened its own (``policies.relay.close_sessions``).

The rollout node creates them at construction; the station node calls them when its operator takes over and
hands back. The callbacks only flip the runner's
pause state (no waiting), so they are safe on a single-threaded executor that also serves the episode.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from strands_robots_msgs.srv import Resume, Takeover

__all__ = ["add_takeover_services", "TakeoverServices"]


class TakeoverServices:
    """The two services and the takeover state they keep (one takeover at a time).

    :param running: tells whether an episode is running now (default: the runner's ``running`` attribute
        or, without one, always true).
    """

    def __init__(self, node: Any, runner: Any, callback_group: Any = None,
                 running: Optional[Callable[[], bool]] = None) -> None:
        self._node = node
        self._runner = runner
        self._running = running or _running_of(runner)
        self._lock = threading.Lock()
        self.in_takeover = False
        self.operator = ""
        self._paused_episode: Any = None
        self.pause = node.create_service(Takeover, "pause_rollout", self._on_pause, callback_group=callback_group)
        self.resume = node.create_service(Resume, "resume_rollout", self._on_resume, callback_group=callback_group)
        # (The Resume type is reused: a name in, ok and a message out.)
        self.close_sessions = node.create_service(Resume, "close_policy_sessions", self._on_close_sessions,
                                                  callback_group=callback_group)

    def _on_pause(self, request: Any, response: Any) -> Any:
        name = request.operator_name.strip()
        with self._lock:
            if not name:
                response.ok, response.message = False, "operator_name must be a non-empty string"
            elif not self._running():
                response.ok, response.message = False, "no episode is running"
            elif self.in_takeover and self._episode() is self._paused_episode:
                response.ok, response.message = False, f"{self.operator} already took the rollout over"
            else:
                self._runner.pause()
                self.in_takeover, self.operator = True, name
                self._paused_episode = self._episode()
                why = f" ({request.reason})" if request.reason else ""
                response.ok, response.message = True, f"{name} took over{why}; rollout time stands still"
        if response.ok:
            self._node.get_logger().info(response.message)
        return response

    def _on_resume(self, request: Any, response: Any) -> Any:
        name = request.operator_name.strip()
        with self._lock:
            if not name:
                response.ok, response.message = False, "operator_name must be a non-empty string"
            elif not self.in_takeover or self._episode() is not self._paused_episode:
                response.ok, response.message = False, "no takeover is in force"
            else:
                self._runner.resume()
                self.in_takeover, self.operator = False, ""
                response.ok, response.message = True, f"{name} handed the arms back to the policy"
        if response.ok:
            self._node.get_logger().info(response.message)
        return response

    def _on_close_sessions(self, request: Any, response: Any) -> Any:
        """Close the relay policy sessions of ended episodes (the station is done with the episode, or restarted)."""
        from strands_robots.policies.relay import close_sessions

        closed = close_sessions()
        response.ok, response.message = True, f"{closed} policy session(s) closed"
        return response

    def _episode(self) -> Any:
        """Return what identifies the running episode (PolicyRunner: its pacer): a takeover never outlives it."""
        return getattr(self._runner, "_pacer", None)


def _running_of(runner: Any) -> Callable[[], bool]:
    def running() -> bool:
        if hasattr(runner, "running"):
            value = runner.running
            return bool(value() if callable(value) else value)
        return getattr(runner, "_pacer", None) is not None  # PolicyRunner: a pacer exists while a run is on

    return running


def add_takeover_services(node: Any, runner: Any, callback_group: Any = None,
                          running: Optional[Callable[[], bool]] = None) -> TakeoverServices:
    """Create ``pause_rollout`` / ``resume_rollout`` on ``node`` calling ``runner.pause()`` / ``resume()``."""
    return TakeoverServices(node, runner, callback_group, running)
