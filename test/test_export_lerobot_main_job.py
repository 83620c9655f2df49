"""export lerobot on a real station recording: the main job recorded (``strands-robots up --record FILE``).

The demo job has a policy_completed, a safety_stop, two taken-over episodes, a discarded try and a start pose never
reached; the dataset's episode rows must say what the station's own JobStatus says (the discarded try is not one of
them), and only the taken-over episodes have operator frames.
"""

from __future__ import annotations

import pytest

pytest.importorskip("mujoco", reason="the simulated arms need mujoco")
pytest.importorskip("grpc", reason="the demo job runs through the relay (grpcio)")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (requirements/python.txt)")

from strands_robots.export import lerobot  # noqa: E402
from strands_robots.export.partial_runs import missing_start  # noqa: E402
from strands_robots.monitoring.report import load_recording  # noqa: E402


def test_export_of_the_recorded_main_job_carries_the_station_results(demo_main_job, tmp_path, capsys):
    run = demo_main_job  # conftest: the main job recorded once for the tests that read what it did
    path = run.path
    assert run.returncode == 0, run.output[-3000:]

    out = tmp_path / "dataset"
    assert lerobot.main([str(path), "-o", str(out)]) == 0
    traces, job = load_recording(path)
    assert job is not None and job["state"] == "SUCCEEDED"
    rows = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    by_run = {t.run_id: t for t in traces}
    stepped = [t for t in traces if t.steps]
    # the recorder was matched before the job was submitted: every run is in it from its Started event on
    assert not [reason for reason in map(missing_start, stepped) if reason], run.output[-3000:]
    finished = {e["run_id"]: e for e in job["episodes"] if e["run_id"]}
    # the station's episodes only: the discarded try (its task ran again) has no result and is left out, named
    assert [r["run_id"] for r in rows] == [t.run_id for t in stepped if t.run_id in finished]
    (discarded,) = [t for t in stepped if t.run_id not in finished]
    assert f"run {discarded.run_id[:8]}: not one of the job's episodes" in capsys.readouterr().err
    assert all(r["episode_id"] for r in rows)
    unreached = [e for e in job["episodes"] if e["end_condition"] == "start_pose_unreached"]
    assert unreached and all(e["run_id"] not in {r["run_id"] for r in rows} for e in unreached)
    assert {"policy_completed", "safety_stop", "timeout"} <= {r["end_condition"] for r in rows}
    taken = 0
    for row in rows:
        trace = by_run[row["run_id"]]
        # every step's command carries the rollout's send stamp: a takeover is measured on the rollout's clock,
        # not on the recorder's delivery times
        assert sorted(trace.action_sent_ns) == [s.index for s in trace.steps], row["run_id"]
        result = finished.get(row["run_id"])
        if result is not None:  # a finished episode of the job: the station's words
            for name in ("episode_id", "end_condition", "scored", "success", "score", "taken_over"):
                assert row[name] == result[name], (row["run_id"], name)
        # at the control frequency: one frame per step, plus the operator's frames of a takeover, plus a held frame
        # per control slot no step filled (a missed deadline; an event the rollout's bounded queue dropped)
        policy_frames = row["length"] - row["operator_frames"]
        unfilled = trace.steps[-1].index - trace.steps[0].index + 1 - len(trace.steps)
        missed = int((trace.ended or {}).get("missed_deadlines", 0))
        assert len(trace.steps) <= policy_frames <= len(trace.steps) + unfilled + missed + 1, row["run_id"]
        if row["taken_over"]:
            taken += 1
            assert row["operator_frames"] > 0, row["episode_id"]
        else:
            assert row["operator_frames"] == 0, row["episode_id"]
    assert taken == sum(bool(e["taken_over"]) for e in job["episodes"]) == 2
    table = pq.read_table(out / "data/chunk-000/file-000.parquet").to_pydict()
    assert table["index"] == list(range(sum(r["length"] for r in rows)))
    assert sum(table["control_source"]) == sum(r["operator_frames"] for r in rows)
