"""Camera frames over ROS: the rollout node's observations hold the camera node's frames.

Three processes in one namespace (the arm driver, the camera node, the rollout node with ``cameras:=scene,wrist``)
and this test's client node; every process is ended by PID (its group) in ``finally``. The step events carry
each frame's stamp and age in steps; once the camera node is SIGKILLed, its last frame ages past its bound and
the episode ends as an error naming the camera, before a stale frame reaches the policy. Once the driver is
frozen (SIGSTOP), the camera node's frames carry the stamp of the last joint state they show, never a fresh one:
the episode ends, and the stale rule refuses the frames.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from strands_robots.ros.action_client import ActionClient  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from strands_robots_msgs.action import RunEpisode  # noqa: E402
from strands_robots_msgs.msg import ObserverEvent  # noqa: E402

from strands_robots.ros.qos import EVENT_QOS  # noqa: E402
from strands_robots.ros.process import spin_in_background  # noqa: E402

from goal_warmup import warm_goal_path  # noqa: E402
from ros_harness import wait_for  # noqa: E402

RATE_HZ = 50.0
# The stale bound of the cameras here: above what the other suites' load on a 2-core machine does to a healthy
# camera node (frames 0.68 s old were seen at load average 9 with the configured 0.5 s).
MAX_AGE_S = 2.0
CAMERAS = ("adapter: mujoco\ncameras:\n"
           f"  scene: {{mjcf_camera: scene, width: 224, height: 224, fps: 15, max_age_s: {MAX_AGE_S}}}\n"
           f"  wrist: {{mjcf_camera: right/wrist, width: 224, height: 224, fps: 15, max_age_s: {MAX_AGE_S}}}\n")


@pytest.fixture(scope="module", autouse=True)
def cameras_file(tmp_path_factory):
    """Write this module's camera file (CAMERAS) once; its path is in CAMERAS_FILE for the tests."""
    global CAMERAS_FILE
    path = tmp_path_factory.mktemp("cameras") / "cameras.yaml"
    path.write_text(CAMERAS)
    CAMERAS_FILE = str(path)
    yield CAMERAS_FILE


CAMERAS_FILE = ""

def _start(module: str, namespace: str, *params: str) -> subprocess.Popen:
    args = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={namespace}"]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _end(proc: subprocess.Popen) -> str:
    """End a process this test started (SIGINT to its group, then SIGKILL); return its output."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=10)
    return out or ""


class CameraStation:
    """This test's client node beside a driver, a camera node and (``rollout``) a rollout node process."""

    def __init__(self, rollout: bool = True, *rollout_params: str) -> None:
        self.namespace = f"/h7_cams_{uuid.uuid4().hex[:8]}"
        self.procs: list = []
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("h7_client", namespace=self.namespace, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spinner = spin_in_background(self.executor, "h7-cams-test")
        self.action = ActionClient(self.node, RunEpisode, "run_episode")
        self.events: list = []
        self._lock = threading.Lock()
        self.node.create_subscription(ObserverEvent, "observer_events", self._on_event, EVENT_QOS)
        try:
            self.procs.append(_start("strands_robots.nodes.arm_driver.node", self.namespace, "autostart:=true",
                                     f"control_rate_hz:={RATE_HZ}"))
            self.camera = _start("strands_robots.nodes.camera.node", self.namespace, f"cameras_file:={CAMERAS_FILE}")
            self.procs.append(self.camera)
            if rollout:
                self.procs.append(_start("strands_robots.nodes.rollout.node", self.namespace,
                                         "start_pose_before_episode:=false", f"control_frequency:={RATE_HZ}",
                                         "driver_timeout_s:=60.0", "driver_silence_s:=0.5", "cameras:=scene,wrist",
                                         f"cameras_file:={CAMERAS_FILE}",
                                         *rollout_params))
                assert self.action.wait_for_server(timeout_sec=60.0), "run_episode action server not found"
                assert wait_for(lambda: self.node.count_subscribers(f"{self.namespace}/observer_events") >= 1, 10)
                # The first goal's answer can be lost (no answer in 30 s); see goal_warmup.py.
                warm_goal_path(self.action, RATE_HZ)
        except BaseException:
            self.close()
            raise

    def _on_event(self, msg) -> None:
        with self._lock:
            self.events.append(msg)

    def run(self, timeout_s: float = 120.0, **fields):
        goal = RunEpisode.Goal()
        goal.seed = -1
        goal.control_frequency = RATE_HZ
        for k, v in fields.items():
            setattr(goal, k, v)
        done = threading.Event()
        future = self.action.send_goal_async(goal)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(30.0), "RunEpisode goal: no answer"
        handle = future.result()
        assert handle.accepted
        done = threading.Event()
        result = handle.get_result_async()
        result.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), f"RunEpisode result not within {timeout_s} s"
        return result.result().result

    def steps(self, run_id: str) -> list:
        with self._lock:
            return [e.step[0] for e in self.events if e.kind == "step" and e.run_id == run_id]

    def close(self) -> None:
        outputs = []
        try:
            for proc in reversed(self.procs):
                outputs.append(_end(proc))
        finally:
            self.executor.shutdown(timeout_sec=5.0)
            self.spinner.join(5.0)
            self.node.destroy_node()
            rclpy.try_shutdown(context=self.context)
        self.output = "\n".join(outputs)


