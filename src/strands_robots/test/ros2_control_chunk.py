"""Send one chunk of actions through the ros2_control hardware, for tests whose own process lacks ros2_control.

Run in the ros2_control environment (:func:`ros2_control_harness.ros2_control_env`): the hardware needs
controller_manager_msgs, which is not a wheel. It builds the hardware from an arms file (as the driver does), sends
one chunk moving ``key`` through the given positions (one action each), waits (bounded) until the hardware reads
the last one, and prints one JSON line: the chunk's points for ``key`` and their times, or ``{"error": ...}``.

    python ros2_control_chunk.py arms.yaml left.joint_1 0.04 0.08 0.05
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list) -> int:
    import rclpy

    from strands_robots.arm.config import DriverConfig
    from strands_robots.nodes.arm_driver.ros2_control import hardware

    path, key, values = argv[1], argv[2], [float(v) for v in argv[3:]]
    rclpy.init()
    arms = None
    try:
        arms = hardware(DriverConfig.from_yaml(path)).adapter
        slot = arms.keys().index(key)
        try:
            arms.command_trajectory([{key: v} for v in values], arms.settings.trajectory_period_s)
        except RuntimeError as exc:
            print(json.dumps({"error": str(exc)}), flush=True)
            return 1
        period = arms.settings.trajectory_period_s
        values = values[:int(round(arms.settings.command_silence_s / period))]  # what the silence bound lets out
        deadline = time.monotonic() + 10.0
        while abs(arms.read().positions[slot] - values[-1]) > 1e-3:
            if time.monotonic() > deadline:
                print(json.dumps({"error": f"{key} never read {values[-1]}"}), flush=True)
                return 1
            time.sleep(0.01)
        print(json.dumps({"points": values, "times_s": [(i + 1) * period for i in range(len(values))]}), flush=True)
        return 0
    finally:
        if arms is not None:
            arms.close()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
