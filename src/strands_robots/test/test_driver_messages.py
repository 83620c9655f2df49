"""The arm driver's message builders (strands_robots.conversions: joint_state, actions, driver).

joint_states carry the node-clock stamp and the robot time apart; streamed commands and verdicts keep every
field.
"""

import math

import pytest

pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")

from strands_robots.conversions.actions import (  # noqa: E402
    msg_to_stream_command, response_to_verdict, stream_verdict_to_msg,
)
from strands_robots.conversions.joint_state import (  # noqa: E402
    clock_msg, driver_joint_state, driver_joint_state_to_observation, joint_state_robot_time_s,
    observation_to_joint_state,
)
from strands_robots.conversions.messages import time_to_ns  # noqa: E402
from strands_robots.arm.verdict import ActionVerdict  # noqa: E402


def test_joint_state_is_stamped_with_the_node_clock_and_keeps_robot_time():
    obs = {"left.joint_1.pos": 0.1, "left.joint_1.vel": 0.0, "left.joint_1.effort": 1.5, "sim_time_s": 12.25}
    stamp_ns = 1_780_000_000_123_456_789  # a node-clock time in 2026, not seconds since 1970 of simulation
    msg = driver_joint_state(obs, stamp_ns)
    assert time_to_ns(msg.header.stamp) == stamp_ns
    assert joint_state_robot_time_s(msg) == pytest.approx(12.25)
    back = driver_joint_state_to_observation(msg)
    assert back["sim_time_s"] == pytest.approx(12.25)
    assert back["left.joint_1.effort"] == 1.5


def test_a_joint_state_from_elsewhere_has_no_robot_time():
    msg = observation_to_joint_state({"a.pos": 0.0, "sim_time_s": 3.0}, stamp_ns=5 * 10**9)
    assert joint_state_robot_time_s(msg) is None
    assert driver_joint_state_to_observation(msg)["sim_time_s"] == 5.0


def test_clock_message_is_robot_time():
    assert time_to_ns(clock_msg(1.5).clock) == 1_500_000_000


def test_stream_command_keeps_deadline_run_and_step():
    from strands_robots_msgs.msg import ActionCommand

    msg = ActionCommand(keys=["left.joint_1"], values=[0.25], run_id="r1", step_index=7, lease_proof="p")
    msg.apply_by.sec, msg.apply_by.nanosec = 10, 5
    cmd = msg_to_stream_command(msg)
    assert (cmd.keys, cmd.values, cmd.run_id, cmd.step_index, cmd.lease_proof, cmd.apply_by_ns) == (
        ("left.joint_1",), (0.25,), "r1", 7, "p", 10_000_000_005)


def test_stream_verdict_message_round_trips_the_verdict():
    v = ActionVerdict(("left.joint_1",), ("x",), ("unknown_key",))
    m = stream_verdict_to_msg(v, "r1", 9, stopped=True, sim_time_s=2.5, received_ns=3 * 10**9 + 1)
    assert (m.run_id, m.step_index, m.stopped, m.sim_time_s) == ("r1", 9, True, 2.5)
    assert time_to_ns(m.received) == 3 * 10**9 + 1
    assert response_to_verdict(m) == v
    coarse = stream_verdict_to_msg(ActionVerdict.coarse("driver not active"), "r1", 1)
    assert response_to_verdict(coarse) == ActionVerdict(error="driver not active")
    assert not math.isnan(coarse.sim_time_s)
