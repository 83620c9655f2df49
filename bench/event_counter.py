"""Observer-stream counter for the control-loop benchmark: a subscriber in its own process.

Subscribes to an ``ObserverEvent`` topic with the rollout node's ``EVENT_QOS`` and counts, per ``run_id``,
the events received by kind, the gaps in ``event_seq`` (events lost anywhere between the control loop and
here), the events the publisher itself said it dropped (``dropped_before``) and reorderings. When it has seen
``--runs`` Ended events, on SIGINT/SIGTERM or after ``--timeout`` seconds, it prints one JSON object on stdout
and exits (0, or 3 on a timeout)::

    python bench/event_counter.py --topic /bench/observer_events --runs 1 --timeout 60

The callback is kept minimal (header fields only); only the Ended payload is converted
(``strands_robots.conversions.events.msg_to_event``) to report what the rollout itself counted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import threading
import time
from typing import Any, Optional


class _Run:
    __slots__ = ("received", "started", "steps", "ended", "next_seq", "gaps", "missing", "reordered",
                 "duplicates", "dropped_before", "first_ns", "last_ns", "ended_summary")

    def __init__(self) -> None:
        self.received = 0
        self.started = 0
        self.steps = 0
        self.ended = 0
        self.next_seq = 0
        self.gaps = 0          # places where event_seq jumped forward
        self.missing = 0       # events missing in those jumps
        self.reordered = 0     # event_seq lower than expected (late or out of order)
        self.duplicates = 0
        self.dropped_before = 0
        self.first_ns = 0
        self.last_ns = 0
        self.ended_summary: Optional[dict] = None

    def to_dict(self) -> dict:
        return {
            "received": self.received, "started": self.started, "steps": self.steps, "ended": self.ended,
            "gaps": self.gaps, "missing": self.missing, "reordered": self.reordered,
            "duplicates": self.duplicates, "dropped_before": self.dropped_before,
            "last_event_seq": self.next_seq - 1,
            "receive_span_s": (self.last_ns - self.first_ns) / 1e9 if self.received > 1 else 0.0,
            "ended_event": self.ended_summary,
        }


class Counter:
    """The subscription callback's state (one executor thread calls it)."""

    def __init__(self, runs_wanted: int) -> None:
        self.runs: dict[str, _Run] = {}
        self.runs_wanted = runs_wanted
        self.ended_runs = 0
        self.done = threading.Event()
        self.first_wall = 0.0

    def __call__(self, msg: Any) -> None:
        now = time.monotonic_ns()
        run = self.runs.get(msg.run_id)
        if run is None:
            run = self.runs[msg.run_id] = _Run()
            run.first_ns = now
            if not self.first_wall:
                self.first_wall = time.time()
        run.received += 1
        run.last_ns = now
        seq = msg.event_seq
        if seq == run.next_seq:
            run.next_seq = seq + 1
        elif seq > run.next_seq:
            run.gaps += 1
            run.missing += seq - run.next_seq
            run.next_seq = seq + 1
        elif seq < run.next_seq:
            # Lower than expected: a duplicate of something seen, or an event counted missing arriving late.
            run.reordered += 1
        run.dropped_before += msg.dropped_before
        kind = msg.kind
        if kind == "step":
            run.steps += 1
        elif kind == "started":
            run.started += 1
        elif kind == "ended":
            run.ended += 1
            run.ended_summary = _ended_summary(msg)
            self.ended_runs += 1
            if self.runs_wanted and self.ended_runs >= self.runs_wanted:
                self.done.set()


def _ended_summary(msg: Any) -> dict:
    try:
        from strands_robots.conversions.events import msg_to_event

        e = msg_to_event(msg)
        return {"applied_actions": e.applied_actions, "missed_deadlines": e.missed_deadlines,
                "outcome": e.outcome, "stopped_reason": e.stopped_reason, "event_seq": e.event_seq}
    except Exception as exc:  # the count matters more than the payload; say why it is missing
        return {"error": f"{type(exc).__name__}: {exc}"}


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", default="observer_events", help="ObserverEvent topic")
    parser.add_argument("--runs", type=int, default=1, help="exit after this many Ended events (0: never)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before giving up")
    args = parser.parse_args(argv)

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from strands_robots_msgs.msg import ObserverEvent

    from strands_robots.ros.qos import EVENT_QOS

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    except (ImportError, TypeError):
        rclpy.init()
    counter = Counter(args.runs)
    node = rclpy.create_node(f"bench_event_counter_{os.getpid()}")
    node.create_subscription(ObserverEvent, args.topic, counter, EVENT_QOS)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    t0 = time.monotonic()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    reason = "ended"
    try:
        while not counter.done.is_set():
            if stop.is_set():
                reason = "signal"
                break
            if time.monotonic() - t0 > args.timeout:
                reason = "timeout"
                break
            executor.spin_once(timeout_sec=0.05)
    finally:
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - t0
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        summary = {
            "topic": node.resolve_topic_name(args.topic) if hasattr(node, "resolve_topic_name") else args.topic,
            "exit_reason": reason,
            "runs": {rid: r.to_dict() for rid, r in counter.runs.items()},
            "received": sum(r.received for r in counter.runs.values()),
            "missing": sum(r.missing for r in counter.runs.values()),
            "wall_s": wall,
            "cpu_s": cpu,
        }
        sys.stdout.write(json.dumps(summary) + "\n")
        sys.stdout.flush()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 3 if reason == "timeout" else 0


if __name__ == "__main__":
    sys.exit(main())
