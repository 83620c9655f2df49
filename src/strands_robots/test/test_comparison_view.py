"""What ``job status``/``watch``, the job page and the report show of a comparison: the view of its pb message.

The messages are built through the real statistics (comparison_message.py) from seeded outcomes; the tests
check the view's words and numbers against the statistics' own, and that blind labels hide every slot name.
"""

from __future__ import annotations

import re

import pytest

from comparison_message import comparison_message, seeded_outcomes
from strands_robots.client.comparison_view import HELD_BACK, comparison_lines, comparison_view
from strands_robots.stats.blocks import PairedBlock
from strands_robots.stats.paired import compare_paired
from strands_robots.stats.sequential import StopRule


def test_revealed_comparison_shows_each_slots_rate_with_its_interval_and_the_paired_difference():
    outcomes = seeded_outcomes(0.8, 0.4, 30, seed=3)
    msg = comparison_message(outcomes)
    view = comparison_view(msg)
    truth = compare_paired([PairedBlock(a, b) for a, b in outcomes])
    vision, blind = view.figures
    assert (vision.slot, blind.slot) == ("vision", "blind")
    assert vision.rate == pytest.approx(truth.a.rate) and blind.rate == pytest.approx(truth.b.rate)
    assert vision.success.startswith(f"{truth.a.successes}/30 = {truth.a.rate * 100:.0f} % "
                                     f"[{truth.a.low * 100:.0f} %, {truth.a.high * 100:.0f} %] Wilson 95 %")
    pair = view.pairs[0]
    assert (pair.only_a, pair.only_b) == (truth.table.only_a, truth.table.only_b)
    assert pair.difference.startswith(f"{truth.difference.difference * 100:+.0f} pts "
                                      f"[{truth.difference.low * 100:+.0f}, {truth.difference.high * 100:+.0f}] "
                                      "Newcombe 95 %")
    assert f"p = {truth.test.p_value:.3g}" in pair.p_value
    assert pair.detectable == f"{truth.detectable.difference * 100:.0f} pts at 80 % power"
    text = "\n".join(comparison_lines(msg))
    assert "vision - blind: " + pair.difference in text
    assert f"only vision {truth.table.only_a}, only blind {truth.table.only_b}" in text


def test_stopped_comparison_names_the_test_e_value_block_and_verdict():
    rule = StopRule(max_blocks=60, alpha=0.05)
    msg = comparison_message(seeded_outcomes(0.9, 0.2, 60, seed=1), rule=rule)
    view = comparison_view(msg)
    assert view.stop is not None and view.stop.verdict == "a_better"
    assert view.stop.stopped_at_block == view.block_count < 60  # stopped early, at the last complete block
    assert view.stop.e_value >= view.stop.threshold == pytest.approx(20.0)
    text = "\n".join(comparison_lines(msg))
    assert f"stopped at block {view.block_count}" in text
    assert "verdict a_better" in text and "paired e-process" in text
    assert "vision won" in text  # the verdict's words name the slots once revealed


def test_blind_comparison_never_names_a_slot_and_shows_blind_labels_in_run_order():
    msg = comparison_message(seeded_outcomes(0.7, 0.3, 12, seed=2), revealed=False,
                             rule=StopRule(max_blocks=40), slots=("secret_policy_x", "secret_policy_y"))
    view = comparison_view(msg)
    assert view.figures == () and view.pairs == () and view.slots == ()
    assert view.stop is not None and view.stop.text == ""
    assert [tuple(label for label, _ in b.runs) for b in view.blocks] == \
        [tuple(o.blind_label for o in b.outcomes) for b in msg.blocks]
    text = "\n".join(comparison_lines(msg))
    assert "secret_policy" not in text
    assert HELD_BACK in text and "labels blind" in text


def test_blocks_are_listed_in_the_order_they_ran_with_task_seed_and_each_outcome():
    msg = comparison_message(seeded_outcomes(0.6, 0.5, 5, seed=4), tasks=("hold_pose", "reach_cube"))
    lines = comparison_lines(msg)
    listed = [line.split() for line in lines if re.match(r"^\s+b_\d{4}\s", line)]
    assert [row[0] for row in listed] == [b.block_id for b in msg.blocks]
    for row, block in zip(listed, msg.blocks):
        assert row[1] == block.task_id and row[3] == str(block.seed)
        assert row[4:] == [f"{o.slot}{'+' if o.success else '-'}" for o in block.outcomes]


def test_long_comparison_lists_only_the_latest_blocks_and_counts_the_rest():
    msg = comparison_message(seeded_outcomes(0.5, 0.5, 50, seed=6))
    lines = comparison_lines(msg, blocks_shown=10)
    assert "    ... 40 earlier blocks" in lines
    assert sum(1 for line in lines if re.match(r"^\s+b_\d{4}\s", line)) == 10


def test_comparison_without_blocks_says_there_is_no_difference_yet():
    msg = comparison_message([])
    view = comparison_view(msg)
    assert view.block_count == 0
    assert view.pairs[0].difference == "n/a (no blocks)"
    assert view.figures[0].success == "0/0 (no outcomes)"


def _status(comparison) -> "object":
    from strands_robots.wire.proto import evaluation_pb2 as pb

    status = pb.JobStatus(job_id="ab1", station_id="sim_station", state="RUNNING", episodes_total=80)
    status.comparison.CopyFrom(comparison)
    return status


def test_job_status_prints_the_comparison_with_its_verdict():
    from strands_robots.client.cli.job import format_status

    msg = comparison_message(seeded_outcomes(0.9, 0.2, 60, seed=1), rule=StopRule(max_blocks=60))
    text = format_status(_status(msg))
    assert "comparison on suite demo: 2 policies" in text
    assert "vision - blind: " in text and "verdict a_better" in text
    assert text.index("state            RUNNING") < text.index("comparison on suite")


def test_watch_progress_line_shows_blocks_and_e_value_and_no_slot_while_blind():
    from strands_robots.client.cli.client_side import comparison_progress

    blind = comparison_message(seeded_outcomes(0.7, 0.3, 9, seed=8), revealed=False, rule=StopRule(max_blocks=40))
    line = comparison_progress(_status(blind))
    e_value = comparison_view(blind).stop.e_value
    assert line.startswith(f"comparison: {len(blind.blocks)} complete blocks; e-value {e_value:.3g} "
                           "(separates at 20), verdict ")
    assert "vision" not in line and "blind -" not in line
    revealed = comparison_message(seeded_outcomes(0.7, 0.3, 9, seed=8), rule=StopRule(max_blocks=40))
    assert "; vision - blind " in comparison_progress(_status(revealed))


def test_a_comparisons_table_gives_each_slots_figures_and_never_a_rate_pooled_over_the_slots():
    from strands_robots.client.cli.client_side import summary_table

    msg = comparison_message(seeded_outcomes(0.9, 0.2, 20, seed=3), rule=StopRule(max_blocks=40))
    status = _status(msg)
    status.summary.success.successes, status.summary.success.trials = 20, 40  # what a pooled line would print
    text = summary_table(status)
    assert "comparison on suite demo" in text and not re.search(r"^job: ", text, re.M), text
    status.ClearField("comparison")
    assert re.search(r"^job: success 20/40", summary_table(status), re.M)
