"""``strands-robots job recordings JOB_ID -o DIR``: download a job's episode recordings (MCAP), checked.

    strands-robots job recordings --relay HOST:PORT --token-file T JOB_ID -o DIR [--episode ep_0001] [--max-bytes N]

Writes ``DIR/<episode_id>.mcap`` for every recording the relay holds for the job (or only ``--episode``), each
checked against the station's size and SHA-256 (and the episode's ``recording_sha256`` in the job's status); a
file that does not match is not kept. A recording the relay refused (too large, its bytes not matching) is
named with the reason. Exit 0 every recording downloaded, 1 some could not be (each named), 2 a bad command line,
3 the relay refused (another team's or an unknown job: "no job ... for this client").
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from strands_robots.client.cli.job_client import add_common_arguments, connect, guard

__all__ = ["add_recordings_parser", "cmd_job_recordings"]


def cmd_job_recordings(args: argparse.Namespace) -> int:
    """Download the job's recordings into ``-o DIR``."""
    from strands_robots.client import RecordingCorrupt, RecordingRefused

    client = connect(args)
    out = Path(args.output)
    infos = client.list_recordings(args.job_id)
    if args.episode:
        infos = [i for i in infos if i.episode_id in args.episode]
        missing = sorted(set(args.episode) - {i.episode_id for i in infos})
    else:
        missing = []
    os.makedirs(out, exist_ok=True)
    failed = 0
    for episode_id in missing:
        print(f"{episode_id}: no recording on the relay", flush=True)
        failed += 1
    if not infos and not missing:
        print(f"job {args.job_id}: the relay holds no recordings (the station sends each after its episode, when "
              f"it records)")
        return 1
    for info in infos:
        if info.refused:
            print(f"{info.episode_id}: not downloadable: {info.refused}", flush=True)
            failed += 1
            continue
        try:
            done = client.download_recording(args.job_id, info.episode_id, out / f"{info.episode_id}.mcap",
                                             max_bytes=args.max_bytes or None)
        except (RecordingCorrupt, RecordingRefused) as exc:
            print(f"{info.episode_id}: {type(exc).__name__}: {exc}", flush=True)
            failed += 1
            continue
        print(f"{info.episode_id}: {done.path} ({done.size_bytes} bytes, sha256 {done.sha256})", flush=True)
    return 1 if failed else 0


def add_recordings_parser(commands: Any) -> None:
    """Add ``recordings`` to the ``job`` command's subparsers."""
    p = commands.add_parser("recordings", help="download the job's episode recordings (MCAP), checked",
                            description="Download the job's episode recordings from the relay as DIR/EPISODE.mcap, "
                                        "each checked against the station's size and SHA-256 (a file that does not "
                                        "match is not kept).", allow_abbrev=False)
    add_common_arguments(p)
    p.add_argument("job_id", help="the job's id (submit printed it)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for <episode_id>.mcap files")
    p.add_argument("--episode", action="append", metavar="EPISODE_ID", help="only this episode; repeat for several")
    p.add_argument("--max-bytes", type=int, default=0,
                   help="refuse a recording larger than this many bytes (default 0: no limit)")
    p.set_defaults(func=guard(cmd_job_recordings))
