"""Camera frames read back from MCAP recordings: every ``sensor_msgs/CompressedImage`` and ``CameraInfo``, by topic.

Reads either kind of recording (a rollout episode file or a ``strands-robots record`` file) by message type, not
topic name, so any namespace works. A frame keeps its header stamp (the camera node's clock when it rendered) and
its log time (when the recorder received it); :func:`decode` turns its JPEG/PNG bytes into an HWC uint8 array.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

__all__ = ["RecordedFrame", "RecordedCameras", "camera_of", "decode", "read_cameras"]

_NS = 1_000_000_000
_COMPRESSED_SUFFIX = "/image_raw/compressed"


@dataclass(frozen=True)
class RecordedFrame:
    """One CompressedImage as recorded: log time, header stamp (ns), ``format`` and the encoded bytes."""

    log_ns: int
    stamp_ns: int
    format: str
    data: bytes


@dataclass
class RecordedCameras:
    """The frames (by CompressedImage topic) and the camera infos (by CameraInfo topic) of one or more files."""

    frames: dict[str, list[RecordedFrame]]
    infos: dict[str, list[tuple[int, int, int]]]   # topic: (stamp ns, width, height)


def camera_of(topic: str) -> str:
    """Return the camera of a topic: ``/ns/scene/image_raw/compressed``, ``/ns/scene/camera_info``: ``scene``."""
    if topic.endswith(_COMPRESSED_SUFFIX):
        topic = topic[: -len(_COMPRESSED_SUFFIX)]
    elif topic.endswith("/camera_info"):
        topic = topic[: -len("/camera_info")]
    return topic.rstrip("/").rsplit("/", 1)[-1]


def decode(frame: RecordedFrame) -> np.ndarray:
    """Return the frame as an ``(height, width, 3)`` uint8 RGB array (JPEG or PNG: Pillow reads either)."""
    from strands_robots.cameras import jpeg

    return jpeg.decode(frame.data)


def read_cameras(paths: "str | Path | Iterable[str | Path]") -> RecordedCameras:
    """Every camera frame and camera info in the files, each topic's in log-time order."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    if isinstance(paths, (str, Path)):
        paths = [paths]
    frames: dict[str, list[RecordedFrame]] = {}
    infos: dict[str, list[tuple[int, int, int]]] = {}
    for path in paths:
        with open(path, "rb") as handle:
            reader = make_reader(handle, decoder_factories=[DecoderFactory()])
            for schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=True):
                kind = schema.name.split("/")[-1]
                if kind == "CompressedImage":
                    stamp = decoded.header.stamp
                    frames.setdefault(channel.topic, []).append(RecordedFrame(
                        int(message.log_time), int(stamp.sec) * _NS + int(stamp.nanosec), str(decoded.format),
                        bytes(decoded.data)))
                elif kind == "CameraInfo":
                    stamp = decoded.header.stamp
                    infos.setdefault(channel.topic, []).append(
                        (int(stamp.sec) * _NS + int(stamp.nanosec), int(decoded.width), int(decoded.height)))
    for items in frames.values():
        items.sort(key=lambda f: f.log_ns)
    return RecordedCameras(frames, infos)
