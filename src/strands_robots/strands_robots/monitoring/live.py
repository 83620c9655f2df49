"""Raw subscriptions to the strands topics: serialized CDR bytes handed on unchanged (rclpy shell).

``record`` and ``--foxglove`` never deserialize a message: the bytes a publisher sent (with their CDR
encapsulation header) go into the MCAP file or out to Foxglove as they came, the way rosbag2 records. Each
subscription uses the publisher's own QoS profile, so latched (transient-local) samples are received; camera
topics (sensor-data QoS: best effort) with a deeper history than the publisher's, so a busy executor thread does
not drop frames its queue could hold.

A reliable volatile topic (events, commands) delivers nothing its publisher sent before the two were matched, so
``record`` says when a subscription's matched publishers change (:class:`MatchedLines`): a harness waits for
those lines before it starts what must be recorded from its first message.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Callable, Iterable

from strands_robots.monitoring.topics import COMMAND, DIAGNOSTICS, EVENT, LATCHED, SENSOR, STATE, StrandsTopic

__all__ = ["qos_profile", "MatchedLines", "RawTap"]

RawCallback = Callable[[str, StrandsTopic, bytes, int], None]
SENSOR_DEPTH = 100  # frames a camera subscription holds (the publisher's sensor-data profile keeps 5)


def qos_profile(kind: str) -> Any:
    """Return the rclpy QoS profile of a QoS kind (``ros/qos.py``)."""
    from strands_robots.ros import qos as _qos

    if kind == SENSOR:
        from rclpy.qos import qos_profile_sensor_data

        profile = copy.copy(qos_profile_sensor_data)
        profile.depth = SENSOR_DEPTH
        return profile
    return {EVENT: _qos.EVENT_QOS, LATCHED: _qos.LATCHED_QOS, STATE: _qos.STATE_QOS, COMMAND: _qos.COMMAND_QOS,
            DIAGNOSTICS: _qos.DIAGNOSTICS_QOS}[kind]


class MatchedLines:
    """One line per change of a topic's matched publishers (``matched /ns/topic: 2 publisher(s)``); none otherwise.

    Every topic starts at 0 matched: a topic nobody publishes is never named.
    """

    def __init__(self) -> None:
        self._last: dict[str, int] = {}

    def changes(self, counts: dict[str, int]) -> list[str]:
        """Return the lines for the counts that differ from the last ones seen (in ``counts``' order)."""
        lines = []
        for name, count in counts.items():
            if count != self._last.get(name, 0):
                lines.append(f"matched {name}: {count} publisher(s)")
            self._last[name] = count
        return lines


class RawTap:
    """Raw subscriptions on ``node`` for ``(live name, topic)`` pairs; ``on_message(name, topic, data, recv_ns)``.

    The callback runs on the executor thread that spins ``node``; ``recv_ns`` is the wall clock at receipt.
    """

    def __init__(self, node: Any, topics: Iterable[tuple[str, StrandsTopic]], on_message: RawCallback) -> None:
        from strands_robots.conversions.messages import message_class

        self._node = node
        self._subscriptions = []
        self.topics = list(topics)
        for name, topic in self.topics:
            cls = message_class(topic.type_name)
            self._subscriptions.append(node.create_subscription(
                cls, name, self._handler(name, topic, on_message), qos_profile(topic.qos), raw=True))

    @staticmethod
    def _handler(name: str, topic: StrandsTopic, on_message: RawCallback) -> Callable[[bytes], None]:
        def handle(data: bytes) -> None:
            on_message(name, topic, bytes(data), time.time_ns())

        return handle

    def publisher_count(self, name: str) -> int:
        """Count the publishers currently matched on ``name`` (0 before discovery)."""
        return self._node.count_publishers(name)

    def matched_counts(self) -> dict[str, int]:
        """Return the publishers each subscription is matched with now, per live name.

        The subscription's own count where rclpy has it (Jazzy, Kilted): a publisher counts once discovery
        matched the two, with compatible QoS. Humble's subscriptions have none; the graph's count of publishers
        on the name stands in there (it can run ahead of the match).
        """
        counts = {}
        for (name, _), sub in zip(self.topics, self._subscriptions):
            matched = getattr(sub, "get_publisher_count", None)
            counts[name] = matched() if matched is not None else self._node.count_publishers(name)
        return counts

    def destroy(self) -> None:
        for sub in self._subscriptions:
            self._node.destroy_subscription(sub)
        self._subscriptions.clear()
