"""Camera figures: render time per frame per camera, JPEG encode/decode, and the driver with cameras on vs off.

Not pass/fail. Three parts:

1. **render**: ``MujocoCameras`` (the camera node's source) renders each camera of ``config/cameras.yaml`` at
   224x224 and at 640x480, the arms posed anew before every frame (forward kinematics + render, what the node
   does per frame); ms per frame p50 / p99 / mean;
2. **jpeg**: Pillow JPEG encode (quality 90) and decode of those frames; ms p50 / p99 and bytes per frame;
3. **driver** (``--driver-seconds S``, 0 to skip): the arm driver node as its own process at 50 Hz, alone and
   then beside the camera node (both cameras, 224x224 at 15 fps); this process subscribes to ``joint_states``
   (published by the driver's control loop each period) and to the cameras' ``image_raw``. Reported: the
   joint_states interval p50 / p99 / max, the share of intervals within 1.5 periods (a deadline held), the
   robot-time rate (robot time advanced / wall time: 1.0 means physics kept up) and the frames per second
   received per camera;
4. **rollout** (``--rollout-seconds S``, 0 to skip): one episode of the rollout node at 50 Hz (mock policy),
   without cameras, then with both (``cameras:=scene,wrist``, the camera node beside it): its missed deadlines
   (``RunPolicyEnded.missed_deadlines``), the share of deadlines held, and each process's CPU seconds per
   second during the episode (``/proc``: what it costs, whatever the machine's load).

Usage (about 1 minute with ``--driver-seconds 20``)::

    source scripts/env.sh --no-install
    export PYTHONPATH=src/strands_robots ROS_DOMAIN_ID=<yours> ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
    python bench/camera_bench.py --frames 100 --driver-seconds 20
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "strands_robots"))

import numpy as np  # noqa: E402

from strands_robots.arm.model import ARM_NAMES  # noqa: E402
from strands_robots.cameras import jpeg  # noqa: E402
from strands_robots.cameras.config import CameraConfig, CameraSet, load_camera_set  # noqa: E402

START = {"joint_2": 0.4, "joint_3": 1.0, "joint_4": 0.9, "gripper": 0.3}


def _ms(values) -> str:
    v = sorted(values)
    p99 = v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))]
    return f"p50 {statistics.median(v) * 1e3:7.2f}  p99 {p99 * 1e3:7.2f}  mean {statistics.fmean(v) * 1e3:7.2f} ms"


def bench_render(frames: int) -> list:
    from strands_robots.cameras.mujoco_cameras import MujocoCameras

    base = load_camera_set()
    rendered = []
    for width, height in ((224, 224), (640, 480)):
        cams = CameraSet("mujoco", tuple(CameraConfig(c.name, c.mjcf_camera, width, height, c.fps, c.max_age_s)
                                         for c in base.cameras))
        source = MujocoCameras(cams)
        if width == 224:
            print(source.gl_line)
        try:
            rng = np.random.default_rng(0)
            for cam in cams.cameras:
                times = []
                source.render(cam.name)  # first frame: context warm-up, not counted
                for _ in range(frames):
                    pose = {f"{a}.{j}": v + float(rng.uniform(-0.2, 0.2)) for a in ARM_NAMES for j, v in START.items()}
                    t = time.perf_counter()
                    source.pose(pose)
                    img = source.render(cam.name)
                    times.append(time.perf_counter() - t)
                rendered.append((f"{cam.name} {width}x{height}", img))
                rate = 1 / statistics.fmean(times)
                print(f"render {cam.name:6s} {width}x{height}: {_ms(times)}  ({rate:6.1f} frames/s)")
        finally:
            source.close()
    return rendered


def bench_jpeg(rendered: list, rounds: int) -> None:
    for label, img in rendered:
        enc, dec = [], []
        data = b""
        for _ in range(rounds):
            t = time.perf_counter()
            data = jpeg.encode(img, 90)
            enc.append(time.perf_counter() - t)
            t = time.perf_counter()
            jpeg.decode(data)
            dec.append(time.perf_counter() - t)
        print(f"jpeg   {label:14s} q90: encode {_ms(enc)} | decode {_ms(dec)} | {len(data):6d} bytes "
              f"(raw {img.nbytes})")


def _start(module: str, ns: str, *params: str) -> subprocess.Popen:
    args = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={ns}"]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _cpu_s(pid: int) -> float:
    """Return the CPU seconds (user + system) process ``pid`` has used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def bench_driver(seconds: float, rate_hz: float = 50.0) -> None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import Image, JointState

    from strands_robots.conversions.joint_state import joint_state_robot_time_s
    from strands_robots.ros.qos import STATE_QOS
    from strands_robots.ros.qos import IMAGE_QOS

    rclpy.init()
    ns = f"/camera_bench_{uuid.uuid4().hex[:6]}"
    node = rclpy.create_node("camera_bench", namespace=ns)
    lock = threading.Lock()
    arrivals: list = []
    frames = {"scene": 0, "wrist": 0}
    node.create_subscription(JointState, "joint_states", lambda m: arrivals.append(
        (time.monotonic(), joint_state_robot_time_s(m))), STATE_QOS)
    for cam in frames:
        def on_image(_m, cam=cam):
            with lock:
                frames[cam] += 1
        node.create_subscription(Image, f"{cam}/image_raw", on_image, IMAGE_QOS)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    driver = _start("strands_robots.nodes.arm_driver.node", ns, "autostart:=true", f"control_rate_hz:={rate_hz}")
    procs = [driver]
    try:
        deadline = time.monotonic() + 60
        while len(arrivals) < 50 and time.monotonic() < deadline:
            time.sleep(0.1)
        for label in ("cameras off", "cameras on"):
            if label == "cameras on":
                procs.append(_start("strands_robots.nodes.camera.node", ns))
                deadline = time.monotonic() + 120
                while frames["wrist"] < 5 and time.monotonic() < deadline:
                    time.sleep(0.1)
            with lock:
                f0 = dict(frames)
            arrivals.clear()
            time.sleep(seconds)
            got = list(arrivals)
            with lock:
                f1 = dict(frames)
            intervals = [b[0] - a[0] for a, b in zip(got, got[1:])]
            period = 1.0 / rate_hz
            held = sum(1 for i in intervals if i <= 1.5 * period) / max(1, len(intervals))
            robot_rate = (got[-1][1] - got[0][1]) / (got[-1][0] - got[0][0]) if len(got) > 1 else float("nan")
            fps = ", ".join(f"{c} {(f1[c] - f0[c]) / seconds:5.1f}" for c in frames) if label == "cameras on" else "-"
            print(f"driver {label:11s}: joint_states interval {_ms(intervals)} max {max(intervals) * 1e3:6.1f} ms | "
                  f"within 1.5 periods {held * 100:7.3f} % of {len(intervals)} | robot-time rate {robot_rate:.4f} | "
                  f"frames/s {fps}")
    finally:
        for p in reversed(procs):
            _end(p)
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown()


