"""ScriptedPolicy: the torque ramp and the scripts that make action resolution partial or none."""

from __future__ import annotations

import math

import pytest

from strands_robots.policies import EndEpisode, make_policy
from strands_robots.policies.scripted import ScriptedPolicy

JOINTS = tuple(f"{arm}.joint_{i}" for arm in ("left", "right") for i in range(1, 7))
KEYS = JOINTS + ("left.gripper", "right.gripper")
LIMITS = {k: ((0.0, 0.04) if k.endswith("gripper") else (-2.0, 2.0)) for k in KEYS}
START = {k: (0.02 if k.endswith("gripper") else 0.01 * i) for i, k in enumerate(KEYS)}


def make_task(limits=True, **extra):
    task = {"instruction": "push", "action_keys": KEYS}
    if limits:
        task["joint_limits"] = LIMITS
    task.update(extra)
    return task


def observation(positions=START):
    obs = {"sim_time_s": 0.0}
    for key, value in positions.items():
        obs[f"{key}.pos"] = value
        obs[f"{key}.vel"] = 0.0
        obs[f"{key}.effort"] = 0.0
    return obs


def actions(policy, n, obs=None):
    out = []
    while len(out) < n:
        out.extend(policy.act(obs if obs is not None else observation()))
    return out[:n]


def test_scripted_ramps_joint_toward_target_holding_others():
    policy = make_policy("scripted", {"ramp_steps": 10, "action_horizon": 4})
    policy.reset(make_task())
    out = actions(policy, 16)
    start, target = START["right.joint_4"], LIMITS["right.joint_4"][1]
    ramp = [a["right.joint_4"] for a in out]
    assert ramp[:10] == pytest.approx([start + (target - start) * (k + 1) / 10 for k in range(10)])
    assert ramp[10:] == pytest.approx([target] * 6)
    assert all(b > a for a, b in zip(ramp[:10], ramp[1:10]))
    for action in out:
        assert set(action) == set(KEYS)
        for key in KEYS:
            if key != "right.joint_4":
                assert action[key] == START[key]


def test_scripted_target_defaults_to_upper_limit_else_one_and_a_half_rad():
    policy = ScriptedPolicy()
    policy.reset(make_task())
    assert policy.target == LIMITS["right.joint_4"][1]
    policy.reset(make_task(limits=False))
    assert policy.target == 1.5
    configured = ScriptedPolicy({"target": -1.0, "joint": "left.joint_2", "ramp_steps": 1})
    configured.reset(make_task())
    assert configured.act(observation())[0]["left.joint_2"] == -1.0


def test_scripted_ramp_ignores_later_observations_until_resume():
    policy = ScriptedPolicy({"ramp_steps": 4, "action_horizon": 2})
    policy.reset(make_task())
    policy.act(observation())
    # The arm lags behind; the ramp keeps its course instead of restarting from the lagging pose.
    second = policy.act(observation({**START, "right.joint_4": -1.0}))
    start, target = START["right.joint_4"], 2.0
    assert second[0]["right.joint_4"] == pytest.approx(start + (target - start) * 3 / 4)


def test_scripted_resume_holds_the_pose_the_operator_left():
    policy = ScriptedPolicy({"ramp_steps": 4})
    policy.reset(make_task())
    policy.act(observation())
    moved = {k: v + 0.1 for k, v in START.items()}
    policy.resume(observation(moved))
    first = policy.act(observation(moved))[0]
    assert first["left.joint_1"] == pytest.approx(moved["left.joint_1"])
    assert first["right.joint_4"] == pytest.approx(moved["right.joint_4"] + (2.0 - moved["right.joint_4"]) / 4)


def test_scripted_unknown_keys_mixes_real_and_unknown_keys():
    policy = ScriptedPolicy({"mode": "unknown_keys"})
    policy.reset(make_task())
    for action in policy.act(observation()):
        assert set(KEYS) < set(action)
        unknown = set(action) - set(KEYS)
        assert unknown == {"left.joint_99", "tool.joint_1"}


def test_scripted_only_unknown_keys_emits_no_real_key():
    policy = ScriptedPolicy({"mode": "only_unknown_keys", "unknown_keys": ["gantry.axis_1"]})
    policy.reset(make_task())
    assert all(action == {"gantry.axis_1": 0.0} for action in policy.act(observation()))


def test_scripted_unknown_keys_that_are_real_are_refused():
    policy = ScriptedPolicy({"mode": "unknown_keys", "unknown_keys": ["left.joint_1"]})
    with pytest.raises(ValueError, match="real action keys"):
        policy.reset(make_task())


def test_scripted_out_of_range_puts_one_key_beyond_its_limit():
    policy = ScriptedPolicy({"mode": "out_of_range", "joint": "left.joint_3"})
    policy.reset(make_task())
    for action in policy.act(observation()):
        assert set(action) == set(KEYS)
        outside = [k for k, v in action.items() if not LIMITS[k][0] <= v <= LIMITS[k][1]]
        assert outside == ["left.joint_3"]
        assert action["left.joint_3"] == pytest.approx(2.5)


def test_scripted_out_of_range_all_puts_every_key_beyond_its_limit():
    policy = ScriptedPolicy({"mode": "out_of_range", "out_of_range_keys": "all", "out_of_range_margin": 0.1})
    policy.reset(make_task())
    for action in policy.act(observation()):
        assert all(v > LIMITS[k][1] for k, v in action.items())


def test_scripted_out_of_range_without_limits_is_refused():
    policy = ScriptedPolicy({"mode": "out_of_range"})
    with pytest.raises(ValueError, match="joint_limits"):
        policy.reset(make_task(limits=False))


def test_scripted_non_finite_sends_nan_for_the_joint_only():
    policy = ScriptedPolicy({"mode": "non_finite", "joint": "right.gripper"})
    policy.reset(make_task())
    for action in policy.act(observation()):
        assert math.isnan(action["right.gripper"])
        assert all(math.isfinite(v) for k, v in action.items() if k != "right.gripper")


def test_scripted_joint_must_be_an_action_key():
    with pytest.raises(ValueError, match="valid keys"):
        ScriptedPolicy({"joint": "right.joint_9"}).reset(make_task())


def test_scripted_unknown_mode_lists_modes():
    with pytest.raises(ValueError, match="torque_ramp"):
        ScriptedPolicy({"mode": "dance"})


def test_scripted_end_after_steps_raises_end_episode():
    policy = ScriptedPolicy({"end_after_steps": 5, "action_horizon": 4})
    policy.reset(make_task())
    assert [len(policy.act(observation())) for _ in range(2)] == [4, 1]
    with pytest.raises(EndEpisode):
        policy.act(observation())


def test_scripted_is_deterministic_across_episodes():
    policy = ScriptedPolicy()
    policy.reset(make_task())
    first = actions(policy, 24)
    policy.reset(make_task())
    assert actions(policy, 24) == first


def test_default_ramp_lasts_ramp_s_at_the_task_control_frequency():
    policy = ScriptedPolicy({"ramp_s": 0.5, "action_horizon": 10})
    policy.reset(make_task(control_frequency=200.0))
    ramp = [a["right.joint_4"] for a in actions(policy, 120)]
    target = LIMITS["right.joint_4"][1]
    # 0.5 s at 200 Hz is 100 actions: still short of the target at 99, there from 100 on.
    assert ramp[98] < target
    assert ramp[99] == pytest.approx(target)
    assert ramp[119] == pytest.approx(target)
