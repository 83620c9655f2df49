"""``strands-robots report`` of a comparison job: each policy's rate with its interval, the paired difference.

The recorded JobStatus is what the station node publishes (the ROS message, read back as plain data, as the
report reads a recording), its comparison built through the real statistics (comparison_message.py).
"""

from __future__ import annotations

import pytest
from comparison_message import comparison_message, seeded_outcomes

from strands_robots.stats.sequential import StopRule

pytest.importorskip("strands_robots_msgs.msg", reason="generated messages not importable")
pytest.importorskip("matplotlib")


def _recorded(pb_comparison):
    from strands_robots.conversions.introspection import msg_to_dict
    from strands_robots.conversions.station import comparison_to_msg

    return {"job_id": "ab", "state": "SUCCEEDED", "episodes": [],
            "comparison": [msg_to_dict(comparison_to_msg(pb_comparison))]}


def _artist(fig, gid):
    found = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]
    assert found, f"no artist {gid}"
    return found[0]


def _bounds(fig, gid):
    """Return the (low, high) of the error bar ``gid`` drew."""
    bars = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid and hasattr(a, "get_segments")]
    (low, high), = [sorted(y for _, y in segment) for segment in bars[0].get_segments()]
    return low, high


def test_the_recorded_comparison_reads_back_as_the_message_the_station_sent():
    from strands_robots.monitoring.comparison_plot import comparison_from_recorded

    sent = comparison_message(seeded_outcomes(0.9, 0.2, 60, seed=1), rule=StopRule(max_blocks=60))
    assert comparison_from_recorded(_recorded(sent)) == sent
    bare = comparison_message(seeded_outcomes(0.5, 0.5, 3, seed=2), revealed=False)
    assert comparison_from_recorded(_recorded(bare)) == bare
    assert comparison_from_recorded({"episodes": [], "comparison": []}) is None


def test_each_policys_rate_has_its_interval_as_an_error_bar_and_the_difference_its_paired_interval():
    from strands_robots.monitoring.comparison_plot import comparison_figure, comparison_from_recorded

    sent = comparison_message(seeded_outcomes(0.8, 0.4, 40, seed=3), rule=StopRule(max_blocks=60))
    fig = comparison_figure(comparison_from_recorded(_recorded(sent)))
    for figures in sent.figures:
        bar = _artist(fig, f"slot_rate:{figures.slot}")
        assert bar.get_height() == pytest.approx(figures.success.rate)
        assert _bounds(fig, f"slot_interval:{figures.slot}") == pytest.approx((figures.success.low,
                                                                               figures.success.high))
    pair = sent.pairs[0]
    assert _bounds(fig, "difference_interval:vision-blind") == pytest.approx((pair.low, pair.high))
    title = fig._suptitle.get_text()
    assert f"e-value {sent.stop.e_value:.3g}" in title and f"verdict {sent.stop.verdict}" in title


def test_a_blind_comparison_names_no_slot_in_the_report():
    from strands_robots.monitoring.comparison_plot import comparison_figure, comparison_from_recorded

    sent = comparison_message(seeded_outcomes(0.8, 0.4, 6, seed=4), revealed=False, rule=StopRule(max_blocks=60),
                              slots=("secret_one", "secret_two"))
    fig = comparison_figure(comparison_from_recorded(_recorded(sent)))
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + fig._suptitle.get_text()
    assert "secret" not in texts and "labels blind" in texts and "6 blocks" in texts


def test_report_of_a_recording_holding_a_comparison_jobs_status_writes_its_comparison_png(tmp_path):
    from mcap_ros2.writer import Writer

    from strands_robots.monitoring import report
    from strands_robots.rollout.msg_schema import full_text

    sent = comparison_message(seeded_outcomes(0.8, 0.4, 20, seed=5), rule=StopRule(max_blocks=40))
    path = tmp_path / "station.mcap"
    with open(path, "wb") as f:  # what the recorder writes of the station's latched job_status
        writer = Writer(f)
        schema = writer.register_msgdef("strands_robots_msgs/msg/JobStatus",
                                        full_text("strands_robots_msgs/msg/JobStatus"))
        writer.write_message("/station/job_status", schema, _recorded(sent), log_time=1, publish_time=1)
        writer.finish()
    written = report.write_report([path], tmp_path, video=False)
    assert [p.name for p in written] == ["station_job.png", "station_comparison.png"]
    assert (tmp_path / "station_comparison.png").stat().st_size > 10_000
