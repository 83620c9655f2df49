"""``strands-robots record``: every strands topic into one MCAP file, the way rosbag2 writes it.

Conventions (what ``ros2 bag info/play`` with the MCAP storage plugin and Foxglove expect):

- header profile ``ros2``; one schema per message type, encoding ``ros2msg``, text = the complete definition
  read from the installed .msg files (:mod:`strands_robots.rollout.msg_schema`, the same texts the episode
  recorder writes); channels with message encoding ``cdr`` and the bytes exactly as published;
- the live topic names (``/strands/observer_events``, ``/diagnostics``), so ``ros2 bag play`` stands in for a
  live run;
- each channel's ``offered_qos_profiles`` metadata (YAML, as rosbag2 writes it), so a replay of a latched topic
  is transient-local again;
- the ROS distro in the ``rosbag2`` metadata record under ``ROS_DISTRO`` (``ros2 bag info`` prints it).

Latched state first. A transient-local topic published before the recorder started (the lease, the driver's
status, a safety stop in force, the job's snapshot) is delivered only once, when the subscription matches. The
recorder holds everything back for a short capture window (until every latched topic has delivered its sample,
at most ``--latch-wait`` seconds: discovery on a loaded machine takes a while), then writes the latest sample of
each latched topic first, logged at the time the recording started, and only then the messages held back, in
arrival order. A later change of a latched topic is recorded where it happens.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from strands_robots.monitoring.topics import LATCHED, StrandsTopic, topics_in
from strands_robots.rollout.msg_schema import MsgDefinitionNotFound, MsgDefinitions, canonical_type_name

__all__ = ["TopicRecorder", "RecordRefused", "qos_yaml", "build_parser", "main"]

PROFILE = "ros2"
LIBRARY = "strands_robots.monitoring.record"
METADATA_RECORD = "strands_robots.record"

# Offered QoS per kind, in rosbag2's YAML form (nodes/_qos.py holds the profiles themselves).
_INFINITE = "{sec: 9223372036, nsec: 854775807}"
_QOS_FIELDS = {
    "event": ("keep_last", 1000, "reliable", "volatile"),
    "latched": ("keep_last", 1, "reliable", "transient_local"),
    "state": ("keep_last", 10, "reliable", "volatile"),
    "command": ("keep_last", 2000, "reliable", "volatile"),
    "diagnostics": ("keep_last", 10, "reliable", "volatile"),
}


class RecordRefused(ValueError):
    """The recording cannot start as asked; nothing was created."""


# Before Jazzy (bag format version 9) rosbag2 wrote the policies as rmw enum numbers, since then as words.
_NUMERIC_QOS_DISTROS = frozenset({"foxy", "galactic", "humble", "iron"})
_RMW_ENUMS = {"keep_last": 1, "reliable": 1, "transient_local": 1, "volatile": 2, "automatic": 1}


def qos_yaml(kind: str, distro: str = "") -> str:
    """Return rosbag2's ``offered_qos_profiles`` text for one publisher of a QoS kind, as ``distro`` writes it."""
    history, depth, reliability, durability = _QOS_FIELDS[kind]
    liveliness: "str | int" = "automatic"
    if distro in _NUMERIC_QOS_DISTROS:
        history, reliability, durability, liveliness = (_RMW_ENUMS[history], _RMW_ENUMS[reliability],
                                                        _RMW_ENUMS[durability], _RMW_ENUMS["automatic"])
    return (f"- history: {history}\n  depth: {depth}\n  reliability: {reliability}\n  durability: {durability}\n"
            f"  deadline: {_INFINITE}\n  lifespan: {_INFINITE}\n  liveliness: {liveliness}\n"
            f"  liveliness_lease_duration: {_INFINITE}\n  avoid_ros_namespace_conventions: false\n")


