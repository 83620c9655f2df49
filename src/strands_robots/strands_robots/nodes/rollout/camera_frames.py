"""The camera node's frames, received by another node (the rollout node) into a :class:`LatestFrames`.

:func:`subscribe_frames` subscribes to ``<camera_namespace>/<camera>/image_raw`` (sensor-data QoS, as published)
for every configured camera and keeps each camera's newest frame, decoded to an HWC uint8 array, with its header
stamp in ns; :func:`camera_backend` wraps a robot backend so its observations hold them
(:class:`~strands_robots.cameras.backend.FramesBackend`: ``<camera>.image``, ``.image_age_s``,
``.image_stamp_ns``, the stale rule). The age is measured on the subscribing node's clock, the clock the camera
node stamps with (system time, or simulation time under ``use_sim_time`` on both).

:class:`SceneSetter` lays out a simulated camera node's scene for an episode: it sets the node's ``scene_seed``
and ``scene_task_json`` parameters (the task's ``object_x`` / ``object_y`` / ``camera_cover`` only) and answers
when the node has taken them, so the backend discards the frames of the old layout.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.node import Node
from sensor_msgs.msg import Image

from strands_robots.cameras.backend import FramesBackend
from strands_robots.cameras.config import CameraSet
from strands_robots.cameras.frames import LatestFrames
from strands_robots.cameras.scene import SCENE_KEYS
from strands_robots.ros.ask_again import ask_until_answered
from strands_robots.conversions import camera as camera_msgs
from strands_robots.ros.qos import IMAGE_QOS

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

        node.create_subscription(Image, topic, on_image, IMAGE_QOS)
    return frames


class CameraSceneError(RuntimeError):
    """The camera node did not take the episode's scene (refused it, or did not answer in time)."""


class SceneSetter:
    """``(task, seed) -> stamp_ns``: set the camera node's scene parameters; the node clock once it answered.

    Call it from a thread other than the one spinning ``node`` (it waits for the answer).

    :param node: the node whose client calls ``<camera_namespace>/<camera_node>/set_parameters``.
    :param timeout_s: how long to wait for the camera node (its service, then its answer).
    """

    def __init__(self, node: Node, camera_node: str, camera_namespace: str = "", timeout_s: float = 10.0) -> None:
        ns = camera_namespace.rstrip("/")
        self.service = f"{ns}/{camera_node}/set_parameters" if ns else f"{camera_node}/set_parameters"
        self._node = node
        self._client = node.create_client(SetParameters, self.service)
        self._timeout_s = float(timeout_s)

    def __call__(self, task: "Optional[Mapping[str, Any]]", seed: "Optional[int]") -> int:
        params = dict(task or {})
        if isinstance(params.get("parameters"), Mapping):
            params = dict(params["parameters"])
        scene = {k: params[k] for k in SCENE_KEYS if params.get(k) not in (None, "")}
        seed_value = ParameterValue(type=ParameterType.PARAMETER_INTEGER,
                                    integer_value=-1 if seed is None else int(seed))
        task_value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=json.dumps(scene))
        request = SetParameters.Request(parameters=[Parameter(name="scene_task_json", value=task_value),
                                                    Parameter(name="scene_seed", value=seed_value)])
        if not self._client.wait_for_service(timeout_sec=self._timeout_s):
            raise CameraSceneError(f"camera node scene service {self.service} not found within {self._timeout_s:g} s")
        # The same values however often they arrive: asked again each second (a node just started can lose one)
        answer = ask_until_answered(lambda: self._client.call_async(request), self._timeout_s)
        if answer is None:
            raise CameraSceneError(f"camera node {self.service}: no answer within {self._timeout_s:g} s")
        refused = [r.reason for r in answer.results if not r.successful]
        if refused:
            raise CameraSceneError(f"camera node refused the scene: {'; '.join(refused)}")
        return int(self._node.get_clock().now().nanoseconds)


def camera_backend(node: Node, inner: Any, cameras: CameraSet, camera_namespace: str = "",
                   first_frame_timeout_s: float = 10.0, scene_node: str = "") -> FramesBackend:
    """Return ``inner`` with the cameras' frames in its observations (subscriptions made on ``node``).

    Its episode recordings hold the cameras' JPEGs and camera infos (:mod:`.camera_recording`).

    :param scene_node: a simulated camera node's name: each ``reset(seed)`` lays out its scene for the task
        and the seed (:class:`SceneSetter`); empty: the scene is not this backend's (a real camera).
    """
    from strands_robots.nodes.rollout.camera_recording import CameraRecordingTap

    frames = subscribe_frames(node, cameras, camera_namespace)
    setter = SceneSetter(node, scene_node, camera_namespace, first_frame_timeout_s) if scene_node else None
    return FramesBackend(inner, frames, lambda: node.get_clock().now().nanoseconds, first_frame_timeout_s, setter,
                         recording=CameraRecordingTap(node, cameras, camera_namespace))
