"""``strands-robots job submit | status | watch | cancel | serve | list | recordings``: the Evaluation Client, CLI.

The same commands are the client's own command line, ``strands-eval <command>`` (:mod:`strands_robots.client.cli`,
installed with the client: no ROS); :func:`add_job_commands` adds them to either parser.

    strands-robots job submit --relay 127.0.0.1:50051 --token-file T  config/demo_job.yaml [--serve] [--watch]
    strands-robots job status --relay ... --token-file T JOB_ID        # one snapshot, field by field
    strands-robots job watch  --relay ... --token-file T JOB_ID        # progress bar until it ends, then the table
    strands-robots job cancel --relay ... --token-file T JOB_ID [--reason TEXT]
    strands-robots job accept --relay ... --token-file T JOB_ID         # another team's comparison invites yours
    strands-robots job decline --relay ... --token-file T JOB_ID [--reason TEXT]   # ... or not: the job ends
    strands-robots job serve  --relay ... --token-file T JOB_ID --openpi ws://HOST:PORT --obs-map PRESET|FILE
    strands-robots job serve  --relay ... --token-file T JOB_ID --policy my_module:MyPolicy [--inference-timeout S]
    strands-robots job serve  --relay ... --token-file T JOB_ID --slot NAME --policy ...   # a comparison's slot
    strands-robots job list   --relay ... --token-file T [--state STATE]   # this client's jobs (cli/job_list.py)
    strands-robots job suites --relay ... --token-file T [--station S]     # what each station offers (job_suites.py)
    strands-robots job leaderboard --relay ... --token-file T SUITE        # your policies ranked (job_leaderboard.py)
    strands-robots job recordings --relay ... --token-file T JOB_ID -o DIR  # its MCAPs (cli/job_recordings.py)
    strands-robots job leaderboard --relay ... --token-file T SUITE        # where the relay ranks (job_leaderboard.py)
    strands-robots job schema [--markdown]                                 # the job file's JSON Schema (job_schema.py)

The client token comes from ``--token-file FILE`` (mode 0600, or refused with one line naming the mode) or the
environment variable ``STRANDS_ROBOTS_TOKEN``, as gh and kubectl take theirs; never from the command line, which
every user of the machine can read (``--token`` is refused, saying so); ``cli/job_client.py`` holds that, the
relay connection, the options and the exit-code guard every job command shares.

``submit`` reads a job file (``job_model/team_job.py``'s format: the station's suite, its tasks and trials,
the team's choices, its own free-form tasks and ``max_discards``, all of which reach the station; a key that
would let a team score itself, inject faults or drive the scripted operator is refused before anything is sent)
and prints the job id; ``--serve`` also serves the file's policy
(:class:`~strands_robots.policies.demo.DemoPolicy`) through the relay and watches the job to its end. ``serve``
serves a submitted job's policy from a team's unchanged openpi
policy server (:class:`~strands_robots.client.openpi.OpenPIPolicy`; ``--obs-map`` a preset or a YAML mapping
file, no default but a RoboArena server's own) until the job ends, attaching again after an episode the server
failed; ``--policy module:Class`` serves the team's own Python policy instead
(:mod:`strands_robots.client.served_policy`). ``submit --dry-run`` checks the file with the relay's rules and
messages (against the station's offer too when a token is at hand) and sends nothing. Times are ISO 8601 UTC.
Exit codes: 0 done (``watch``/``--serve``/``serve``: the job SUCCEEDED), 1 the job ended otherwise
(a preflight the policy failed, too), 2 a bad command line or file, 3 the relay refused (the reason is printed),
4 the openpi server could not be reached or refused the mapping (or the --policy module could not be loaded).

:func:`add_job_parser` adds the ``job`` command to an argparse parser (the CLI wires it in).
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any, Optional, Sequence

from strands_robots.client.cli import argv_secrets
from strands_robots.client.cli.job_client import (
    DEFAULT_NAME,
    EXIT_POLICY_SERVER,
    EXIT_USAGE,
    add_common_arguments,
    connect,
    fail,
    guard,
)
from strands_robots.client.cli.job_status import dry_run, format_status, print_event
from strands_robots.client.cli.parse_command import parse_command

__all__ = ["add_job_parser", "cmd_job_submit", "cmd_job_status", "cmd_job_watch", "cmd_job_cancel", "cmd_job_serve",
           "cmd_job_accept", "cmd_job_decline",
           "main", "format_status", "add_job_commands"]


@guard
def cmd_job_submit(args: argparse.Namespace) -> int:
    """Submit the job file's tasks; with ``--serve`` also serve its policy and watch the job to its end."""
    from strands_robots.job_model.team_job import load_team_job
    from strands_robots.client.cli.client_side import submit_team_job, summary_table, watch_job

    spec = load_team_job(args.job_file)  # a key a team must never set is refused here, before anything is sent
    if args.dry_run:
        return dry_run(args, spec)
    try:
        from strands_robots.policies.demo import DemoPolicy
    except ImportError:  # the client alone: --serve's provider is the main package's
        DemoPolicy = None
    if args.serve and getattr(spec, "compare", None) is not None:
        return fail(f"--serve serves one policy; this job compares slots {', '.join(spec.compare.slots)}: submit it "
                    f"without --serve and serve each slot with its own: serve JOB_ID --slot NAME --policy "
                    f"module:Class (or --openpi URL)", EXIT_USAGE, _name(args))
    if args.serve and DemoPolicy is None:
        return fail("--serve serves the file's policy provider, which needs the strands_robots package; serve your "
                    "own with: serve JOB_ID --policy module:Class (or --openpi URL)", EXIT_USAGE, _name(args))
    client = connect(args)
    job_id = submit_team_job(client, spec, station_id=args.station)
    print(job_id, flush=True)
    if not args.serve and not args.watch:
        return 0
    served: dict = {}
    if args.serve:
        policy = DemoPolicy(spec.policy_provider, dict(spec.policy_config))

        def serve() -> None:
            try:
                served["final"] = client.serve_policy(job_id, policy)
            except Exception as exc:
                served["error"] = exc

        threading.Thread(target=serve, name="job-policy", daemon=True).start()
    final = watch_job(client, job_id, poll_s=args.poll_s)
    if "error" in served:
        print(f"policy: {type(served['error']).__name__}: {served['error']}", file=sys.stderr)
    print(summary_table(final))
    return 0 if final.state == "SUCCEEDED" else 1


