"""The Policy every provider implements, and the exception that ends an episode.

One class each across the rollout and the Evaluation Client: they are defined in
:mod:`strands_robots.client.policy` (so the client installs on its own) and re-exported here, so a team's
client ``Policy`` runs in process as is and its ``EndEpisode`` ends the episode as ``policy_completed``.
"""

from __future__ import annotations

from strands_robots.client.policy import EndEpisode, Policy

__all__ = ["EndEpisode", "Policy", "NEVER_BLOCKS"]

NEVER_BLOCKS = "never_blocks"
"""Optional policy attribute: ``True`` declares that ``act`` is pure computation of microseconds (no I/O, no
sleep, no lock held by others). The chunk pipeline then calls a synchronous ``act`` on the control thread
itself; any other policy's ``act`` runs on a worker thread the loop can abandon on a cancel. Absent means
``False``."""
