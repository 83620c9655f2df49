"""The topic recorder: raw CDR messages of live topics into one MCAP file, the way rosbag2 writes it (no rclpy).

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
at most ``max_wait_s`` seconds, ``--latch-wait``: discovery on a loaded machine takes a while), then writes the
latest sample of each latched topic first, logged at the time the recording started, and only then the messages
held back, in arrival order. A later change of a latched topic is recorded where it happens.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from strands_robots.monitoring.topics import LATCHED, StrandsTopic
from strands_robots.rollout.msg_schema import MsgDefinitionNotFound, MsgDefinitions, canonical_type_name

__all__ = ["TopicRecorder", "RecordRefused", "qos_yaml", "wait_for_latched"]

PROFILE = "ros2"
LIBRARY = "strands_robots.monitoring.record"  # the writer named in the file (the command that wrote it)
METADATA_RECORD = "strands_robots.record"

# Offered QoS per kind, in rosbag2's YAML form (ros/qos.py holds the profiles themselves).
_INFINITE = "{sec: 9223372036, nsec: 854775807}"
_QOS_FIELDS = {
    "event": ("keep_last", 1000, "reliable", "volatile"),
    "latched": ("keep_last", 1, "reliable", "transient_local"),
    "state": ("keep_last", 10, "reliable", "volatile"),
    "command": ("keep_last", 2000, "reliable", "volatile"),
    "diagnostics": ("keep_last", 10, "reliable", "volatile"),
    "sensor": ("keep_last", 5, "best_effort", "volatile"),
}


class RecordRefused(ValueError):
    """The recording cannot start as asked; nothing was created."""


# Before Jazzy (bag format version 9) rosbag2 wrote the policies as rmw enum numbers, since then as words.
_NUMERIC_QOS_DISTROS = frozenset({"foxy", "galactic", "humble", "iron"})
_RMW_ENUMS = {"keep_last": 1, "reliable": 1, "best_effort": 2, "transient_local": 1, "volatile": 2, "automatic": 1}


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

        from strands_robots.rollout.mcap_file import METADATA_ROS_DISTRO_KEY, METADATA_ROSBAG2, ros_distro

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
