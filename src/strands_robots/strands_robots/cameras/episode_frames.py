"""In process: each rendered camera frame as the episode recording's ``CompressedImage`` and ``CameraInfo``.

The same topics and fields the camera node publishes over ROS (``<prefix>/<camera>/image_raw/compressed``: JPEG
at the camera's quality, format ``rgb8; jpeg compressed bgr8``; ``<prefix>/<camera>/camera_info``: its
intrinsics), as message dicts the recorder encodes (:meth:`EpisodeRecorder.write_message`), stamped with the
robot clock the frame was rendered at, so an in-process recording reads back as one made over ROS.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from strands_robots.cameras import jpeg
from strands_robots.cameras.intrinsics import DISTORTION_MODEL, Intrinsics

__all__ = ["COMPRESSED_FORMAT", "frame_messages"]

COMPRESSED_FORMAT = "rgb8; jpeg compressed bgr8"  # compressed_image_transport's text for an rgb8 source
_NS = 1_000_000_000


def frame_messages(prefix: str, camera: str, image: np.ndarray, k: Intrinsics, stamp_ns: int,
                   quality: int) -> list[tuple[str, str, dict[str, Any]]]:
    """``(topic, type, message dict)`` of one frame: its JPEG, then its camera info."""
    sec, nanosec = divmod(int(stamp_ns), _NS)
    header = {"stamp": {"sec": sec, "nanosec": nanosec}, "frame_id": f"{camera}_optical_frame"}
    base = f"{prefix.rstrip('/')}/{camera}"
    return [
        (f"{base}/image_raw/compressed", "sensor_msgs/msg/CompressedImage",
         {"header": header, "format": COMPRESSED_FORMAT, "data": jpeg.encode(image, quality)}),
        (f"{base}/camera_info", "sensor_msgs/msg/CameraInfo",
         {"header": header, "width": k.width, "height": k.height, "distortion_model": DISTORTION_MODEL,
          "d": list(k.d), "k": list(k.k), "r": list(k.r), "p": list(k.p)}),
    ]
