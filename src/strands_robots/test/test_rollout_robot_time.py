"""A step's ``sim_time_s`` is the robot time of the observation it acted on, over ROS as in process.

The driver's ``joint_states`` carry the robot (simulation) time of each reading beside the node-clock stamp
(``conversions.joint_state.driver_joint_state``); the rollout node must report that robot time in
``RunPolicyStep.sim_time_s`` and ``RunPolicyEnded.sim_time_s``, never the stamp (wall-clock epoch without
``use_sim_time``).
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from sensor_msgs.msg import JointState  # noqa: E402

from strands_robots.conversions.joint_state import joint_state_robot_time_s  # noqa: E402
from strands_robots.ros.qos import STATE_QOS  # noqa: E402
from strands_robots.simulation.observers import RunPolicyEnded, RunPolicyStep  # noqa: E402

from ros_harness import wait_for  # noqa: E402
from test_rollout_node import Rig, rig  # noqa: E402,F401  (the fixture is shared with the node tests)


def test_step_sim_time_is_the_robot_time_of_the_driver_reading_not_the_wall_clock(rig):  # noqa: F811
    r: Rig = rig()
    lock = threading.Lock()
    robot_times: list = []

    def on_state(msg: JointState) -> None:
        t = joint_state_robot_time_s(msg)
        if t is not None:
            with lock:
                robot_times.append(t)

    sub = r.client.create_subscription(JointState, "joint_states", on_state, STATE_QOS)
    # Readings arriving before the goal, not only a subscription made before it: the episode can act on a reading
    # (at 0.04 s, say) that this subscription, not yet matched, never gets (its first: 0.06).
    assert wait_for(lambda: sub.get_publisher_count() >= 1 and robot_times, 10.0), "no joint_states before the goal"
    result, _status = r.run(policy_provider="mock", duration_s=0.5)
    events = r.run_events(result.ended.run_id)
    steps = [e for e in events if isinstance(e, RunPolicyStep)]
    ended = [e for e in events if isinstance(e, RunPolicyEnded)]
    assert steps and len(ended) == 1
    with lock:
        seen = sorted(robot_times)
    assert seen, "no joint_states with a robot time arrived"
    lo, hi = seen[0], seen[-1]
    sims = [s.sim_time_s for s in steps]
    # Every step acted on a reading the driver published: its robot time lies within the readings seen
    # (the subscription started before the goal, and the driver keeps publishing after it).
    outside = [t for t in sims if not (lo - 1e-6 <= t <= hi + 1e-6)]
    assert not outside, f"step sim_time_s outside the driver's robot times [{lo:.3f}, {hi:.3f}]: {outside[:3]}"
    assert sims == sorted(sims), "robot time went backwards between steps"
    assert sims[-1] > sims[0], "robot time did not advance over the episode"
    assert lo - 1e-6 <= ended[0].sim_time_s <= hi + 1e-6
