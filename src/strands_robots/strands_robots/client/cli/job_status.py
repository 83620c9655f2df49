"""A job's snapshot as ``status`` prints it, and the checks ``submit --dry-run`` makes (the job commands' helpers).

:func:`format_status`: what and where, the state and progress, when (ISO 8601 UTC, whose clock), what produced
the scores (the station's software and revision, its config files' hashes, the policy's declared spec, key by
key), then the episodes' table. :func:`dry_run`: a job file checked as the relay will check it, sending nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

from strands_robots.client.cli.job_client import client_token, connect
from strands_robots.client.cli.times import iso_utc

__all__ = ["format_status", "format_provenance", "dry_run", "print_event"]


def _spec_lines(title: str, spec_json: str) -> list:
    """Return a declared spec, key by key under ``title`` (its raw text when it is not a JSON object)."""
    import json

    if not spec_json:
        return [f"{title:<16} (the policy declared none)"]
    try:
        spec = json.loads(spec_json)
    except ValueError:
        spec = None
    if isinstance(spec, dict):
        return [title] + [f"  {key:<15}{json.dumps(value, sort_keys=True)}"[:300]
                          for key, value in sorted(spec.items())]
    return [f"{title:<16} {spec_json}"[:2000]]


def format_provenance(provenance: Any) -> list:
    """Return what produced the scores, a line each: the station's software, its config files, the policy's spec.

    A comparison's provenance names every slot's declared spec, each under its slot's name.
    """
    p = provenance
    lines = [f"{'station software':<17}strands_robots {p.software_version or '(unknown)'}"
             f"{', revision ' + p.git_revision if p.git_revision else ' (not from a git checkout)'}"]
    for f in p.config_files:
        lines.append(f"{'config ' + f.name:<17}sha256 {f.sha256}" + (f"  ({f.path})" if f.path else ""))
    if p.slot_specs:
        for s in p.slot_specs:
            lines += _spec_lines(f"policy spec of slot {s.slot}", s.policy_spec_json)
    else:
        lines += _spec_lines("policy spec", p.policy_spec_json)
    return lines


def format_status(status: Any) -> str:
    """One snapshot for a reader: what and where, the state, progress, when (ISO 8601 UTC), what produced it."""
    from strands_robots.client.cli.client_side import status_progress

    lines = [f"{'job':<17}{status.job_id}", f"{'station':<17}{status.station_id}",
             f"{'state':<17}{status.state}",
             f"{'progress':<17}{status_progress(status)}",
             f"{'updated':<17}{iso_utc(status.updated_unix_ms)} (the station's clock)"]
    if status.HasField("station_last_heard_unix_ms"):
        lines.append(f"{'station heard':<17}{iso_utc(status.station_last_heard_unix_ms)} (the relay's clock)")
    else:
        lines.append(f"{'station heard':<17}never (the relay has not heard from the station)")
    if status.message:
        lines.append(f"{'message':<17}{status.message}")
    if status.HasField("provenance"):  # what produced the scores
        lines += format_provenance(status.provenance)
    if status.episodes:
        from strands_robots.client.cli.client_side import summary_table

        lines += ["", summary_table(status)]
    if status.HasField("comparison") and not status.episodes:  # else at the end of the summary table
        from strands_robots.client.comparison_view import comparison_lines

        lines += [""] + comparison_lines(status.comparison)
    return "\n".join(lines)


def dry_run(args: argparse.Namespace, spec: Any) -> int:
    """Check the job as the relay will, sending nothing: its station's offer too when a token is at hand."""
    from strands_robots.job_model.team_job import check_against_offer

    station = args.station or spec.station_id
    try:
        from strands_robots.station.task_parameters import check_choices
    except ImportError:  # the client alone: the offer's ranges below, the station's own at the relay
        pass
    else:
        check_choices(spec)  # the relay's range check of each choice, with the station's rules
    try:
        client_token(args)
    except ValueError:
        print(f"{args.job_file}: the file is a valid job of {spec.episodes} episode(s) for station {station!r}; "
              f"not checked against the station's offer (no token: give --token-file to check that too); nothing "
              f"sent", flush=True)
        return 0
    from strands_robots.job_model.offer import StationOffer

    offered = [entry for entry in connect(args).list_suites(station) if entry.station_id == station]
    if not offered:
        print(f"{args.job_file}: the file is a valid job of {spec.episodes} episode(s); station {station!r} has "
              f"offered nothing on this relay yet, so the relay checks it against the offer when the station "
              f"connects; nothing sent", flush=True)
        return 0
    check_against_offer(spec, StationOffer.from_pb(station, offered[0].offer))
    print(f"{args.job_file}: the file is a valid job of {spec.episodes} episode(s) and station {station!r} offers "
          f"what it names; nothing sent", flush=True)
    return 0


def print_event(request: Any) -> None:
    kind = request.WhichOneof("kind")
    if kind == "preflight":
        print("preflight: the station sent its first observation before any arm moves; the answer is checked, "
              "never applied", flush=True)
    elif kind == "episode_start":
        print(f"episode {request.episode_start.episode_id}: {request.episode_start.task.instruction}", flush=True)
    elif kind == "episode_end":
        end = request.episode_end
        print(f"episode {end.episode_id} ended: {end.end_condition} {end.end_detail}"[:500], flush=True)
