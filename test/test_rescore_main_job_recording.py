"""``strands-robots rescore`` on the recorded main job: every episode recomputed offline equals the live result.

The main job runs once on a real simulated station (``up --record``: relay, driver, rollout, camera and station
nodes; conftest's ``demo_main_job``). Rescore reads only the recording; its live column is the station's
JobStatus in the file, and both are held against the JobStatus this test's own node received from the station
while the job ran. A copy of the recording with one episode's recorded end input changed must rescore differently
(exit 1, naming the values that differ).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest.importorskip("mujoco", reason="the simulated arms need mujoco")
pytest.importorskip("grpc", reason="the demo job runs through the relay (grpcio)")


def _rescore(path) -> "subprocess.CompletedProcess":
    return subprocess.run([sys.executable, "-m", "strands_robots.cli", "rescore", str(path)], capture_output=True,
                          text=True, timeout=300)


def _tampered_copy(source, target, run_id: str, key: str, value: float) -> None:
    """Copy an MCAP file, the Ended event of ``run_id`` with its recorded end input ``key`` set to ``value``."""
    from mcap.reader import make_reader
    from mcap.writer import Writer
    from rclpy.serialization import deserialize_message, serialize_message
    from strands_robots_msgs.msg import ObserverEvent

    changed = 0
    with open(source, "rb") as src, open(target, "wb") as dst:
        reader = make_reader(src)
        writer = Writer(dst)
        writer.start(profile="ros2", library="test")
        schemas: dict = {}
        channels: dict = {}
        for schema, channel, message in reader.iter_messages(log_time_order=True):
            if schema.id not in schemas:
                schemas[schema.id] = writer.register_schema(schema.name, schema.encoding, schema.data)
            if channel.id not in channels:
                channels[channel.id] = writer.register_channel(channel.topic, channel.message_encoding,
                                                               schemas[schema.id], dict(channel.metadata))
            data = message.data
            if schema.name.endswith("ObserverEvent"):
                event = deserialize_message(data, ObserverEvent)
                if event.kind == "ended" and event.run_id == run_id:
                    ended = event.ended[0]
                    keys = list(ended.end_input_keys)
                    values = list(ended.end_input_values)
                    values[keys.index(key)] = value
                    ended.end_input_values = values
                    data = serialize_message(event)
                    changed += 1
            writer.add_message(channels[channel.id], log_time=message.log_time, data=data,
                               publish_time=message.publish_time, sequence=message.sequence)
        writer.finish()
    assert changed == 1, f"the Ended event of {run_id} was not found once ({changed})"


def test_rescore_of_the_recorded_main_job_equals_every_live_episode_and_a_changed_input_differs(demo_main_job,
                                                                                                  tmp_path):
    from strands_robots.monitoring.rescore import rescore_recording

    run = demo_main_job
    assert run.returncode == 0, run.output[-3000:]
    station = run.statuses_of(run.job_ids()[0])[-1]  # as the station published it, received by this test's node
    assert station.state == "SUCCEEDED"
    rolled = [e for e in station.episodes if e.run_id]
    assert len(rolled) == 7

    done = _rescore(run.path)
    assert done.returncode == 0, done.stdout + done.stderr
    rescored = {r.run_id: r for r in rescore_recording([run.path])}
    # every rollout of the file: the seven kept ones, and the discarded one by the rollout's own verdict
    recorded_runs = {e.run_id for e in run.demo_job_events()}  # the comparison after the job is not in the file
    assert set(rescored) >= {e.run_id for e in rolled} and len(rescored) == len(recorded_runs)
    assert re.search(rf"^{len(rescored)} episode\(s\) rescored .*every one agrees", done.stdout, re.M), done.stdout
    judged = 0
    for live in rolled:
        r = rescored[live.run_id]
        assert r.episode_id == live.episode_id and r.end_condition == live.end_condition
        assert not r.differences, (live.episode_id, r.live, r.rescored)
        at_end, ever = list(live.success_at_end), list(live.success_ever)
        if at_end:  # the task has a predicate: both meanings recomputed from the recorded inputs alone
            judged += 1
            assert [r.rescored["success_at_end"]] == at_end and [r.rescored["success_ever"]] == ever, live.episode_id
            assert r.steps > 0 or live.end_condition != "timeout"
        if live.scored:
            assert r.rescored["success"] == live.success, live.episode_id
            assert r.rescored["score"] == pytest.approx(live.score, abs=1e-9), live.episode_id
    assert judged == 6  # every rollout whose task has a success predicate (short_reach has none)

    # The vision task's predicate reads object_distance_m, derived from the joints: its recorded inputs say it.
    reach = next(e for e in rolled if e.task.task_id == "reach_cube")
    assert rescored[reach.run_id].predicate == "object_distance_m < 0.06"
    hold = next(e for e in rolled if e.task.task_id == "hold_pose")
    assert list(hold.success_at_end) == [True] and hold.scored and hold.success

    tampered = tmp_path / "tampered.mcap"
    _tampered_copy(run.path, tampered, hold.run_id, "right.joint_4.pos", 0.0)
    changed = _rescore(tampered)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    row = next(line for line in changed.stdout.splitlines() if line.startswith(hold.episode_id))
    assert "DIFFERS: success_at_end" in row and "success" in row and "score" in row, changed.stdout
    after = {r.run_id: r for r in rescore_recording([tampered])}
    again = after.pop(hold.run_id)
    assert again.rescored["success_at_end"] is False and again.live["success_at_end"] is True
    assert set(again.differences) == {"success_at_end", "success", "score"}, again.differences
    assert len(after) == len(rescored) - 1 and not any(r.differences for r in after.values())  # others untouched


def test_rescore_refuses_a_file_that_is_not_a_recording_with_one_line(tmp_path):
    bogus = tmp_path / "notes.mcap"
    bogus.write_text("not an mcap file")
    done = _rescore(bogus)
    assert done.returncode == 2 and done.stderr.startswith("strands-robots rescore: "), done.stderr
    assert "Traceback" not in done.stderr
