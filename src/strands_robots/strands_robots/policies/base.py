"""The Policy protocol every provider implements, and the exception that ends an episode."""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable


class EndEpisode(Exception):
    """Raised by ``Policy.act`` to end the episode: its end condition is ``policy_completed``."""


@runtime_checkable
class Policy(Protocol):
    """A policy maps an observation to a chunk of actions.

    ``act`` returns a sequence of actions (each ``{actuator_key: value}``), at most ``action_horizon`` long;
    the loop applies them one per control step. An empty chunk makes the loop re-query once synchronously.
    """

    def reset(self, task: Mapping[str, Any]) -> None:
        """Start a new episode; ``task`` holds at least ``instruction`` (str) and ``action_keys`` (tuple)."""

    def act(self, observation: Mapping[str, Any]) -> Sequence[Mapping[str, float]]:
        """Infer an action chunk from an observation. May raise EndEpisode."""

    def resume(self, observation: Mapping[str, Any]) -> None:
        """Continue from the arm's current state after an operator takeover ends."""


NEVER_BLOCKS = "never_blocks"
"""Optional policy attribute: ``True`` declares that ``act`` is pure computation of microseconds (no I/O, no
sleep, no lock held by others). The chunk pipeline then calls a synchronous ``act`` on the control thread
itself; any other policy's ``act`` runs on a worker thread the loop can abandon on a cancel. Absent means
``False``."""
