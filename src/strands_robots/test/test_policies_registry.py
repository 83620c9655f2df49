"""make_policy / register_provider: providers by name, instances passed through, unknown names refused."""

from __future__ import annotations

import pytest

from strands_robots.policies import EndEpisode, Policy, known_providers, make_policy, register_provider
from strands_robots.policies.mock import MockPolicy
from strands_robots.policies.scripted import ScriptedPolicy


class _FixedPolicy:
    def __init__(self, config):
        self.config = config

    def reset(self, task):
        pass

    def act(self, observation):
        raise EndEpisode("done")

    def resume(self, observation):
        pass


def test_builtin_providers_are_known():
    assert {"mock", "replay", "scripted"} <= set(known_providers())


def test_make_policy_builds_provider_by_name_case_insensitively():
    assert isinstance(make_policy("mock", None), MockPolicy)
    assert isinstance(make_policy(" Scripted ", {"mode": "unknown_keys"}), ScriptedPolicy)


def test_unknown_provider_lists_known_ones():
    with pytest.raises(ValueError) as err:
        make_policy("lerobot_local", {})
    message = str(err.value)
    assert "lerobot_local" in message
    for name in ("mock", "replay", "scripted"):
        assert name in message


def test_policy_instance_is_returned_as_is():
    policy = _FixedPolicy({})
    assert isinstance(policy, Policy)
    assert make_policy(policy, {"ignored": 1}) is policy


def test_non_policy_object_is_refused():
    with pytest.raises(TypeError):
        make_policy(42, None)  # type: ignore[arg-type]


def test_registered_provider_is_built_with_its_config():
    register_provider("test_fixed_provider", _FixedPolicy)
    policy = make_policy("test_fixed_provider", {"a": 1})
    assert isinstance(policy, _FixedPolicy)
    assert policy.config == {"a": 1}
    assert "test_fixed_provider" in known_providers()


def test_registering_a_taken_name_needs_replace():
    register_provider("test_taken_provider", _FixedPolicy)
    with pytest.raises(ValueError, match="already registered"):
        register_provider("test_taken_provider", _FixedPolicy)
    register_provider("test_taken_provider", lambda config: _FixedPolicy({"replaced": True}), replace=True)
    assert make_policy("test_taken_provider").config == {"replaced": True}


def test_factory_returning_a_non_policy_is_refused():
    register_provider("test_broken_provider", lambda config: object(), replace=True)
    with pytest.raises(TypeError, match="test_broken_provider"):
        make_policy("test_broken_provider")


def test_unknown_option_is_refused_with_known_options():
    with pytest.raises(ValueError) as err:
        make_policy("mock", {"action_horzion": 4})
    assert "action_horzion" in str(err.value)
    assert "action_horizon" in str(err.value)