@pytest.fixture
def station():
    s = CameraStation()
    try:
        yield s
    finally:
        s.close()


class LookingPolicy:
    """Holds still and keeps the shape, dtype and age of every camera frame it is shown."""

    never_blocks = True

    def __init__(self) -> None:
        self.seen: list = []

    def reset(self, task):
        pass

    def act(self, observation):
        self.seen.append({k: (v.shape, v.dtype, observation[k + "_age_s"]) for k, v in observation.items()
                          if k.endswith(".image")})
        return [{"right.joint_1": float(observation["right.joint_1.pos"])}]

    def resume(self, observation):
        pass


def test_images_reach_a_policy_over_ros_with_the_configured_shape_and_dtype():
    import numpy as np

    from strands_robots.cameras.config import load_camera_set
    from strands_robots.nodes.rollout.camera_frames import camera_backend
    from strands_robots.driver_link.client import RosDriverBackend
    from strands_robots.rollout.runner import PolicyRunner

    s = CameraStation(rollout=False)
    backend = None
    try:
        # As the rollout node composes it: the driver's client, the camera node's frames around it.
        backend = RosDriverBackend(s.node, wait_timeout_s=60.0, control_frequency=RATE_HZ,
                                   reset_moves_to_start_pose=False)
        assert backend.wait_until_ready(timeout_s=60.0)
        assert backend.acquire("h7", priority=10, duration_s=5.0, timeout_s=10.0).granted
        cams = load_camera_set(CAMERAS_FILE)
        runner = PolicyRunner(camera_backend(s.node, backend, cams, first_frame_timeout_s=60.0))
        policy = LookingPolicy()
        out = runner.run(policy, n_steps=20, control_frequency=RATE_HZ, action_horizon=1)
        assert out["status"] == "success", out
        assert len(policy.seen) == 20
        for seen in policy.seen:
            assert set(seen) == {"scene.image", "wrist.image"}
            for name, (shape, dtype, age) in seen.items():
                cam = cams.camera(name.split(".")[0])
                assert shape == (cam.height, cam.width, 3) and dtype == np.uint8 and 0.0 <= age <= cam.max_age_s
    finally:
        if backend is not None:
            backend.close()
        s.close()


