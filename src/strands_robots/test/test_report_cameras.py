"""strands-robots report with cameras: a contact sheet per episode and an MP4 per camera, from a recording.

The recording is written by the project's recorder (``EpisodeRecorder``): observer events and, for two cameras of
different sizes, real ``sensor_msgs/CompressedImage`` CDR (rclpy's serializer) of the ``pattern`` adapter's
frames, whose inverted square moves each frame. The sheet's tiles are compared with the frames themselves and
the MP4s are decoded back with PyAV.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mcap_ros2", reason="mcap-ros2-support is not installed (requirements/python.txt)")
av = pytest.importorskip("av", reason="PyAV is not installed (requirements/python.txt)")
pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")

from monitor_helpers import KEYS, ended, started, step  # noqa: E402
from PIL import Image  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402

from strands_robots.cameras import jpeg, pattern  # noqa: E402
from strands_robots.cameras.config import load_camera_set  # noqa: E402
from strands_robots.monitoring import report  # noqa: E402
from strands_robots.monitoring.camera_sheets import frame_rate, sheet_layout  # noqa: E402
from strands_robots.conversions import camera as camera_msgs  # noqa: E402
from strands_robots.rollout.recording import EpisodeRecorder  # noqa: E402

T0 = 1_700_000_000_000_000_000
SIZES = {"scene": (224, 224, 20), "wrist": (160, 120, 7)}   # width, height, frames
PERIOD_NS = 66_666_667  # 15 fps


@pytest.fixture
def recording(tmp_path):
    """One episode with both cameras' frames; return (path, {camera: [decoded frame, ...]})."""
    text = "adapter: pattern\ncameras:\n" + "".join(
        f"  {c}: {{mjcf_camera: scene, width: {w}, height: {h}, fps: 15}}\n" for c, (w, h, _) in SIZES.items())
    (tmp_path / "cams.yaml").write_text(text)
    source = pattern.cameras(load_camera_set(str(tmp_path / "cams.yaml")))
    path = tmp_path / "episode_0000.mcap"
    frames: dict = {c: [] for c in SIZES}
    with EpisodeRecorder.open(path, control_frequency=50.0, fps=50.0, actuator_keys=KEYS,
                              topic_prefix="/station") as rec:
        rec.write_event(started("run-cams"))
        for i in range(70):
            rec.write_event(step("run-cams", i + 1, i))
        for cam, (_, _, count) in SIZES.items():
            for n in range(count):
                image = source.render(cam)
                stamp = T0 + 10_000_000 + n * PERIOD_NS
                msg = camera_msgs.compressed_msg(jpeg.encode(image, 90), _time(stamp), f"{cam}_optical_frame")
                rec.write_raw(f"/station/{cam}/image_raw/compressed", "sensor_msgs/msg/CompressedImage",
                              serialize_message(msg), stamp)
                frames[cam].append(jpeg.decode(bytes(msg.data)))
        rec.write_event(ended("run-cams", 71))
    return path, frames


