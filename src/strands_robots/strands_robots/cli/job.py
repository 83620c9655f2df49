"""``strands-robots job submit | status | watch | cancel | serve | list | recordings``: the Evaluation Client, CLI.

    strands-robots job submit --relay 127.0.0.1:50051 --token-file T  config/demo_job.yaml [--serve] [--watch]
    strands-robots job status --relay ... --token-file T JOB_ID        # one snapshot, field by field
    strands-robots job watch  --relay ... --token-file T JOB_ID        # progress bar until it ends, then the table
    strands-robots job cancel --relay ... --token-file T JOB_ID [--reason TEXT]
    strands-robots job serve  --relay ... --token-file T JOB_ID --openpi ws://HOST:PORT --obs-map PRESET|FILE
    strands-robots job list   --relay ... --token-file T [--state STATE]   # this client's jobs (cli/job_list.py)
    strands-robots job suites --relay ... --token-file T [--station S]     # what each station offers (job_suites.py)
    strands-robots job leaderboard --relay ... --token-file T SUITE        # your policies ranked (job_leaderboard.py)
    strands-robots job recordings --relay ... --token-file T JOB_ID -o DIR  # its MCAPs (cli/job_recordings.py)

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
failed. Exit codes: 0 done (``watch``/``--serve``/``serve``: the job SUCCEEDED), 1 the job ended otherwise
(a preflight the policy failed, too), 2 a bad command line or file, 3 the relay refused (the reason is printed),
4 the openpi server could not be reached or refused the mapping.

:func:`add_job_parser` adds the ``job`` command to an argparse parser (the CLI wires it in).
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any, Optional, Sequence

from strands_robots.cli import argv_secrets
from strands_robots.cli.job_client import EXIT_POLICY_SERVER, EXIT_USAGE, add_common_arguments, connect, fail, guard

__all__ = ["add_job_parser", "cmd_job_submit", "cmd_job_status", "cmd_job_watch", "cmd_job_cancel", "cmd_job_serve",
           "main", "format_status"]

def format_status(status: Any) -> str:
    """One snapshot, as the spec names its fields."""
    lines = [f"job_id           {status.job_id}", f"station_id       {status.station_id}",
             f"state            {status.state}", f"episodes_total   {status.episodes_total}",
             f"episodes         {len(status.episodes)} finished",
             f"updated_unix_ms  {status.updated_unix_ms}", f"message          {status.message}"]
    if status.HasField("station_last_heard_unix_ms"):
        lines.append(f"station heard    {status.station_last_heard_unix_ms} (unix ms, relay clock)")
    if status.HasField("provenance"):  # what produced the scores
        p = status.provenance
        lines.append(f"station software strands_robots {p.software_version} {p.git_revision or '(no git revision)'}")
        lines += [f"{'sha256 ' + f.name:<16} {f.sha256}" for f in p.config_files]
        if p.policy_spec_json:
            lines.append(f"policy spec      {p.policy_spec_json}")
    if status.episodes:
        from strands_robots.cli.client_side import summary_table

        lines += ["", summary_table(status)]
    if status.HasField("comparison"):
        from strands_robots.client.comparison_view import comparison_lines

        lines += [""] + comparison_lines(status.comparison)
    return "\n".join(lines)


@guard
def cmd_job_submit(args: argparse.Namespace) -> int:
    """Submit the job file's tasks; with ``--serve`` also serve its policy and watch the job to its end."""
    from strands_robots.job_model.team_job import load_team_job
    from strands_robots.policies.demo import DemoPolicy
    from strands_robots.cli.client_side import submit_team_job, summary_table, watch_job

    spec = load_team_job(args.job_file)  # a key a team must never set is refused here, before anything is sent
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
    from strands_robots.cli.client_side import summary_table, watch_job

    final = watch_job(connect(args), args.job_id, poll_s=args.poll_s)
    print(summary_table(final))
    if final.HasField("comparison"):
        from strands_robots.client.comparison_view import comparison_lines

        print("\n".join(comparison_lines(final.comparison)))
    print(f"job {final.job_id} {final.state}: {final.message}")
    return 0 if final.state == "SUCCEEDED" else 1


