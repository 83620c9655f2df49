"""The one ``Policy`` class and the one ``EndEpisode`` exception: a team's policy, served or run in process.

Both live here so the Evaluation Client installs on its own (no ROS, nothing else of strands_robots), and
:mod:`strands_robots.policies.base` re-exports these very objects: a policy written against the client runs in
process too (``run_policy(MyPolicy(), ...)``), and its ``EndEpisode`` ends the episode as ``policy_completed``
wherever it is raised.
"""

from __future__ import annotations

import abc
from typing import Any, Mapping, Sequence

__all__ = ["EndEpisode", "Policy"]

_METHODS = ("reset", "act", "resume")


class EndEpisode(Exception):
    """Raise from :meth:`Policy.act` to end the episode; the station records it as ``policy_completed``."""


class Policy(metaclass=abc.ABCMeta):
    """A policy maps an observation to a chunk of actions. Subclass and override :meth:`act` (and the others).

    Any object with ``reset``, ``act`` and ``resume`` is a ``Policy`` (``isinstance`` checks the three methods,
    as ``collections.abc`` does), so the built-in providers need not subclass it; a subclass gets the defaults.

    ``act`` returns a sequence of actions (each ``{actuator_key: value}``), at most ``action_horizon`` long,
    applied one per control step; an empty chunk makes the loop ask again once.

    Served through the relay (``EvaluationClient.serve_policy``), ``reset`` gets a ``pb.Task`` and, while the
    session runs, ``self.episode`` is the current ``pb.EpisodeStart`` (episode id, task, the actuator keys the
    policy may command, control frequency and action horizon), set before :meth:`reset`. Before the job's first
    lease the station's preflight is served the same way, ``reset`` then one ``act`` on the arms as they stand:
    then ``self.episode.preflight`` is True and ``self.episode.episode_id`` empty (the answer is checked, never
    applied; the first episode's ``reset`` follows). Run in process,
    ``reset`` gets the rollout's task mapping (at least ``instruction`` and ``action_keys``).
    """

    episode: Any = None

    @classmethod
    def __subclasshook__(cls, other: type) -> Any:
        if cls is Policy:
            return all(callable(getattr(other, name, None)) for name in _METHODS) or NotImplemented
        return NotImplemented

    def reset(self, task: Any) -> None:
        """Start a new episode of ``task``.

        :param task: a ``pb.Task`` (served through the relay) or the rollout's task mapping (in process).
        """

    def act(self, observation: Mapping[str, Any]) -> Sequence[Mapping[str, float]]:
        """Return an action chunk: a list of ``{actuator_key: value}``, applied one per control step.

        ``observation`` maps keys to floats, strings, bools or arrays (numpy when installed, else nested
        lists). Raise :class:`EndEpisode` to end the episode.

        :param observation: the station's observation of this step, by key.
        """
        raise NotImplementedError("Policy.act must be overridden")

    def resume(self, observation: Mapping[str, Any]) -> None:
        """Continue after an operator takeover, from the arms' current state in ``observation``.

        :param observation: the station's observation as the operator hands the arms back.
        """

    def spec(self) -> Any:
        """Declare what this policy needs of a station (optional; None: nothing declared, nothing checked).

        A :class:`~strands_robots.client.policy_spec.PolicySpec` (actuator keys or their count, observation keys,
        cameras and image size, control rate, the range it commands a gripper in). The station checks it when
        the policy attaches, before any arm moves, and fails the job naming every mismatch.
        """
        return None