def test_over_ros_every_step_carries_both_cameras_frames_and_a_killed_camera_ends_the_episode_as_stale(station):
    result = station.run(max_steps=40, duration_s=5.0)
    ended = result.ended
    assert ended.outcome == "ok", (ended.error_type, ended.error_message, ended.end_detail)
    run_id = ended.run_id
    assert wait_for(lambda: len(station.steps(run_id)) == 40, 10.0)
    steps = station.steps(run_id)
    for step in steps:
        assert list(step.camera_names) == ["scene", "wrist"]
        assert all(stamp > 0 for stamp in step.camera_stamp_ns)
        # within the bound, plus the age of a reused chunk-start observation
        assert all(age <= MAX_AGE_S * RATE_HZ + step.observation_age_steps for age in step.camera_age_steps), \
            [(s.observation_age_steps, list(s.camera_age_steps)) for s in steps]
        assert "scene.image_age_s" in step.observation_keys
        assert not any(k.endswith(".image") for k in step.observation_keys)  # never the pixels
    stamps = [s.camera_stamp_ns[0] for s in steps]
    assert stamps == sorted(stamps) and len(set(stamps)) >= 3  # new frames arrived during the episode

    os.killpg(station.camera.pid, signal.SIGKILL)
    station.camera.wait(10.0)
    killed_at = time.monotonic()
    result = station.run(max_steps=2000, duration_s=40.0)
    ended = result.ended
    assert ended.outcome == "error" and ended.error_type == "CameraStale", (ended.error_type, ended.end_detail)
    assert "stale: its latest frame is" in ended.error_message and f"(limit {MAX_AGE_S:g} s)" in ended.error_message
    assert ended.applied_actions < 2000
    assert time.monotonic() - killed_at < 60.0
    for step in station.steps(ended.run_id):  # any step that ran saw frames within the bound
        assert all(age <= MAX_AGE_S * RATE_HZ + step.observation_age_steps for age in step.camera_age_steps)


def test_over_ros_each_reset_lays_out_the_scene_for_the_task_and_seed_and_drops_the_old_frames():
    import numpy as np

    from strands_robots.cameras.config import load_camera_set
    from strands_robots.nodes.rollout.camera_frames import CameraSceneError, camera_backend
    from strands_robots.driver_link.client import RosDriverBackend

    s = CameraStation(rollout=False)
    backend = None
    try:
        backend = RosDriverBackend(s.node, wait_timeout_s=60.0, control_frequency=RATE_HZ,
                                   reset_moves_to_start_pose=False)
        assert backend.wait_until_ready(timeout_s=60.0)
        cams = load_camera_set(CAMERAS_FILE).select(["scene"])
        cb = camera_backend(s.node, backend, cams, first_frame_timeout_s=60.0, scene_node="camera")

        def scene(task, seed):
            cb.set_task(task)
            before_ns = s.node.get_clock().now().nanoseconds
            cb.reset(seed)
            obs = cb.observe()
            assert obs["scene.image_stamp_ns"] > before_ns  # a frame of the new layout, none from before
            return obs["scene.image"].astype(int)

        a = scene({}, 1)
        b = scene({}, 2)
        a_again = scene({}, 1)
        placed = scene({"parameters": {"object_x": "0.45", "object_y": "-0.3"}}, 1)
        assert np.abs(a - b).mean() > 0.05 and np.abs(a - placed).mean() > 0.05
        assert np.abs(a - a_again).mean() < np.abs(a - b).mean() / 4  # the same layout again (arms held still)
        cb.set_task(None)
        s.camera.send_signal(signal.SIGSTOP)  # a camera node that cannot answer: the reset says so
        try:
            with pytest.raises(CameraSceneError, match="no answer"):
                stuck = camera_backend(s.node, backend, cams, first_frame_timeout_s=1.0, scene_node="camera")
                stuck.reset(3)
        finally:
            s.camera.send_signal(signal.SIGCONT)
    finally:
        if backend is not None:
            backend.close()
        s.close()