@guard
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
    try:
        from strands_robots.client.openpi import OpenPIError, OpenPIPolicy, serve_openpi
    except ImportError as exc:
        return fail(f"the openpi bridge needs its extra ({exc.name} is missing): pip install "
                    f"'strands-robots-client[openpi]'", EXIT_USAGE)
    from strands_robots.cli.client_side import summary_table

    client = connect(args)
    try:
        policy = OpenPIPolicy(args.openpi, obs_map=args.obs_map, connect_timeout_s=args.connect_timeout_s)
    except OpenPIError as exc:
        return fail(str(exc), EXIT_POLICY_SERVER)
    print(f"openpi server {policy.url}: {policy.variant}, obs map {policy.obs_map.name}, metadata "
          f"{policy.metadata!r}"[:2000], flush=True)

    def on_event(request: Any) -> None:
        kind = request.WhichOneof("kind")
        if kind == "preflight":
            print("preflight: the station sent its first observation before any arm moves; the answer is checked, "
                  "never applied", flush=True)
        elif kind == "episode_start":
            print(f"episode {request.episode_start.episode_id}: {request.episode_start.task.instruction}", flush=True)
        elif kind == "episode_end":
            end = request.episode_end
            print(f"episode {end.episode_id} ended: {end.end_condition} {end.end_detail}"[:500], flush=True)

    try:
        final = serve_openpi(client, args.job_id, policy, on_event=on_event, reconnect_s=args.reconnect_s)
    finally:
        policy.close()
    print(summary_table(final))
    print(f"job {final.job_id} {final.state}: {final.message}")
    return 0 if final.state == "SUCCEEDED" else 1


def add_job_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``job`` with its commands to ``subparsers`` (each sets ``func``; list and recordings from cli/)."""
    job = subparsers.add_parser("job", help="submit, inspect, watch or cancel an evaluation job on a relay",
                                allow_abbrev=False)
    commands = job.add_subparsers(dest="job_command", required=True)

    submit = commands.add_parser("submit", help="submit a job file's tasks", allow_abbrev=False)
    add_common_arguments(submit)
    submit.add_argument("job_file")
    submit.add_argument("--station", help="station id (default: the file's)")
    submit.add_argument("--serve", action="store_true", help="serve the file's policy and watch the job")
    submit.add_argument("--watch", action="store_true", help="watch the job to its end")
    submit.set_defaults(func=cmd_job_submit)
    for name, func, text in (("status", cmd_job_status, "print the latest snapshot"),
                             ("watch", cmd_job_watch, "progress bar until the job ends, then the table"),
                             ("cancel", cmd_job_cancel, "ask the station to cancel the job")):
        p = commands.add_parser(name, help=text, allow_abbrev=False)
        add_common_arguments(p)
        p.add_argument("job_id")
        if name == "cancel":
            p.add_argument("--reason", default="cancelled from the command line")
        p.set_defaults(func=func)
    serve = commands.add_parser("serve", help="serve a submitted job's policy from an openpi policy server",
                                allow_abbrev=False)
    add_common_arguments(serve)
    serve.add_argument("job_id")
    serve.add_argument("--openpi", required=True, metavar="ws://HOST:PORT", help="the openpi policy server")
    serve.add_argument("--obs-map", default=None, metavar="PRESET|FILE",
                       help="droid_jointpos, droid, aloha, libero, roboarena or a YAML mapping file; no default "
                            "(a RoboArena server's metadata names its own)")
    serve.add_argument("--connect-timeout-s", type=float, default=10.0,
                       help="how long to wait for the openpi server (default %(default)s)")
    serve.add_argument("--reconnect-s", type=float, default=30.0,
                       help="keep attaching to the relay for this long when it is unreachable (default %(default)s)")
    serve.set_defaults(func=cmd_job_serve)
    from strands_robots.cli.job_leaderboard import add_leaderboard_parser
    from strands_robots.cli.job_list import add_list_parser
    from strands_robots.cli.job_recordings import add_recordings_parser
    from strands_robots.cli.job_suites import add_suites_parser

    add_list_parser(commands)
    add_suites_parser(commands)
    add_leaderboard_parser(commands)
    add_recordings_parser(commands)
    return job


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m strands_robots.cli.job submit ...`` (or ``job submit ...``), as ``strands-robots job`` will."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "job":
        argv.insert(0, "job")
    refused = argv_secrets.refusal(argv)
    if refused:
        print(refused, file=sys.stderr, flush=True)
        return EXIT_USAGE
    parser = argparse.ArgumentParser(prog="strands-robots", allow_abbrev=False)
    add_job_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