def _time(ns: int):
    from builtin_interfaces.msg import Time

    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _decode_video(path):
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def test_report_writes_a_contact_sheet_per_episode_and_an_mp4_per_camera(recording, tmp_path):
    path, frames = recording
    written = report.write_report([path], tmp_path / "out")
    names = sorted(p.name for p in written)
    base = "run_run-cams"  # no station result and not a downloaded episode's file name: named by its run
    assert names == sorted([f"{base}.png", f"{base}_cameras.png", f"{base}_scene.mp4", f"{base}_wrist.mp4",
                            "episode_0000_job.png"])
    # The sheet: every camera's frames (fewer than per_camera here: all of them), each tile the frame itself.
    sheet = np.asarray(Image.open(tmp_path / "out" / f"{base}_cameras.png").convert("RGB"))
    layout = sheet_layout({"scene": 20, "wrist": 7}, (160, 160))
    assert sheet.shape == (layout.height, layout.width, 3)
    assert [i for i, _, _ in layout.tiles["scene"]] == list(range(20))
    assert [i for i, _, _ in layout.tiles["wrist"]] == list(range(7))
    for cam in ("scene", "wrist"):
        for index, x, y in layout.tiles[cam][:: 3]:
            expected = np.asarray(Image.fromarray(frames[cam][index]).resize((160, 160), Image.BILINEAR))
            tile = sheet[y: y + 160, x: x + 160]
            assert np.array_equal(tile, expected), f"{cam} tile {index} is not frame {index}"
    # The videos: every frame, in order, at the camera's size and rate.
    for cam, (w, h, count) in SIZES.items():
        decoded = _decode_video(tmp_path / "out" / f"{base}_{cam}.mp4")
        assert len(decoded) == count
        assert decoded[0].shape == (h, w, 3)
        for k in (0, count // 2, count - 1):
            here = np.abs(decoded[k].astype(int) - frames[cam][k].astype(int)).mean()
            other = np.abs(decoded[k].astype(int) - frames[cam][(k + 3) % count].astype(int)).mean()
            assert here < 6.0 < other, f"{cam} video frame {k}: {here:.1f} vs another frame {other:.1f}"
        with av.open(str(tmp_path / "out" / f"{base}_{cam}.mp4")) as container:
            assert float(container.streams.video[0].average_rate) == pytest.approx(15.0, abs=0.1)


def test_a_downloaded_episodes_report_files_are_named_by_its_episode_id(recording, tmp_path):
    import shutil

    path, _ = recording
    downloaded = tmp_path / "ep_0003.mcap"  # the name `job recordings` gives the station's episode ep_0003
    shutil.copyfile(path, downloaded)
    written = report.write_report([downloaded], tmp_path / "out", video=False)
    assert sorted(p.name for p in written) == ["ep_0003.png", "ep_0003_cameras.png", "ep_0003_job.png"]
    traces, _ = report.load_recording(downloaded)
    assert [t.episode_id for t in traces] == ["ep_0003"]


def test_the_sheet_samples_a_long_episode_evenly_with_the_first_and_last_frames():
    layout = sheet_layout({"scene": 300}, (160, 120), columns=8, per_camera=24)
    indices = [i for i, _, _ in layout.tiles["scene"]]
    assert len(indices) == 24 and indices[0] == 0 and indices[-1] == 299
    assert max(np.diff(indices)) - min(np.diff(indices)) <= 1  # evenly spaced
    assert layout.height > 3 * (120 + 14)  # three rows of tiles
    assert frame_rate([0, 66_000_000, 133_000_000, 200_000_000]) == pytest.approx(15.0, abs=0.1)
    assert frame_rate([5]) == 15.0


def test_report_without_video_writes_only_the_sheet(recording, tmp_path, capsys):
    path, _ = recording
    assert report.main([str(path), "-o", str(tmp_path / "o2"), "--no-video"]) == 0
    printed = capsys.readouterr().out.split()
    assert any(p.endswith("_cameras.png") for p in printed) and not any(p.endswith(".mp4") for p in printed)


def test_an_in_process_recording_holds_every_frame_rendered_and_reports_it(tmp_path):
    """run_policy(record=True) with cameras: each frame the policy was shown is in the file, as over ROS."""
    from strands_robots.cameras.episode_frames import COMPRESSED_FORMAT
    from strands_robots.monitoring.recorded_frames import read_cameras
    from strands_robots.conversions.camera import COMPRESSED_FORMAT as ROS_FORMAT
    from strands_robots.simulation import Simulation

    assert COMPRESSED_FORMAT == ROS_FORMAT
    cams = load_camera_set().with_adapter("pattern")
    sim = Simulation.with_robot("alice", cameras=cams)
    steps = []
    out = sim.run_policy("alice", "mock", n_steps=40, control_frequency=50.0, fast_mode=True, action_horizon=1,
                         record=True, recording_dir=str(tmp_path), fps=50.0,
                         observer=lambda e: steps.append(e) if type(e).__name__ == "RunPolicyStep" else None)
    assert out["status"] == "success", out
    (path,) = tmp_path.glob("*.mcap")
    recorded = read_cameras(path)
    assert sorted(recorded.frames) == ["/scene/image_raw/compressed", "/wrist/image_raw/compressed"]
    for n, cam in enumerate(("scene", "wrist")):
        frames = recorded.frames[f"/{cam}/image_raw/compressed"]
        shown = {s.camera_stamp_ns[n] for s in steps}              # the frames the steps were observed with
        assert [f.stamp_ns for f in frames] == sorted(shown)       # each rendered frame once, none missing
        assert 10 <= len(frames) <= 14                              # 15 fps over 0.8 s of robot time
        assert [s for s, _, _ in recorded.infos[f"/{cam}/camera_info"]] == sorted(shown)
        assert recorded.infos[f"/{cam}/camera_info"][0][1:] == (224, 224)
        assert frames[0].format == COMPRESSED_FORMAT
    written = report.write_report([path], tmp_path / "out")
    for cam in ("scene", "wrist"):
        (video,) = [p for p in written if p.name.endswith(f"_{cam}.mp4")]
        assert len(_decode_video(video)) == len(recorded.frames[f"/{cam}/image_raw/compressed"])