ROLLOUT_PHASES = {
    "off": (False, False),       # driver + rollout node
    "node": (True, False),       # driver + camera node + rollout node not subscribing (the renderer's CPU alone)
    "on": (True, True),          # driver + camera node + rollout node with cameras:=scene,wrist
}


def bench_rollout(seconds: float, phases: "list[str]", rate_hz: float = 50.0) -> None:
    """Measure the rollout loop's deadlines at 50 Hz without cameras, then with the camera node and both cameras."""
    import rclpy
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from strands_robots_msgs.action import RunEpisode

    rclpy.init()
    node = rclpy.create_node("camera_bench_client")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()

    def wait(future, timeout_s: float, what: str):
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            raise RuntimeError(f"{what}: no answer within {timeout_s:g} s")
        return future.result()

    try:
        for phase in phases:
            camera_node, cameras = ROLLOUT_PHASES[phase]
            label = {"off": "cameras off", "node": "camera node", "on": "cameras on"}[phase]
            ns = f"/camera_bench_{uuid.uuid4().hex[:6]}"
            procs = [_start("strands_robots.nodes.arm_driver.node", ns, "autostart:=true",
                            f"control_rate_hz:={rate_hz}")]
            params = ["start_pose_before_episode:=false", f"control_frequency:={rate_hz}", "driver_timeout_s:=60.0"]
            if camera_node:
                procs.append(_start("strands_robots.nodes.camera.node", ns))
            if cameras:
                params += ["cameras:=scene,wrist", "camera_scene_node:=camera"]
            rollout = _start("strands_robots.nodes.rollout.node", ns, *params)
            procs.append(rollout)
            action = ActionClient(node, RunEpisode, f"{ns}/run_episode")
            try:
                if not action.wait_for_server(timeout_sec=120.0):
                    raise RuntimeError("run_episode not found")
                goal = RunEpisode.Goal(control_frequency=rate_hz, duration_s=seconds, seed=1)
                cpu0 = {p.pid: _cpu_s(p.pid) for p in procs}
                wall0 = time.monotonic()
                handle = wait(action.send_goal_async(goal), 60.0, "RunEpisode goal")
                ended = wait(handle.get_result_async(), seconds * 2 + 120, "RunEpisode result").result.ended
                wall = time.monotonic() - wall0
                cpu = {p.pid: (_cpu_s(p.pid) - cpu0[p.pid]) / wall for p in procs}
                steps = max(1, ended.applied_actions)
                print(f"rollout {label:11s}: outcome {ended.outcome} {ended.error_message[:80]} | "
                      f"{ended.applied_actions} steps at {rate_hz:g} Hz | missed deadlines {ended.missed_deadlines} | "
                      f"deadlines held {100.0 * (1 - ended.missed_deadlines / (steps + ended.missed_deadlines)):.3f} %"
                      f" | CPU s/s: driver {cpu[procs[0].pid]:.2f}, rollout {cpu[rollout.pid]:.2f}"
                      + (f", camera node {cpu[procs[1].pid]:.2f}" if camera_node else ""))
            finally:
                action.destroy()
                for p in reversed(procs):
                    _end(p)
    finally:
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100, help="frames rendered per camera and size")
    parser.add_argument("--jpeg-rounds", type=int, default=100)
    parser.add_argument("--driver-seconds", type=float, default=20.0, help="0: skip the driver part")
    parser.add_argument("--rollout-seconds", type=float, default=30.0, help="episode length; 0: skip the rollout part")
    parser.add_argument("--rollout-phases", default="off,on", help=f"comma-separated of {', '.join(ROLLOUT_PHASES)}")
    args = parser.parse_args()
    print(f"camera_bench on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    rendered = bench_render(args.frames)
    bench_jpeg(rendered, args.jpeg_rounds)
    if args.driver_seconds > 0:
        bench_driver(args.driver_seconds)
    if args.rollout_seconds > 0:
        bench_rollout(args.rollout_seconds, [p.strip() for p in args.rollout_phases.split(",") if p.strip()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
