"""The policy a team serves through the relay, and the exception that ends an episode."""

from __future__ import annotations

from typing import Any, List, Mapping


class EndEpisode(Exception):
    """Raise from :meth:`Policy.act` to end the episode; the station records it as ``policy_completed``."""


class Policy:
    """Subclass and override :meth:`act` (and :meth:`reset` / :meth:`resume` as needed).

    While a session runs, ``self.episode`` is the current ``pb.EpisodeStart`` (episode id, task, the actuator
    keys the policy may command, control frequency and action horizon), set before :meth:`reset`.
    """

    episode: Any = None

    def reset(self, task: Any) -> None:
        """Start a new episode of ``task`` (``pb.Task``: instruction, layout, parameters, scoring)."""

    def act(self, observation: Mapping[str, Any]) -> List[Mapping[str, float]]:
        """Return an action chunk: a list of ``{actuator_key: value}``, applied one per control step.

        ``observation`` maps keys to floats, strings, bools or arrays (numpy when installed, else nested
        lists). Raise :class:`EndEpisode` to end the episode.
        """
        raise NotImplementedError("Policy.act must be overridden")

    def resume(self, observation: Mapping[str, Any]) -> None:
        """Continue after an operator takeover, from the arms' current state in ``observation``."""
