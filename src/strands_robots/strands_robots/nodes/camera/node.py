"""camera_node: the station's cameras on ROS, as image_transport would publish them.

Its own process, so rendering never runs inside the arm driver's control loop (the driver node does not know
it exists). It mirrors the arms from the driver's ``joint_states`` into a model and MjData of its own
(:mod:`strands_robots.cameras.mujoco_cameras`) and, on a render thread of its own (the OpenGL contexts are
current there), renders each configured camera at its fps and publishes, per camera ``<camera>``
(a source that mirrors the arms publishes nothing before the first ``joint_states``):

- ``<ns>/<camera>/image_raw`` — ``sensor_msgs/Image`` (``rgb8``), sensor-data QoS;
- ``<ns>/<camera>/image_raw/compressed`` — ``sensor_msgs/CompressedImage`` (JPEG, the camera's quality);
- ``<ns>/<camera>/camera_info`` — ``sensor_msgs/CameraInfo`` (intrinsics from the MJCF ``fovy`` and size);

all three naming the frame ``<camera>_optical_frame`` and stamped with the time of what the frame shows
(:mod:`strands_robots.cameras.mirror_stamp`): a source that mirrors the arms stamps each frame with the header
stamp of the ``joint_states`` it draws (never later than the node clock when the arms and the scene were read,
so a scene change answered at t shows in every frame stamped after t), draws a camera's next frame only from a
newer joint state (each frame a time of its own), and draws nothing from a joint state older than the camera's
``max_age_s`` (a frozen driver: the frames stop and age, never fresh-stamped pictures of old arms); any other
source stamps the node clock when the frame is taken (simulation time under ``use_sim_time``). The frames come
from the camera adapter the read-only ``adapter`` parameter names (empty: the camera file's;
:mod:`strands_robots.cameras.adapter`): ``mujoco``, ``pattern``, an entry point of ``strands_robots.cameras`` (a
real camera), or ``module:factory``.

Parameters: ``cameras_file`` (read-only; empty: the package's ``config/cameras.yaml``), ``cameras`` (read-only,
comma-separated names; empty: every camera of the file), ``adapter``, ``model_path`` (read-only; empty: the
bundled MJCF), ``driver_namespace`` (read-only; where ``joint_states`` comes from, empty: this node's
namespace), ``scene_seed`` and ``scene_task_json`` (the object's place, :func:`~strands_robots.cameras.scene.
object_position` of the task parameters and the seed; may be set while running). A refused parameter or an
adapter that cannot start ends the process at once with one line (exit 2).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, List, Optional

from builtin_interfaces.msg import Time
from rcl_interfaces.msg import IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, JointState

from strands_robots.cameras import adapter as camera_adapter
from strands_robots.cameras import jpeg
from strands_robots.cameras.config import CameraConfigError, load_cameras
from strands_robots.cameras.mirror_stamp import frame_stamp_ns, joint_state_ns
from strands_robots.cameras.render_priority import CAMERA_RT_PRIORITY, CAMERA_RT_PRIORITY_ENV, lower_render_priority
from strands_robots.cameras.scene import SceneParameterError, object_position
from strands_robots.conversions import camera as camera_msgs
from strands_robots.ros.qos import IMAGE_QOS, STATE_QOS
from strands_robots.ros.process import NodeProcess
from strands_robots.ros.realtime_priority import decide_realtime

SCENE_TASK_JSON_MAX = 4096
_START_TIMEOUT_S = 120.0  # GL detection and the first contexts on a loaded software renderer
_STARTING_STOP_WAIT_S = 0.5  # a stop while the adapter still starts: how long its thread is waited for

PARAMETERS: dict = {
    "cameras_file": ("", "camera file (config/cameras.yaml); empty: the package's", {"read_only": True}),
    "cameras": ("", "comma-separated cameras of the file to run; empty: all", {"read_only": True}),
    "adapter": ("", "camera adapter: mujoco, pattern, an entry point of strands_robots.cameras, or module:factory; "
                    "empty: the camera file's", {"read_only": True}),
    "model_path": ("", "MJCF to render; empty: the bundled two-arm model", {"read_only": True}),
    "driver_namespace": ("", "namespace of the arm driver's joint_states; empty: this node's", {"read_only": True}),
    "frame_id_prefix": ("", "prefix of the <camera>_optical_frame names", {"read_only": True}),
    "scene_seed": (-1, "seed of the object's place; negative: none (the region's centre unless the task says)",
                   {"integer_range": [IntegerRange(from_value=-1, to_value=2**63 - 1, step=1)]}),
    "scene_task_json": ("", f"task parameters placing the object, a JSON object (object_x, object_y); at most "
                            f"{SCENE_TASK_JSON_MAX} characters", {}),
}


def _scene_task(text: str) -> dict:
    """Parse ``scene_task_json``; :raises ValueError: too long, not JSON, not an object, or a refused place."""
    if len(text) > SCENE_TASK_JSON_MAX:
        raise ValueError(f"scene_task_json is {len(text)} characters; allowed: at most {SCENE_TASK_JSON_MAX}")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"scene_task_json is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("scene_task_json must be a JSON object")
    object_position(data, None)  # refuses a place outside the region, naming it
    return data


class CameraNode(Node):
    """Publishes the configured cameras (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("camera", **kwargs)
        for name, (default, description, extra) in PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(description=description, **extra))
        p = self.p
        self.camera_set = load_cameras(p("cameras_file"), p("cameras")).with_adapter(p("adapter"))
        if not self.camera_set.cameras:
            raise CameraConfigError("no cameras to run: the camera file lists none")
        self._scene = (_scene_task(p("scene_task_json")), None if p("scene_seed") < 0 else int(p("scene_seed")))
        self._scene_version = 1
        self.add_on_set_parameters_callback(self._on_parameters)
        self._joint_lock = threading.Lock()
        self._joints: Optional[dict] = None
        self._joints_version = 0
        self._joints_ns = 0  # the time of the joint state in _joints (mirror_stamp rule 1)
        self.held = {c.name: 0 for c in self.camera_set.cameras}  # frames not drawn: the joint state too old
        ns = p("driver_namespace").rstrip("/")
        self.create_subscription(JointState, f"{ns}/joint_states" if ns else "joint_states", self._on_joints,
                                 STATE_QOS)
        prefix = p("frame_id_prefix")
        self._pubs = {}
        for c in self.camera_set.cameras:
            self._pubs[c.name] = tuple(
                self.create_publisher(kind, topic, IMAGE_QOS, event_callbacks=self._matched_log(topic))
                for kind, topic in ((Image, camera_msgs.image_topic(c.name)),
                                    (CompressedImage, camera_msgs.compressed_topic(c.name)),
                                    (CameraInfo, camera_msgs.info_topic(c.name)))
            ) + (camera_msgs.frame_id(c.name, prefix),)
        self.published = {c.name: 0 for c in self.camera_set.cameras}
        self.compressed_published = {c.name: 0 for c in self.camera_set.cameras}  # only while someone subscribes
        self.render_failures = {c.name: 0 for c in self.camera_set.cameras}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.start_error: "BaseException | None" = None
        self.render_error = ""
        self._thread = threading.Thread(target=self._render_loop, name="camera-render", daemon=True)

    def p(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _matched_log(self, topic: str) -> PublisherEventCallbacks:
        """Log each change of ``topic``'s matched subscribers (``matched <topic>: N subscriber(s)``).

        This publisher's own view, the one that decides who gets a best-effort frame: a subscriber that already
        sees the publisher (a recorder saying it is matched) may not be seen by it yet.
        """
        name = self.resolve_topic_name(topic)
        return PublisherEventCallbacks(matched=lambda info: self.get_logger().info(
            f"matched {name}: {info.current_count} subscriber(s)"))

    # -- inputs (executor thread) ---------------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        if len(msg.position) != len(msg.name):
            return
        stamp_ns = joint_state_ns(msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec,
                                  self.get_clock().now().nanoseconds)
        with self._joint_lock:
            self._joints = dict(zip(msg.name, msg.position))
            self._joints_version += 1
            self._joints_ns = stamp_ns

    def _on_parameters(self, params: List[Any]) -> SetParametersResult:
        task, seed = self._scene
        for param in params:
            if param.name in PARAMETERS and PARAMETERS[param.name][2].get("read_only"):
                return SetParametersResult(successful=False, reason=f"{param.name} is read-only")
            try:
                if param.name == "scene_task_json":
                    task = _scene_task(str(param.value))
                elif param.name == "scene_seed":
                    seed = None if int(param.value) < 0 else int(param.value)
            except (ValueError, SceneParameterError) as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        with self._joint_lock:
            self._scene = (task, seed)
            self._scene_version += 1
        return SetParametersResult(successful=True)

    # -- the render thread ----------------------------------------------------------------------------------
    def start(self, timeout_s: float = _START_TIMEOUT_S, stop: Optional[threading.Event] = None) -> bool:
        """Start rendering; return True once the source is up, False when ``stop`` was set first.

        :raises CameraConfigError: the adapter failed to start (its one line), or no answer within ``timeout_s``.
        """
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.1):
            if stop is not None and stop.is_set():  # a stop while the adapter starts (GL, the model) is no error
                return False
            if time.monotonic() > deadline:
                raise CameraConfigError(f"the camera adapter did not start within {timeout_s:g} s")
        if self.start_error is not None:
            raise self.start_error
        return True

    @property
    def rendering(self) -> bool:
        """The render thread is running (False once it ended, for whatever reason)."""
        return self._thread.is_alive()

    def _render_loop(self) -> None:
        try:
            self._render()
        except BaseException as exc:  # noqa: BLE001 - kept for main's one fatal line, then the process exits
            self.render_error = f"{type(exc).__name__}: {exc}"
            raise

    def _render(self) -> None:
        try:
            source = camera_adapter.load(self.camera_set)
        except Exception as exc:  # CameraConfigError, NoOffscreenGL, ...: one line for main
            self.start_error = exc if isinstance(exc, CameraConfigError) else CameraConfigError(
                f"camera adapter {self.camera_set.adapter!r} failed to start: {type(exc).__name__}: {exc}")
            self._ready.set()
            return
        try:
            line = getattr(source, "gl_line", "")
            self.get_logger().info(
                f"cameras {', '.join(f'{c.name} {c.width}x{c.height}@{c.fps:g}' for c in self.camera_set.cameras)} "
                f"by adapter {self.camera_set.adapter}" + (f"; {line}" if line else ""))
            intrinsics = {c.name: source.intrinsics(c.name) for c in self.camera_set.cameras}
            self._ready.set()
            cams = self.camera_set.cameras
            due = {c.name: time.monotonic() for c in cams}
            posed = scened = -1
            mirrors = bool(getattr(source, "mirrors_arms", False))
            waiting = False
            held_log = _HeldLog(self)
            last_stamp = {c.name: -1 for c in cams}  # each frame a time of its own (a newer joint state)
            while not self._stop.is_set():
                now = time.monotonic()
                ready = [c for c in cams if now >= due[c.name]]
                if not ready:
                    self._stop.wait(max(0.0, min(due.values()) - now))
                    continue
                with self._joint_lock:
                    joints, jv, joints_ns = self._joints, self._joints_version, self._joints_ns
                    scene, sv = self._scene, self._scene_version
                    # Read under the lock a scene change takes: a frame of the old scene is stamped before the
                    # change was answered (its joint state's time is earlier still).
                    now_ns = self.get_clock().now().nanoseconds
                if joints is None and mirrors:  # a mirror of unknown arms would show them wrong: no frame yet
                    if not waiting:
                        self.get_logger().info("waiting for the driver's joint_states before the first frame")
                        waiting = True
                    self._stop.wait(0.02)
                    due = {c.name: time.monotonic() for c in cams}
                    continue
                if sv != scened:
                    source.set_scene(scene[0], scene[1])
                    scened = sv
                if joints is not None and jv != posed:
                    source.pose(joints)
                    posed = jv
                for c in ready:
                    period = c.period_s
                    due[c.name] = due[c.name] + period if due[c.name] + period > now else now + period
                    stamp_ns = frame_stamp_ns(joints_ns, now_ns, c.max_age_s) if mirrors else now_ns
                    if stamp_ns is None:  # the arms as of a joint state every consumer would refuse: no frame
                        held_log.held(c.name, (now_ns - joints_ns) / 1e9, c.max_age_s)
                        continue
                    held_log.drawn(c.name)
                    if stamp_ns <= last_stamp[c.name]:  # rule 4: no newer joint state, the same picture
                        continue
                    last_stamp[c.name] = stamp_ns
                    try:
                        image = source.render(c.name)
                    except Exception as exc:  # no frame this time: subscribers see the frames age
                        self.render_failures[c.name] += 1
                        if self.render_failures[c.name] in (1, 10, 100) or self.render_failures[c.name] % 1000 == 0:
                            self.get_logger().warn(f"camera {c.name}: render failed ({self.render_failures[c.name]} "
                                                   f"times): {type(exc).__name__}: {exc}")
                        continue
                    self._publish(c, image, intrinsics[c.name], _time_msg(stamp_ns))
        finally:
            source.close()

    def _publish(self, cam: Any, image: Any, k: Any, stamp: Any) -> None:
        raw_pub, jpeg_pub, info_pub, frame = self._pubs[cam.name]
        raw_pub.publish(camera_msgs.image_msg(image, stamp, frame))
        if jpeg_pub.get_subscription_count():  # encode only for someone
            jpeg_pub.publish(camera_msgs.compressed_msg(jpeg.encode(image, cam.jpeg_quality), stamp, frame))
            self.compressed_published[cam.name] += 1
        info_pub.publish(camera_msgs.info_msg(k, stamp, frame))
        self.published[cam.name] += 1

    def stop(self) -> None:
        """Stop the render thread; wait for it (and its renderer's close) unless it is still starting the adapter.

        An adapter still starting (GL detection, the model's first contexts: seconds on a loaded software
        renderer) is not waited for past ``_STARTING_STOP_WAIT_S``: its daemon thread ends with the process.
        """
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0 if self._ready.is_set() else _STARTING_STOP_WAIT_S)


