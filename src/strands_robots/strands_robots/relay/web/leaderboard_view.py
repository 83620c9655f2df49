"""What the leaderboard page shows: a team's ranking on a suite as rows with a strength and its interval to draw.

Built from the ``LeaderboardResponse`` the relay's ``Leaderboard`` RPC answers (``relay/leaderboard.py``), so the
page and ``job leaderboard`` show the same fit. A strength is drawn on the log scale the model is linear in: the
centre line is a policy of average strength (log-strength 0), and each bar runs from the interval's low to high.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Tuple

__all__ = ["LeaderboardRow", "LeaderboardPage", "leaderboard_page", "BAR_WIDTH"]

#: The drawn strength axis' width in pixels.
BAR_WIDTH = 300


@dataclass(frozen=True)
class LeaderboardRow:
    """One policy's place, with where its strength and interval fall on the drawn axis (pixels)."""

    rank: int
    policy: str
    strength: str        # 2.31 [1.20, 4.45]: odds of a decisive win against an average policy, and the interval
    wins: int
    losses: int
    ties: int
    jobs: int
    others: bool         # another team's policy (``team/slot``), met in a comparison the viewer took part in
    x_low: float
    x_high: float
    x_centre: float


@dataclass(frozen=True)
class LeaderboardPage:
    """A team's ranking on one suite."""

    suite: str
    rows: Tuple[LeaderboardRow, ...]
    blocks: int
    jobs: int
    confidence: float
    method: str
    note: str
    x_average: float     # where a policy of average strength falls


def _odds(log_strength: float) -> str:
    return f"{math.exp(log_strength):.2f}"


def leaderboard_page(board: Any) -> LeaderboardPage:
    """Return the page of a ``pb.LeaderboardResponse``."""
    reach = max([1.0] + [max(abs(e.low), abs(e.high)) for e in board.entries])

    def x(value: float) -> float:
        return round(BAR_WIDTH * (0.5 + value / (2 * reach)), 1)

    rows = tuple(LeaderboardRow(rank=e.rank, policy=e.policy, others=bool(e.others),
                                strength=f"{_odds(e.log_strength)} [{_odds(e.low)}, {_odds(e.high)}]",
                                wins=e.wins, losses=e.losses, ties=e.ties, jobs=e.jobs, x_low=x(e.low),
                                x_high=x(e.high), x_centre=x(e.log_strength))
                 for e in board.entries)
    return LeaderboardPage(suite=board.suite, rows=rows, blocks=board.blocks, jobs=board.jobs,
                           confidence=board.confidence, method=board.method, note=board.note, x_average=x(0.0))
