"""``strands-eval leaderboard SUITE`` (or ``strands-robots job leaderboard``): your policies on a suite, ranked.

    strands-eval leaderboard --relay HOST:PORT --token-file T SUITE

One line per policy (a slot of the comparison jobs on the suite the team took part in: its own by slot name,
another team's as ``<team>/<slot>``, marked "another team's"), strongest first: its rank, its
Bradley-Terry strength with the interval (as odds against a policy of average strength: 2.0 means it wins two
decisive comparisons for each one it loses against an average one), its wins, losses and ties, and the jobs it
ran in. Policies whose intervals overlap are not told apart by the data yet. Only the comparisons the calling
team submitted or accepted are read. Exit 0, 2 a bad command line, 3 the relay refused (a bad suite id, the token).
"""

from __future__ import annotations

import argparse
import math
from typing import Any, List

from strands_robots.client.cli.job_client import add_common_arguments, connect, guard

__all__ = ["add_leaderboard_parser", "cmd_job_leaderboard", "leaderboard_lines"]


def _odds(log_strength: float) -> str:
    return f"{math.exp(log_strength):.2f}"


def leaderboard_lines(board: Any) -> List[str]:
    """Return a ``pb.LeaderboardResponse`` as ``job leaderboard`` prints it."""
    head = (f"suite {board.suite}: {len(board.entries)} policies ranked over {board.blocks} complete blocks of "
            f"{board.jobs} comparison jobs")
    lines = [head]
    if board.entries:
        width = max([len(e.policy) for e in board.entries] + [6])
        strengths = [f"{_odds(e.log_strength)} [{_odds(e.low)}, {_odds(e.high)}]" for e in board.entries]
        title = f"STRENGTH [{board.confidence * 100:g} % interval]"
        column = max([len(s) for s in strengths] + [len(title)])
        lines.append(f"  RANK  {'POLICY':<{width}}  {title:<{column}}  WINS  LOSSES  TIES  JOBS")
        for e, strength in zip(board.entries, strengths):
            lines.append(f"  {e.rank:>4}  {e.policy:<{width}}  {strength:<{column}}  {e.wins:>4}  {e.losses:>6}  "
                         f"{e.ties:>4}  {e.jobs:>4}" + ("  (another team's)" if e.others else ""))
        lines.append("  strength: the odds of winning a decisive block against a policy of average strength "
                     "(Bradley-Terry); overlapping intervals: not told apart yet")
    if board.method:
        lines.append(f"  method: {board.method}")
    if board.note:
        lines.append(f"  note: {board.note}")
    return lines


def cmd_job_leaderboard(args: argparse.Namespace) -> int:
    """Print the team's ranking on the suite."""
    board = connect(args).leaderboard(args.suite)
    print("\n".join(leaderboard_lines(board)), flush=True)
    return 0


def add_leaderboard_parser(commands: Any) -> None:
    """Add ``leaderboard`` to the ``job`` command's subparsers."""
    p = commands.add_parser("leaderboard", help="rank your policies on a suite (Bradley-Terry, with intervals)",
                            description="Rank your own policies on a suite: Bradley-Terry strengths with intervals, "
                                        "from your comparison jobs' complete blocks.", allow_abbrev=False)
    add_common_arguments(p)
    p.add_argument("suite", help="the suite's id (suites lists them)")
    p.set_defaults(func=guard(cmd_job_leaderboard))