class _HeldLog:
    """Counts the frames held back for a too old joint state, and says once when a camera stops and resumes."""

    def __init__(self, node: CameraNode) -> None:
        self._node = node
        self._holding: set = set()

    def held(self, camera: str, age_s: float, max_age_s: float) -> None:
        self._node.held[camera] += 1
        if camera not in self._holding:
            self._holding.add(camera)
            self._node.get_logger().warn(
                f"camera {camera}: no frames: the driver's last joint_states is {age_s:.3f} s old (limit "
                f"{max_age_s:g} s); frames resume with the joint stream")

    def drawn(self, camera: str) -> None:
        if camera in self._holding:
            self._holding.discard(camera)
            self._node.get_logger().info(f"camera {camera}: joint_states fresh again, frames resume")


def _time_msg(stamp_ns: int) -> Time:
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    return Time(sec=sec, nanosec=nanosec)


def main(args: Optional[List[str]] = None) -> int:
    """Run the camera node until SIGINT/SIGTERM; exit 2 for a refused parameter or an adapter that cannot start."""
    argv = list(sys.argv if args is None else args)
    try:  # first, before any thread: every thread of the process inherits it (cameras/render_priority.py)
        lower_render_priority()
        realtime = decide_realtime(variable=CAMERA_RT_PRIORITY_ENV, default=CAMERA_RT_PRIORITY, executor="single")
    except ValueError as exc:
        print(f"camera_node: {exc}", file=sys.stderr)
        return 2
    process = NodeProcess(argv, realtime)
    node: Optional[CameraNode] = None
    code = 0
    try:
        node = CameraNode()
        process.adopt(node=node)
        node.start(stop=process.stop)
        # Every thread now (the render thread too) and every later one runs real-time, below the control loop
        # (cameras/render_priority.py).
        spin = process.run(node, SingleThreadedExecutor(), "camera-executor")
        while not process.stop.wait(0.2):
            if not spin.is_alive():
                node.get_logger().fatal("the executor thread ended: the camera node exits non-zero")
                code = 1
                break
            if not node.rendering:  # frames stopped: exit, so a supervisor restarts the cameras
                node.get_logger().fatal(f"the render thread ended: {node.render_error or 'unknown reason'}; "
                                        "the camera node exits non-zero")
                code = 1
                break
        # The render thread stops first: a frame published after the count was read would be missing from it.
        node.stop()
        node.get_logger().info("frames published: " + ", ".join(
            f"{n} {c} ({node.compressed_published[n]} compressed)" for n, c in node.published.items()))
    except (CameraConfigError, ValueError) as exc:
        print(f"camera_node: {exc}", file=sys.stderr, flush=True)
        code = 2
    finally:
        if node is not None:
            node.stop()
        process.close(spin_timeout_s=5.0)
    return code


if __name__ == "__main__":
    sys.exit(main())
