"""The live side of ``record`` and ``foxglove``: one node's raw subscriptions fanned out to the sinks (rclpy shell).

The topic options both commands share are here too.

:func:`run_live` takes the sinks ready made (a :class:`~strands_robots.monitoring.topic_recorder.TopicRecorder`,
a :class:`~strands_robots.monitoring.foxglove_live.FoxgloveLive` or any object with ``offer(name, data,
recv_ns)`` and ``close()``): the commands build them, this module imports neither command.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Sequence

from strands_robots.monitoring.stop_drain import ArrivalClock, wait_until_quiet
from strands_robots.monitoring.topic_recorder import TopicRecorder, wait_for_latched
from strands_robots.monitoring.topics import STRANDS_TOPICS, StrandsTopic, topics_in

__all__ = ["add_topic_arguments", "chosen_topics", "default_cameras", "run_live"]


def default_cameras() -> list[str]:
    """Return the cameras of the package's camera file (``config/cameras.yaml``); none when it cannot be read."""
    from strands_robots.cameras.config import CameraConfigError, load_camera_set

    try:
        return list(load_camera_set(None).names)
    except (CameraConfigError, OSError):
        return []


def add_topic_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", default="strands", help="the station's namespace (default %(default)s)")
    parser.add_argument("--topics", nargs="*", default=None, help="topic names relative to --namespace, of: "
                             f"{' '.join(t.name.lstrip('/') for t in STRANDS_TOPICS)} (default: all of them)")
    parser.add_argument("--cameras", nargs="*", default=None,
                        help="cameras whose image_raw/compressed and camera_info to take (default: those of "
                             "config/cameras.yaml; the option alone: none)")
    parser.add_argument("--camera-namespace", default=None,
                        help="namespace of the camera node's topics (default: --namespace)")


def chosen_topics(args: argparse.Namespace) -> list[tuple[str, StrandsTopic]]:
    """``(live name, topic)`` the options name; :raises ValueError: an unknown topic."""
    cameras = default_cameras() if args.cameras is None else list(args.cameras)
    return topics_in(args.namespace, args.topics, cameras, args.camera_namespace)


def run_live(topics: Sequence[tuple[str, StrandsTopic]], *, namespace: str, recorder: "TopicRecorder | None",
             live: Any = None, duration_s: float = 0.0, latch_wait_s: float = 0.0, program: str = "record") -> int:
    """Spin one node with raw subscriptions until Ctrl-C / SIGTERM or ``duration_s``; each message to the sinks.

    With a recorder, the capture window waits up to ``latch_wait_s`` for the latched state (what is missing is
    said), and each change of a topic's matched publishers is printed (``matched /ns/topic: 1 publisher(s)``,
    polled every 0.1 s). The sinks are closed here, the recorder last, with the message count per topic printed.
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from strands_robots.monitoring.live import MatchedLines, RawTap
    from strands_robots.ros.process import StopSignals, init_without_signal_handlers, spin_in_background

    arrivals = ArrivalClock()
    matched = MatchedLines() if recorder is not None else None

    def on_message(name: str, topic: StrandsTopic, data: bytes, recv_ns: int) -> None:
        arrivals.mark()
        if recorder is not None:
            recorder.offer(name, data, recv_ns)
        if live is not None:
            live.offer(name, data, recv_ns)

    with StopSignals() as signals:
        init_without_signal_handlers(["strands-robots"])
        node = rclpy.create_node(f"strands_robots_{program}")
        tap = RawTap(node, topics, on_message)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spin = spin_in_background(executor, f"{program}-executor")
        try:
            if recorder is not None:
                print(f"recording {len(topics)} topics under /{namespace.strip('/')} to {recorder.path}", flush=True)
                silent, absent = wait_for_latched(recorder, tap.publisher_count, max_wait_s=latch_wait_s,
                                                  stop=signals.event)
                for name in silent:
                    print(f"{program}: {name} has a publisher but sent no latched sample within {latch_wait_s} s",
                          file=sys.stderr, flush=True)
                if absent:
                    print(f"{program}: no publisher of {', '.join(absent)} yet; recorded as they come", flush=True)
            deadline = time.monotonic() + duration_s if duration_s > 0 else None
            while True:
                if matched is not None:
                    for line in matched.changes(tap.matched_counts()):
                        print(line, flush=True)
                if signals.event.wait(0.1) or not spin.is_alive():
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
            if spin.is_alive():  # what was sent before the stop is still taken (stop_drain.py)
                wait_until_quiet(arrivals.last)
        finally:
            executor.shutdown()
            spin.join(5.0)
            tap.destroy()
            node.destroy_node()
            rclpy.try_shutdown()
            if live is not None:
                live.close()
            if recorder is not None:
                counts = recorder.close()
                total = sum(counts.values())
                print(f"wrote {total} messages to {recorder.path}: "
                      + ", ".join(f"{name} {n}" for name, n in counts.items() if n), flush=True)
    return 0
