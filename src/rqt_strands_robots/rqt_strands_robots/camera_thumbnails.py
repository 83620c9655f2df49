"""The monitor's live camera thumbnails: one per camera the station publishes, newest frame only.

:class:`CameraFeed` (ROS side, callbacks on the node's executor thread) finds the cameras under the station's
namespace in the ROS graph (every ``<ns>/<camera>/image_raw/compressed``, looked up again each ``rescan()``,
so a camera node started after the monitor shows up), subscribes to each with sensor-data QoS and keeps only
the newest JPEG per camera with its header stamp and how many arrived: a slow GUI never queues frames.
:class:`CameraStats` (no ROS, no Qt) turns what arrived into each thumbnail's caption (frames, rate, age);
:class:`CameraThumbnails` (Qt, GUI thread) shows them, a label per camera, decoding the JPEG with Qt itself.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from rqt_strands_robots.qt import QtCore, QtGui, QtWidgets

__all__ = ["CameraFeed", "CameraFrame", "CameraStats", "CameraThumbnails", "cameras_in_graph"]

COMPRESSED_SUFFIX = "/image_raw/compressed"
COMPRESSED_TYPE = "sensor_msgs/msg/CompressedImage"
THUMB_WIDTH = 200
_NS = 1_000_000_000


@dataclass(frozen=True)
class CameraFrame:
    """The newest JPEG of a camera: bytes, header stamp (ns), arrival (monotonic s), frames arrived so far."""

    data: bytes
    stamp_ns: int
    arrived_s: float
    count: int


def cameras_in_graph(topics: "list[tuple[str, list[str]]]", namespace: str) -> list[str]:
    """Return the cameras of ``namespace`` among ``(topic, types)`` (``get_topic_names_and_types()``), sorted."""
    ns = "/" + str(namespace or "").strip("/")
    prefix = ns.rstrip("/") + "/"
    found = []
    for name, types in topics:
        if name.startswith(prefix) and name.endswith(COMPRESSED_SUFFIX) and COMPRESSED_TYPE in types:
            camera = name[len(prefix): -len(COMPRESSED_SUFFIX)]
            if camera and "/" not in camera:
                found.append(camera)
    return sorted(set(found))


class CameraFeed:
    """Subscriptions to the cameras' JPEG topics under ``namespace``; :meth:`latest` per camera (thread-safe)."""

    def __init__(self, node: Any, namespace: str) -> None:
        self.node, self.namespace = node, namespace
        self._lock = threading.Lock()
        self._latest: dict[str, CameraFrame] = {}
        self._counts: dict[str, int] = {}
        self._subscriptions: dict[str, Any] = {}

    def rescan(self) -> list[str]:
        """Subscribe to every camera now in the graph; the cameras watched."""
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import CompressedImage

        for camera in cameras_in_graph(self.node.get_topic_names_and_types(), self.namespace):
            if camera not in self._subscriptions:
                topic = "/" + "/".join(p for p in (self.namespace.strip("/"), camera) if p) + COMPRESSED_SUFFIX
                self._subscriptions[camera] = self.node.create_subscription(
                    CompressedImage, topic, lambda msg, c=camera: self._on_frame(c, msg), qos_profile_sensor_data)
        return sorted(self._subscriptions)

    def _on_frame(self, camera: str, msg: Any) -> None:
        stamp = msg.header.stamp.sec * _NS + msg.header.stamp.nanosec
        with self._lock:
            count = self._counts.get(camera, 0) + 1
            self._counts[camera] = count
            self._latest[camera] = CameraFrame(bytes(msg.data), int(stamp), time.monotonic(), count)

    def latest(self) -> dict[str, CameraFrame]:
        with self._lock:
            return dict(self._latest)

    def destroy(self) -> None:
        for sub in self._subscriptions.values():
            self.node.destroy_subscription(sub)
        self._subscriptions.clear()


@dataclass
class CameraStats:
    """Per camera: frames seen and the rate over the last frames (arrival times), for the caption."""

    arrivals: dict[str, list[tuple[float, int]]] = field(default_factory=dict)

    def update(self, camera: str, frame: CameraFrame) -> None:
        seen = self.arrivals.setdefault(camera, [])
        if not seen or seen[-1][1] != frame.count:
            seen.append((frame.arrived_s, frame.count))
            del seen[:-30]

    def rate_hz(self, camera: str) -> Optional[float]:
        seen = self.arrivals.get(camera, [])
        if len(seen) < 2 or seen[-1][0] <= seen[0][0]:
            return None
        return (seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0])

    def caption(self, camera: str, frame: CameraFrame, size: "tuple[int, int] | None", now_s: float) -> str:
        rate = self.rate_hz(camera)
        dims = f"{size[0]}x{size[1]}" if size else "?"
        return (f"{camera}  {dims}{'' if rate is None else f'  {rate:.1f} fps'}\n"
                f"frame {frame.count}, {max(0.0, now_s - frame.arrived_s):.1f} s ago")


class CameraThumbnails(QtWidgets.QWidget):
    """A row of thumbnails, one per camera; :meth:`show_frames` on the GUI thread."""

    def __init__(self, parent: Any = None, thumb_width: int = THUMB_WIDTH) -> None:
        super().__init__(parent)
        self.thumb_width = thumb_width
        self.stats = CameraStats()
        self.images: dict[str, Any] = {}      # camera: QLabel with the pixmap
        self.captions: dict[str, Any] = {}    # camera: QLabel with the caption
        self.sizes: dict[str, tuple[int, int]] = {}
        self._shown: dict[str, int] = {}
        self._row = QtWidgets.QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self.placeholder = QtWidgets.QLabel("no camera on this station's namespace")
        self._row.addWidget(self.placeholder)
        self._row.addStretch(1)

    def _slot(self, camera: str) -> None:
        box = QtWidgets.QVBoxLayout()
        image = QtWidgets.QLabel()
        image.setFixedWidth(self.thumb_width)
        image.setAlignment(QtCore.Qt.AlignCenter)
        caption = QtWidgets.QLabel(camera)
        caption.setWordWrap(True)
        caption.setMaximumWidth(self.thumb_width)
        box.addWidget(image)
        box.addWidget(caption)
        self._row.insertLayout(self._row.count() - 1, box)
        self.images[camera], self.captions[camera] = image, caption
        self.placeholder.hide()

    def show_frames(self, frames: dict[str, CameraFrame], now_s: "float | None" = None) -> int:
        """Show each camera's newest frame (decoded by Qt); the thumbnails redrawn."""
        now_s = time.monotonic() if now_s is None else now_s
        drawn = 0
        for camera in sorted(frames):
            frame = frames[camera]
            if camera not in self.images:
                self._slot(camera)
            self.stats.update(camera, frame)
            if self._shown.get(camera) != frame.count:
                image = QtGui.QImage.fromData(frame.data)
                if not image.isNull():
                    self.sizes[camera] = (image.width(), image.height())
                    self.images[camera].setPixmap(QtGui.QPixmap.fromImage(image).scaledToWidth(
                        self.thumb_width, QtCore.Qt.SmoothTransformation))
                    drawn += 1
                self._shown[camera] = frame.count
            self.captions[camera].setText(self.stats.caption(camera, frame, self.sizes.get(camera), now_s))
        return drawn

    def clear(self) -> None:
        """Forget every camera (another station)."""
        for camera in list(self.images):
            self.images.pop(camera).deleteLater()
            self.captions.pop(camera).deleteLater()
        self.sizes.clear()
        self._shown.clear()
        self.stats = CameraStats()
        self.placeholder.show()
