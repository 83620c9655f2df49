"""Print the controller_manager's ``~/activity`` as JSON lines, for tests whose own process lacks ros2_control.

Run in the ros2_control environment (:func:`ros2_control_harness.ros2_control_env`): controller_manager_msgs is
not a wheel. Each line: ``{"stamp_ns": ..., "received_ns": ..., "controllers": {name: state},
"hardware": {name: state}}`` (stamps on the system clock). Given a joint, also the hardware's position command of
that joint after every update of the controller_manager, from its introspection data: ``{"command": value,
"stamp_ns": ...}``. It ends on SIGINT/SIGTERM or when stdin closes.

    python ros2_control_probe.py /controller_manager [left_joint_1]
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time


def main(argv: list) -> int:
    import rclpy
    from controller_manager_msgs.msg import ControllerManagerActivity
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    manager = argv[1] if len(argv) > 1 else "/controller_manager"
    rclpy.init(signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    node = rclpy.create_node("strands_test_ros2_control_probe")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

    def on_activity(msg) -> None:
        line = {"stamp_ns": msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec, "received_ns": time.time_ns(),
                "controllers": {c.name: c.state.label for c in msg.controllers},
                "hardware": {h.name: h.state.label for h in msg.hardware_components}}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_subscription(ControllerManagerActivity, f"{manager}/activity", on_activity, qos)
    if len(argv) > 2:
        watch_command(node, manager, argv[2])
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    while not stop.is_set():
        rclpy.spin_once(node, timeout_sec=0.1)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def watch_command(node, manager: str, joint: str) -> None:
    """Print ``joint``'s position command interface from every introspection snapshot of ``manager``."""
    from pal_statistics_msgs.msg import StatisticsNames, StatisticsValues
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    wanted = f"command_interface.{joint}/position"
    where: dict = {}

    def on_names(msg) -> None:
        names = list(msg.names)
        where.clear()
        if wanted in names:
            where[msg.names_version] = names.index(wanted)

    def on_values(msg) -> None:
        i = where.get(msg.names_version)
        if i is None or i >= len(msg.values):
            return
        stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        sys.stdout.write(json.dumps({"command": msg.values[i], "stamp_ns": stamp}) + "\n")
        sys.stdout.flush()

    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    # best effort, as published; deep: samples wait in the reader while this process is slow to take them
    stream = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE)
    node.create_subscription(StatisticsNames, f"{manager}/introspection_data/names", on_names, latched)
    node.create_subscription(StatisticsValues, f"{manager}/introspection_data/values", on_values, stream)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