class TopicRecorder:
    """Writes raw CDR messages of live topics into one MCAP file (no rclpy: the shell hands it bytes).

    Thread-safe: subscription callbacks may call :meth:`offer` from any thread.

    :param path: the file to create; refused when it exists.
    :param topics: ``(live name, topic)`` pairs; every type's schema is read now, so a missing .msg refuses the
        recording before any file exists.
    :param started_ns: wall clock when the subscriptions were made (the log time of the latched state).
    """

    def __init__(self, path: "str | os.PathLike[str]", topics: Sequence[tuple[str, StrandsTopic]], *,
                 started_ns: "int | None" = None, msg_search_path: "Sequence[str] | None" = None,
                 distro: "str | None" = None) -> None:
        from mcap.writer import CompressionType, Writer

        from strands_robots.rollout.recording import METADATA_ROS_DISTRO_KEY, METADATA_ROSBAG2, ros_distro

        self.path = Path(path)
        if os.path.lexists(self.path):
            raise RecordRefused(f"{self.path} already exists; a recording never overwrites another")
        definitions = MsgDefinitions(msg_search_path)
        texts: dict[str, str] = {}
        try:
            for _, topic in topics:
                type_name = canonical_type_name(topic.type_name)
                texts.setdefault(type_name, definitions.full_text(type_name))
        except MsgDefinitionNotFound as exc:
            raise RecordRefused(f"cannot record: {exc}") from exc
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "xb")
        self._writer = Writer(self._file, compression=CompressionType.ZSTD)
        self._writer.start(profile=PROFILE, library=LIBRARY)
        schema_ids = {name: self._writer.register_schema(name, "ros2msg", text.encode("utf-8"))
                      for name, text in texts.items()}
        self.distro = distro or ros_distro()
        self._channels: dict[str, int] = {}
        self._topics: dict[str, StrandsTopic] = {}
        for name, topic in topics:
            self._channels[name] = self._writer.register_channel(
                name, "cdr", schema_ids[canonical_type_name(topic.type_name)],
                {"offered_qos_profiles": qos_yaml(topic.qos, self.distro)})
            self._topics[name] = topic
        self._writer.add_metadata(METADATA_ROSBAG2, {METADATA_ROS_DISTRO_KEY: self.distro})
        self.started_ns = int(started_ns if started_ns is not None else time.time_ns())
        self._lock = threading.Lock()
        self._capturing = True
        self._latched: dict[str, tuple[bytes, int]] = {}     # name -> (data, recv_ns): state in force at start
        self._held: list[tuple[str, bytes, int]] = []        # everything else during the capture window
        self._sequence: dict[str, int] = {}
        self.counts: dict[str, int] = {name: 0 for name in self._channels}
        self._closed = False

    @property
    def capturing(self) -> bool:
        with self._lock:
            return self._capturing

    def latched_names(self) -> list[str]:
        return [name for name, topic in self._topics.items() if topic.qos == LATCHED]

    def captured_latched(self) -> set[str]:
        """Latched topics whose state at start has arrived."""
        with self._lock:
            return set(self._latched)

    def offer(self, name: str, data: bytes, recv_ns: int) -> None:
        """Take one message as received on live topic ``name``."""
        with self._lock:
            if self._closed or name not in self._channels:
                return
            if self._capturing:
                if self._topics[name].qos == LATCHED and name not in self._latched:
                    self._latched[name] = (bytes(data), int(recv_ns))
                else:
                    self._held.append((name, bytes(data), int(recv_ns)))
                return
            self._write(name, data, recv_ns, recv_ns)

    def end_capture(self) -> None:
        """Write the latched state (at ``started_ns``), then what was held back; from now on write as it comes."""
        with self._lock:
            if not self._capturing:
                return
            self._capturing = False
            for name in self._channels:  # topic order: a stable start of file
                if name in self._latched:
                    data, recv_ns = self._latched[name]
                    self._write(name, data, min(self.started_ns, recv_ns), recv_ns)
            for name, data, recv_ns in self._held:
                self._write(name, data, recv_ns, recv_ns)
            self._held.clear()

    def _write(self, name: str, data: bytes, log_ns: int, publish_ns: int) -> None:
        seq = self._sequence.get(name, 0)
        self._sequence[name] = seq + 1
        self._writer.add_message(self._channels[name], log_time=int(log_ns), data=bytes(data),
                                 publish_time=int(publish_ns), sequence=seq & 0xFFFFFFFF)
        self.counts[name] += 1

    def close(self, extra: "Mapping[str, str] | None" = None) -> dict[str, int]:
        """Finish the file (idempotent); the message count per topic."""
        self.end_capture()
        with self._lock:
            if self._closed:
                return dict(self.counts)
            self._closed = True
            info = {"started_ns": str(self.started_ns), **{k: str(v) for k, v in (extra or {}).items()}}
            self._writer.add_metadata(METADATA_RECORD, info)
            self._writer.finish()
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            return dict(self.counts)


