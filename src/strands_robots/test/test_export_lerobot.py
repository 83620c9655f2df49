"""strands-robots export lerobot: real in-process recordings out as a LeRobotDataset v3, read back with pyarrow.

Every figure is checked against the recording it came from (read with the report's reader), not against numbers
the exporter printed.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="the simulated arms need mujoco")
pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (requirements/python.txt)")
pq = pytest.importorskip("pyarrow.parquet")

from strands_robots.cli import main as cli_main  # noqa: E402
from strands_robots.export import lerobot  # noqa: E402
from strands_robots.monitoring.report import load_recording  # noqa: E402
from strands_robots.simulation import Simulation  # noqa: E402
from strands_robots.simulation.observers import RunPolicyStep  # noqa: E402

TAKEOVER_AT = 10
TAKEOVER_S = 0.3


def record(out: Path, *, n_steps: int, hz: float, instruction: str, takeover: bool = False) -> Path:
    sim = Simulation.with_robot("alice")
    runner = sim.robot("alice").runner
    resumed = threading.Event()

    def observer(event):
        if takeover and isinstance(event, RunPolicyStep) and event.applied_action_index == TAKEOVER_AT:
            runner.pause()  # what the station's takeover does in process (station/inprocess.py)
            timer = threading.Timer(TAKEOVER_S, lambda: (runner.resume(), resumed.set()))
            timer.daemon = True
            timer.start()

    result = sim.run_policy(robot_name="alice", policy_provider="mock", n_steps=n_steps, control_frequency=hz,
                            observer=observer, record=True, recording_dir=str(out), instruction=instruction)
    if takeover:
        assert resumed.wait(10.0)
    return Path(result["episodes"][0]["recording_path"])


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """Three 50 Hz episodes (two of one task, the second taken over for 0.3 s) and one 30 Hz episode."""
    out = tmp_path_factory.mktemp("rec")
    a = record(out / "a", n_steps=20, hz=50.0, instruction="pick the cube")
    b = record(out / "b", n_steps=25, hz=50.0, instruction="pick the cube", takeover=True)
    c = record(out / "c", n_steps=15, hz=50.0, instruction="stack the blocks")
    d = record(out / "d", n_steps=12, hz=30.0, instruction="stack the blocks")
    return a, b, c, d


@pytest.fixture(scope="module")
def dataset(recordings, tmp_path_factory):
    a, b, c, _ = recordings
    out = tmp_path_factory.mktemp("ds") / "dataset"
    assert cli_main(["export", "lerobot", str(a), str(b), str(c), "-o", str(out)]) == 0
    return out


def trace_of(path):
    traces, _ = load_recording(path)
    assert len(traces) == 1
    return traces[0]


def data_table(root):
    return pq.read_table(root / "data/chunk-000/file-000.parquet")


def episode_rows(root):
    return pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()


def operator_gap_frames(trace, fps):
    """Frames the takeover gap spans: its wall time less the robot time that passed over it, at ``fps``.

    The wall time between the two steps' sends: the recording's ``actions`` log times.
    """
    assert len(trace.action_ns) == len(trace.steps)
    s0, s1 = trace.steps[TAKEOVER_AT], trace.steps[TAKEOVER_AT + 1]
    sent0, sent1 = trace.action_ns[TAKEOVER_AT], trace.action_ns[TAKEOVER_AT + 1]
    inserted = (sent1 - sent0) * 1e-9 - (s1.sim_time_s - s0.sim_time_s)
    last_step_t = trace.steps[-1].sim_time_s - trace.steps[0].sim_time_s + inserted
    return int(math.floor((last_step_t + 0.5 / trace.control_frequency) * fps + 1e-9)) + 1 - len(trace.steps)


def test_info_json_is_v3_with_totals_features_and_paths(dataset, recordings):
    info = json.loads((dataset / "meta/info.json").read_text())
    traces = [trace_of(p) for p in recordings[:3]]
    keys = list(traces[0].actuator_keys)
    expected_frames = 20 + 15 + 25 + operator_gap_frames(traces[1], 50.0)
    assert info["codebase_version"] == "v3.0"
    assert info["robot_type"] == "alice"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, expected_frames, 2)
    assert info["fps"] == 50.0
    assert (info["chunks_size"], info["data_files_size_in_mb"], info["video_files_size_in_mb"]) == (1000, 100, 500)
    assert info["splits"] == {"train": "0:3"}
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] is None  # no video features
    features = info["features"]
    assert features["observation.state"] == {"dtype": "float32", "shape": [len(keys)], "names": keys}
    assert features["action"] == {"dtype": "float32", "shape": [len(keys)], "names": keys}
    for name in ("control_source", "frame_index", "episode_index", "index", "task_index"):
        assert features[name] == {"dtype": "int64", "shape": [1], "names": None}
    assert features["timestamp"] == {"dtype": "float32", "shape": [1], "names": None}
    table = data_table(dataset)
    assert set(table.column_names) == set(features)
    assert table.num_rows == expected_frames
    assert table.schema.field("observation.state").type == pa.list_(pa.float32(), len(keys))


def test_frames_at_the_control_frequency_are_the_recorded_steps(dataset, recordings):
    table = data_table(dataset).to_pydict()
    rows = episode_rows(dataset)
    for e, path in ((0, recordings[0]), (2, recordings[2])):
        trace = trace_of(path)
        row = rows[e]
        frm, to = row["dataset_from_index"], row["dataset_to_index"]
        assert row["length"] == to - frm == len(trace.steps)
        for k, step in enumerate(trace.steps):
            i = frm + k
            assert table["frame_index"][i] == k and table["episode_index"][i] == e and table["index"][i] == i
            assert table["timestamp"][i] == pytest.approx(k / 50.0, abs=1e-6)
            expected_state = [step.observation[f"{key}.pos"] for key in trace.actuator_keys]
            np.testing.assert_allclose(table["observation.state"][i], expected_state, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(table["action"][i], [step.action[key] for key in trace.actuator_keys],
                                       rtol=1e-6, atol=1e-7)
            assert table["control_source"][i] == lerobot.CONTROL_POLICY


def test_indices_are_contiguous_across_episodes(dataset):
    table = data_table(dataset).to_pydict()
    rows = episode_rows(dataset)
    assert table["index"] == list(range(len(table["index"])))
    assert [r["episode_index"] for r in rows] == [0, 1, 2]
    assert rows[0]["dataset_from_index"] == 0
    for prev, row in zip(rows, rows[1:]):
        assert row["dataset_from_index"] == prev["dataset_to_index"]
    assert rows[-1]["dataset_to_index"] == len(table["index"])
    for row in rows:
        frm, to = row["dataset_from_index"], row["dataset_to_index"]
        assert table["frame_index"][frm:to] == list(range(row["length"]))
        assert set(table["episode_index"][frm:to]) == {row["episode_index"]}
        assert (row["data/chunk_index"], row["data/file_index"]) == (0, 0)


def test_takeover_frames_are_flagged_operator_and_hold_the_arms_state(dataset, recordings):
    trace = trace_of(recordings[1])
    gap = operator_gap_frames(trace, 50.0)
    assert gap >= 10  # 0.3 s at 50 Hz, less what the loaded machine ate of it
    row = episode_rows(dataset)[1]
    table = data_table(dataset).to_pydict()
    frm, to = row["dataset_from_index"], row["dataset_to_index"]
    source = table["control_source"][frm:to]
    assert row["length"] == len(trace.steps) + gap and row["operator_frames"] == gap
    # the operator's frames come right after the step the takeover paused at, policy frames before and after
    assert source == [0] * (TAKEOVER_AT + 1) + [1] * gap + [0] * (len(trace.steps) - TAKEOVER_AT - 1)
    held = [trace.steps[TAKEOVER_AT].observation[f"{k}.pos"] for k in trace.actuator_keys]
    for i in range(frm + TAKEOVER_AT + 1, frm + TAKEOVER_AT + 1 + gap):
        np.testing.assert_allclose(table["observation.state"][i], held, rtol=1e-6, atol=1e-7)
        assert table["action"][i] == table["observation.state"][i]  # the operator's command is not recorded
    after = trace.steps[TAKEOVER_AT + 1]
    np.testing.assert_allclose(table["action"][frm + TAKEOVER_AT + 1 + gap],
                               [after.action[k] for k in trace.actuator_keys], rtol=1e-6, atol=1e-7)
    # an episode without a takeover has none flagged
    assert episode_rows(dataset)[0]["operator_frames"] == 0


def test_a_takeover_is_found_on_the_rollouts_send_stamps_not_the_recorders_delivery_times():
    """A step the recorder got late hides a short takeover in the log times; the commands' stamps still show it.

    A ROS recording's log times are when the recorder got each message; ``ActionCommand.sent`` is the rollout's
    clock at the send.
    """
    from strands_robots.monitoring.report import EpisodeTrace, StepPoint

    period_ns, gap_ns, resumed_at = 20_000_000, 80_000_000, 15
    t0 = 1_700_000_000_000_000_000
    sent = [t0 + i * period_ns + (gap_ns if i >= resumed_at else 0) for i in range(30)]
    delivered = list(sent)
    delivered[resumed_at - 1] += 70_000_000  # the last step before the takeover reached the recorder 70 ms late

    def trace(stamped: bool) -> EpisodeTrace:
        steps = [StepPoint(t=0.0, index=i, resolution="full", unresolved=(), reasons=(), deadline_missed=False,
                           action={"j": 0.1 * i}, observation={"j.pos": 0.1 * i}, log_ns=delivered[i],
                           elapsed_s=0.001 + 0.02 * i, chunk_index=i % 8 if i < resumed_at else i - resumed_at)
                 for i in range(30)]
        return EpisodeTrace(run_id="r", start_ns=t0, actuator_keys=("j",), control_frequency=50.0, steps=steps,
                            episode={"taken_over": True}, action_ns=delivered,
                            action_sent_ns={i: ns for i, ns in enumerate(sent)} if stamped else {})

    frames = lerobot.episode_frames(trace(stamped=True), 50.0, ["j"])
    assert frames.control_source.tolist() == [0] * resumed_at + [1] * 4 + [0] * 15  # 80 ms at 50 Hz
    assert lerobot.episode_frames(trace(stamped=False), 50.0, ["j"]).control_source.sum() == 0


def test_a_runs_commands_that_reached_the_recorder_before_its_started_event_keep_their_send_stamps():
    """The first commands can be delivered before the run's Started (another topic): matched by run_id, not time."""
    from types import SimpleNamespace

    from strands_robots.monitoring import report

    started_ns = 1_700_000_000_000_000_000
    trace = report.EpisodeTrace(run_id="r", start_ns=started_ns, end_ns=started_ns + 10**9)

    def command(step: int, log_ns: int, run_id: str = "r"):
        sent = started_ns - 5_000_000 + step * 20_000_000
        msg = SimpleNamespace(run_id=run_id, step_index=step, sent=SimpleNamespace(sec=sent // 10**9,
                                                                                    nanosec=sent % 10**9))
        return (log_ns, "ActionCommand", msg, "/station/action_commands")

    others = [command(0, started_ns - 3_000_000), command(1, started_ns - 1_000_000),
              command(2, started_ns + 40_000_000), command(0, started_ns + 2_000_000, run_id="another run")]
    report._attach(trace, others)
    assert sorted(trace.action_sent_ns) == [0, 1, 2]
    assert trace.action_sent_ns[0] == started_ns - 5_000_000  # this run's, not the other run's step 0
    assert len(trace.action_ns) == 2  # the log times inside the run's window: the other run's and step 2