@guard
def cmd_job_status(args: argparse.Namespace) -> int:
    """Print the job's latest snapshot."""
    print(format_status(connect(args).get_status(args.job_id)))
    return 0


@guard
def cmd_job_watch(args: argparse.Namespace) -> int:
    """Progress bar of finished episodes until the job ends, then the summary table."""
    from strands_robots.client.cli.client_side import summary_table, watch_job

    final = watch_job(connect(args), args.job_id, poll_s=args.poll_s)
    print(summary_table(final))
    print(f"job {final.job_id} {final.state}: {final.message}")
    return 0 if final.state == "SUCCEEDED" else 1


@guard
def cmd_job_accept(args: argparse.Namespace) -> int:
    """Accept the invitation to another team's comparison job (then serve this team's slot)."""
    print(f"job {args.job_id}: {connect(args).accept(args.job_id)}")
    return 0


def cmd_job_decline(args: argparse.Namespace) -> int:
    """Decline the invitation to another team's comparison job: the job ends, naming this team."""
    print(f"job {args.job_id}: {connect(args).decline(args.job_id, args.reason)}")
    return 0


def cmd_job_cancel(args: argparse.Namespace) -> int:
    """Ask the station to cancel the job."""
    if connect(args).cancel(args.job_id, args.reason):
        print(f"job {args.job_id}: cancel requested")
        return 0
    print(f"job {args.job_id} had already ended; nothing to cancel")
    return 1