def test_the_rollout_node_lays_out_the_goals_scene_before_its_episode():
    s = CameraStation(True, "camera_scene_node:=camera")
    try:
        result = s.run(max_steps=10, duration_s=5.0, seed=7)
        assert result.ended.outcome == "ok", (result.message, result.ended.error_message)
        steps = s.steps(result.ended.run_id)
        assert steps and all(list(st.camera_names) == ["scene", "wrist"] for st in steps)
        from rcl_interfaces.srv import GetParameters

        client = s.node.create_client(GetParameters, f"{s.namespace}/camera/get_parameters")
        assert client.wait_for_service(timeout_sec=30.0)
        done = threading.Event()
        future = client.call_async(GetParameters.Request(names=["scene_seed"]))
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(30.0)
        assert future.result().values[0].integer_value == 7  # the goal's seed laid out the scene
    finally:
        s.close()


def _ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def test_a_frozen_driver_ends_the_episode_and_no_frame_after_it_carries_a_fresh_stamp():
    from sensor_msgs.msg import Image, JointState

    from strands_robots.cameras.config import load_camera_set
    from strands_robots.cameras.frames import CameraStale
    from strands_robots.ros.qos import STATE_QOS
    from strands_robots.nodes.rollout.camera_frames import subscribe_frames
    from strands_robots.ros.qos import IMAGE_QOS

    s = CameraStation()
    driver = s.procs[0]
    lock = threading.Lock()
    joints: list = []  # header stamps of the driver's joint states
    images: list = []  # (header stamp, arrival monotonic) of the scene camera's frames
    s.node.create_subscription(JointState, "joint_states",
                               lambda m: (lock.acquire(), joints.append(_ns(m.header.stamp)), lock.release()),
                               STATE_QOS)
    s.node.create_subscription(Image, "scene/image_raw",
                               lambda m: (lock.acquire(), images.append((_ns(m.header.stamp), time.monotonic())),
                                          lock.release()), IMAGE_QOS)
    cams = load_camera_set(CAMERAS_FILE)
    frames = subscribe_frames(s.node, cams)  # the stale rule, as the rollout's observations apply it
    frozen = False
    try:
        goal = RunEpisode.Goal()
        goal.seed, goal.control_frequency, goal.max_steps, goal.duration_s = -1, RATE_HZ, 3000, 60.0
        sent = s.action.send_goal_async(goal)
        assert wait_for(sent.done, 30.0) and sent.result().accepted
        result = sent.result().get_result_async()
        assert wait_for(lambda: any(e.kind == "step" for e in list(s.events)), 60.0), "the episode did not start"
        driver.send_signal(signal.SIGSTOP)  # the driver freezes: its joint stream stops, the camera node goes on
        frozen = True
        frozen_at = time.monotonic()
        assert wait_for(result.done, 30.0), "the episode did not end with its driver frozen"
        ended = result.result().result.ended
        assert ended.outcome == "error", (ended.error_type, ended.end_detail)
        assert ended.error_type in ("DriverFault", "CameraStale"), (ended.error_type, ended.end_detail)
        # The stale rule sees the frozen arms: the newest frame ages past the camera's bound.
        def stale() -> bool:
            try:
                frames.add_to({}, s.node.get_clock().now().nanoseconds)
            except CameraStale:
                return True
            return False

        assert wait_for(stale, MAX_AGE_S + 30.0), "fresh-stamped frames of frozen arms kept the cameras fresh"
        with lock:
            last_joint = max(joints)
            after = [stamp for stamp, at in images if at > frozen_at + 0.5]  # past what was in flight
        assert all(stamp <= last_joint for stamp in after), (last_joint, after[-5:])
        assert len(after) <= 15 * MAX_AGE_S + 1  # drawn from the last state only while within the bound
        driver.send_signal(signal.SIGCONT)
        frozen = False
        # Thawed, the joint stream resumes and the frames come again, stamped with its new states.
        assert wait_for(lambda: images and images[-1][0] > last_joint, 60.0), "no frame after the driver resumed"
    finally:
        if frozen:
            driver.send_signal(signal.SIGCONT)
        s.close()
