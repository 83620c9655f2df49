"""Camera frames as ``sensor_msgs`` messages, as image_transport publishes them.

The camera node's and the rollout node's shared translation:

- ``Image``: ``rgb8``, row step ``3 * width``, little-endian flag 0;
- ``CompressedImage``: ``format`` ``"rgb8; jpeg compressed bgr8"`` (compressed_image_transport's text for an
  rgb8 source), JPEG bytes;
- ``CameraInfo``: the intrinsics of :mod:`strands_robots.cameras.intrinsics` (``plumb_bob``, no distortion).

Topics, relative to the camera node's namespace: ``<camera>/image_raw``, ``<camera>/image_raw/compressed``,
``<camera>/camera_info``; images on sensor-data QoS (``ros/qos.py`` ``IMAGE_QOS``), as camera drivers publish them.
Imports without rclpy or sensor_msgs, as every conversions module does: the message classes load on first use.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from strands_robots.cameras.intrinsics import DISTORTION_MODEL, Intrinsics

if TYPE_CHECKING:
    from sensor_msgs.msg import CameraInfo, CompressedImage, Image

ENCODING = "rgb8"
COMPRESSED_FORMAT = "rgb8; jpeg compressed bgr8"


_MSGS: "SimpleNamespace | None" = None


def _msgs() -> SimpleNamespace:
    """Return the ``sensor_msgs`` classes of camera frames, imported once on first use."""
    global _MSGS
    if _MSGS is None:
        from sensor_msgs.msg import CameraInfo, CompressedImage, Image

        _MSGS = SimpleNamespace(CameraInfo=CameraInfo, CompressedImage=CompressedImage, Image=Image)
    return _MSGS


def image_topic(camera: str) -> str:
    return f"{camera}/image_raw"


def compressed_topic(camera: str) -> str:
    return f"{camera}/image_raw/compressed"


def info_topic(camera: str) -> str:
    return f"{camera}/camera_info"


def frame_id(camera: str, prefix: str = "") -> str:
    """Return the optical frame a camera's messages name, ``<prefix><camera>_optical_frame``."""
    return f"{prefix}{camera}_optical_frame"


def image_msg(image: np.ndarray, stamp: Any, frame: str) -> Image:
    m = _msgs().Image()
    m.header.stamp = stamp
    m.header.frame_id = frame
    m.height, m.width = int(image.shape[0]), int(image.shape[1])
    m.encoding = ENCODING
    m.is_bigendian = 0
    m.step = 3 * m.width
    m.data = np.ascontiguousarray(image, dtype=np.uint8).tobytes()
    return m


def compressed_msg(jpeg: bytes, stamp: Any, frame: str) -> CompressedImage:
    m = _msgs().CompressedImage()
    m.header.stamp = stamp
    m.header.frame_id = frame
    m.format = COMPRESSED_FORMAT
    m.data = jpeg
    return m


def info_msg(k: Intrinsics, stamp: Any, frame: str) -> CameraInfo:
    m = _msgs().CameraInfo()
    m.header.stamp = stamp
    m.header.frame_id = frame
    m.width, m.height = k.width, k.height
    m.distortion_model = DISTORTION_MODEL
    m.d = list(k.d)
    m.k = list(k.k)
    m.r = list(k.r)
    m.p = list(k.p)
    return m


def image_from_msg(msg: Image) -> np.ndarray:
    """Return an ``rgb8`` (or ``bgr8``) ``Image`` as an ``(height, width, 3)`` uint8 RGB array (a copy).

    :raises ValueError: another encoding, or a size that does not match the data.
    """
    if msg.encoding not in ("rgb8", "bgr8"):
        raise ValueError(f"image encoding {msg.encoding!r} is not rgb8 or bgr8")
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    buf = np.frombuffer(bytes(msg.data) if not isinstance(msg.data, (bytes, bytearray)) else msg.data, np.uint8)
    if step < 3 * w or buf.size < h * step:
        raise ValueError(f"image {w}x{h} step {step} does not match its {buf.size} bytes")
    img = buf[: h * step].reshape(h, step)[:, : 3 * w].reshape(h, w, 3)
    return np.array(img[..., ::-1] if msg.encoding == "bgr8" else img, dtype=np.uint8)

