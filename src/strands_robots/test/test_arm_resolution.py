"""Per-key action resolution (pure, no simulation)."""

import math

import numpy as np
import pytest

from strands_robots.arm.model import default_arm_specs, joint_specs_by_key
from strands_robots.arm.resolution import resolve_action
from strands_robots.arm.verdict import (
    REASON_ARM_STOPPED,
    REASON_NON_FINITE,
    REASON_NOT_LEASE_HOLDER,
    REASON_OUTSIDE_LIMITS,
    REASON_UNKNOWN_KEY,
)

SPECS = joint_specs_by_key(default_arm_specs())


def _complete(verdict, emitted):
    assert len(verdict.unresolved_keys) == len(verdict.unresolved_reasons)
    both = verdict.applied_keys + verdict.unresolved_keys
    assert len(set(both)) == len(both)
    assert set(both) == set(emitted)


def test_valid_action_is_fully_applied_with_targets():
    action = {"left.joint_1": 0.1, "right.gripper": 0.5}
    r = resolve_action(action, SPECS)
    assert r.verdict.applied_keys == ("left.joint_1", "right.gripper")
    assert r.verdict.unresolved_keys == ()
    assert dict(r.targets) == action


def test_unknown_key_is_unresolved_with_reason():
    r = resolve_action({"left.joint_1": 0.0, "left.elbow": 0.2, "middle.joint_1": 0.0}, SPECS)
    assert r.verdict.applied_keys == ("left.joint_1",)
    assert r.verdict.reasons() == {"left.elbow": REASON_UNKNOWN_KEY, "middle.joint_1": REASON_UNKNOWN_KEY}
    assert "left.elbow" not in r.targets


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, None, "0.1", True, [0.1]])
def test_non_finite_or_non_number_value_is_non_finite(bad):
    r = resolve_action({"right.joint_2": bad, "right.joint_3": 0.2}, SPECS)
    assert r.verdict.reasons() == {"right.joint_2": REASON_NON_FINITE}
    assert set(r.targets) == {"right.joint_3"}


def test_numpy_scalars_are_accepted():
    r = resolve_action({"left.joint_1": np.float32(0.25), "left.joint_2": np.array(0.1)}, SPECS)
    assert r.verdict.applied_keys == ("left.joint_1", "left.joint_2")
    assert all(type(v) is float for v in r.targets.values())


def test_value_outside_limits_is_refused_not_clamped():
    r = resolve_action({"left.gripper": 0.81, "left.joint_4": -2.0, "left.joint_2": 1.8}, SPECS)
    assert r.verdict.reasons() == {"left.gripper": REASON_OUTSIDE_LIMITS}
    assert r.verdict.applied_keys == ("left.joint_4", "left.joint_2")  # limits are inclusive


def test_stale_lease_marks_every_valid_key_not_lease_holder():
    action = {"left.joint_1": 0.0, "right.joint_1": 0.0}
    r = resolve_action(action, SPECS, lease_valid=False)
    assert r.verdict.applied_keys == ()
    assert r.verdict.reasons() == {k: REASON_NOT_LEASE_HOLDER for k in action}
    assert not r.targets


def test_stopped_arm_keys_are_arm_stopped_other_arm_applies():
    r = resolve_action({"left.joint_1": 0.0, "right.joint_1": 0.0}, SPECS, stopped_arms=("right",))
    assert r.verdict.applied_keys == ("left.joint_1",)
    assert r.verdict.reasons() == {"right.joint_1": REASON_ARM_STOPPED}


def test_reason_precedence_key_then_value_then_lease_then_stop():
    action = {"nope": 1.0, "left.joint_1": math.nan, "left.joint_2": 9.0, "left.joint_3": 0.0}
    r = resolve_action(action, SPECS, lease_valid=False, stopped_arms=("left",))
    assert r.verdict.unresolved_reasons == (
        REASON_UNKNOWN_KEY, REASON_NON_FINITE, REASON_OUTSIDE_LIMITS, REASON_NOT_LEASE_HOLDER)
    r2 = resolve_action({"left.joint_3": 0.0}, SPECS, stopped_arms=("left",))
    assert r2.verdict.unresolved_reasons == (REASON_ARM_STOPPED,)


def test_key_tuples_keep_emission_order_and_cover_every_key():
    action = {"right.joint_6": 0.0, "zzz": 0.0, "left.joint_1": 0.0, "right.joint_1": math.nan,
              "left.gripper": 0.2}
    r = resolve_action(action, SPECS)
    assert r.verdict.applied_keys == ("right.joint_6", "left.joint_1", "left.gripper")
    assert r.verdict.unresolved_keys == ("zzz", "right.joint_1")
    assert list(r.targets) == list(r.verdict.applied_keys)
    _complete(r.verdict, action)


@pytest.mark.parametrize("garbage", [None, [("left.joint_1", 0.1)], "left.joint_1=0.1", 3.0, {1: 0.1},
                                     {("left", "joint_1"): 0.1}])
def test_garbage_input_is_a_coarse_error_with_empty_key_tuples(garbage):
    r = resolve_action(garbage, SPECS)
    assert r.verdict.is_coarse_error
    assert r.verdict.applied_keys == () and r.verdict.unresolved_keys == ()
    assert not r.targets


def test_empty_action_is_empty_verdict_not_error():
    r = resolve_action({}, SPECS)
    assert not r.verdict.is_coarse_error
    assert r.verdict.applied_keys == () and r.verdict.unresolved_keys == ()