def wait_for_latched(recorder: TopicRecorder, publisher_count: Any, *, max_wait_s: float,
                     stop: "threading.Event | None" = None) -> tuple[list[str], list[str]]:
    """End the capture window once every latched topic delivered its state, or at ``max_wait_s``.

    Discovery on a loaded machine can take seconds, so a latched topic whose publisher is not known yet is
    waited for too. Return the latched topics missing at the end: ``(with a publisher, without one)``.
    """
    started = time.monotonic()
    while True:
        missing = [n for n in recorder.latched_names() if n not in recorder.captured_latched()]
        if not missing or time.monotonic() - started >= max_wait_s or (stop is not None and stop.is_set()):
            recorder.end_capture()
            with_publisher = [n for n in missing if publisher_count(n) > 0]
            return with_publisher, [n for n in missing if n not in with_publisher]
        time.sleep(0.02)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strands-robots record", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default="",
                        help="MCAP file to write (default: strands_<UTC time>.mcap in the current directory)")
    parser.add_argument("--namespace", default="strands", help="the station's namespace")
    parser.add_argument("--topics", nargs="*", default=None, help="relative topic names (default: all)")
    parser.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0: Ctrl-C)")
    parser.add_argument("--latch-wait", type=float, default=3.0,
                        help="longest wait for the latched state (discovery included) before writing (s)")
    parser.add_argument("--foxglove", action="store_true",
                        help="also serve the live topics over the Foxglove WebSocket protocol")
    parser.add_argument("--foxglove-host", default="127.0.0.1", help="Foxglove server address (loopback default)")
    parser.add_argument("--foxglove-port", type=int, default=8765)


def default_output() -> str:
    return time.strftime("strands_%Y%m%dT%H%M%SZ.mcap", time.gmtime())


def main(argv: "Sequence[str] | None" = None) -> int:
    """Record until Ctrl-C / SIGTERM or ``--duration``; 0 on a clean stop, 2 when refused."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from strands_robots.cli._ros import ros_env_check

    ros_env_check("record")
    try:
        topics = topics_in(args.namespace, args.topics)
        recorder = TopicRecorder(args.output or default_output(), topics)
    except (RecordRefused, ValueError) as exc:
        print(f"strands-robots record: {exc}", file=sys.stderr, flush=True)
        return 2
    return run_live(args, topics, recorder)


def run_live(args: argparse.Namespace, topics: list, recorder: "TopicRecorder | None") -> int:
    """Spin one node with raw subscriptions; fan each message out to the recorder and/or Foxglove."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from strands_robots.monitoring.live import RawTap
    from strands_robots.nodes.process import StopSignals, init_without_signal_handlers, spin_in_background

    live = None
    if args.foxglove:
        from strands_robots.monitoring.foxglove_live import FoxgloveLive

        try:
            live = FoxgloveLive(topics, host=args.foxglove_host, port=args.foxglove_port)
        except Exception as exc:  # the port is taken, the SDK missing: say so, write nothing more
            print(f"strands-robots record: cannot serve Foxglove: {exc}", file=sys.stderr, flush=True)
            if recorder is not None:
                recorder.close()
            return 2
        print(f"foxglove: ws://{args.foxglove_host}:{live.port}", flush=True)

    def on_message(name: str, topic: StrandsTopic, data: bytes, recv_ns: int) -> None:
        if recorder is not None:
            recorder.offer(name, data, recv_ns)
        if live is not None:
            live.offer(name, data, recv_ns)

    code = 0
    with StopSignals() as signals:
        init_without_signal_handlers(["strands-robots"])
        node = rclpy.create_node("strands_robots_record")
        tap = RawTap(node, topics, on_message)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spin = spin_in_background(executor, "record-executor")
        try:
            if recorder is not None:
                print(f"recording {len(topics)} topics under /{args.namespace.strip('/')} to {recorder.path}",
                      flush=True)
                silent, absent = wait_for_latched(recorder, tap.publisher_count, max_wait_s=args.latch_wait,
                                                  stop=signals.event)
                for name in silent:
                    print(f"record: {name} has a publisher but sent no latched sample within {args.latch_wait} s",
                          file=sys.stderr, flush=True)
                if absent:
                    print(f"record: no publisher of {', '.join(absent)} yet; recorded as they come", flush=True)
            deadline = time.monotonic() + args.duration if args.duration > 0 else None
            while not signals.event.wait(0.1) and spin.is_alive():
                if deadline is not None and time.monotonic() >= deadline:
                    break
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
    return code


if __name__ == "__main__":
    sys.exit(main())
