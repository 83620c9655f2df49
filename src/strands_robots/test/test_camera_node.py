"""The camera node as its own process over real DDS: image_transport's topics, encodings and intrinsics.

The node runs as ``python -m strands_robots.nodes.camera.node`` in a namespace of its own and is ended by PID in
``finally``; this process plays the arm driver (it publishes ``joint_states``) and subscribes to the topics.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, JointState  # noqa: E402

from strands_robots.arm.model import ARM_NAMES, JOINT_NAMES  # noqa: E402
from strands_robots.cameras import jpeg  # noqa: E402
from strands_robots.cameras.intrinsics import from_fovy  # noqa: E402
from strands_robots.ros.qos import STATE_QOS  # noqa: E402
from strands_robots.conversions.camera import image_from_msg  # noqa: E402
from strands_robots.ros.qos import IMAGE_QOS  # noqa: E402
from strands_robots.ros.process import spin_in_background  # noqa: E402

from ros_harness import wait_for  # noqa: E402

START = {"joint_2": 0.4, "joint_3": 1.0, "joint_4": 0.9, "gripper": 0.3}
KEYS = [f"{a}.{j}" for a in ARM_NAMES for j in JOINT_NAMES]


def _env() -> dict:
    here = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(here.parent), str(here), env.get("PYTHONPATH", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


class CameraProcess:
    """The camera node in its own process in namespace ``ns``; a probe node here plays the driver."""

    def __init__(self, *ros_args: str, joints: bool = True, program: "tuple | None" = None) -> None:
        self.ns = f"/h7_{uuid.uuid4().hex[:8]}"
        self.publish_joints = joints
        self.joint_lag_ns = 0  # joint states stamped this long before they are published (a measured state)
        self.joint_stamps: list = []  # the header stamp (ns) of every joint state published
        self.lines: list = []
        program = program or ("-m", "strands_robots.nodes.camera.node")
        self.proc = subprocess.Popen(
            [sys.executable, *program, "--ros-args", "-r", f"__ns:={self.ns}", *ros_args], env=_env(),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self._reader.start()
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("h7_camera_probe", namespace=self.ns, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = spin_in_background(self.executor, "h7_probe")
        self.received: dict = {}
        self.stamps: dict = {}  # topic: (header stamp ns, arrival monotonic s) of every message
        self.lock = threading.Lock()
        self.joints = self.node.create_publisher(JointState, "joint_states", STATE_QOS)
        self.pose = {k: START.get(k.split(".")[1], 0.0) for k in KEYS}
        self._timer = self.node.create_timer(0.02, self._publish_joints)
        for cam in ("scene", "wrist"):
            for suffix, cls in (("image_raw", Image), ("image_raw/compressed", CompressedImage),
                                ("camera_info", CameraInfo)):
                topic = f"{cam}/{suffix}"
                self.received[topic] = []
                self.node.create_subscription(cls, topic, lambda m, t=topic: self._keep(t, m), IMAGE_QOS)

    def _publish_joints(self) -> None:
        if not self.publish_joints:
            return
        m = JointState()
        stamp_ns = self.node.get_clock().now().nanoseconds - self.joint_lag_ns
        m.header.stamp.sec, m.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
        with self.lock:
            m.name = list(self.pose)
            m.position = [float(v) for v in self.pose.values()]
            self.joint_stamps.append(stamp_ns)
        self.joints.publish(m)

    def _keep(self, topic: str, msg) -> None:
        with self.lock:
            self.received[topic].append(msg)
            del self.received[topic][:-50]
            self.stamps.setdefault(topic, []).append(
                (msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec, time.monotonic()))

    def latest(self, topic: str):
        with self.lock:
            got = self.received[topic]
            return got[-1] if got else None

    def count(self, topic: str) -> int:
        with self.lock:
            return len(self.received[topic])

    def wait_new(self, topic: str, n: int = 3, timeout_s: float = 60.0):
        """Wait for ``n`` messages arriving after now on ``topic``; return the last."""
        start = self.count(topic)
        with self.lock:
            got = self.received[topic]
            first_id = id(got[-1]) if got else None
        ok = wait_for(lambda: self.count(topic) >= min(50, start + n) and id(self.latest(topic)) != first_id,
                      timeout_s)
        assert ok, f"no new {topic} within {timeout_s} s; node output:\n{''.join(self.lines[-20:])}"
        return self.latest(topic)

    def exit_and_output(self, timeout_s: float = 60.0) -> tuple:
        """Wait for the node to exit; return its exit code and everything it wrote (stderr with stdout)."""
        code = self.proc.wait(timeout_s)
        self._reader.join(10.0)  # end-of-file comes with the exit: the last lines are in
        return code, "".join(self.lines)

    def set_param(self, name: str, value) -> bool:
        client = self.node.create_client(SetParameters, "camera/set_parameters")
        assert client.wait_for_service(timeout_sec=30.0)
        v = ParameterValue()
        if isinstance(value, int):
            v.type, v.integer_value = ParameterType.PARAMETER_INTEGER, value
        else:
            v.type, v.string_value = ParameterType.PARAMETER_STRING, value
        future = client.call_async(SetParameters.Request(parameters=[Parameter(name=name, value=v)]))
        assert wait_for(future.done, 30.0)
        return future.result().results[0].successful

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
                try:
                    self.proc.wait(15.0)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5.0)
        finally:
            # Shut the executor down and join its spin thread before the node and context go: a spin thread still
            # in rclpy's wait at interpreter exit aborts the process ("terminate called without an active
            # exception").
            self.thread.stop(5.0)
            self.node.destroy_node()
            rclpy.shutdown(context=self.context)


@pytest.fixture
def cameras():
    made: list = []

    def start(*ros_args: str, joints: bool = True, program: "tuple | None" = None) -> CameraProcess:
        made.append(CameraProcess(*ros_args, joints=joints, program=program))
        return made[-1]

    try:
        yield start
    finally:
        for c in made:
            c.close()


def _diff(a, b) -> float:
    return float(np.abs(a.astype(int) - b.astype(int)).mean())


def test_camera_topics_have_image_transport_names_encodings_and_the_mjcf_intrinsics(cameras):
    cam = cameras()
    raw = cam.wait_new("scene/image_raw")
    compressed = cam.wait_new("scene/image_raw/compressed")
    info = cam.wait_new("scene/camera_info")
    types = dict(cam.node.get_topic_names_and_types())
    for name in ("scene", "wrist"):
        assert types[f"{cam.ns}/{name}/image_raw"] == ["sensor_msgs/msg/Image"]
        assert types[f"{cam.ns}/{name}/image_raw/compressed"] == ["sensor_msgs/msg/CompressedImage"]
        assert types[f"{cam.ns}/{name}/camera_info"] == ["sensor_msgs/msg/CameraInfo"]
    assert (raw.encoding, raw.width, raw.height, raw.step, raw.is_bigendian) == ("rgb8", 224, 224, 672, 0)
    assert raw.header.frame_id == "scene_optical_frame" == info.header.frame_id
    assert compressed.format == "rgb8; jpeg compressed bgr8"
    decoded = jpeg.decode(bytes(compressed.data))
    assert decoded.shape == (224, 224, 3) and decoded.dtype == np.uint8
    k = from_fovy(45.0, 224, 224)  # the MJCF's scene camera: fovy="45"
    assert (info.width, info.height, info.distortion_model) == (224, 224, "plumb_bob")
    assert list(info.k) == pytest.approx(list(k.k)) and list(info.p) == pytest.approx(list(k.p))
    wrist = cam.wait_new("wrist/camera_info")
    assert list(wrist.k)[0] == pytest.approx(112.0 / math.tan(math.radians(35.0)))  # fovy="70"
    # Stamped with the node clock (system time here: no use_sim_time) when rendered; info shares the stamp.
    stamp_s = raw.header.stamp.sec + raw.header.stamp.nanosec * 1e-9
    assert abs(stamp_s - time.time()) < 120.0
    stamps = {(m.header.stamp.sec, m.header.stamp.nanosec) for m in cam.received["scene/camera_info"]}
    assert (raw.header.stamp.sec, raw.header.stamp.nanosec) in stamps


def test_the_wrist_frames_over_ros_change_when_the_arm_moves_and_the_scene_when_the_seed_does(cameras):
    cam = cameras()
    before = image_from_msg(cam.wait_new("wrist/image_raw"))
    still = image_from_msg(cam.wait_new("wrist/image_raw"))
    with cam.lock:
        cam.pose["right.joint_1"] = 0.6
        cam.pose["right.joint_4"] = 0.3
    moved = image_from_msg(cam.wait_new("wrist/image_raw", n=5))
    assert _diff(before, still) == 0.0
    assert _diff(before, moved) > 5.0
    scene1 = image_from_msg(cam.wait_new("scene/image_raw"))
    assert cam.set_param("scene_seed", 2)
    scene2 = image_from_msg(cam.wait_new("scene/image_raw", n=5))
    assert _diff(scene1, scene2) > 0.05
    assert not cam.set_param("scene_task_json", '{"object_x": 5}')  # outside the region: refused


def test_the_pattern_adapter_is_brought_up_by_the_adapter_parameter(cameras):
    cam = cameras("-p", "adapter:=pattern", "-p", "cameras:=wrist")
    img = image_from_msg(cam.wait_new("wrist/image_raw"))
    info = cam.wait_new("wrist/camera_info")
    assert img.shape == (224, 224, 3)
    assert tuple(img[0, 0]) == (255, 255, 255) and tuple(img[0, -1]) == (0, 0, 0)  # the first and last bars
    assert list(info.k)[0] == pytest.approx(112.0 / math.tan(math.radians(30.0)))  # the pattern's 60 degrees
    assert cam.count("scene/image_raw") == 0
    assert any("by adapter pattern" in line for line in cam.lines)


def test_an_unknown_adapter_ends_the_node_with_one_line_and_exit_2():
    proc = subprocess.Popen([sys.executable, "-m", "strands_robots.nodes.camera.node", "--ros-args", "-p",
                             "adapter:=nope"], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5.0)
    assert proc.returncode == 2
    assert err.strip().splitlines()[-1].startswith("camera_node: unknown camera adapter 'nope'")


def test_under_use_sim_time_frames_are_stamped_with_simulation_time(cameras):
    from rosgraph_msgs.msg import Clock

    cam = cameras("-p", "use_sim_time:=true", "-p", "cameras:=wrist", "-r", "/clock:=clock")
    clock = cam.node.create_publisher(Clock, "clock", 10)
    sim_ns = [1234_500_000_000]

    def tick() -> None:
        sim_ns[0] += 20_000_000
        m = Clock()
        m.clock.sec, m.clock.nanosec = divmod(sim_ns[0], 1_000_000_000)
        clock.publish(m)

    cam.node.create_timer(0.02, tick)
    assert wait_for(lambda: (m := cam.latest("wrist/image_raw")) is not None and m.header.stamp.sec >= 1234, 60.0), \
        "no frame stamped with the simulation clock"
    raw = cam.latest("wrist/image_raw")
    stamp_ns = raw.header.stamp.sec * 1_000_000_000 + raw.header.stamp.nanosec
    assert 1234_500_000_000 <= stamp_ns <= sim_ns[0]  # simulation time, not the wall clock's 1.7e9 s


class _PoseFails:
    """A camera source whose mirror breaks on the first joint state (a fault the render loop cannot absorb)."""

    def __init__(self, config) -> None:
        from strands_robots.cameras.pattern import PatternCameras

        self._inner = PatternCameras(config)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def names(self):
        return self._inner.names()

    def intrinsics(self, name):
        return self._inner.intrinsics(name)

    def set_scene(self, task_params, seed):
        pass

    def render(self, name):
        return self._inner.render(name)

    def close(self):
        pass

    def pose(self, positions):
        raise RuntimeError("mirror broke")


def pose_fails(config, model_path=None):
    """Camera adapter factory for ``module:factory`` (the third way the adapter API finds one)."""
    return _PoseFails(config)


def test_a_render_thread_that_dies_ends_the_node_non_zero_saying_why(cameras):
    cam = cameras("-p", "adapter:=test_camera_node:pose_fails", "-p", "cameras:=wrist")
    code, output = cam.exit_and_output(60.0)
    assert code == 1, f"camera node exited {code}, not 1; its stderr and stdout:\n{output[-6000:]}"
    assert "the render thread ended: RuntimeError: mirror broke" in output, output[-6000:]


# The camera node's main in a process of its own, its joint_states callback made slow (each one still in the
# executor 0.3 s), so its executor thread is in a callback when the render thread dies; after main returns, the
# live threads of the process are printed before the interpreter exits.
_MAIN_WITH_A_SLOW_CALLBACK = """
import sys, threading, time
from strands_robots.nodes.camera import node as camera_node

