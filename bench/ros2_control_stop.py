"""How fast a latched stop takes the arms down on a real ros2_control stack (mock hardware), per command controller.

What a stop does on ``hardware:=ros2_control`` (``nodes/arm_driver/ros2_control.py``): the driver core holds the
arms (the adapter publishes a hold at the measured position to the command controller at once), then, two
controller_manager updates later (the controller applies the hold first), the adapter asks the controller_manager's
``switch_controller`` to deactivate the command controller without waiting for the answer. This bench drives the real adapter and driver core in this process against ``ros2_control_node`` running
the package's demo description and controllers (``config/ros2_control/``), and for each trial:

1. re-activates the controller (the operator's clear: ``DriverCore.reset_safety``), moves ``left.joint_1`` to -1.0,
   then commands +1.0 (a 2 rad move at the URDF's 3 rad/s) and waits until the joint passed -0.5;
2. latches a stop (``DriverCore.stop``): ``t0`` is taken just before it;
3. reads when the joint stood still (the broadcaster's ``/joint_states`` header stamps: the controller_manager's
   own update clock), and when the controller_manager said the controller was inactive (its ``~/activity``
   stamp, taken once the switch is done).

With ``--update-rates`` the controller_manager runs the demo controllers file at each rate in turn (side by side: the
hold's lead and the switch are counted in its updates, so its rate bounds how soon the controller is inactive). A
rate the driver refuses at a 20 ms control period runs at a 40 ms one.

Printed per controller and rate: the latch call itself (hold sent, switch scheduled), ``t0`` to the last joint_states
sample in which the joint still moved (the arm standing), and ``t0`` to the inactive activity stamp, as p50 / p95 / max over
the trials, with the machine's load. Every figure is a difference of system-clock stamps on this one machine.

Run where ros2_control is (a sourced distro or workspace, or ``STRANDS_ROBOTS_ROS2_CONTROL_ENV`` naming a file that
sets one up, as for the tests), after ``source scripts/env.sh``::

    STRANDS_ROBOTS_ROS2_CONTROL_ENV=/path/to/ros2_control/env.bash python bench/ros2_control_stop.py --trials 20 \
        --update-rates 100 500

It ends every process it starts by PID.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEST_DIR = HERE.parent / "src" / "strands_robots" / "test"
sys.path.insert(0, str(TEST_DIR))
sys.path.insert(0, str(HERE.parent / "src" / "strands_robots"))

CONTROLLERS = {"forward_command": "forward_position_controller", "joint_trajectory": "joint_trajectory_controller"}


def outer(args: argparse.Namespace) -> int:
    from ros2_control_harness import ros2_control_env

    env, why = ros2_control_env()
    if env is None:
        print(f"ros2_control_stop: {why}", file=sys.stderr)
        return 2
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent / "src" / "strands_robots"), env.get("PYTHONPATH", "")])
    code = 0
    for rate, mode in ((r, m) for r in args.update_rates for m in args.modes):
        proc = subprocess.Popen([sys.executable, __file__, "--inner", mode, "--trials", str(args.trials),
                                 "--update-rates", str(rate)], env=env, start_new_session=True)
        try:
            code = max(code, proc.wait(args.trials * 30 + 180))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(10)
            print(f"[{mode}] at {rate} Hz: timed out", file=sys.stderr)
            code = 1
    return code


def percentiles(values: list) -> str:
    import numpy as np

    a = np.asarray(values, dtype=float)
    return f"p50 {np.percentile(a, 50):6.1f}  p95 {np.percentile(a, 95):6.1f}  max {a.max():6.1f} ms"


def controllers_at(rate: int, tmp: Path) -> Path:
    """The demo controllers file with the controller_manager at ``rate`` Hz (the broadcaster keeps its own rate)."""
    from ros2_control_harness import CONTROLLERS as DEMO

    text = DEMO.read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("update_rate:")
              and lines[i - 1].strip() == "ros__parameters:" and lines[i - 2].strip() == "controller_manager:")
    lines[at] = f"    update_rate: {rate}  # Hz"
    path = tmp / f"controllers_{rate}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def inner(mode: str, trials: int, rate: int) -> int:
    import rclpy
    from controller_manager_msgs.msg import ControllerManagerActivity
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from ros2_control_harness import ARMS, ControllerManager, RobotDescription, wait_until
    from strands_robots.arm.config import DriverConfig
    from strands_robots.arm.driver import DriverCore
    from strands_robots.nodes.arm_driver.ros2_control import hardware

    controller = CONTROLLERS[mode]
    other = [c for c in CONTROLLERS.values() if c != controller][0]
    tmp = Path(tempfile.mkdtemp(prefix="ros2_control_stop_"))
    arms_yaml = ARMS.read_text()
    if mode == "joint_trajectory":
        arms_yaml = arms_yaml.replace("controller: forward_position_controller",
                                      "controller: joint_trajectory_controller")
        arms_yaml = arms_yaml.replace("mode: forward_command ", "mode: joint_trajectory")
    from strands_robots.arm.ros2_control import STOP_BOUND_REFUSE, stop_bound

    period_s = 0.02
    if stop_bound("/controller_manager", float(rate), period_s)[0] == STOP_BOUND_REFUSE:
        # the driver refuses this rate at a 20 ms control period; a slower station's period lets it run for the bench
        period_s = 0.04
        arms_yaml = arms_yaml.replace("trajectory_period_s: 0.02 ", "trajectory_period_s: 0.04 ")
        assert "trajectory_period_s: 0.04" in arms_yaml
    (tmp / "arms.yaml").write_text(arms_yaml)
    rclpy.init()
    node = rclpy.create_node("strands_bench_ros2_control_stop")
    lock = threading.Lock()
    samples: list = []  # (stamp_ns, left_joint_1)
    activity: list = []  # (stamp_ns, state of the controller)

    def on_joint_states(msg) -> None:
        if "left_joint_1" in msg.name:
            with lock:
                samples.append((msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec,
                                msg.position[list(msg.name).index("left_joint_1")]))
                del samples[:-2000]

    def on_activity(msg) -> None:
        for c in msg.controllers:
            if c.name == controller:
                with lock:
                    activity.append((msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec, c.state.label))

    node.create_subscription(JointState, "/joint_states", on_joint_states, 100)
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_subscription(ControllerManagerActivity, "/controller_manager/activity", on_activity, latched)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    description = RobotDescription(node.context)
    cm = ControllerManager(dict(os.environ), tmp, controllers_at(rate, tmp))
    arms = None
    try:
        cm.start()
        cm.spawn("joint_state_broadcaster", controller)
        cm.spawn(other, inactive=True)
        config = DriverConfig.from_yaml(str(tmp / "arms.yaml"))
        arms = hardware(config).adapter
        core = DriverCore(arms, config)
        latch_ms, still_ms, inactive_ms = [], [], []
        for trial in range(trials):
            wait_until(lambda: not arms.fault(), 30.0)
            reset = core.reset_safety()
            assert reset.ok, reset.message
            wait_until(lambda: activity and activity[-1][1] == "active", 20.0)
            # the driver's own view of the controller catches up with the activity just heard within a poll
            wait_until(lambda: not core.send_action({"left.joint_1": -1.0}).error, 10.0)
            wait_until(lambda: samples and abs(samples[-1][1] + 1.0) < 1e-3, 10.0)
            assert not core.send_action({"left.joint_1": 1.0}).error
            wait_until(lambda: samples[-1][1] > -0.5, 10.0)
            seen = len(activity)
            t0 = time.time_ns()
            assert core.stop(f"bench trial {trial}")
            t1 = time.time_ns()
            wait_until(lambda: any(s == "inactive" for _, s in activity[seen:]), 10.0)
            time.sleep(0.3)  # the joint has stood still a while: its last move is in the samples
            with lock:
                inactive_ns = next(t for t, s in activity[seen:] if s == "inactive")
                after = [(t, p) for t, p in samples if t >= t0 - 50_000_000]
            moved = [after[i][0] for i in range(1, len(after)) if abs(after[i][1] - after[i - 1][1]) > 1e-9]
            latch_ms.append((t1 - t0) / 1e6)
            still_ms.append(((moved[-1] if moved else t0) - t0) / 1e6)
            inactive_ms.append((inactive_ns - t0) / 1e6)
            print(f"[{mode}] trial {trial:2d}: latch call {latch_ms[-1]:5.1f} ms, joint still after "
                  f"{still_ms[-1]:5.1f} ms, {controller} inactive after {inactive_ms[-1]:5.1f} ms", flush=True)
        load = os.getloadavg()
        print(f"\n[{mode}] {trials} stops, {controller}, controller_manager at {rate} Hz, control period "
              f"{period_s * 1000:g} ms, mock hardware, {os.cpu_count()} cores, "
              f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
        print(f"[{mode}]   latch call (hold sent, switch scheduled): {percentiles(latch_ms)}")
        print(f"[{mode}]   stop -> joint standing (last moving joint_states stamp): {percentiles(still_ms)}")
        print(f"[{mode}]   stop -> controller inactive (~/activity stamp):          {percentiles(inactive_ms)}")
        return 0
    finally:
        if arms is not None:
            arms.close()
        cm.stop()
        description.close()
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--modes", nargs="+", default=list(CONTROLLERS), choices=list(CONTROLLERS))
    parser.add_argument("--update-rates", nargs="+", type=int, default=[500],
                        help="controller_manager update rates (Hz) to run the demo controllers at, in turn")
    parser.add_argument("--inner", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        return inner(args.inner, args.trials, args.update_rates[0])
    return outer(args)


if __name__ == "__main__":
    sys.exit(main())
