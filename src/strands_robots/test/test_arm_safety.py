"""Safety envelope and check text (pure, no simulation)."""

import numpy as np
import pytest

from strands_robots.arm.adapter import JointReadings
from strands_robots.arm.model import default_arm_specs, joint_specs_by_key
from strands_robots.arm.safety import SafetyCheck, SafetyEnvelope, SafetyMargins, format_checks

ARMS = default_arm_specs()
KEYS = tuple(joint_specs_by_key(ARMS))


def readings(pos=None, vel=None, eff=None):
    n = len(KEYS)
    p, v, e = np.zeros(n), np.zeros(n), np.zeros(n)
    for arr, upd in ((p, pos), (v, vel), (e, eff)):
        for k, x in (upd or {}).items():
            arr[KEYS.index(k)] = x
    return JointReadings(KEYS, p, v, e, 0.0)


def test_check_text_form_matches_spec():
    check = SafetyCheck("right", "joint_4", "torque", 3.4, 3.0, "N*m")
    assert check.text() == "right: joint 4 reads +3.4 N*m"


@pytest.mark.parametrize("joint,quantity,value,unit,text", [
    ("joint_2", "torque", -18.26, "N*m", "left: joint 2 reads -18.3 N*m"),
    ("gripper", "position", 0.91, "rad", "left: gripper reads +0.9 rad"),
    ("joint_6", "velocity", -4.04, "rad/s", "left: joint 6 reads -4.0 rad/s"),
])
def test_check_text_is_signed_one_decimal_with_joint_number(joint, quantity, value, unit, text):
    assert SafetyCheck("left", joint, quantity, value, 1.0, unit).text() == text


def test_within_envelope_trips_nothing():
    env = SafetyEnvelope(ARMS, SafetyMargins())
    r = readings(pos={"left.joint_2": 1.8 + 0.04}, vel={"right.joint_4": 3.5}, eff={"right.joint_4": -4.4})
    assert env.evaluate(r) == ()


def test_envelope_returns_every_tripped_check_with_limits_and_units():
    env = SafetyEnvelope(ARMS, SafetyMargins(position_rad=0.05, velocity_fraction=0.1, torque_fraction=0.1))
    r = readings(pos={"left.joint_2": 1.9}, vel={"right.joint_4": -3.7},
                 eff={"right.joint_4": 4.6, "right.joint_2": -25.0})
    checks = env.evaluate(r)
    assert [(c.arm, c.joint, c.quantity) for c in checks] == [
        ("left", "joint_2", "position"),
        ("right", "joint_2", "torque"),
        ("right", "joint_4", "velocity"),
        ("right", "joint_4", "torque"),
    ]
    by = {(c.arm, c.joint, c.quantity): c for c in checks}
    assert by[("left", "joint_2", "position")].limit == pytest.approx(1.85)
    assert by[("right", "joint_4", "velocity")].limit == pytest.approx(3.6)
    assert by[("right", "joint_4", "torque")].limit == pytest.approx(4.5)
    assert by[("right", "joint_4", "torque")].unit == "N*m"
    assert format_checks(checks) == (
        "left: joint 2 reads +1.9 rad; right: joint 2 reads -25.0 N*m; right: joint 4 reads -3.7 rad/s; "
        "right: joint 4 reads +4.6 N*m")


def test_latch_stays_stopped_until_reset():
    env = SafetyEnvelope(ARMS)
    assert env.check(readings(eff={"left.joint_5": 9.0}))
    assert env.stopped and env.stopped_arms == ("left", "right")
    assert env.check(readings()) == ()  # a calm reading does not release the stop
    assert env.stopped
    env.reset()
    assert not env.stopped and env.tripped == ()


def test_stop_scope_arm_stops_only_the_tripped_arm():
    env = SafetyEnvelope(ARMS, stop_scope="arm")
    env.check(readings(eff={"right.joint_4": 9.0}))
    assert env.stopped_arms == ("right",)


def test_bad_margins_are_refused():
    with pytest.raises(ValueError, match="torque_fraction"):
        SafetyMargins(torque_fraction=1.0)
    with pytest.raises(ValueError, match="position_rad"):
        SafetyMargins(position_rad=-0.1)
