"""Camera topics in the recordings: a real camera node's every JPEG frame and camera info, read back by the reader.

The camera node (its own process, MuJoCo renders) and ``strands-robots record`` (its own process) run over real
DDS; the node renders nothing before the driver's first ``joint_states``, so every frame it publishes is published
after the recorder subscribed. Its closing line says how many frames (and JPEGs) it published per camera.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("mcap_ros2", reason="mcap-ros2-support is not installed (requirements/python.txt)")

from mcap.reader import make_reader  # noqa: E402
from rclpy.time import Time  # noqa: E402
from monitor_helpers import start_module  # noqa: E402
from test_camera_node import CameraProcess  # noqa: E402  (the camera node process and a probe playing the driver)

from recorder_lines import Lines, end, wait_matched  # noqa: E402
from ros_harness import wait_for  # noqa: E402
from strands_robots.monitoring.recorded_frames import camera_of, decode, read_cameras  # noqa: E402

CAMERAS = ("scene", "wrist")


def published_counts(lines: list) -> dict:
    """``{camera: (frames, jpegs)}`` from the camera node's closing ``frames published:`` line."""
    text = "".join(lines)
    line = [ln for ln in text.splitlines() if "frames published:" in ln]
    assert line, f"the camera node never said what it published:\n{text[-2000:]}"
    return {m.group(1): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"(\w+) (\d+) \((\d+) compressed\)", line[-1])}


def subscribers(cam: CameraProcess, topic: str) -> int:
    return cam.node.count_subscribers(f"{cam.ns}/{topic}")


def test_record_holds_every_frame_the_camera_node_published_under_its_live_name(tmp_path):
    cam = CameraProcess(joints=False)  # no joint_states yet: the node renders and publishes nothing
    out = tmp_path / "station.mcap"
    recorder = None
    try:
        recorder = start_module("strands_robots.monitoring.record", "-o", str(out), "--namespace", cam.ns,
                                "--topics", "joint_states", "--latch-wait", "0.2")
        recorder_out = Lines(recorder.stdout)
        # The probe subscribes to every camera topic too: wait for the recorder's subscription beside it.
        assert wait_for(lambda: all(subscribers(cam, f"{c}/{t}") >= 2 for c in CAMERAS
                                    for t in ("image_raw/compressed", "camera_info")), 30.0), \
            "the recorder never subscribed to the camera topics"
        assert wait_for(lambda: all(cam.node.count_publishers(f"{cam.ns}/{c}/image_raw/compressed") == 1
                                    for c in CAMERAS), 30.0)
        # ... and for the recorder to say it is matched with the camera's publishers: best-effort frames sent before
        # are never delivered (the graph showing both is not the match; a run lost frames 0 and 1 so)
        wait_matched(recorder_out, [f"{cam.ns}/{c}/{t}" for c in CAMERAS for t in ("image_raw/compressed",
                                                                                  "camera_info")], 30.0)
        # ... and for the camera node to say its publishers matched both subscribers (the probe's, the recorder's):
        # the publisher's own view decides who gets a frame, and it can lag the recorder's (a recorder that says
        # matched can still miss the first frames the probe gets)
        wanted = [f"matched {cam.ns}/{c}/{t}: 2 subscriber(s)" for c in CAMERAS
                  for t in ("image_raw/compressed", "camera_info")]
        assert wait_for(lambda: all(w in "".join(cam.lines) for w in wanted), 30.0), "".join(cam.lines)[-3000:]
        cam.publish_joints = True  # the driver is up: frames from now on
        cam.wait_new("scene/image_raw/compressed", n=20)
        cam.wait_new("wrist/image_raw/compressed", n=20)
        cam.proc.send_signal(2)
        cam.proc.wait(30.0)
        assert wait_for(lambda: "frames published:" in "".join(cam.lines), 10.0)
        with cam.lock:  # what the probe (another subscriber, in this process) received, by header stamp
            probe = {c: [Time.from_msg(m.header.stamp).nanoseconds
                         for m in cam.received[f"{c}/image_raw/compressed"]] for c in CAMERAS}
    finally:
        if recorder is not None:
            end(recorder)
            stderr = recorder.stderr.read()
        cam.close()
    assert recorder.returncode == 0, stderr
    counts = published_counts(cam.lines)
    assert set(counts) == set(CAMERAS)
    recorded = read_cameras(out)
    topics = {f"{cam.ns}/{c}/image_raw/compressed" for c in CAMERAS}
    assert set(recorded.frames) == topics                            # the live names
    assert set(recorded.infos) == {f"{cam.ns}/{c}/camera_info" for c in CAMERAS}
    with open(out, "rb") as handle:  # what ros2 bag info lists: channels, their types and offered QoS
        summary = make_reader(handle).get_summary()
    schemas = {i: sc.name for i, sc in summary.schemas.items()}
    channels = {c.topic: c for c in summary.channels.values()}
    for name in CAMERAS:
        jpeg_channel = channels[f"{cam.ns}/{name}/image_raw/compressed"]
        assert schemas[jpeg_channel.schema_id] == "sensor_msgs/msg/CompressedImage"
        assert schemas[channels[f"{cam.ns}/{name}/camera_info"].schema_id] == "sensor_msgs/msg/CameraInfo"
        assert "reliability: best_effort" in jpeg_channel.metadata["offered_qos_profiles"]
        # A frame missing from the recording is named: its stamp, where it was in the run, and whether the probe
        # got it (a frame lost between the camera node and the recorder alone, or for every subscriber).
        got = {f.stamp_ns for f in recorded.frames[f"{cam.ns}/{name}/image_raw/compressed"]}
        missing = [(k, t) for k, t in enumerate(probe[name]) if t not in got]
        assert summary.statistics.channel_message_counts[jpeg_channel.id] == counts[name][1], (
            f"{name}: {counts[name][1]} JPEGs published, {len(got)} recorded, {len(probe[name])} reached the probe; "
            f"frames the probe got and the recorder did not (index of {len(probe[name])}, stamp): {missing}")
    for topic, frames in recorded.frames.items():
        name = camera_of(topic)
        published, jpegs = counts[name]
        assert jpegs == published >= 20, f"{name}: JPEGs published without a subscriber: {counts}"
        assert len(frames) == jpegs, f"{name}: {len(frames)} frames recorded, {jpegs} published"
        assert len(recorded.infos[f"{cam.ns}/{name}/camera_info"]) == published
        stamps = [f.stamp_ns for f in frames]
        assert len(set(stamps)) == len(stamps) and stamps == sorted(stamps)  # each frame once, in order
        first, last = decode(frames[0]), decode(frames[-1])
        assert first.shape == (224, 224, 3) and first.dtype == np.uint8 and last.shape == (224, 224, 3)
        assert frames[0].format == "rgb8; jpeg compressed bgr8"
        # the camera info names the same frames: stamps shared one to one
        assert stamps == [s for s, _, _ in recorded.infos[f"{cam.ns}/{name}/camera_info"]]
