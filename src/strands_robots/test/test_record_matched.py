"""strands-robots record says when its subscriptions are matched: a line per change of a topic's publishers.

A reliable volatile topic delivers nothing sent before the match, so whatever must record a run from its first
message waits for these lines before starting the run (``up --record``: ``LocalStation.start_recorder``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("mcap_ros2", reason="mcap-ros2-support is not installed (requirements/python.txt)")

from monitor_helpers import start_module  # noqa: E402
from recorder_lines import RECORDING, Lines, end  # noqa: E402

from strands_robots.monitoring.live import MatchedLines, RawTap  # noqa: E402

NS = "rec_matched"


def test_a_line_only_when_a_topics_matched_publishers_change():
    lines = MatchedLines()
    assert lines.changes({"/a": 0, "/b": 0}) == []  # nobody publishes: nothing said
    assert lines.changes({"/a": 1, "/b": 0}) == ["matched /a: 1 publisher(s)"]
    assert lines.changes({"/a": 1, "/b": 0}) == []
    assert lines.changes({"/a": 2, "/b": 1}) == ["matched /a: 2 publisher(s)", "matched /b: 1 publisher(s)"]
    assert lines.changes({"/a": 0, "/b": 1}) == ["matched /a: 0 publisher(s)"]  # gone again: said too


class _Subscription:
    pass


class _MatchedSubscription:
    def get_publisher_count(self) -> int:
        return 3


class _Node:
    """Enough of an rclpy node for RawTap: subscriptions of one kind, a graph that counts 2 per topic."""

    def __init__(self, subscription) -> None:
        self.subscription = subscription

    def create_subscription(self, *args, **kwargs):
        return self.subscription

    def count_publishers(self, name: str) -> int:
        return 2


def test_matched_counts_are_the_subscriptions_own_or_the_graphs_where_rclpy_has_none():
    pytest.importorskip("rclpy", reason="RawTap's QoS profiles need rclpy")
    from strands_robots.monitoring.topics import topics_in

    topics = topics_in(NS, ["observer_events", "action_commands"])
    names = [name for name, _ in topics]
    assert RawTap(_Node(_MatchedSubscription()), topics, print).matched_counts() == dict.fromkeys(names, 3)
    # Humble: no get_publisher_count on a subscription
    assert RawTap(_Node(_Subscription()), topics, print).matched_counts() == dict.fromkeys(names, 2)


def said_times(out: Lines, text: str, times: int, timeout_s: float = 30.0) -> None:
    """Wait until the recorder printed the line ``text`` ``times`` times (bounded)."""
    seen = []

    def counted(line: str) -> bool:
        seen.extend([line] if line.strip() == text else [])
        return len(seen) >= times

    out.wait_for(counted, timeout_s, f"{text!r} printed {times} time(s)")


def test_record_prints_a_matched_line_when_a_publisher_starts_after_it(ros_context, tmp_path):
    import rclpy

    from strands_robots.conversions.messages import message_class
    from strands_robots.monitoring.live import qos_profile
    from strands_robots.monitoring.topics import topics_in

    (name, topic), = topics_in(NS, ["observer_events"])
    cls, qos = message_class(topic.type_name), qos_profile(topic.qos)
    proc = None
    node = rclpy.create_node("record_matched_test", context=ros_context)
    try:
        proc = start_module("strands_robots.monitoring.record", "-o", str(tmp_path / "m.mcap"), "--namespace", NS,
                            "--topics", "observer_events", "action_commands", "--cameras", "--latch-wait", "0")
        out, err = Lines(proc.stdout), Lines(proc.stderr)
        out.wait_for(lambda ln: ln.startswith(RECORDING), 60.0, "'recording' line")
        node.create_publisher(cls, name, qos)  # after the recorder's subscriptions exist
        first = out.wait_for(lambda ln: ln.startswith("matched "), 30.0, "a matched line")
        assert first.strip() == f"matched {name}: 1 publisher(s)"
        second = node.create_publisher(cls, name, qos)
        said_times(out, f"matched {name}: 2 publisher(s)", 1)
        node.destroy_publisher(second)
        said_times(out, f"matched {name}: 1 publisher(s)", 2)
    finally:
        node.destroy_node()
        if proc is not None:
            end(proc)
    assert proc.returncode == 0, err.text()
    said = [ln.strip() for ln in out.text().splitlines() if ln.startswith("matched ")]
    # each change said once; action_commands has no publisher and is never named (the last publisher can go
    # before the recorder stops: then that is said too)
    assert said[:3] == [f"matched {name}: {n} publisher(s)" for n in (1, 2, 1)], said
    assert said[3:] in ([], [f"matched {name}: 0 publisher(s)"]), said