@guard
def cmd_job_serve(args: argparse.Namespace) -> int:
    """Serve the job's policy from an openpi policy server (``--openpi``) until the job ends."""
    if bool(args.openpi) == bool(args.policy):
        return fail("serve takes one policy: --openpi ws://HOST:PORT (an openpi server) or --policy module:Class "
                    "(a Python policy)", EXIT_USAGE, _name(args))
    if args.policy:
        return _serve_python_policy(args)
    try:
        from strands_robots.client.openpi import OpenPIError, OpenPIPolicy, serve_openpi
    except ImportError as exc:
        return fail(f"the openpi bridge needs its extra ({exc.name} is missing): pip install "
                    f"'strands-robots-client[openpi]'", EXIT_USAGE, _name(args))
    from strands_robots.client.cli.client_side import summary_table

    client = connect(args)
    try:
        policy = OpenPIPolicy(args.openpi, obs_map=args.obs_map, connect_timeout_s=args.connect_timeout_s,
                              variant=args.variant, infer_timeout_s=args.inference_timeout or 30.0)
    except OpenPIError as exc:
        return fail(str(exc), EXIT_POLICY_SERVER, _name(args))
    print(f"openpi server {policy.url}: {policy.variant}, obs map {policy.obs_map.name}, metadata "
          f"{policy.metadata!r}"[:2000], flush=True)

    on_event = print_event

    try:
        final = serve_openpi(client, args.job_id, policy, on_event=on_event, reconnect_s=args.reconnect_s,
                             slot=args.slot or "")
    finally:
        policy.close()
    print(summary_table(final))
    print(f"job {final.job_id} {final.state}: {final.message}")
    return 0 if final.state == "SUCCEEDED" else 1


def _name(args: argparse.Namespace) -> str:
    return getattr(args, "cli_name", DEFAULT_NAME)


def _serve_python_policy(args: argparse.Namespace) -> int:
    """Serve ``--policy module:Class`` until the job ends (each act bounded by ``--inference-timeout``)."""
    from strands_robots.client.cli.client_side import summary_table
    from strands_robots.client.served_policy import PolicyLoadError, load_policy, serve_to_the_end

    try:
        policy = load_policy(args.policy, inference_timeout_s=args.inference_timeout)
    except PolicyLoadError as exc:
        return fail(str(exc), EXIT_POLICY_SERVER, _name(args))
    client = connect(args)
    slot = f" slot {args.slot}" if args.slot else ""
    print(f"serving {args.policy} for job {args.job_id}{slot}", flush=True)
    final = serve_to_the_end(client, args.job_id, policy, on_event=print_event, reconnect_s=args.reconnect_s,
                             slot=args.slot or "")
    print(summary_table(final))
    print(f"job {final.job_id} {final.state}: {final.message}")
    return 0 if final.state == "SUCCEEDED" else 1


