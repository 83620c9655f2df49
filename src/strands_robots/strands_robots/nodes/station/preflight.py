"""The preflight for :class:`~strands_robots.nodes.station.robot_port.RosRobotPort`: one observation, one answer.

When a ``relay`` job's policy client attached (``wait_for_policy`` keeps that policy session open for this) and
before any lease, :meth:`StationPreflightCalls.preflight` builds the observation an episode's first step would
send: the arms' current joint state from the driver's ``joint_states`` (read, nothing commanded) and a frame of
each camera the rollouts observe (``<camera_namespace>/<camera>/image_raw``, subscribed from the first preflight on
and taken serialized, decoded only for a preflight; a frame received after the preflight began),
encoded as the task asks (``cameras.request``: the cameras it names, their size, JPEG or PNG); sends it on the
session as the relay's ``Preflight`` request and returns the answer as a
:class:`~strands_robots.station.preflight.PreflightAnswer`, which the core checks. The session is closed
afterwards (each episode's rollout opens its own). A station-side failure to build the observation (no joint
state, no camera frame in time) is reported as the answer's error, naming the station's part.

A mixin of the port: it uses the port's node, driver backend and open policy sessions.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Dict, Tuple

from strands_robots.station.job import EpisodePlan, JobSpec
from strands_robots.station.preflight import PreflightAnswer

__all__ = ["StationPreflightCalls", "FRAME_WAIT_S"]

#: How long the preflight waits for a frame of every camera: longer than a rollout waits for its first frames (10 s,
#: ``nodes/rollout/camera_frames.py``): a preflight may come while the camera node is still starting (its process
#: and the renderer take 10-15 s on a loaded 2-core machine).
FRAME_WAIT_S = 30.0
_NS = 1_000_000_000


class StationPreflightCalls:
    """Send the attached policy one observation of the arms as they stand; return its answer (never applied)."""

    #: job id -> its attached policy sessions by slot ("" for a job of one policy), kept open by
    #: ``wait_for_policy`` for the preflight
    _preflight_sessions: Dict[str, Dict[str, Any]]
    camera_set: Any = None  # the station's cameras.yaml (CameraSet); None: no cameras
    camera_namespace: str = ""

    def _init_preflight(self, camera_set: Any, camera_namespace: str) -> None:
        self._preflight_sessions = {}
        self.camera_set = camera_set
        self.camera_namespace = camera_namespace
        self._camera_subscriptions: Dict[str, Any] = {}
        self._raw_frames: Dict[str, Tuple[float, bytes]] = {}  # camera -> (monotonic arrival, serialized Image)
        self._frames_arrived = threading.Condition()

    def _keep_for_preflight(self, job_id: str, sessions: Dict[str, Any]) -> None:
        old = self._preflight_sessions.pop(job_id, None) or {}
        self._preflight_sessions[job_id] = dict(sessions)
        kept = set(map(id, sessions.values()))
        for session in old.values():
            if id(session) not in kept:
                session.close()

    def _drop_preflight_session(self, job_id: str) -> None:
        for session in (self._preflight_sessions.pop(job_id, None) or {}).values():
            session.close()

    def preflight(self, spec: JobSpec, plan: EpisodePlan) -> Any:
        """Send the job's policy the observation of ``plan``'s first step; None when it is not a relay policy.

        A comparison's every slot is asked in turn: a tuple of their answers, each naming its slot (the gate checks
        each against its own slot's declared spec).
        """
        if spec.policy_provider != "relay":
            return None
        sessions = self._preflight_sessions.pop(spec.job_id, None) or {}
        if not sessions:
            return PreflightAnswer(error="the policy session closed before the station's first observation")
        try:
            answers = tuple(dataclasses.replace(self._ask(session, plan), slot=slot)
                            for slot, session in sessions.items())
            return answers if spec.comparison is not None else answers[0]
        finally:
            for session in sessions.values():
                session.close()

    def _ask(self, session: Any, plan: EpisodePlan) -> PreflightAnswer:
        from strands_robots.cameras.request import CameraRequest, ImageRequest, encode_observation, image_request
        from strands_robots.policies.base import EndEpisode
        from strands_robots.station_link.session import PolicySessionError, RemotePolicyError

        try:
            observation: Dict[str, Any] = dict(self.backend.observe())
        except Exception as exc:  # no joint state: the driver's part, said so
            return PreflightAnswer(error=f"the station could not read the arms' state ({type(exc).__name__}: {exc})")
        offered = tuple(k[: -len(".pos")] for k in observation if isinstance(k, str) and k.endswith(".pos"))
        try:
            request = image_request(dict(plan.task.parameters))
        except ValueError as exc:  # refused at submit already; named by the gate's camera check too
            return PreflightAnswer(error=f"the task's camera request is refused: {exc}")
        observed = self.observed_cameras()
        have = tuple(observed) if observed is not None else (self.camera_set.names if self.camera_set else ())
        if request.cameras is not None:  # an unknown camera is the gate's reason; the others are sent
            request = ImageRequest(tuple(c for c in request.cameras if c.name in have), request.format,
                                   request.quality)
            wanted: Tuple[str, ...] = tuple(c.name for c in request.cameras)
        else:
            wanted = have
            request = ImageRequest(tuple(CameraRequest(n) for n in have), request.format, request.quality)
        if wanted:
            missing = self._add_frames(observation, wanted)
            if missing:
                return PreflightAnswer(error=f"the station had no frame of camera {', '.join(missing)} within "
                                             f"{FRAME_WAIT_S:g} s (the station's cameras, not the policy)")
        try:
            encoded = encode_observation(observation, request)
        except ValueError as exc:
            return PreflightAnswer(error=f"the station could not encode its observation: {exc}")
        try:
            chunk = session.preflight(plan.task, encoded, action_keys=offered,
                                      control_frequency=plan.control_frequency,
                                      action_horizon=getattr(self, "action_horizon", 0))
        except EndEpisode as exc:
            return PreflightAnswer(ended=str(exc), offered_keys=offered, cameras=wanted)
        except RemotePolicyError as exc:
            return PreflightAnswer(error=f"it raised {exc.error_type}: {str(exc).split(': ', 1)[-1]}",
                                   offered_keys=offered, cameras=wanted)
        except PolicySessionError as exc:
            return PreflightAnswer(error=str(exc), offered_keys=offered, cameras=wanted)
        return PreflightAnswer(chunk=tuple(chunk), offered_keys=offered, cameras=wanted)

    def _add_frames(self, observation: Dict[str, Any], names: Tuple[str, ...]) -> Tuple[str, ...]:
        """Add a frame of every camera in ``names`` received after this call; return the cameras that sent none.

        The subscriptions are made at the first preflight and kept: an entity destroyed from this thread while
        the node's executor spins would break its wait set. They take each message serialized (no decoding but
        at a preflight, so frames between preflights cost a copy each).
        """
        from rclpy.serialization import deserialize_message
        from sensor_msgs.msg import Image

        from strands_robots.conversions import camera as camera_msgs

        if self.camera_set is None:
            return names
        known = set(self.camera_set.names)
        unknown = tuple(n for n in names if n not in known)
        if unknown:
            return unknown
        since = time.monotonic()
        for name in names:
            self._subscribe_camera(name)
        deadline = since + FRAME_WAIT_S
        with self._frames_arrived:
            self._frames_arrived.wait_for(lambda: all(self._raw_frames.get(n, (0.0, b""))[0] >= since for n in names),
                                          timeout=max(0.0, deadline - time.monotonic()))
            fresh = {n: self._raw_frames[n][1] for n in names if self._raw_frames.get(n, (0.0, b""))[0] >= since}
        now_ns = self._node.get_clock().now().nanoseconds  # the clock the camera node stamps with
        for name, raw in fresh.items():
            msg = deserialize_message(raw, Image)
            try:
                image = camera_msgs.image_from_msg(msg)
            except ValueError:
                fresh.pop(name)
                continue
            stamp_ns = msg.header.stamp.sec * _NS + msg.header.stamp.nanosec
            observation[f"{name}.image"] = image
            observation[f"{name}.image_age_s"] = max(0.0, (now_ns - stamp_ns) / _NS)
            observation[f"{name}.image_stamp_ns"] = stamp_ns
        return tuple(n for n in names if n not in fresh)

    def _subscribe_camera(self, name: str) -> None:
        """Subscribe (once) to ``name``'s ``image_raw``, keeping its newest message serialized with its arrival."""
        from sensor_msgs.msg import Image

        from strands_robots.conversions import camera as camera_msgs
        from strands_robots.ros.qos import IMAGE_QOS

        if name in self._camera_subscriptions:
            return
        ns = self.camera_namespace.rstrip("/")
        topic = f"{ns}/{camera_msgs.image_topic(name)}" if ns else camera_msgs.image_topic(name)

        def on_image(raw: bytes) -> None:
            with self._frames_arrived:
                self._raw_frames[name] = (time.monotonic(), raw)
                self._frames_arrived.notify_all()

        self._camera_subscriptions[name] = self._node.create_subscription(Image, topic, on_image, IMAGE_QOS, raw=True)