on_joints = camera_node.CameraNode._on_joints

def slow_on_joints(self, msg):
    on_joints(self, msg)
    time.sleep(0.3)

camera_node.CameraNode._on_joints = slow_on_joints
code = camera_node.main(sys.argv)
print("threads after main: " + ",".join(sorted(t.name for t in threading.enumerate())), flush=True)
sys.exit(code)
"""


def test_the_camera_node_exits_only_after_its_executor_thread_ended(cameras):
    # A spin thread still in rclpy when the interpreter exits is ended there by pthread_exit, which aborts the
    # process (-6, "terminate called without an active exception"); a slow callback at exit is that path.
    cam = cameras("-p", "adapter:=test_camera_node:pose_fails", "-p", "cameras:=wrist",
                  program=("-c", _MAIN_WITH_A_SLOW_CALLBACK))
    code, output = cam.exit_and_output(60.0)
    assert code == 1, f"camera node exited {code}, not 1; its stderr and stdout:\n{output[-6000:]}"
    after = [line for line in output.splitlines() if line.startswith("threads after main: ")]
    assert after, output[-6000:]
    assert "camera-executor" not in after[-1].split(": ", 1)[1].split(","), output[-6000:]


def test_the_simulated_cameras_publish_nothing_before_the_drivers_first_joint_states(cameras):
    cam = cameras("-p", "cameras:=wrist", joints=False)
    assert wait_for(lambda: any("waiting for the driver's joint_states" in line for line in cam.lines), 60.0), \
        "".join(cam.lines)[-2000:]
    assert cam.count("wrist/image_raw") == 0
    cam.publish_joints = True
    cam.wait_new("wrist/image_raw")


def _stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def test_each_frame_is_stamped_with_the_joint_state_it_draws_and_a_frozen_joint_stream_stops_the_frames(cameras):
    from strands_robots.cameras.config import load_camera_set

    wrist = load_camera_set().camera("wrist")  # the camera file the node reads
    cam = cameras("-p", "cameras:=wrist")
    cam.joint_lag_ns = 200_000_000  # each state measured 0.2 s before it is published
    cam.wait_new("wrist/image_raw", n=5)
    lagged = cam.wait_new("wrist/image_raw", n=5)
    with cam.lock:
        published = set(cam.joint_stamps)
    assert _stamp_ns(lagged) in published  # the stamp of a joint state it drew, not the time it was drawn
    def info_shares_it() -> bool:  # the camera info, published right after the image, carries its stamp
        with cam.lock:
            return any(_stamp_ns(m) == _stamp_ns(lagged) for m in cam.received["wrist/camera_info"])

    assert wait_for(info_shares_it, 10.0)

    # The driver freezes: no joint state after this one.
    cam.publish_joints = False
    with cam.lock:
        last_joint_ns = max(cam.joint_stamps)
        frozen_at = time.monotonic()
    assert wait_for(lambda: any("camera wrist: no frames: the driver's last joint_states is" in line
                                for line in cam.lines), 30.0), "".join(cam.lines)[-3000:]
    with cam.lock:
        after = [(stamp, at) for stamp, at in cam.stamps["wrist/image_raw"] if at > frozen_at]
    assert all(stamp <= last_joint_ns for stamp, _ in after), (last_joint_ns, after)  # never a fresh stamp
    # drawn from the last state only while it is younger than the camera's bound
    assert len([s for s, _ in after if s == last_joint_ns]) <= wrist.max_age_s * wrist.fps + 1

    # The joint stream resumes: so do the frames, with the new states' stamps.
    cam.joint_lag_ns = 0
    cam.publish_joints = True
    resumed = cam.wait_new("wrist/image_raw", n=3)
    assert _stamp_ns(resumed) > last_joint_ns
    assert wait_for(lambda: any("camera wrist: joint_states fresh again, frames resume" in line
                                for line in cam.lines), 30.0)
