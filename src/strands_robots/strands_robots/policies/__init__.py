"""Policy providers: the ``Policy`` protocol and the built-in ``mock``, ``replay`` and ``scripted`` providers.

``make_policy(name, config)`` builds one by name; ``register_provider`` adds others (the relay provider).
Nothing here imports rclpy.
"""

from strands_robots.policies.base import EndEpisode, Policy
from strands_robots.policies.registry import known_providers, make_policy, register_provider

__all__ = ["EndEpisode", "Policy", "known_providers", "make_policy", "register_provider"]
