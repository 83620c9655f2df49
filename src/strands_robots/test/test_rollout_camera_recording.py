"""The rollout node's episode recording holds the cameras' JPEGs and camera infos, every frame of the episode.

Three processes in one namespace (the arm driver, the camera node, the rollout node with ``cameras:=scene,wrist``;
:class:`test_rollout_cameras.CameraStation`) and this test's client node, which also takes every JPEG the camera
node publishes (a deep best-effort queue) as the witness of what was published. The episode's file is read back
with the project's readers (:mod:`strands_robots.monitoring.recorded_frames`, ``report.load_recording``).
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mcap_ros2", reason="mcap-ros2-support is not installed (requirements/python.txt)")

from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import CompressedImage  # noqa: E402
from test_rollout_cameras import CameraStation, cameras_file  # noqa: E402,F401  (cameras_file: the module fixture)

from ros_harness import wait_for  # noqa: E402
from strands_robots.monitoring.recorded_frames import decode, read_cameras  # noqa: E402
from strands_robots.monitoring import report  # noqa: E402
from strands_robots.monitoring.report import load_recording  # noqa: E402

NS_PER_S = 1_000_000_000
MARGIN_NS = 300_000_000  # a frame published this close to the episode's start or end may be in flight


def test_the_episode_recording_holds_every_camera_frame_published_during_the_episode(tmp_path):
    s = CameraStation()
    witnessed: dict = {"scene": [], "wrist": []}
    lock = threading.Lock()
    qos = copy.copy(qos_profile_sensor_data)
    qos.depth = 500

    def keep(cam, msg):
        with lock:
            witnessed[cam].append(msg.header.stamp.sec * NS_PER_S + msg.header.stamp.nanosec)

    try:
        for cam in witnessed:
            s.node.create_subscription(CompressedImage, f"{cam}/image_raw/compressed",
                                       lambda m, c=cam: keep(c, m), qos)
        assert wait_for(lambda: all(witnessed[c] for c in witnessed), 60.0), "no JPEG from the camera node"
        result = s.run(max_steps=100, duration_s=10.0, record=True, recording_dir=str(tmp_path))
        assert result.ended.outcome == "ok", (result.message, result.ended.error_message)
        path = Path(result.ended.recording_path)
    finally:
        s.close()
    assert path.parent == tmp_path and path.is_file()
    recorded = read_cameras(path)
    traces, _ = load_recording(path)
    (trace,) = traces
    start_ns, end_ns = trace.start_ns, trace.end_ns
    for cam in ("scene", "wrist"):
        topic = f"{s.namespace}/{cam}/image_raw/compressed"
        frames = recorded.frames[topic]                       # under the live name
        stamps = [f.stamp_ns for f in frames]
        assert len(set(stamps)) == len(stamps) == len(trace.images[topic])  # the report's reader sees them all
        # every frame the camera node published while the episode ran (the witness took them) is in the file
        with lock:
            during = [t for t in witnessed[cam] if start_ns + MARGIN_NS <= t <= end_ns - MARGIN_NS]
        assert len(during) >= 10, f"{cam}: only {len(during)} frames published in a 2 s episode"
        missing = sorted(set(during) - set(stamps))
        assert not missing, f"{cam}: {len(missing)} of {len(during)} published frames not recorded"
        assert all(start_ns <= f.log_ns <= end_ns for f in frames)  # recorded only while the episode ran
        assert len(recorded.infos[f"{s.namespace}/{cam}/camera_info"]) >= len(during)
        image = decode(frames[len(frames) // 2])
        assert image.shape == (224, 224, 3) and image.dtype == np.uint8
    # strands-robots report: the episode's contact sheet and an MP4 per camera holding every recorded frame
    av = pytest.importorskip("av", reason="PyAV is not installed (requirements/python.txt)")
    written = report.write_report([path], tmp_path / "report")
    for cam in ("scene", "wrist"):
        (video,) = [p for p in written if p.name.endswith(f"_{cam}.mp4")]
        with av.open(str(video)) as container:
            decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
        assert len(decoded) == len(recorded.frames[f"{s.namespace}/{cam}/image_raw/compressed"])
        assert decoded[0].shape == (224, 224, 3)
    assert any(p.name.endswith("_cameras.png") for p in written)
