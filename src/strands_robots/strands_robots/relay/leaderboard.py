"""``Evaluation.Leaderboard``: a team's own policies on a suite, ranked by Bradley-Terry with an interval each.

A policy is the owning team (the client token's name) and a slot name: ``vision`` in two of a team's comparison
jobs on the same suite is one policy, and another team's ``vision`` is another policy, never read here. The fit
(``stats.ranking.bradley_terry``) pools every complete block the relay kept of the team's ended comparison jobs
on the suite (:mod:`~strands_robots.relay.comparison_blocks`, the newest ``MAX_BLOCKS_READ``); a block may hold
any two or more of the team's policies, so policies never run in one job are linked through the ones they share.

Fewer than two policies compared: no entries, and the note says why. A bad suite id is INVALID_ARGUMENT.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import grpc

from strands_robots.relay import comparison_blocks
from strands_robots.relay.auth import KIND_CLIENT
from strands_robots.relay.core import Refused, RelayCore
from strands_robots.wire.proto import evaluation_service_pb2 as es

__all__ = ["LeaderboardService", "leaderboard_of", "check_suite", "CONFIDENCE"]

#: Every strength's interval is two-sided at this level.
CONFIDENCE = 0.95
#: A suite id, as a station's suite file names it.
SUITE_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_suite(suite: str) -> str:
    """Return ``suite`` when it is a suite id; INVALID_ARGUMENT naming the rule otherwise."""
    if not SUITE_ID.fullmatch(suite):
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                      f"suite: {suite[:80]!r} is not a suite id (1-64 letters, digits, '.', '_', '-')")
    return suite


def leaderboard_of(suite: str, blocks: Sequence[comparison_blocks.StoredBlock], *,
                   limit: int = comparison_blocks.MAX_BLOCKS_READ) -> Any:
    """Return the ``LeaderboardResponse`` of ``blocks`` (one team's, on ``suite``).

    :param limit: the most blocks read: when ``blocks`` reaches it, the note says older ones were left out.
    """
    from strands_robots.stats.blocks import Block
    from strands_robots.stats.ranking import DEFAULT_PRIOR_SD, bradley_terry

    jobs = {b.job_id for b in blocks}
    response = es.LeaderboardResponse(suite=suite, blocks=len(blocks), jobs=len(jobs), confidence=CONFIDENCE,
                                      prior_sd=DEFAULT_PRIOR_SD)
    policies = sorted({p for b in blocks for p in b.outcomes})
    if len(policies) < 2:
        response.note = (f"no ranking yet: {len(policies)} polic{'y' if len(policies) == 1 else 'ies'} of yours "
                         f"compared on suite {suite!r} (a ranking needs a comparison job of two or more that "
                         f"has ended)")
        return response
    ranking = bradley_terry([Block(dict(b.outcomes), b.block_id) for b in blocks], confidence=CONFIDENCE)
    response.method = ranking.method
    response.prior_sd = ranking.prior_sd
    jobs_of = {p: len({b.job_id for b in blocks if p in b.outcomes}) for p in policies}
    for entry in ranking.entries:
        response.entries.add(policy=entry.policy, rank=entry.rank, log_strength=entry.log_strength, low=entry.low,
                             high=entry.high, wins=entry.wins, losses=entry.losses, ties=entry.ties,
                             comparisons=entry.comparisons, jobs=jobs_of[entry.policy])
    notes = [ranking.note] if ranking.note else []
    if len(blocks) >= limit:
        notes.append(f"the newest {limit} blocks only: older ones are left out")
    response.note = "; ".join(notes)
    return response


class LeaderboardService:
    """The ``Leaderboard`` RPC; the method table (``handlers.py``) binds it. Makes the blocks table at start."""

    def __init__(self, core: RelayCore) -> None:
        self._core = core
        comparison_blocks.ensure_tables(core.store)

    async def Leaderboard(self, request: Any, context: Any) -> Any:
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        suite = check_suite(request.suite)
        blocks = await core.run(comparison_blocks.blocks_of, core.store, principal.name, suite)
        return await core.run(leaderboard_of, suite, blocks)
