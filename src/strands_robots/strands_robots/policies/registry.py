"""Policy providers by name: ``make_policy("mock", {...})``.

The built-in providers are ``mock``, ``replay`` and ``scripted``. Others (the relay provider, an openpi client)
add themselves with ``register_provider`` so this module never imports their dependencies.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping

from strands_robots.policies.base import Policy
from strands_robots.policies.mock import MockPolicy
from strands_robots.policies.replay import ReplayPolicy
from strands_robots.policies.scripted import ScriptedPolicy

PolicyFactory = Callable[[Mapping[str, Any]], Policy]
"""Builds a policy from its config (an empty mapping when none was given)."""

_lock = threading.Lock()


def _relay_policy(config: Mapping[str, Any]) -> Policy:
    # Imported on use: the relay provider's grpc dependency stays out of this module.
    from strands_robots.policies.relay import RelayPolicy

    return RelayPolicy(config)


_factories: dict[str, PolicyFactory] = {
    "mock": MockPolicy,
    "replay": ReplayPolicy,
    "scripted": ScriptedPolicy,
    "relay": _relay_policy,
}


def _normalise(name: str) -> str:
    return name.strip().lower()


def register_provider(name: str, factory: PolicyFactory, *, replace: bool = False) -> None:
    """Make ``make_policy(name, config)`` call ``factory(config)``.

    :param name: the provider's name, matched case-insensitively.
    :param factory: called with the config mapping; returns a ``Policy``.
    :param replace: allow replacing an existing provider of that name (tests, plugins).
    :raises ValueError: the name is empty, or taken and ``replace`` is false.
    """
    if not isinstance(name, str) or not _normalise(name):
        raise ValueError(f"policy provider name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise TypeError(f"policy provider factory for {name!r} must be callable")
    key = _normalise(name)
    with _lock:
        if key in _factories and not replace:
            raise ValueError(f"policy provider {key!r} is already registered (pass replace=True to replace it)")
        _factories[key] = factory


def known_providers() -> tuple[str, ...]:
    """Return the registered provider names, sorted."""
    with _lock:
        return tuple(sorted(_factories))


def make_policy(provider: str | Policy, config: Mapping[str, Any] | None = None) -> Policy:
    """Build the policy ``provider`` names from ``config``; a ``Policy`` instance is returned as is.

    :param provider: a registered provider name (``mock``, ``replay``, ``scripted``, …) or a policy object.
    :param config: the provider's options (see each provider's docstring); ``None`` means none.
    :raises ValueError: an unknown provider name (the message lists the known ones), or an invalid option.
    :raises TypeError: ``provider`` is neither a name nor a policy, or the factory built something else.
    """
    if not isinstance(provider, str):
        if isinstance(provider, Policy):
            return provider
        raise TypeError(
            "policy provider must be a provider name or an object with reset/act/resume, "
            f"got {type(provider).__name__}"
        )
    key = _normalise(provider)
    with _lock:
        factory = _factories.get(key)
        known = sorted(_factories)
    if factory is None:
        raise ValueError(f"unknown policy provider {provider!r}; known providers: {', '.join(known)}")
    policy = factory(dict(config) if config is not None else {})
    if not isinstance(policy, Policy):
        raise TypeError(f"policy provider {key!r} built {type(policy).__name__}, which lacks reset/act/resume")
    return policy
