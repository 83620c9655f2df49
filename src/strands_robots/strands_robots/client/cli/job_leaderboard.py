"""``strands-eval leaderboard SUITE``: a suite's ranking of policies, where the relay offers one.

    strands-eval leaderboard --relay HOST:PORT --token-file T SUITE

Asks the relay through ``EvaluationClient.leaderboard(suite)`` and prints what it answers, one entry per line; a
client or relay that does not offer rankings yet says so in one line (exit 2). Exit 0, 2 not offered or a bad
command line, 3 the relay refused.
"""

from __future__ import annotations

import argparse
from typing import Any

from strands_robots.client.cli.job_client import EXIT_USAGE, DEFAULT_NAME, add_common_arguments, connect, fail, guard

__all__ = ["add_leaderboard_parser", "cmd_job_leaderboard", "format_leaderboard"]


def format_leaderboard(board: Any) -> str:
    """Return the relay's answer as text: a protobuf message in its text form, else one line per entry."""
    if hasattr(board, "ListFields"):
        from google.protobuf import text_format

        return text_format.MessageToString(board).rstrip()
    if isinstance(board, (list, tuple)):
        return "\n".join(str(entry) for entry in board)
    return str(board)


def cmd_job_leaderboard(args: argparse.Namespace) -> int:
    """Print the suite's leaderboard."""
    client = connect(args)
    leaderboard = getattr(client, "leaderboard", None)
    if not callable(leaderboard):
        return fail(f"leaderboard: this relay client does not offer suite rankings yet (suite {args.suite!r})",
                    EXIT_USAGE, getattr(args, "cli_name", DEFAULT_NAME))
    print(format_leaderboard(leaderboard(args.suite)), flush=True)
    return 0


def add_leaderboard_parser(commands: Any) -> None:
    """Add ``leaderboard`` to the job commands' subparsers."""
    p = commands.add_parser("leaderboard", help="show a suite's ranking of policies (where the relay offers one)",
                            description="Show a suite's ranking of policies, as the relay computes it.",
                            allow_abbrev=False)
    add_common_arguments(p)
    p.add_argument("suite", help="the suite (suites lists them)")
    p.set_defaults(func=guard(cmd_job_leaderboard))
