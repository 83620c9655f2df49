"""The rollout node's goal, read: a ``RunEpisode`` goal's fields, the node's parameters filling what it leaves empty.

:func:`run_kwargs` turns a goal into the arguments of :func:`~strands_robots.rollout.run_spec.validate_run`
(a number or string left 0 / empty takes the parameter's value; ``record`` / ``async_rtc`` decide for their goal,
or come from the parameters for the node's own autorun episodes); :func:`relay_policy_for` builds the relay
provider from the node's start-time credentials, taking only the episode's options from the goal. Used by
:class:`~strands_robots.nodes.rollout.node.RolloutNode`.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from strands_robots.rollout.run_spec import RunRefused

__all__ = ["run_kwargs", "relay_policy_for"]


def run_kwargs(goal: Any, p: Callable[[str], Any], namespace: str, episode_number_offset: int,
               relay_policy: Any, autorun: bool = False) -> dict:
    """Return the run arguments of a goal for ``validate_run``; a field left 0 / empty takes the parameter.

    :param p: the node's parameter value by name.
    :param namespace: the node's namespace (recordings are filed under it).
    :param episode_number_offset: the node's episodes run so far (numbers the recordings).
    :param relay_policy: the relay provider's factory built from the node's credentials, or None without them.
    :raises RunRefused: ``policy_config_json`` is not a JSON object, or the relay provider refused it.
    """
    config_json = goal.policy_config_json or p("policy_config_json")
    try:
        policy_config = json.loads(config_json) if config_json else None
    except ValueError as exc:
        raise RunRefused("policy_config_json", config_json, f"policy_config_json is not JSON: {exc}") from None
    if policy_config is not None and not isinstance(policy_config, dict):
        raise RunRefused("policy_config_json", config_json, "policy_config_json must be a JSON object")
    seed = goal.seed if goal.seed >= 0 else p("seed")
    provider: Any = goal.policy_provider or p("policy_provider")
    if isinstance(provider, str) and provider.strip().lower() == "relay":
        provider = relay_policy_for(relay_policy, policy_config)
        policy_config = None
    kwargs: dict[str, Any] = {
        "robot_name": goal.robot_name or p("robot_name"),
        "policy_provider": provider,
        "policy_config": policy_config,
        "instruction": goal.task.instruction or p("instruction"),
        "control_frequency": goal.control_frequency or p("control_frequency"),
        "action_horizon": goal.action_horizon or p("action_horizon"),
        "async_rtc": bool(p("async_rtc") if autorun else goal.async_rtc),
        "rtc_inference_timeout_s": goal.rtc_inference_timeout_s or p("rtc_inference_timeout_s"),
        "record": bool(p("record") if autorun else goal.record),
        "seed": seed if seed >= 0 else None,
        "n_episodes": 1,
        "recording_topic_prefix": "" if namespace == "/" else namespace,
        "episode_number_offset": episode_number_offset,
    }
    max_steps = goal.max_steps or p("max_steps")
    if max_steps:
        kwargs["n_steps"] = int(max_steps)
        if goal.duration_s:
            kwargs["duration_s"] = goal.duration_s
    else:
        kwargs["duration_s"] = goal.duration_s or p("duration_s")
    if kwargs["record"]:
        kwargs["recording_dir"] = goal.recording_dir or p("recording_dir")
    params = {kv.key: kv.value for kv in goal.task.parameters}
    if goal.task.task_id or params or goal.task.layout:
        kwargs["task"] = {"task_id": goal.task.task_id, "layout": goal.task.layout, "parameters": params}
    return kwargs


def relay_policy_for(relay_policy: Any, policy_config: "dict | None") -> Any:
    """Build the relay provider with the node's start-time credentials (its options only from the goal).

    :param relay_policy: the factory built from the node's credentials, or None when the node has none.
    :raises RunRefused: an option the provider does not know (a relay address, a token or a path among
        them), or the node was started without ``relay_credentials_file``.
    """
    from strands_robots.policies.relay import NO_CREDENTIALS, RelayPolicy

    try:
        if relay_policy is None:
            RelayPolicy(policy_config)  # the options first: a goal naming a relay or a token is told so
            raise ValueError(NO_CREDENTIALS)
        return relay_policy(policy_config or {})
    except (TypeError, ValueError) as exc:
        keys = sorted(map(str, policy_config or {}))
        raise RunRefused("policy_config", keys, f"policy_config (keys {keys}) refused: {exc}") from None
