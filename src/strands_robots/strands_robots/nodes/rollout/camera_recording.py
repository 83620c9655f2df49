"""The cameras in the rollout node's episode recordings: each JPEG and camera info, as published, while recording.

:class:`CameraRecordingTap` subscribes (raw: the CDR bytes are never decoded) to every configured camera's
``<camera>/image_raw/compressed`` and ``<camera>/camera_info`` under the camera node's namespace, for the life
of the node, so discovery is done before an episode starts. While a recorder is attached (from just after the
episode's file opened until just before its Ended is written) each message goes into it under its live name,
logged at its receipt (:meth:`~strands_robots.rollout.recording.EpisodeRecorder.write_raw`, from the executor
thread). A failed write is counted and said once; the episode's own writes then fail too, as the recorder's rule
is.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any, Optional

from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, CompressedImage

from strands_robots.cameras.config import CameraSet
from strands_robots.conversions import camera as camera_msgs

__all__ = ["CameraRecordingTap", "SUBSCRIBER_DEPTH"]

SUBSCRIBER_DEPTH = 100  # frames queued per topic (the camera node's sensor-data profile keeps 5)
_TYPES = ((camera_msgs.compressed_topic, CompressedImage, "sensor_msgs/msg/CompressedImage"),
          (camera_msgs.info_topic, CameraInfo, "sensor_msgs/msg/CameraInfo"))


class CameraRecordingTap:
    """Raw subscriptions to the cameras' JPEG and info topics; :meth:`attach` a recorder to record them."""

    def __init__(self, node: Node, cameras: CameraSet, camera_namespace: str = "") -> None:
        self._node = node
        self._lock = threading.Lock()
        self._recorder: Optional[Any] = None
        self.failures = 0
        self.topics: list[str] = []
        qos = copy.copy(qos_profile_sensor_data)
        qos.depth = SUBSCRIBER_DEPTH
        ns = camera_namespace.rstrip("/")
        for cam in cameras.cameras:
            for relative, cls, type_name in _TYPES:
                topic = node.resolve_topic_name(f"{ns}/{relative(cam.name)}" if ns else relative(cam.name))
                self.topics.append(topic)
                node.create_subscription(cls, topic, self._handler(topic, type_name), qos, raw=True)

    def _handler(self, topic: str, type_name: str) -> Any:
        def on_message(data: bytes) -> None:
            recv_ns = time.time_ns()
            with self._lock:
                recorder = self._recorder
            if recorder is None:
                return
            try:
                recorder.write_raw(topic, type_name, bytes(data), recv_ns)
            except Exception as exc:  # the recorder failed: the episode's next write reports it
                self.failures += 1
                if self.failures == 1:
                    self._node.get_logger().error(f"recording {topic} failed: {type(exc).__name__}: {exc}")

        return on_message

    def attach(self, recorder: Any) -> None:
        """Record every message from now on into ``recorder`` (``write_raw(topic, type, data, log_ns)``)."""
        with self._lock:
            self._recorder = recorder

    def detach(self) -> None:
        """Stop recording (a message being written finishes; the recorder refuses any after its close)."""
        with self._lock:
            self._recorder = None
