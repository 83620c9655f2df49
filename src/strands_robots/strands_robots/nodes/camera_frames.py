"""The camera node's frames, received by another node (the rollout node) into a :class:`LatestFrames`.

:func:`subscribe_frames` subscribes to ``<camera_namespace>/<camera>/image_raw`` (sensor-data QoS, as published)
for every configured camera and keeps each camera's newest frame, decoded to an HWC uint8 array, with its header
stamp in ns; :func:`camera_backend` wraps a robot backend so its observations hold them
(:class:`~strands_robots.cameras.backend.FramesBackend`: ``<camera>.image``, ``.image_age_s``,
``.image_stamp_ns``, the stale rule). The age is measured on the subscribing node's clock, the clock the camera
node stamps with (system time, or simulation time under ``use_sim_time`` on both).
"""

from __future__ import annotations

from typing import Any

from rclpy.node import Node
from sensor_msgs.msg import Image

from strands_robots.cameras.backend import FramesBackend
from strands_robots.cameras.config import CameraSet
from strands_robots.cameras.frames import LatestFrames
from strands_robots.nodes import camera_msgs

_NS = 1_000_000_000


def subscribe_frames(node: Node, cameras: CameraSet, camera_namespace: str = "") -> LatestFrames:
    """Subscribe ``node`` to every camera's ``image_raw``; return the store its frames arrive in.

    A frame of another size than configured, or of an encoding other than rgb8/bgr8, is dropped and counted
    in ``frames.refused`` (its camera then ages into the stale rule), with one warning per camera.
    """
    frames = LatestFrames(cameras.cameras)
    ns = camera_namespace.rstrip("/")
    log = node.get_logger()
    for cam in cameras.cameras:
        topic = f"{ns}/{camera_msgs.image_topic(cam.name)}" if ns else camera_msgs.image_topic(cam.name)

        def on_image(msg: Image, cam: Any = cam) -> None:
            try:
                image = camera_msgs.image_from_msg(msg)
                if image.shape[:2] != (cam.height, cam.width):
                    raise ValueError(f"{image.shape[1]}x{image.shape[0]}, configured {cam.width}x{cam.height}")
            except ValueError as exc:
                frames.refused[cam.name] += 1
                if frames.refused[cam.name] == 1:
                    log.warning(f"camera {cam.name}: frame refused: {exc}")
                return
            frames.put(cam.name, image, msg.header.stamp.sec * _NS + msg.header.stamp.nanosec)

        node.create_subscription(Image, topic, on_image, camera_msgs.IMAGE_QOS)
    return frames


def camera_backend(node: Node, inner: Any, cameras: CameraSet, camera_namespace: str = "",
                   first_frame_timeout_s: float = 10.0) -> FramesBackend:
    """Return ``inner`` with the cameras' frames in its observations (subscriptions made on ``node``)."""
    frames = subscribe_frames(node, cameras, camera_namespace)
    return FramesBackend(inner, frames, lambda: node.get_clock().now().nanoseconds, first_frame_timeout_s)
