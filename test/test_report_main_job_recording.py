"""The chain on a real simulated station: the main job recorded (``up --record``), then report on the file.

The job summary the report draws from the recording must say what the demo itself printed, and the
safety-stop episode's figure must carry the station's own words for the tripped check.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install matplotlib)")
pytest.importorskip("mujoco", reason="the simulated arms need mujoco")
pytest.importorskip("grpc", reason="the demo job runs through the relay (grpcio)")

from test_record_live import LATCHED, read_file  # noqa: E402

from strands_robots.monitoring import report  # noqa: E402


def test_report_of_the_recorded_main_job_matches_the_demos_summary(demo_main_job, tmp_path):
    run = demo_main_job  # conftest: the main job recorded once, a second recorder started while it ran
    path, station_out = run.path, run.output
    assert run.returncode == 0, station_out[-3000:]
    assert re.search(r"^\[demo\] stopped: .*recorder exit 0", station_out, re.M), station_out[-3000:]
    assert run.late_returncode == 0, run.late_out + run.late_err
    # the late recording starts with the state in force when it started, every latched topic's
    _, _, _, late_messages = read_file(run.late_path)
    first = []
    for topic, _, _, decoded in late_messages:
        if topic.rsplit("/", 1)[1] not in LATCHED:
            break
        first.append((topic.rsplit("/", 1)[1], decoded))
    assert {name for name, _ in first} == LATCHED, run.late_out + run.late_err
    assert dict(first)["job_status"].state == "RUNNING" and dict(first)["driver_status"].active
    printed = re.search(r"^job: success (\d+)/(\d+) = (\d+) % \[(\d+) %, (\d+) %\] Wilson 95 %; mean score ([\d.]+) ",
                        station_out, re.M)
    assert printed, station_out[-2000:]

    traces, job = report.load_recording(path)
    assert job is not None and job["state"] == "SUCCEEDED"
    summary = report.job_summary(traces, job)
    assert round(summary.success_rate * 100) == int(printed.group(3))
    assert f"{summary.mean_score:.2f}" == printed.group(6)
    assert sum(s and not t for s, t in zip(summary.scored, summary.taken_over)) == int(printed.group(2))
    # the report's figures are the station's: the same k of n and interval the client printed
    rate = summary.figures.success
    assert (rate.successes, rate.trials) == (int(printed.group(1)), int(printed.group(2)))
    assert (round(rate.low * 100), round(rate.high * 100)) == (int(printed.group(4)), int(printed.group(5)))

    stops = [e for e in job["episodes"] if e["end_condition"] == "safety_stop"]
    assert stops, "the demo job has a safety-stop episode"
    trace = next(t for t in traces if t.run_id == stops[0]["run_id"])
    fig = report.episode_figure(trace)
    boxes = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == "safety_checks"]
    assert len(boxes) == 1 and stops[0]["end_detail"].split("; ")[0] in boxes[0].get_text()
    assert "end: safety_stop" in fig._suptitle.get_text() and stops[0]["episode_id"] in fig._suptitle.get_text()
    written = report.write_report([path], tmp_path / "png", video=False)
    plots = [p for p in written if not p.name.endswith("_cameras.png")]  # a camera node recorded: its sheets too
    assert len(plots) == len(traces) + 1
