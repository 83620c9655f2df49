"""How fast a latched stop takes the arms down on a real ros2_control stack (mock hardware), per command controller.

What a stop does on ``hardware:=ros2_control`` (``nodes/arm_driver/ros2_control.py``): the driver core holds the
arms (the adapter publishes a hold at the measured position to the command controller at once), then, once the
controller_manager's introspection data shows the hold in the hardware's commands (``--hold seen``; at the latest
the rest of the control period), or two controller_manager updates later where that data is not read (``--hold
timed``, what a controller_manager without introspection gets), the adapter asks the controller_manager's
``switch_controller`` to deactivate the command controller without waiting for the answer. This bench drives the
real adapter and driver core in this process against ``ros2_control_node`` running the package's demo description
and controllers (``config/ros2_control/``), and for each trial:

1. re-activates the controller (the operator's clear: ``DriverCore.reset_safety``), moves ``left.joint_1`` to -1.0,
   then commands +1.0 (a 2 rad move at the URDF's 3 rad/s) and waits until the joint passed -0.5;
2. latches a stop (``DriverCore.stop``): ``t0`` is taken just before it;
3. reads, from the joint's position command in the controller_manager's introspection data (every update, stamped
   by its own clock), when the command stood still (the mock hardware follows it exactly) and whether the hold
   reached the hardware before the switch: the command equals the hold or turned back from its peak toward it,
   which only an active controller applying the hold does (``ros2_control_harness.hold_before_switch``; a trial
   whose snapshots around the hold were dropped is counted apart, unjudged); and when the controller_manager said
   the controller was inactive (its ``~/activity`` stamp, taken once the switch is done).

With ``--update-rates`` the controller_manager runs the demo controllers file at each rate in turn (side by side: the
hold's lead and the switch are counted in its updates, so its rate bounds how soon the controller is inactive). A
rate the driver refuses at a 20 ms control period runs at a 40 ms one.

Printed per controller, rate and ``--hold``: the latch call itself (hold sent, switch scheduled), ``t0`` to the last
snapshot that shows the command's final value (the arm standing), and ``t0`` to the inactive activity stamp, as
p50 / p95 / max over the trials, and in how many trials the hold came before the switch, with the machine's load.
Every figure is a difference of system-clock stamps on this one machine.

Run where ros2_control is (a sourced distro or workspace, or ``STRANDS_ROBOTS_ROS2_CONTROL_ENV`` naming a file that
sets one up, as for the tests), after ``source scripts/env.sh``::

    STRANDS_ROBOTS_ROS2_CONTROL_ENV=/path/to/ros2_control/env.bash python bench/ros2_control_stop.py --trials 20 \
        --update-rates 100 500 --hold seen timed

With ``--busy N`` that many busy-loop processes share the machine for the whole run (a loaded station host: the
hold's message and the switch's request then wait for the CPU). It ends every process it starts by PID.
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
    # busy loops beside the stack, as a loaded station host: they end with the bench, by PID
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(args.busy)]
    try:
        code = legs(args, env)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait(10)
    return code


def legs(args: argparse.Namespace, env: dict) -> int:
    code = 0
    for rate, mode, hold in ((r, m, h) for r in args.update_rates for m in args.modes for h in args.hold):
        proc = subprocess.Popen([sys.executable, __file__, "--inner", mode, "--trials", str(args.trials),
                                 "--update-rates", str(rate), "--hold", hold], env=env, start_new_session=True)
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


def inner(mode: str, trials: int, rate: int, hold: str) -> int:
    import rclpy
    from controller_manager_msgs.msg import ControllerManagerActivity
    from pal_statistics_msgs.msg import StatisticsNames, StatisticsValues
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from ros2_control_harness import (
        ARMS,
        ControllerManager,
        RobotDescription,
        controllers_at,
        hold_before_switch,
        wait_until,
    )
    from strands_robots.arm.config import DriverConfig
    from strands_robots.arm.driver import DriverCore
    from strands_robots.nodes.arm_driver import ros2_control as link
    from strands_robots.nodes.arm_driver.ros2_control import hardware

    if hold == "timed":  # the adapter as on a controller_manager whose introspection data it cannot read
        link._introspection_interfaces = lambda: None

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
    commands: list = []  # (stamp_ns, the hardware's position command of left_joint_1), every update
    where: dict = {}

    def on_names(msg) -> None:
        names = list(msg.names)
        where.clear()
        if "command_interface.left_joint_1/position" in names:
            where[msg.names_version] = names.index("command_interface.left_joint_1/position")

    def on_values(msg) -> None:
        i = where.get(msg.names_version)
        if i is not None and i < len(msg.values):
            with lock:
                commands.append((msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec, msg.values[i]))
                del commands[:-5000]

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
    sent: list = []  # (monotonic, left_joint_1) of every command the adapter sends the controller

    if mode == "forward_command":
        from std_msgs.msg import Float64MultiArray as Command

        def on_command(msg) -> None:  # the demo controllers file lists left_joint_1 first
            sent.append((time.monotonic(), msg.data[0]))
    else:
        from trajectory_msgs.msg import JointTrajectory as Command

        def on_command(msg) -> None:
            sent.append((time.monotonic(), msg.points[-1].positions[list(msg.joint_names).index("left_joint_1")]))
    suffix = "commands" if mode == "forward_command" else "joint_trajectory"
    node.create_subscription(Command, f"/{controller}/{suffix}", on_command, 100)
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_subscription(ControllerManagerActivity, "/controller_manager/activity", on_activity, latched)
    node.create_subscription(StatisticsNames, "/controller_manager/introspection_data/names", on_names,
                             QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                        durability=DurabilityPolicy.TRANSIENT_LOCAL))
    node.create_subscription(StatisticsValues, "/controller_manager/introspection_data/values", on_values,
                             QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT,
                                        durability=DurabilityPolicy.VOLATILE))
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
        latch_ms, still_ms, inactive_ms, hold_first = [], [], [], []
        unjudged = 0  # trials whose snapshots around the hold were dropped: no verdict either way
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
            wait_until(lambda: sent, 10.0)
            before = len(sent)
            t0 = time.time_ns()
            assert core.stop(f"bench trial {trial}")
            t1 = time.time_ns()
            wait_until(lambda: any(s == "inactive" for _, s in activity[seen:]), 10.0)
            time.sleep(0.3)  # the joint has stood still a while: its last move is in the samples
            with lock:
                inactive_ns = next(t for t, s in activity[seen:] if s == "inactive")
                window = [(t, c) for t, c in commands if t >= t0]
            if not window:  # this process missed every snapshot since the stop (best effort, a starved host)
                print(f"[{mode}] trial {trial:2d}: no introspection snapshot reached the bench after the stop; "
                      "not counted", flush=True)
                continue
            held = sent[before:]
            assert len(held) == 1, f"one command (the hold) after the stop, got {len(held)}"
            hold_value = held[0][1]
            values = [c for _, c in window]
            judged = hold_before_switch(window, hold_value, 1.0 / rate, t0)
            if judged is None:
                unjudged += 1
            else:
                hold_first.append(judged)
            # the first snapshot that shows the command's final value: from there on it stands
            moved = [window[i][0] for i in range(1, len(window)) if abs(window[i][1] - window[i - 1][1]) > 1e-9]
            latch_ms.append((t1 - t0) / 1e6)
            still_ms.append(((moved[-1] if moved else window[0][0]) - t0) / 1e6)
            inactive_ms.append((inactive_ns - t0) / 1e6)
            print(f"[{mode}] trial {trial:2d}: latch call {latch_ms[-1]:5.1f} ms, command standing after "
                  f"{still_ms[-1]:5.1f} ms, {controller} inactive after {inactive_ms[-1]:5.1f} ms, hold "
                  f"{['NOT before', 'before', 'unjudged (snapshots dropped)'][2 if judged is None else int(judged)]} "
                  f"the switch (hold {hold_value:+.4f}, peak "
                  f"{max(values) if values else float('nan'):+.4f}, settled {values[-1] if values else float('nan'):+.4f})",
                  flush=True)
        load = os.getloadavg()
        print(f"\n[{mode}] {len(latch_ms)} stops, {controller}, hold {hold}, controller_manager at {rate} Hz, control period "
              f"{period_s * 1000:g} ms, mock hardware, {os.cpu_count()} cores, "
              f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
        print(f"[{mode}]   latch call (hold sent, switch scheduled): {percentiles(latch_ms)}")
        print(f"[{mode}]   stop -> the hardware's command standing (last change):   {percentiles(still_ms)}")
        print(f"[{mode}]   stop -> controller inactive (~/activity stamp):          {percentiles(inactive_ms)}")
        print(f"[{mode}]   the hold reached the hardware before the switch: {sum(hold_first)} of {len(hold_first)}"
              + (f" ({unjudged} more unjudged: snapshots dropped around the hold)" if unjudged else ""))
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
    parser.add_argument("--hold", nargs="+", default=["seen"], choices=["seen", "timed"],
                        help="how the switch waits for the hold: seen in the introspection data, or a time lead")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy-loop processes to run beside the stack for the whole run (a loaded host)")
    parser.add_argument("--inner", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        return inner(args.inner, args.trials, args.update_rates[0], args.hold[0])
    return outer(args)


if __name__ == "__main__":
    sys.exit(main())
