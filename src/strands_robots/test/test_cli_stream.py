"""cli/stream.py: what a reader of the observer stream reports, from events a real in-process run made.

The events come from ``Simulation.run_policy`` with an observer (the same dataclasses the ROS stream converts
to); the tests drop, reorder or cut them the way a late or lossy subscriber would see them.
"""

from __future__ import annotations

import io
import math

import pytest

pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from strands_robots.cli.stream import StreamPrinter, StreamTracker, summary_line  # noqa: E402
from strands_robots.simulation.observers import RunPolicyEnded, RunPolicyStarted, RunPolicyStep  # noqa: E402


@pytest.fixture(scope="module")
def two_runs():
    """Events of a real two-episode in-process run (mock policy, 50 Hz, 0.4 s each)."""
    from strands_robots.simulation import Simulation

    events: list = []
    sim = Simulation()
    sim.add_robot("alice")
    result = sim.run_policy(robot_name="alice", policy_provider="mock", duration=0.4, control_frequency=50.0,
                            observer=events.append, n_episodes=2, fast_mode=True)
    assert result["status"] == "success"
    run_ids = list(dict.fromkeys(e.run_id for e in events))
    assert len(run_ids) == 2
    return events, run_ids


def _printed(printer_kwargs: dict, events) -> list:
    out = io.StringIO()
    printer = StreamPrinter(out=out, **printer_kwargs)
    for event in events:
        printer(event)
    printer.finish()
    return printer, out.getvalue().splitlines()


def test_joining_a_run_midway_sets_the_baseline_and_reports_no_gap(two_runs):
    events, run_ids = two_runs
    first = [e for e in events if e.run_id == run_ids[0]]
    joined = first[7:]  # a reader that started while the run was at event_seq 7
    printer, lines = _printed({}, joined)
    assert printer.gaps == 0
    assert not [line for line in lines if line.startswith("!! gap")]
    assert f"-- joined run_id={run_ids[0]} at event_seq 7" in lines
    assert printer.tracker.runs[run_ids[0]].joined_at == 7


def test_a_missing_event_is_one_gap_naming_the_missing_event_seq(two_runs):
    events, run_ids = two_runs
    first = [e for e in events if e.run_id == run_ids[0]]
    lossy = first[:5] + first[8:]  # event_seq 5, 6, 7 never arrived
    printer, lines = _printed({}, lossy)
    assert printer.gaps == 3
    gaps = printer.tracker.gaps
    assert [(g.first, g.last, g.missing, g.seen) for g in gaps] == [(5, 7, 3, 8)]
    assert f"!! gap in {run_ids[0]}: event_seq 5..7 missing (3 lost), got 8" in lines


def test_the_second_run_starts_its_own_baseline_at_event_seq_0(two_runs):
    events, run_ids = two_runs
    printer, lines = _printed({"expected_episodes": 2}, events)
    assert printer.gaps == 0
    started = [line for line in lines if line.startswith("Started")]
    assert len(started) == 2
    assert started[0].endswith("episode 1/2") and started[1].endswith("episode 2/2"), started
    assert len(printer.ended) == 2


def test_gaps_mode_prints_only_gaps_and_a_count(two_runs):
    events, run_ids = two_runs
    lossy = [e for e in events if not (e.run_id == run_ids[1] and e.event_seq == 3)]
    printer, lines = _printed({"mode": "gaps"}, lossy)
    assert lines == [
        f"!! gap in {run_ids[1]}: event_seq 3 missing (1 lost), got 4",
        f"-- {len(lossy)} events of 2 run(s), 1 gap(s), 1 lost",
    ]


def test_summary_mode_has_one_line_per_run_with_the_figures_of_the_events_seen(two_runs):
    events, run_ids = two_runs
    printer, lines = _printed({"mode": "summary"}, events)
    assert len(lines) == 2 and all(line.startswith("Summary") for line in lines), lines
    for run_id, line in zip(run_ids, lines):
        run_events = [e for e in events if e.run_id == run_id]
        steps = [e for e in run_events if isinstance(e, RunPolicyStep)]
        ended = next(e for e in run_events if isinstance(e, RunPolicyEnded))
        full = sum(1 for s in steps if s.action_resolution == "full")
        unknown = sum(1 for s in steps if s.action_resolution == "unknown")
        assert f"run_id={run_id} outcome={ended.outcome} stopped_reason={ended.stopped_reason}" in line
        assert f"steps_seen={len(steps)} " in line
        assert f"full/partial/none/unknown={full}/" in line and line.split("full/partial/none/unknown=")[1].split(
            " ")[0].endswith(f"/{unknown}")
        assert f"missed_deadlines={ended.missed_deadlines} " in line
        assert f"events={len(run_events)} lost=0" in line
        run = printer.tracker.runs[run_id]
        ages = [s.observation_age_steps for s in steps]
        assert run.observation_age_max == max(ages)
        assert math.isclose(run.observation_age_mean, sum(ages) / len(ages))
        assert len(run.step_intervals_ns) == len(steps) - 1