def add_job_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``job`` with its commands to ``subparsers`` (each sets ``func``; list and recordings from cli/)."""
    job = subparsers.add_parser("job", help="submit, inspect, watch or cancel an evaluation job on a relay",
                                description="A team's Evaluation Client against a relay: the same commands as "
                                            "strands-eval's.", allow_abbrev=False)
    add_job_commands(job.add_subparsers(dest="job_command", required=True, metavar="COMMAND"))
    return job


def add_job_commands(commands: Any) -> None:
    """Add the job commands to ``commands``: ``strands-robots job``'s and ``strands-eval``'s (the same)."""
    submit = commands.add_parser("submit", help="submit a job file's tasks", allow_abbrev=False,
                                 description="Submit a job file's tasks to a station through the relay and print "
                                             "the job's id; --serve: serve the file's policy and watch the job.")
    add_common_arguments(submit)
    submit.add_argument("job_file", help="the job file (YAML; docs/job-file.md)")
    submit.add_argument("--station", help="the station to run the job on (default: the job file's station)")
    submit.add_argument("--dry-run", action="store_true",
                        help="check the file with the relay's rules (and the station's offer when a token is given); "
                             "send nothing")
    submit.add_argument("--serve", action="store_true", help="serve the file's policy and watch the job")
    submit.add_argument("--watch", action="store_true", help="watch the job to its end")
    submit.set_defaults(func=cmd_job_submit)
    for name, func, text, description in (
            ("status", cmd_job_status, "print the latest snapshot",
             "Print the job's latest snapshot: station, state, progress, when it was updated and the "
             "episodes' results so far."),
            ("watch", cmd_job_watch, "progress bar until the job ends, then the table",
             "Follow the job with a progress bar until it ends, then print the summary table; exit 0 when it "
             "SUCCEEDED."),
            ("cancel", cmd_job_cancel, "ask the station to cancel the job (a comparison another team invited "
                                       "you to: withdraw your slots, which ends it)",
             "Ask the station to cancel the job; exit 1 when it had already ended. On a comparison another "
             "team invited you to, this withdraws your slots, which ends the job."),
            ("accept", cmd_job_accept, "accept another team's invitation to its comparison job",
             "Accept another team's invitation to its comparison job; the job runs once every invited team "
             "accepted."),
            ("decline", cmd_job_decline, "decline another team's invitation (the job ends)",
             "Decline another team's invitation to its comparison job; the job ends, naming your team and "
             "reason.")):
        p = commands.add_parser(name, help=text, description=description, allow_abbrev=False)
        add_common_arguments(p)
        p.add_argument("job_id", help="the job's id (submit printed it; an invitation's: job list shows it)")
        if name == "cancel":
            p.add_argument("--reason", default="cancelled from the command line", help="why (the job's message)")
        if name == "decline":
            p.add_argument("--reason", default="", help="why (said in the job's message)")
        p.set_defaults(func=func)
    serve = commands.add_parser("serve", help="serve a submitted job's policy from an openpi policy server",
                                description="Serve a submitted job's policy through the relay: from an openpi "
                                            "policy server (--openpi) or a Python class (--policy).",
                                allow_abbrev=False)
    add_common_arguments(serve)
    serve.add_argument("job_id", help="the job's id (submit printed it)")
    serve.add_argument("--openpi", default=None, metavar="ws://HOST:PORT",
                       help="the openpi policy server to serve the policy from (one of --openpi and --policy)")
    serve.add_argument("--obs-map", default=None, metavar="PRESET|FILE",
                       help="droid_jointpos, droid, aloha, libero, roboarena or a YAML mapping file; no default "
                            "(a RoboArena server's metadata names its own)")
    serve.add_argument("--variant", default=None, choices=("openpi", "roboarena"),
                       help="with --openpi: the server's protocol (default: RoboArena when its metadata says so)")
    serve.add_argument("--policy", default=None, metavar="MODULE:CLASS",
                       help="a Python policy instead: a Policy subclass or any class with act(observation), made "
                            "with no arguments (the current directory is on the import path)")
    serve.add_argument("--inference-timeout", type=float, default=None, metavar="S",
                       help="the longest one answer may take, in seconds (openpi: default 30; a Python policy: no "
                            "limit unless given); a later answer ends the episode as the policy's error")
    serve.add_argument("--connect-timeout-s", type=float, default=10.0,
                       help="how long to wait for the openpi server, in seconds (default %(default)s)")
    serve.add_argument("--slot", default=None, metavar="NAME",
                       help="a comparison job's slot this policy serves (the job file's compare.slots); each slot "
                            "is served by its own serve command. A comparison served without it, or a slot the "
                            "job does not have, is refused naming the job's slots")
    serve.add_argument("--reconnect-s", type=float, default=30.0,
                       help="keep attaching to the relay for this long when it is unreachable, in seconds (default "
                            "%(default)s)")
    serve.set_defaults(func=cmd_job_serve)
    from strands_robots.client.cli.job_list import add_list_parser
    from strands_robots.client.cli.job_recordings import add_recordings_parser
    from strands_robots.client.cli.job_suites import add_suites_parser

    add_list_parser(commands)
    add_suites_parser(commands)
    add_recordings_parser(commands)
    from strands_robots.client.cli.job_leaderboard import add_leaderboard_parser
    from strands_robots.client.cli.job_schema import add_schema_parser

    add_leaderboard_parser(commands)
    add_schema_parser(commands)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m strands_robots.client.cli.job submit ...`` (or ``job submit ...``), as ``strands-robots job``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "job":
        argv.insert(0, "job")
    refused = argv_secrets.refusal(argv)
    if refused:
        print(refused, file=sys.stderr, flush=True)
        return EXIT_USAGE
    parser = argparse.ArgumentParser(prog="strands-robots", allow_abbrev=False)
    add_job_parser(parser.add_subparsers(dest="command", required=True))
    args = parse_command(parser, argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
