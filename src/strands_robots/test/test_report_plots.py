"""strands-robots report: PNGs from real recordings; the figures are checked through their matplotlib artists."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install matplotlib)")
pytest.importorskip("mujoco", reason="the simulated arms need mujoco")

from strands_robots.monitoring import report  # noqa: E402
from strands_robots.simulation import Simulation  # noqa: E402
from strands_robots.simulation.observers import RunPolicyStep  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def artists(fig, gid):
    found = []
    for ax in fig.axes:
        found += [a for a in ax.get_children() if a.get_gid() == gid]
    return found


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """Record two real episodes in process.

    One with a stalled observer (missed deadlines) and unknown keys (partial steps), one driven into the safety
    envelope by the scripted torque ramp.
    """
    out = tmp_path_factory.mktemp("rec")
    steps: list = []

    def stall(event):
        if isinstance(event, RunPolicyStep):
            steps.append((event.applied_action_index, event.deadline_missed, event.action_resolution))
            if event.applied_action_index in (5, 12):
                time.sleep(0.07)  # overruns the 20 ms period: the next steps run late

    sim = Simulation.with_robot("alice")
    first = sim.run_policy(robot_name="alice", policy_provider="scripted",
                           policy_config={"mode": "unknown_keys", "unknown_keys": ["left.bogus"]},
                           n_steps=25, control_frequency=50.0, observer=stall, record=True,
                           recording_dir=str(out / "a"))
    sim2 = Simulation.with_robot("alice")
    second = sim2.run_policy(robot_name="alice", policy_provider="scripted",
                             policy_config={"mode": "torque_ramp", "joint": "right.joint_4"}, duration=4.0,
                             fast_mode=True, record=True, recording_dir=str(out / "b"))
    return out, first["episodes"][0], second["episodes"][0], steps


def test_report_writes_a_png_per_episode_and_a_job_summary(recordings, tmp_path):
    out, first, second, _ = recordings
    code = report.main([first["recording_path"], second["recording_path"], "-o", str(tmp_path)])
    assert code == 0
    pngs = sorted(tmp_path.glob("*.png"))
    assert len(pngs) == 3 and sum(p.name.endswith("_job.png") for p in pngs) == 1
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_MAGIC


def test_episode_figure_plots_commanded_against_measured_and_marks_unresolved_and_late_steps(recordings):
    _, first, _, steps = recordings
    traces, _ = report.load_recording(first["recording_path"])
    assert len(traces) == 1
    fig = report.episode_figure(traces[0])
    commanded = {line.get_gid()[len("commanded:"):]: line for ax in fig.axes for line in ax.get_lines()
                 if (line.get_gid() or "").startswith("commanded:")}
    measured = {line.get_gid()[len("measured:"):]: line for ax in fig.axes for line in ax.get_lines()
                if (line.get_gid() or "").startswith("measured:")}
    assert "left.bogus" not in measured
    assert {"left.joint_1", "right.joint_4", "right.gripper"} <= set(commanded) & set(measured)
    assert all(len(line.get_xdata()) == first["applied_actions"] for line in commanded.values()
               if line.get_gid() != "commanded:left.bogus")
    assert commanded["right.joint_4"].get_linestyle() == "--" and measured["right.joint_4"].get_linestyle() == "-"
    # every partial step is marked (the unknown key never resolves)
    (unresolved,) = artists(fig, "unresolved")
    assert len(unresolved.get_offsets()) == first["partial_count"] == first["applied_actions"]
    # one vertical line per late step, on every panel
    late = [index for index, missed, _ in steps if missed]
    assert late, "the stalled observer made no step late"
    assert len(artists(fig, "missed_deadline")) == len(late) * len(fig.axes)
    assert not artists(fig, "safety_stop")
    assert "end: budget" in fig._suptitle.get_text() and "not scored" in fig._suptitle.get_text()


def test_a_run_recorded_from_after_its_start_is_titled_a_partial_recording(recordings):
    _, first, _, _ = recordings
    (whole,), _ = report.load_recording(first["recording_path"])
    assert whole.started and whole.recorded_from_start
    assert "partial recording" not in report.episode_figure(whole)._suptitle.get_text()
    # what a recorder that joined at step 24 holds: no Started event, the steps from 24 on
    late = report.EpisodeTrace(run_id=whole.run_id, start_ns=whole.steps[24].log_ns, steps=whole.steps[24:],
                               ended=whole.ended)
    assert not late.started and not late.recorded_from_start
    last = whole.steps[-1].index
    assert f"partial recording: steps 24-{last} only" in report.episode_figure(late)._suptitle.get_text()


def test_episode_figure_shows_the_safety_stop_with_its_checks(recordings):
    _, _, second, _ = recordings
    assert second["stopped_reason"] == "safety_stop"
    traces, _ = report.load_recording(second["recording_path"])
    fig = report.episode_figure(traces[0])
    (box,) = artists(fig, "safety_checks")
    for check in second["end_detail"].split("; "):
        assert check in box.get_text()
    assert len(artists(fig, "safety_stop")) == len(fig.axes)
    assert "end: safety_stop" in fig._suptitle.get_text()


def test_job_summary_counts_only_scored_episodes_not_taken_over():
    job = {"job_id": "job-9", "state": "SUCCEEDED", "episodes": [
        {"episode_id": "ep_0000", "end_condition": "timeout", "scored": True, "success": True, "score": 1.0,
         "taken_over": False, "run_id": "a"},
        {"episode_id": "ep_0001", "end_condition": "timeout", "scored": True, "success": False, "score": 0.5,
         "taken_over": False, "run_id": "b"},
        {"episode_id": "ep_0002", "end_condition": "safety_stop", "scored": True, "success": True, "score": 0.9,
         "taken_over": True, "run_id": "c"},
        {"episode_id": "ep_0003", "end_condition": "timeout", "scored": False, "success": False, "score": 0.0,
         "taken_over": False, "run_id": "d"},
    ]}
    summary = report.job_summary([], job)
    assert summary.success_rate == pytest.approx(0.5)
    assert summary.mean_score == pytest.approx(0.75)
    fig = report.job_figure(summary)
    bars = {gid: artists(fig, f"episode:{gid}") for gid in summary.labels}
    assert all(len(b) == 1 for b in bars.values())
    assert bars["ep_0001"][0].get_height() == pytest.approx(0.5)
    assert bars["ep_0002"][0].get_hatch() == "//"
    assert "success rate 50%" in fig.axes[0].get_title() and "mean score 0.75" in fig.axes[0].get_title()


def test_job_figure_draws_each_rate_and_mean_score_with_its_interval_as_an_error_bar():
    job = {"job_id": "job-9", "state": "SUCCEEDED", "episodes": [
        {"episode_id": f"ep_{i:04d}", "end_condition": "timeout", "scored": True, "success": i % 3 != 0,
         "score": (i % 4) / 3, "taken_over": i == 9, "run_id": str(i), "task": {"task_id": "a" if i < 6 else "b"}}
        for i in range(10)]}
    summary = report.job_summary([], job)
    figures = summary.figures  # the station's computation (station/summary.py) of these episodes
    assert [t.task_id for t in figures.tasks] == ["a", "b"] and figures.coverage.taken_over == ("ep_0009",)
    fig = report.job_figure(summary)
    for label, f in (("all tasks", figures), ("a", figures.task("a")), ("b", figures.task("b"))):
        bar, = artists(fig, f"rate:{label}")
        assert bar.get_height() == pytest.approx(f.success.rate)
        bars = [a for a in artists(fig, f"rate_interval:{label}") if hasattr(a, "get_segments")]
        (low, high), = [sorted(y for _, y in segment) for segment in bars[0].get_segments()]
        assert (low, high) == pytest.approx((f.success.low, f.success.high))
        score_bars = [a for a in artists(fig, f"score_interval:{label}") if hasattr(a, "get_segments")]
        (low, high), = [sorted(y for _, y in segment) for segment in score_bars[0].get_segments()]
        assert (low, high) == pytest.approx((f.score.low, f.score.high))
    assert "Wilson 95 % interval" in fig.axes[1].get_title()
    assert "coverage 9/10 scored (1 taken over)" in fig.axes[1].get_title()


def test_report_refuses_a_missing_file_and_an_empty_directory(tmp_path, capsys):
    assert report.main([str(tmp_path / "nope.mcap")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert report.main([str(tmp_path / "empty")]) == 2


def test_report_of_a_recording_directory_takes_every_episode_file(recordings, tmp_path):
    out, first, _, _ = recordings
    assert report.main([str(out / "a"), "-o", str(tmp_path)]) == 0
    assert len([p for p in tmp_path.glob("*.png") if not p.name.endswith("_job.png")]) == 1


def test_a_recording_cut_short_is_said_in_one_line_and_what_it_holds_is_reported_and_rescored(recordings, tmp_path,
                                                                                               capsys):
    from strands_robots.monitoring import rescore

    out, _, second, _ = recordings
    whole = open(second["recording_path"], "rb").read()
    cut = tmp_path / "ep_0001.mcap"  # a file still being written looks the same: no summary, a record unfinished
    cut.write_bytes(whole[: len(whole) // 3])
    assert report.main([str(cut), "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"strands-robots report: ep_0001.mcap was {report.CUT_SHORT}"]
    traces, _ = report.load_recording(cut)
    (full,) = report.load_recording(second["recording_path"])[0]
    (trace,) = traces
    assert 0 < len(trace.steps) < len(full.steps)  # what the file holds, no more
    assert (tmp_path / "out" / "ep_0001.png").read_bytes()[:8] == PNG_MAGIC
    assert rescore.main([str(cut)]) in (0, 1)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"strands-robots rescore: ep_0001.mcap was {report.CUT_SHORT}"]
