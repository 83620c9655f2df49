"""``strands-eval``: the Evaluation Client's command line, installed with the client (no ROS).

    strands-eval submit JOB_FILE | status | watch | list | cancel | accept | decline | serve | recordings | suites |
    leaderboard | schema

Each command is :mod:`strands_robots.client.cli.job`'s, the very code ``strands-robots job ...`` runs. The
client token comes from ``--token-file FILE`` (mode 0600) or ``STRANDS_ROBOTS_TOKEN``, never the command line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

__all__ = ["build_parser", "main", "PROG"]

PROG = "strands-eval"


def build_parser() -> argparse.ArgumentParser:
    """Return the ``strands-eval`` parser: the job commands at the top level."""
    from strands_robots.client.cli.job import add_job_commands

    parser = argparse.ArgumentParser(
        prog=PROG, allow_abbrev=False,
        description="Submit evaluation jobs to a strands_robots relay, serve their policy, follow them and take "
                    "their results home. The token: --token-file FILE (mode 0600) or STRANDS_ROBOTS_TOKEN.")
    add_job_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    parser.set_defaults(cli_name=PROG)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one ``strands-eval`` command; its exit code."""
    from strands_robots.client.cli import argv_secrets

    args_list = list(sys.argv[1:] if argv is None else argv)
    refused = argv_secrets.refusal(args_list)
    if refused:
        print(refused.replace("strands-robots job:", f"{PROG}:", 1), file=sys.stderr, flush=True)
        return 2
    from strands_robots.client.cli.parse_command import parse_command

    args = parse_command(build_parser(), args_list)
    args.cli_name = PROG
    return int(args.func(args) or 0)
