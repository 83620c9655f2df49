"""EpisodeRecorder.write_raw: serialized camera messages from another thread beside the loop's steps.

Real CDR (rclpy's serializer) of CompressedImage and CameraInfo goes in from a second thread while the main thread
writes steps; everything reads back with mcap_ros2, a step's two messages never split, nothing after close, and a
full disk during a raw write is a RecordingError that leaves every whole chunk readable.
"""

from __future__ import annotations

import errno
import io
import threading

import pytest

pytest.importorskip("mcap_ros2", reason="mcap-ros2-support is not installed (requirements/python.txt)")
pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")

from mcap.reader import NonSeekingReader, make_reader  # noqa: E402
from mcap_ros2.decoder import DecoderFactory  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import CameraInfo, CompressedImage  # noqa: E402

from strands_robots.rollout.recording import EpisodeRecorder, RecordingError  # noqa: E402

KEYS = ("left.joint_1", "right.joint_1")
T0 = 1_700_000_000_000_000_000
JPEG = "/s/scene/image_raw/compressed"
INFO = "/s/scene/camera_info"


def jpeg_cdr(n: int) -> bytes:
    msg = CompressedImage()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_000, n
    msg.header.frame_id = "scene_optical_frame"
    msg.format = "rgb8; jpeg compressed bgr8"
    msg.data = bytes([n % 256]) * 3000  # not a real JPEG: the recorder never decodes what it is handed
    return serialize_message(msg)


def info_cdr(n: int) -> bytes:
    msg = CameraInfo()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_000, n
    msg.width, msg.height = 224, 224
    return serialize_message(msg)


def open_recorder(path, **kw):
    return EpisodeRecorder.open(path, control_frequency=50.0, fps=50.0, actuator_keys=KEYS, topic_prefix="/s",
                                chunk_size=16 * 1024, **kw)


def test_raw_messages_from_another_thread_read_back_beside_every_step(tmp_path):
    path = tmp_path / "r.mcap"
    rec = open_recorder(path)
    done = threading.Event()

    def cameras():
        for n in range(120):
            assert rec.write_raw(JPEG, "sensor_msgs/msg/CompressedImage", jpeg_cdr(n), T0 + n * 1000)
            assert rec.write_raw(INFO, "sensor_msgs/CameraInfo", info_cdr(n), T0 + n * 1000)
        done.set()

    thread = threading.Thread(target=cameras)
    thread.start()
    for i in range(200):
        rec.write_step(i, T0 + i * 20_000_000, {f"{k}.pos": 0.1 * i for k in KEYS}, {k: 0.2 for k in KEYS}, None)
    thread.join(30.0)
    assert done.is_set()
    assert rec.close() == 200
    assert rec.raw_counts == {JPEG: 120, INFO: 120}
    assert rec.write_raw(JPEG, "sensor_msgs/msg/CompressedImage", jpeg_cdr(0), T0) is False  # after close: none
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        msgs = [(c.topic, m, d) for _, c, m, d in reader.iter_decoded_messages(log_time_order=False)]
    by_topic: dict = {}
    for topic, message, decoded in msgs:
        by_topic.setdefault(topic, []).append((message, decoded))
    assert len(by_topic["/s/joint_states"]) == len(by_topic["/s/action_commands"]) == 200
    images = by_topic[JPEG]
    assert [d.header.stamp.nanosec for _, d in images] == list(range(120))   # each once, in order
    assert [m.sequence for m, _ in images] == list(range(120))
    assert all(bytes(d.data) == bytes([n % 256]) * 3000 for n, (_, d) in enumerate(images))
    assert [d.width for _, d in by_topic[INFO]] == [224] * 120


def test_write_raw_refuses_a_topic_recorded_as_another_type_and_an_unknown_type(tmp_path):
    rec = open_recorder(tmp_path / "t.mcap")
    rec.write_raw(JPEG, "sensor_msgs/msg/CompressedImage", jpeg_cdr(1), T0)
    with pytest.raises(RecordingError, match="recorded as sensor_msgs/msg/CompressedImage"):
        rec.write_raw(JPEG, "sensor_msgs/msg/CameraInfo", info_cdr(1), T0)
    with pytest.raises(RecordingError, match="no_such_pkg"):
        rec.write_raw("/s/x", "no_such_pkg/msg/Nothing", b"\x00\x01\x00\x00", T0)
    assert rec.close() == 0


def test_a_full_disk_during_a_raw_write_is_an_error_and_the_whole_chunks_stay_readable(tmp_path):
    class FullDisk(io.FileIO):
        written = 0

        def write(self, data):
            room = 40_000 - self.written
            if room <= 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            n = super().write(memoryview(data)[:room])
            self.written += n
            return n

    path = tmp_path / "full.mcap"
    rec = open_recorder(path, raw_file=lambda p: FullDisk(p, "xb"))
    written = 0
    with pytest.raises(RecordingError, match="No space left"):
        for n in range(1000):
            rec.write_step(n, T0 + n, {"left.joint_1.pos": 0.0}, {"left.joint_1": 0.0}, None)
            rec.write_raw(JPEG, "sensor_msgs/msg/CompressedImage", jpeg_cdr(n), T0 + n)
            written = n + 1
    assert 0 < written < 1000
    with pytest.raises(RecordingError, match="already failed"):
        rec.write_step(written + 1, T0, {}, {}, None)
    frames = rec.frames
    rec.close()
    read = []
    with open(path, "rb") as f:  # no summary: a streaming reader recovers every whole chunk
        messages = NonSeekingReader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages(
            log_time_order=False)
        while True:
            try:
                read.append(next(messages))
            except StopIteration:
                break
            except Exception:  # the file ends where the last whole chunk did
                break
    topics = [channel.topic for _, channel, _, _ in read]
    assert topics.count("/s/action_commands") == topics.count("/s/joint_states") == frames > 0  # what a reader gets
    assert 0 < topics.count(JPEG) <= written
