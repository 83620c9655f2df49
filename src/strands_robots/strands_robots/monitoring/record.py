"""``strands-robots record``: every strands topic (and each camera's JPEG and intrinsics) into one MCAP file.

The file follows rosbag2's conventions (:mod:`~strands_robots.monitoring.topic_recorder`): ``ros2 bag info/play``
with the MCAP storage plugin and Foxglove open it; the latched state comes first. ``--foxglove`` also serves the
same topics live (:mod:`~strands_robots.monitoring.foxglove_live`).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

from strands_robots.monitoring.serve import add_topic_arguments, chosen_topics, run_live
from strands_robots.monitoring.topic_recorder import RecordRefused, TopicRecorder

__all__ = ["build_parser", "default_output", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strands-robots record",
        description="Record every strands topic (and each camera's JPEG and intrinsics) into one MCAP file, rosbag2's "
                    "conventions, the latched state first; ros2 bag and Foxglove open it. --foxglove also serves the "
                    "same topics live.")
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default="",
                        help="MCAP file to write (default: strands_<UTC time>.mcap in the current directory)")
    add_topic_arguments(parser)
    parser.add_argument("--duration", type=float, default=0.0,
                        help="stop after this many seconds (default 0: at Ctrl-C or SIGTERM)")
    parser.add_argument("--latch-wait", type=float, default=3.0,
                        help="longest wait for the latched state (discovery included) before writing, in seconds "
                             "(default %(default)s)")
    parser.add_argument("--foxglove", action="store_true",
                        help="also serve the live topics over the Foxglove WebSocket protocol")
    parser.add_argument("--foxglove-host", default="127.0.0.1", help="with --foxglove: the address it listens on "
                                                                               "(default %(default)s)")
    parser.add_argument("--foxglove-port", type=int, default=8765,
                        help="with --foxglove: the port it listens on (default %(default)s)")


def default_output() -> str:
    return time.strftime("strands_%Y%m%dT%H%M%SZ.mcap", time.gmtime())


def main(argv: "Sequence[str] | None" = None) -> int:
    """Record until Ctrl-C / SIGTERM or ``--duration``; 0 on a clean stop, 2 when refused."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from strands_robots.ros.tools import ros_env_check

    ros_env_check("record")
    try:
        topics = chosen_topics(args)
        recorder = TopicRecorder(args.output or default_output(), topics)
    except (RecordRefused, ValueError) as exc:
        print(f"strands-robots record: {exc}", file=sys.stderr, flush=True)
        return 2
    live = None
    if args.foxglove:
        from strands_robots.monitoring.foxglove_live import FoxgloveLive

        try:
            live = FoxgloveLive(topics, host=args.foxglove_host, port=args.foxglove_port)
        except Exception as exc:  # the port is taken, the SDK missing: say so, write nothing more
            print(f"strands-robots record: cannot serve Foxglove: {exc}", file=sys.stderr, flush=True)
            recorder.close()
            return 2
        print(f"foxglove: ws://{args.foxglove_host}:{live.port}", flush=True)
    return run_live(topics, namespace=args.namespace, recorder=recorder, live=live, duration_s=args.duration,
                    latch_wait_s=args.latch_wait, program="record")


if __name__ == "__main__":
    sys.exit(main())