def _live_run(behind_ns: int):
    """Make a station recording's run (report._attach's input) whose recorder took the events and commands late.

    The run starts at ``t0`` on the rollout's clock and sends 50 steps at 50 Hz; the camera node publishes a frame
    every 66 ms from 1 s before the run on, each stamped with the time of what it shows and taken by the recorder
    20 ms later; the run's observer events and commands (reliable, deep queues) reach it ``behind_ns`` late.
    """
    from types import SimpleNamespace

    from strands_robots.monitoring import report
    from strands_robots.monitoring.report import EpisodeTrace, StepPoint

    t0, period = 1_700_000_000_000_000_000, 20_000_000
    sent = [t0 + 10_000_000 + i * period for i in range(50)]
    end_utc = sent[-1] + 10_000_000

    def time_of(ns):
        return SimpleNamespace(sec=ns // 10**9, nanosec=ns % 10**9)

    steps = [StepPoint(t=0.0, index=i, resolution="full", unresolved=(), reasons=(), deadline_missed=False,
                       action={"j": 0.01 * i}, observation={"j.pos": 0.01 * i}, log_ns=ns + behind_ns,
                       elapsed_s=0.001 + 0.02 * i, chunk_index=i % 8) for i, ns in enumerate(sent)]
    trace = EpisodeTrace(run_id="r", start_ns=t0 + behind_ns, started=True, actuator_keys=("j",),
                         control_frequency=50.0, end_ns=end_utc + behind_ns, steps=steps,
                         start_utc_ns=t0, end_utc_ns=end_utc)
    others = []
    for k in range(40):  # the frames, near the present in the recorder
        stamp = t0 - 10**9 + k * 66_000_000
        msg = SimpleNamespace(header=SimpleNamespace(stamp=time_of(stamp)), format="jpeg", data=b"frame%d" % k)
        others.append((stamp + 20_000_000, "CompressedImage", msg, "/st/scene/image_raw/compressed"))
    for i, ns in enumerate(sent):  # the commands, late
        msg = SimpleNamespace(run_id="r", step_index=i, sent=time_of(ns))
        others.append((ns + behind_ns, "ActionCommand", msg, "/st/action_commands"))
    others.sort(key=lambda r: r[0])
    report._attach(trace, others)
    return trace, sent


def test_a_recorder_behind_on_the_events_still_gives_a_run_its_frames_from_its_first_step():
    """Frames go by the time of what they show: a recorder 2 s behind on the events leaves no frame out.

    A recorder that falls behind takes a reliable topic's deep queue (events, commands) seconds late while the
    frames' few best-effort slots stay near the present: by log times the run's first 2 s of frames come before
    its Started event, and its first frames before any image.
    """
    trace, sent = _live_run(behind_ns=2 * 10**9)
    frames = lerobot.episode_frames(trace, 50.0, ["j"], ["scene"])
    assert frames.before_images == 0 and len(frames.timestamps) == 50
    topic = "/st/scene/image_raw/compressed"
    assert trace.images_at_start[topic][2] == b"frame15"  # stamped 10 ms before the run's start
    for k, j in enumerate(frames.step_index):  # the latest frame stamped at or before the step's send
        latest = max(n for n in range(40) if sent[0] - 10_000_000 - 10**9 + n * 66_000_000 <= sent[j])
        assert frames.images["scene"][k] == b"frame%d" % latest


def test_tasks_parquet_maps_each_instruction_to_its_task_index(dataset):
    tasks = pq.read_table(dataset / "meta/tasks.parquet").to_pydict()
    assert tasks == {"task_index": [0, 1], "task": ["pick the cube", "stack the blocks"]}
    rows = episode_rows(dataset)
    assert [r["tasks"] for r in rows] == [["pick the cube"], ["pick the cube"], ["stack the blocks"]]
    table = data_table(dataset).to_pydict()
    for row in rows:
        expected = tasks["task"].index(row["tasks"][0])
        assert set(table["task_index"][row["dataset_from_index"]:row["dataset_to_index"]]) == {expected}


def test_stats_json_equals_numpy_over_the_data(dataset):
    stats = json.loads((dataset / "meta/stats.json").read_text())
    table = data_table(dataset).to_pydict()
    assert set(stats) == set(table)
    for name, values in table.items():
        array = np.asarray(values, dtype=np.float64)
        if array.ndim == 1:
            array = array[:, None]
        for stat, fn in (("mean", np.mean), ("std", np.std), ("min", np.min), ("max", np.max)):
            np.testing.assert_allclose(stats[name][stat], fn(array, axis=0), rtol=1e-9, atol=1e-12,
                                       err_msg=f"{name} {stat}")
        assert stats[name]["count"] == [len(array)]
    rows = episode_rows(dataset)
    frm, to = rows[1]["dataset_from_index"], rows[1]["dataset_to_index"]
    assert rows[1]["stats/control_source/max"] == [1.0]
    np.testing.assert_allclose(rows[1]["stats/observation.state/mean"],
                               np.mean(np.asarray(table["observation.state"][frm:to], dtype=np.float64), axis=0))


def test_episode_rows_carry_the_end_condition_and_null_scores_without_a_station(dataset, recordings):
    rows = episode_rows(dataset)
    for row, path in zip(rows, recordings[:3]):
        trace = trace_of(path)
        assert row["end_condition"] == trace.ended["stopped_reason"] == "budget"
        assert row["end_detail"] == trace.ended["end_detail"]
        assert row["run_id"] == trace.run_id and row["recording"] == path.name
        assert (row["scored"], row["success"], row["score"], row["taken_over"]) == (None, None, None, None)
        assert row["outcome"] is None and row["task_id"] == ""
    summary = json.loads((dataset / "meta/summary.json").read_text())  # no station result: nothing to count
    assert summary["job"]["success"]["trials"] == 0 and summary["job"]["success"]["rate"] is None
    assert summary["tasks"] == {}


def test_resampling_to_half_the_rate_takes_every_other_step(recordings, tmp_path):
    out = tmp_path / "half"
    assert lerobot.main([str(recordings[0]), "-o", str(out), "--fps", "25"]) == 0
    trace = trace_of(recordings[0])
    table = data_table(out).to_pydict()
    assert len(table["index"]) == 10  # 20 steps at 50 Hz over 0.38 s: frames at 0, 0.04, ... 0.36 s
    assert json.loads((out / "meta/info.json").read_text())["fps"] == 25.0
    for k in range(10):
        step = trace.steps[2 * k]
        assert table["timestamp"][k] == pytest.approx(k / 25.0, abs=1e-6)
        np.testing.assert_allclose(table["observation.state"][k],
                                   [step.observation[f"{key}.pos"] for key in trace.actuator_keys], atol=1e-7)


def test_mixed_control_frequencies_are_refused_without_fps_in_one_line(recordings, tmp_path, capsys):
    a, _, _, d = recordings
    out = tmp_path / "mixed"
    assert cli_main(["export", "lerobot", str(a), str(d), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "different control frequencies (30, 50 Hz)" in err and "--fps" in err
    assert not out.exists()
    assert cli_main(["export", "lerobot", str(a), str(d), "-o", str(out), "--fps", "30"]) == 0
    rows = episode_rows(out)
    assert [r["length"] for r in rows] == [12, 12]  # 20 steps over 0.38 s at 30 fps; 12 at 30 Hz stay 12


def test_a_file_that_is_not_a_recording_is_refused_in_one_line(tmp_path, capsys):
    bogus = tmp_path / "notes.mcap"
    bogus.write_text("not an mcap file\n")
    out = tmp_path / "out"
    assert cli_main(["export", "lerobot", str(bogus), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bogus} is not a recording MCAP" in err
    assert not out.exists()
    assert cli_main(["export", "lerobot", str(tmp_path / "absent.mcap"), "-o", str(out)]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_non_empty_output_directory_is_never_written_into(recordings, tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine\n")
    assert cli_main(["export", "lerobot", str(recordings[0]), "-o", str(out)]) == 2
    assert "is not an empty directory" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def station_recording(src: Path, dst: Path, *, cameras: "dict[str, int]", result: "dict | None") -> dict:
    """Rewrite an episode recording as ``strands-robots record`` holds a station's: camera frames and the result.

    Every message of ``src`` is copied with its log time; per camera, a JPEG (``CompressedImage`` on
    ``/station/<camera>/image_raw/compressed``) of a uniform gray whose level is the step number times the
    camera's factor, 1 ms before each step's action was sent; ``result`` as the station's ``EpisodeResult`` after
    the episode.
    Returns ``{camera: [jpeg bytes of step 0, 1, ...]}``.
    """
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
    from mcap_ros2.writer import Writer

    from strands_robots.cameras.jpeg import encode
    from strands_robots.conversions.camera import COMPRESSED_FORMAT  # what the camera node writes
    from strands_robots.rollout.msg_schema import MsgDefinitions

    definitions = MsgDefinitions(None)
    frames: dict[str, list[bytes]] = {cam: [] for cam in cameras}
    with open(src, "rb") as handle, open(dst, "wb") as out:
        writer = Writer(out)
        schemas: dict = {}

        def schema(name, text=None):
            if name not in schemas:
                schemas[name] = writer.register_msgdef(name, text or definitions.full_text(name))
            return schemas[name]

        last = 0
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        for sch, channel, message, decoded in reader.iter_decoded_messages(log_time_order=True):
            if channel.topic.endswith("/action_commands"):
                step = int(message.sequence)  # the step index
                for cam, factor in cameras.items():
                    image = np.full((48, 64, 3), (step * factor) % 256, dtype=np.uint8)
                    data = encode(image, quality=90)
                    frames[cam].append(data)
                    stamp = message.log_time - 1_000_000
                    writer.write_message(f"/station/{cam}/image_raw/compressed",
                                         schema("sensor_msgs/msg/CompressedImage"),
                                         {"header": {"stamp": {"sec": stamp // 10**9, "nanosec": stamp % 10**9},
                                                     "frame_id": cam}, "format": COMPRESSED_FORMAT, "data": data},
                                         log_time=stamp, publish_time=stamp)
            writer.write_message(channel.topic, schema(sch.name, sch.data.decode()), decoded,
                                 log_time=message.log_time, publish_time=message.publish_time,
                                 sequence=message.sequence)
            last = max(last, message.log_time)
        if result is not None:
            message = {"items": [], "task": {"parameters": [], "scoring": {"items": []}}, **result}
            writer.write_message("/station/station/episode_results", schema("strands_robots_msgs/msg/EpisodeResult"),
                                 message, log_time=last + 1, publish_time=last + 1)
        writer.finish()
    return frames


def test_camera_frames_become_image_features_with_the_jpeg_bytes(recordings, tmp_path):
    from PIL import Image

    src = recordings[0]
    trace = trace_of(src)
    station = tmp_path / "station.mcap"
    frames = station_recording(src, station, cameras={"scene": 5, "wrist": 9}, result=None)
    out = tmp_path / "cams"
    assert lerobot.main([str(station), "-o", str(out)]) == 0
    info = json.loads((out / "meta/info.json").read_text())
    for cam in ("scene", "wrist"):
        assert info["features"][f"observation.images.{cam}"] == {
            "dtype": "image", "shape": [48, 64, 3], "names": ["height", "width", "channels"]}
    table = data_table(out)
    assert table.schema.field("observation.images.scene").type == pa.struct(
        [("bytes", pa.binary()), ("path", pa.string())])
    data = table.to_pydict()
    assert len(data["index"]) == len(trace.steps) == len(frames["scene"])
    for k in range(len(trace.steps)):  # each frame holds the camera frame taken for its step
        for cam in ("scene", "wrist"):
            assert data[f"observation.images.{cam}"][k]["bytes"] == frames[cam][k]
    with Image.open(__import__("io").BytesIO(data["observation.images.wrist"][7]["bytes"])) as image:
        assert abs(int(np.asarray(image).mean()) - 63) <= 2  # step 7 x 9
    assert "observation.images.scene" not in json.loads((out / "meta/stats.json").read_text())


def test_station_episode_rows_carry_end_condition_success_and_score(recordings, tmp_path):
    a, b = recordings[0], recordings[1]
    results = [
        {"episode_id": "ep_0000", "end_condition": "timeout", "scored": True, "success": True, "score": 0.75,
         "taken_over": False, "end_detail": "", "run_id": trace_of(a).run_id,
         "task": {"task_id": "reach", "parameters": [], "scoring": {"items": []}}},
        {"episode_id": "ep_0001", "end_condition": "policy_completed", "scored": True, "success": False,
         "score": 0.25, "taken_over": True, "end_detail": "the policy ended it", "run_id": trace_of(b).run_id,
         "task": {"task_id": "reach", "parameters": [], "scoring": {"items": []}}},
    ]
    files = []
    for n, (src, result) in enumerate(zip((a, b), results)):
        files.append(tmp_path / f"station_{n}.mcap")
        station_recording(src, files[-1], cameras={}, result=result)
    out = tmp_path / "scored"
    assert lerobot.main([str(f) for f in files] + ["-o", str(out)]) == 0
    rows = episode_rows(out)
    for row, result in zip(rows, results):
        for name in ("episode_id", "end_condition", "scored", "success", "score", "taken_over", "end_detail",
                     "run_id"):
            assert row[name] == result[name], name
    assert rows[0]["operator_frames"] == 0
    assert rows[1]["operator_frames"] == operator_gap_frames(trace_of(b), 50.0)
    # what feeds the figures: the task and whether the episode is an outcome (a taken-over one is not)
    assert [(r["task_id"], r["outcome"]) for r in rows] == [("reach", "scored"), ("reach", "taken_over")]
    summary = json.loads((out / "meta/summary.json").read_text())
    job = summary["job"]
    assert (job["success"]["successes"], job["success"]["trials"], job["success"]["method"]) == (1, 1, "wilson")
    assert job["success"]["low"] == pytest.approx(0.2065, abs=1e-4) and job["success"]["high"] == 1.0
    assert job["score"]["n"] == 1 and job["score"]["mean"] == 0.75 and job["score"]["low"] is None
    assert job["coverage"]["scored"] == ["ep_0000"] and job["coverage"]["taken_over"] == ["ep_0001"]
    assert list(summary["tasks"]) == ["reach"] and summary["tasks"]["reach"]["success"] == job["success"]
    # a station that says nobody took over: the same gap is not flagged
    quiet = tmp_path / "quiet.mcap"
    station_recording(b, quiet, cameras={}, result={**results[1], "taken_over": False})
    assert lerobot.main([str(quiet), "-o", str(tmp_path / "quiet")]) == 0
    (row,) = episode_rows(tmp_path / "quiet")
    assert row["operator_frames"] == 0 and row["length"] == len(trace_of(b).steps)


def test_an_attempt_the_station_did_not_keep_is_left_out_and_named_and_not_counted(recordings, tmp_path, capsys):
    a, b = recordings[0], recordings[1]
    kept = {"episode_id": "ep_0001", "end_condition": "timeout", "scored": True, "success": True, "score": 1.0,
            "taken_over": False, "end_detail": "", "run_id": trace_of(b).run_id,
            "task": {"task_id": "reach", "parameters": [], "scoring": {"items": []}}}
    discarded, listed = tmp_path / "station_0.mcap", tmp_path / "station_1.mcap"
    station_recording(a, discarded, cameras={}, result=None)  # ep_0000: discarded, so no result of the station
    station_recording(b, listed, cameras={}, result=kept)
    out = tmp_path / "kept"
    assert lerobot.main([str(discarded), str(listed), "-o", str(out)]) == 0
    rows = episode_rows(out)
    assert [(r["episode_id"], r["run_id"]) for r in rows] == [("ep_0001", trace_of(b).run_id)]
    err = capsys.readouterr().err
    assert (f"station_0.mcap: run {trace_of(a).run_id[:8]}: not one of the job's episodes (the recording holds no "
            "station result for it") in err and "left out" in err
    summary = json.loads((out / "meta/summary.json").read_text())
    assert {k: v for k, v in summary["job"]["coverage"].items() if v} == {"scored": ["ep_0001"]}
    # recordings holding no station result at all (a rollout's own episode files): every whole run is exported
    assert lerobot.main([str(discarded), "-o", str(tmp_path / "alone")]) == 0
    assert [r["run_id"] for r in episode_rows(tmp_path / "alone")] == [trace_of(a).run_id]


def test_a_downloaded_episode_files_name_is_its_episode_id(recordings, tmp_path):
    import shutil

    downloaded = tmp_path / "ep_0007.mcap"  # as `job recordings` names the station's ep_0007
    shutil.copyfile(recordings[0], downloaded)
    assert lerobot.main([str(downloaded), "-o", str(tmp_path / "out")]) == 0
    (row,) = episode_rows(tmp_path / "out")
    assert row["episode_id"] == "ep_0007" and row["recording"] == "ep_0007.mcap"


def test_video_option_writes_one_h264_file_per_camera_holding_every_frame(recordings, tmp_path):
    av = pytest.importorskip("av", reason="PyAV is not installed (requirements/python.txt)")
    a, c = recordings[0], recordings[2]
    files = [tmp_path / "s0.mcap", tmp_path / "s1.mcap"]
    for src, dst in zip((a, c), files):
        station_recording(src, dst, cameras={"scene": 5}, result=None)
    out = tmp_path / "video"
    assert lerobot.main([str(f) for f in files] + ["-o", str(out), "--video"]) == 0
    info = json.loads((out / "meta/info.json").read_text())
    key = "observation.images.scene"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert info["features"][key] == {
        "dtype": "video", "shape": [48, 64, 3], "names": ["height", "width", "channels"],
        "info": {"video.height": 48, "video.width": 64, "video.codec": "h264", "video.pix_fmt": "yuv420p",
                 "video.is_depth_map": False, "video.fps": 50, "video.channels": 3, "has_audio": False}}
    assert key not in data_table(out).column_names  # video features live in the MP4, not in parquet
    rows = episode_rows(out)
    assert [(r[f"videos/{key}/from_timestamp"], r[f"videos/{key}/to_timestamp"]) for r in rows] == [
        (0.0, 20 / 50), (20 / 50, 35 / 50)]
    assert [(r[f"videos/{key}/chunk_index"], r[f"videos/{key}/file_index"]) for r in rows] == [(0, 0), (0, 0)]
    with av.open(str(out / f"videos/{key}/chunk-000/file-000.mp4")) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264" and float(stream.average_rate) == 50.0
        levels = [float(frame.to_ndarray(format="rgb24").mean()) for frame in container.decode(stream)]
    expected = [(k * 5) % 256 for k in range(20)] + [(k * 5) % 256 for k in range(15)]  # each step's gray level
    assert len(levels) == info["total_frames"] == 35
    np.testing.assert_allclose(levels, expected, atol=3)


def joined_late(src: Path, dst: Path, *, at_step: int, keep_started: bool = False) -> None:
    """Rewrite an episode recording as a recorder that joined at step ``at_step`` holds it.

    Every message logged before that step's event is dropped (the Started event too, unless ``keep_started``).
    """
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
    from mcap_ros2.writer import Writer

    with open(src, "rb") as handle:
        messages = list(make_reader(handle, decoder_factories=[DecoderFactory()]).iter_decoded_messages(
            log_time_order=True))
    joined = next(m.log_time for _, c, m, d in messages
                  if c.topic.endswith("/observer_events") and d.kind == "step" and d.step[0].applied_action_index
                  == at_step)
    with open(dst, "wb") as out:
        writer = Writer(out)
        schemas: dict = {}
        for sch, channel, message, decoded in messages:
            started = channel.topic.endswith("/observer_events") and decoded.kind == "started"
            if message.log_time < joined and not (keep_started and started):
                continue
            if sch.name not in schemas:
                schemas[sch.name] = writer.register_msgdef(sch.name, sch.data.decode())
            writer.write_message(channel.topic, schemas[sch.name], decoded, log_time=message.log_time,
                                 publish_time=message.publish_time, sequence=message.sequence)
        writer.finish()


def test_a_run_recorded_from_after_its_start_is_left_out_with_the_steps_the_file_holds(recordings, tmp_path, capsys):
    a, _, c, _ = recordings
    late = tmp_path / "late.mcap"
    joined_late(c, late, at_step=6)
    run = trace_of(c).run_id
    out = tmp_path / "ds"
    assert lerobot.main([str(a), str(late), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err == (f"strands-robots export lerobot: late.mcap: run {run[:8]}: the recording holds steps 6-14 only "
                   "(it began after the run started); left out\n")
    rows = episode_rows(out)
    assert [r["run_id"] for r in rows] == [trace_of(a).run_id]  # the complete run only
    assert json.loads((out / "meta/info.json").read_text())["total_frames"] == len(trace_of(a).steps)
    # alone, nothing is left to export: refused, each run named
    assert lerobot.main([str(late), "-o", str(tmp_path / "none")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "steps 6-14 only" in lines[0] and "no run is recorded from its start" in lines[1]
    assert not (tmp_path / "none").exists()
    # its Started in the file but its first steps not (a recorder matched on one topic and not yet on the other)
    gap = tmp_path / "gap.mcap"
    joined_late(c, gap, at_step=3, keep_started=True)
    assert lerobot.main([str(gap), "-o", str(tmp_path / "gap")]) == 2
    assert f"run {run[:8]}: the recording holds steps 3-14 only (its steps 0-2 are missing)" in capsys.readouterr().err


def test_export_of_an_unknown_format_is_refused_naming_the_formats(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        cli_main(["export", "rlds", "x.mcap", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and err.startswith("usage: strands-robots export ")
    assert "invalid choice: 'rlds'" in err and "lerobot" in err.splitlines()[-1]
    assert not (tmp_path / "o").exists()
