"""The rollout node's own observers of its episodes: the run tracker and the action feedback.

:class:`RunTracker` (first in the observer list, on the control thread) tells the driver backend each new
run_id, so the command stream carries the episode's lifecycle id and its step indices restart at 0.
:class:`EpisodeFeedback` turns step events into ``RunEpisode`` feedback, at most 10 per second; it is the
event publisher's ``on_event`` hook (it runs on the publisher thread): while a goal is running
(:attr:`EpisodeFeedback.target` is its handle) every ``RunPolicyStep`` counts its missed deadline, and one
feedback a tenth of a second carries the step reached, the budget, the elapsed time and the misses so far;
``RunPolicyStarted`` resets the count. Used by
:class:`~strands_robots.nodes.rollout.node.RolloutNode`.
"""

from __future__ import annotations

import time
from typing import Any

from strands_robots_msgs.action import RunEpisode

from strands_robots.simulation.observers import RunPolicyStarted, RunPolicyStep

__all__ = ["RunTracker", "EpisodeFeedback"]


class RunTracker:
    """Observer (first in the list, on the control thread) telling the backend each new run_id.

    So the command stream carries the episode's lifecycle id and its step indices restart at 0.
    """

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def __call__(self, event: Any) -> None:
        if type(event) is RunPolicyStarted:
            self._backend.begin_run(event.run_id)


class EpisodeFeedback:
    """Publish a running goal's feedback from its step events (see the module docstring)."""

    def __init__(self) -> None:
        self.target: Any = None  # the running goal's handle, or None between goals
        self._last = 0.0
        self._missed = 0
        self._total_steps = 0

    def __call__(self, event: Any) -> None:
        handle = self.target
        if handle is None:
            return
        if type(event) is RunPolicyStarted:
            self._missed = 0
            self._total_steps = int(event.total_steps)
            return
        if type(event) is not RunPolicyStep:
            return
        if event.deadline_missed:
            self._missed += 1
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        fb = RunEpisode.Feedback()
        fb.run_id = event.run_id
        fb.applied_actions = event.applied_action_index + 1
        fb.total_steps = self._total_steps
        fb.elapsed_s = float(event.elapsed_s)
        fb.last_resolution = event.action_resolution
        fb.missed_deadlines = self._missed
        handle.publish_feedback(fb)
