"""``strands-robots job suites``: the suites each station offers on the relay — what a job file may name.

    strands-robots job suites --relay HOST:PORT --token-file T [--station STATION]

Per station: its profile, whether it runs a team's own (free-form) tasks, and each suite with its headline
success, what a team may choose, and its tasks (id, trials available, episode budget, instruction, the score
sheet's questions). A station is listed once it has connected to the relay. Exit 0, 2 a bad command line, 3 the
relay refused.
"""

from __future__ import annotations

import argparse
from typing import Any

from strands_robots.client.cli.job_client import add_common_arguments, connect, guard
from strands_robots.client.cli.times import iso_utc

__all__ = ["add_suites_parser", "cmd_job_suites", "format_station_suites"]


def _choice(rule: Any) -> str:
    if not rule.HasField("min") and not rule.HasField("max"):
        return rule.key
    low = f"{rule.min:g}" if rule.HasField("min") else ""
    high = f"{rule.max:g}" if rule.HasField("max") else ""
    return f"{rule.key} {low}..{high}"


def format_station_suites(entry: Any) -> str:
    """One station's offer (a ``pb.StationSuites``), as ``job suites`` prints it."""
    offer = entry.offer
    heard = iso_utc(entry.offered_unix_ms)
    lines = [f"station {entry.station_id}: {offer.profile or 'hardware'} profile, free-form tasks "
             f"{'allowed' if offer.allow_free_form_tasks else 'not allowed'} (offered {heard})"]
    if not offer.suites:
        lines.append("  (no suites)")
    for suite in offer.suites:
        choose = ", ".join(_choice(c) for c in suite.team_may_choose) or "nothing"
        lines.append(f"  suite {suite.suite}: {suite.title}")
        lines.append(f"    headline {suite.headline}; the team may choose: {choose}")
        width = max(len(t.task_id) for t in suite.tasks) if suite.tasks else 4
        lines.append(f"    {'TASK':<{width}}  TRIALS  BUDGET  INSTRUCTION")
        for task in suite.tasks:
            lines.append(f"    {task.task_id:<{width}}  {task.trials:>6}  {task.budget_s:>5g}s  {task.instruction}")
            if task.layout:
                lines.append(f"    {'':<{width}}                  layout: {task.layout}")
            for question in task.questions:
                lines.append(f"    {'':<{width}}                  ? {question}")
    return "\n".join(lines)


def cmd_job_suites(args: argparse.Namespace) -> int:
    """Print the suites each station offers (or one station's)."""
    stations = connect(args).list_suites(args.station or None)
    for entry in stations:
        print(format_station_suites(entry), flush=True)
    if not stations:
        print("(no station has offered suites yet" + (f": {args.station}" if args.station else "") + ")")
    return 0


def add_suites_parser(commands: Any) -> None:
    """Add ``suites`` to the ``job`` command's subparsers."""
    p = commands.add_parser("suites", help="list the suites each station offers (what a job file may name)",
                            description="List the suites each station on the relay offers: what a job file's "
                                        "suite may name.", allow_abbrev=False)
    add_common_arguments(p)
    p.add_argument("--station", default="", help="only this station's suites")
    p.set_defaults(func=guard(cmd_job_suites))
