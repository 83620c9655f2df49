"""DemoPolicy: the demo team's policy, served through the relay by the Evaluation Client.

A built-in policy (``mock`` or ``scripted``, :mod:`strands_robots.policies.registry`) run on the client's side,
as a remote team's policy would be: ``strands-robots up`` (:mod:`strands_robots.cli.station_demo`),
``demo_job --relay`` (:mod:`strands_robots.cli.demo_job`) and ``strands-robots job submit --serve``
(:mod:`strands_robots.client.cli.job`) serve it.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

from strands_robots.client import Policy

__all__ = ["DemoPolicy", "demo_slot_policies"]


class DemoPolicy(Policy):
    """The demo team's policy, served through the relay: a built-in policy run on the client side.

    Per episode: ``provider`` (``mock`` or ``scripted``) with ``config``, overridden by the task's
    ``policy.<option>`` parameters (JSON values), the way the station applies them to its own providers. Its
    ``EndEpisode`` becomes the client's ``EndEpisode`` (the episode ends ``policy_completed``). ``episodes``
    lists the episodes it started (the station's preflight, answered the same way, is not one).

    :param blind: the policy never sees a camera frame (every ``<camera>.image`` is left out of its observations):
        the demo's comparison runs the vision policy against this blind one on the same task.
    """

    def __init__(self, provider: str = "mock", config: Optional[Mapping[str, Any]] = None, *,
                 blind: bool = False) -> None:
        self.provider = provider
        self.blind = bool(blind)
        self.config = dict(config or {})
        self.inner: Any = None
        self.episodes: List[str] = []
        self.resumes = 0

    def reset(self, task: Any) -> None:
        from strands_robots.policies.registry import make_policy

        config = dict(self.config)
        for key, value in task.parameters.items():
            if key.startswith("policy."):
                try:
                    config[key[len("policy."):]] = json.loads(value)
                except ValueError:
                    config[key[len("policy."):]] = value
        episode = self.episode
        self.inner = make_policy(self.provider, config)
        self.inner.reset({
            "instruction": task.instruction,
            "action_keys": tuple(episode.action_keys) if episode is not None else (),
            "control_frequency": (episode.control_frequency if episode is not None else 0.0) or 50.0,
            "action_horizon": (episode.action_horizon if episode is not None else 0) or 8,
            "joint_limits": {},
        })
        if episode is None or not episode.preflight:  # the station's preflight asks once before any episode
            self.episodes.append(episode.episode_id if episode is not None else "")

    def act(self, observation: Mapping[str, Any]) -> List[dict]:
        from strands_robots.client import EndEpisode as ClientEndEpisode
        from strands_robots.policies.base import EndEpisode

        try:
            chunk = self.inner.act(self._seen(observation))
        except EndEpisode as exc:
            raise ClientEndEpisode(str(exc)) from None
        return [{k: float(v) for k, v in action.items()} for action in chunk]

    def resume(self, observation: Mapping[str, Any]) -> None:
        self.resumes += 1
        self.inner.resume(self._seen(observation))

    def _seen(self, observation: Mapping[str, Any]) -> Mapping[str, Any]:
        if not self.blind:
            return observation
        return {k: v for k, v in observation.items() if not (isinstance(k, str) and k.endswith(".image"))}


def demo_slot_policies(provider: str, config: Optional[Mapping[str, Any]],
                       slots: Sequence[str]) -> Dict[str, DemoPolicy]:
    """Return the demo's policy for each slot of a comparison: the first slot's sees, every other one is blind.

    The demo compares a policy that looks (the job file's, e.g. the suite's ``vision_reach``) with the same policy
    never shown a camera frame, so the comparison has a known answer: the first slot is better wherever the task
    needs the camera.
    """
    return {slot: DemoPolicy(provider, config, blind=i > 0) for i, slot in enumerate(slots)}
