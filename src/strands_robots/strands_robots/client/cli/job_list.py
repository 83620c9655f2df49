"""``strands-robots job list``: this client's own jobs on the relay, newest first, page by page.

Another team's comparison job that names this team for a slot is listed too (by the relay's id), saying whose it
is, this team's slots and the invitation's answer (``pending`` until ``job accept`` or ``job decline``).

    strands-robots job list --relay HOST:PORT --token-file T [--state RUNNING --state FAILED] [--limit N]

One line per job (id, state, finished/total episodes, station, submit time, the latest message). ``--limit``
stops after N jobs (default 50; 0 for all); the relay sends them in pages (``--page-size``). Exit 0, 2 a bad
command line, 3 the relay refused.
"""

from __future__ import annotations

import argparse
from typing import Any, Iterator

from strands_robots.client.cli.job_client import add_common_arguments, connect, guard
from strands_robots.client.cli.times import iso_utc

__all__ = ["add_list_parser", "cmd_job_list", "iter_jobs", "format_job_line"]


def iter_jobs(client: Any, states: "tuple[str, ...]" = (), page_size: int = 20) -> Iterator[Any]:
    """Yield every job of the client's (``pb.JobSummary``), newest first, fetching page after page."""
    token = ""
    while True:
        page = client.list_jobs(states=states, page_size=page_size, page_token=token)
        yield from page.jobs
        token = page.next_page_token
        if not token:
            return


def format_job_line(job: Any) -> str:
    submitted = iso_utc(job.submitted_unix_ms)
    message = " ".join(job.message.split())[:80]
    if job.owner:  # another team's comparison this team is invited to: say whose, its slots, and the answer
        todo = f"; accept: job accept {job.job_id}" if job.invitation == "pending" else ""
        message = (f"[team {job.owner}'s, your slot(s) {', '.join(job.slots)}: invitation {job.invitation}{todo}] "
                   f"{message}").rstrip()
    return (f"{job.job_id:<32} {job.state:<14} {job.episodes_done:>5}/{job.episodes_total:<5} "
            f"{job.station_id:<20} {submitted:<20}  {message}").rstrip()


def cmd_job_list(args: argparse.Namespace) -> int:
    """Print this client's jobs, newest first."""
    client = connect(args)
    shown = 0
    print(f"{'JOB':<32} {'STATE':<14} {'EPISODES':<11} {'STATION':<20} {'SUBMITTED (UTC)':<20}  MESSAGE")
    for job in iter_jobs(client, tuple(args.state or ()), args.page_size):
        print(format_job_line(job), flush=True)
        shown += 1
        if args.limit and shown >= args.limit:
            break
    if shown == 0:
        print("(no jobs" + (f" in state {', '.join(args.state)}" if args.state else "") + ")")
    return 0


def add_list_parser(commands: Any) -> None:
    """Add ``list`` to the ``job`` command's subparsers."""
    p = commands.add_parser("list", help="list this client's jobs, newest first", allow_abbrev=False,
                            description="List this client's jobs on the relay, newest first, one line each: id, "
                                        "state, finished/total episodes, station, submit time, the latest message.")
    add_common_arguments(p)
    p.add_argument("--state", action="append", metavar="STATE",
                   help="only jobs in this state (CREATED, WAITING_POLICY, RUNNING, FINALIZING, SUCCEEDED, FAILED, "
                        "CANCELLED); repeat for several")
    p.add_argument("--limit", type=int, default=50, help="stop after this many jobs (0: all; default %(default)s)")
    p.add_argument("--page-size", type=int, default=20, help="jobs per relay call, 1..100 (default %(default)s)")
    p.set_defaults(func=guard(cmd_job_list))