def test_summary_of_a_run_that_never_ended_says_so(two_runs):
    events, run_ids = two_runs
    cut = [e for e in events if e.run_id == run_ids[0] and not isinstance(e, RunPolicyEnded)]
    printer, lines = _printed({"mode": "summary"}, cut)
    assert len(lines) == 1 and "not ended" in lines[0] and f"run_id={run_ids[0]}" in lines[0]


def test_interval_deviation_needs_the_started_event_for_the_period(two_runs):
    events, run_ids = two_runs
    tracker = StreamTracker()
    for e in events:
        if e.run_id == run_ids[0] and not isinstance(e, RunPolicyStarted):
            tracker.add(e)
    run = tracker.runs[run_ids[0]]
    assert math.isnan(run.interval_deviation_ms(0.99))
    assert "interval_dev_p50/p99=-/-ms" in summary_line(run)


def test_step_lines_are_paced_by_the_injected_clock(two_runs):
    events, run_ids = two_runs
    now = [0.0]
    out = io.StringIO()
    printer = StreamPrinter(out=out, progress_period_s=1.0, clock=lambda: now[0])
    steps = [e for e in events if e.run_id == run_ids[0] and isinstance(e, RunPolicyStep)]
    full = [s for s in steps if s.action_resolution == "full"]
    assert len(full) >= 3
    for s in full[:3]:
        printer(s)  # first one prints, the next two fall within the same second
    now[0] = 1.0
    printer(full[0])
    assert len([line for line in out.getvalue().splitlines() if line.startswith("Step")]) == 2


# ------------------------------------------------------------------------ up's verdict over what it received
def _verdict_of(events, episodes: int, rollout_rc, why: str = "", failure_code=None):
    from strands_robots.cli.up import _verdict

    out = io.StringIO()
    printer = StreamPrinter(out=out, expected_episodes=episodes)
    for event in events:
        printer(event)
    import contextlib

    with contextlib.redirect_stdout(out):
        code = _verdict(printer, episodes, rollout_rc, why, failure_code, 2)
    return code, out.getvalue().splitlines()[-1]


def test_up_verdict_is_done_only_when_every_episode_was_seen_to_end_ok(two_runs):
    events, run_ids = two_runs
    code, line = _verdict_of(events, 2, 0)
    assert code == 0 and line.startswith("[up] done: 2/2 episode(s) ended ok"), line


def test_up_verdict_trusts_the_rollout_when_only_a_last_ended_event_was_lost(two_runs):
    events, run_ids = two_runs
    lost_last_ended = [e for e in events if not (e.run_id == run_ids[1] and isinstance(e, RunPolicyEnded))]
    code, line = _verdict_of(lost_last_ended, 2, 0)
    assert code == 0, line
    assert "the rollout reports 2/2 episode(s) ok, but only 1 Ended event(s) arrived" in line, line


def test_up_verdict_fails_when_an_episode_was_never_seen_to_start(two_runs):
    events, run_ids = two_runs
    first_only = [e for e in events if e.run_id == run_ids[0]]
    code, line = _verdict_of(first_only, 2, 0)
    assert code == 1 and line.startswith("[up] FAILED (only 1 of 2 episode(s) were seen to end ok)"), line


def test_up_verdict_of_a_safety_stop_is_failed_with_the_rollout_code_and_the_detail():
    from strands_robots.simulation import Simulation

    events: list = []
    sim = Simulation()
    sim.add_robot("alice")
    sim.run_policy(robot_name="alice", policy_provider="scripted", duration=10.0, control_frequency=50.0,
                   observer=events.append, fast_mode=True)
    ended = [e for e in events if isinstance(e, RunPolicyEnded)]
    assert len(ended) == 1 and ended[0].outcome == "error" and ended[0].stopped_reason == "safety_stop"
    code, line = _verdict_of(events, 1, 1)
    assert code == 1 and line.startswith("[up] FAILED (error: safety_stop, "), line
    assert "done" not in line and "rollout exit code 1" in line


def test_up_verdict_of_refused_parameters_is_exit_2_naming_the_node():
    code, line = _verdict_of([], 1, 2)
    assert code == 2 and "the rollout node refused its parameters" in line, line
    code, line = _verdict_of([], 1, None, "the arm driver refused its parameters (its line above says why)", 2)
    assert code == 2 and "rollout exit code still running when stopped" in line, line
