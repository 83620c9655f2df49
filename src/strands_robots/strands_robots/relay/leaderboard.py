"""``Evaluation.Leaderboard``: the policies of a team's comparisons on a suite, ranked with an interval each.

A policy is a team (a client token's name) and a slot name: ``vision`` in two of a team's comparison jobs on the
same suite is one policy, and another team's ``vision`` is another policy. The fit
(``stats.ranking.bradley_terry``) pools every complete block the relay kept of the ended comparison jobs the team
took part in on the suite, as submitter or as an invited team (:mod:`~strands_robots.relay.comparison_blocks`, the
newest ``MAX_BLOCKS_READ``); the team's own policies are named by slot, another team's it met there as
``<team>/<slot>`` (marked ``others``), and a comparison the team took no part in is never read. A block may hold
any two or more policies, so policies never run in one job are linked through the ones they share.

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


def policy_name(block: comparison_blocks.StoredBlock, slot: str, viewer: str) -> str:
    """Return how ``viewer`` sees ``slot`` of ``block``: its own slot by name, another team's as ``team/slot``."""
    team = block.team_of(slot)
    return slot if team == viewer else f"{team}/{slot}"


def leaderboard_of(suite: str, blocks: Sequence[comparison_blocks.StoredBlock], viewer: str = "", *,
                   limit: int = comparison_blocks.MAX_BLOCKS_READ) -> Any:
    """Return the ``LeaderboardResponse`` of ``blocks`` (the comparisons ``viewer`` took part in, on ``suite``).

    :param viewer: the team asking: its policies are named by slot, another team's as ``<team>/<slot>`` and
        marked ``others`` ("": every block's submitter is the viewer, as when one team ran them all).
    :param limit: the most blocks read: when ``blocks`` reaches it, the note says older ones were left out.
    """
    from strands_robots.stats.blocks import Block
    from strands_robots.stats.ranking import DEFAULT_PRIOR_SD, bradley_terry

    jobs = {b.job_id for b in blocks}
    response = es.LeaderboardResponse(suite=suite, blocks=len(blocks), jobs=len(jobs), confidence=CONFIDENCE,
                                      prior_sd=DEFAULT_PRIOR_SD)
    named = [({policy_name(b, slot, viewer or b.client_id): won for slot, won in b.outcomes.items()}, b)
             for b in blocks]
    team_of = {policy_name(b, slot, viewer or b.client_id): b.team_of(slot) for b in blocks for slot in b.outcomes}
    policies = sorted(team_of)
    if len(policies) < 2:
        response.note = (f"no ranking yet: {len(policies)} polic{'y' if len(policies) == 1 else 'ies'} "
                         f"compared on suite {suite!r} in comparisons you took part in (a ranking needs a "
                         f"comparison job of two or more that has ended)")
        return response
    ranking = bradley_terry([Block(outcomes, b.block_id) for outcomes, b in named], confidence=CONFIDENCE)
    response.method = ranking.method
    response.prior_sd = ranking.prior_sd
    jobs_of = {p: len({b.job_id for outcomes, b in named if p in outcomes}) for p in policies}
    for entry in ranking.entries:
        team = team_of[entry.policy]
        response.entries.add(policy=entry.policy, rank=entry.rank, log_strength=entry.log_strength, low=entry.low,
                             high=entry.high, wins=entry.wins, losses=entry.losses, ties=entry.ties,
                             comparisons=entry.comparisons, jobs=jobs_of[entry.policy], team=team,
                             others=bool(viewer) and team != viewer)
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
        return await core.run(leaderboard_of, suite, blocks, principal.name)
