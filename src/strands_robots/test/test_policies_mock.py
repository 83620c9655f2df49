"""MockPolicy: smooth seeded motion inside the limits, and the failure options tests rely on."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from strands_robots.policies import EndEpisode, make_policy
from strands_robots.policies.mock import MockPolicy, MockPolicyError

JOINTS = tuple(f"{arm}.joint_{i}" for arm in ("left", "right") for i in range(1, 7))
KEYS = JOINTS + ("left.gripper", "right.gripper")
LIMITS = {k: ((0.0, 0.04) if k.endswith("gripper") else (-1.0, 1.0)) for k in KEYS}


def make_task(**extra):
    task = {"instruction": "wave", "action_keys": KEYS, "joint_limits": LIMITS, "control_frequency": 50.0}
    task.update(extra)
    return task


def observation(positions=None):
    obs = {"sim_time_s": 0.0}
    for key in KEYS:
        obs[f"{key}.pos"] = (positions or {}).get(key, 0.0)
        obs[f"{key}.vel"] = 0.0
        obs[f"{key}.effort"] = 0.0
    return obs


def run(policy, n_chunks, obs=None):
    obs = obs if obs is not None else observation()
    actions = []
    for _ in range(n_chunks):
        actions.extend(policy.act(obs))
    return actions


def test_mock_emits_chunks_of_action_horizon_with_every_action_key():
    policy = make_policy("mock", {"action_horizon": 5})
    policy.reset(make_task())
    chunk = policy.act(observation())
    assert len(chunk) == 5
    assert all(tuple(a) == KEYS for a in chunk)


def test_mock_horizon_defaults_to_task_then_eight():
    policy = MockPolicy()
    policy.reset(make_task(action_horizon=3))
    assert len(policy.act(observation())) == 3
    policy.reset(make_task())
    assert len(policy.act(observation())) == 8


def test_mock_stays_inside_joint_limits():
    # Start near the edges: the motion must still stay inside, and well inside where it started inside.
    start = {k: (0.039 if k.endswith("gripper") else 0.95 * (-1) ** i) for i, k in enumerate(KEYS)}
    policy = MockPolicy({"amplitude": 5.0, "frequency_hz": 3.0, "seed": 7})
    policy.reset(make_task())
    actions = run(policy, 100, observation(start))
    for key in KEYS:
        lower, upper = LIMITS[key]
        values = [a[key] for a in actions]
        assert min(values) >= lower and max(values) <= upper, key
    # From inside the 10 % margin, the motion stays inside it.
    centre = {k: 0.02 for k in KEYS if k.endswith("gripper")}
    policy.reset(make_task())
    for action in run(policy, 100, observation(centre)):
        for key, value in action.items():
            lower, upper = LIMITS[key]
            margin = 0.1 * (upper - lower)
            assert lower + margin - 1e-12 <= value <= upper - margin + 1e-12


def test_mock_without_limits_uses_small_amplitude():
    policy = MockPolicy({"seed": 3})
    policy.reset({"instruction": "x", "action_keys": KEYS})
    actions = run(policy, 50)
    assert max(abs(v) for a in actions for v in a.values()) <= 2 * 0.2 + 1e-9
    assert max(abs(v) for a in actions for v in a.values()) > 0.01


def test_mock_motion_starts_at_observed_pose_and_is_smooth():
    start = {k: 0.3 for k in KEYS if not k.endswith("gripper")}
    policy = MockPolicy({"seed": 1})
    policy.reset(make_task())
    actions = run(policy, 20, observation(start))
    assert actions[0]["left.joint_1"] == pytest.approx(0.3)
    values = np.array([[a[k] for k in KEYS] for a in actions])
    # At 50 Hz, 0.5 Hz +-25 %, amplitude 0.2: at most 2*pi*0.625*0.2/50 rad per step.
    assert np.abs(np.diff(values, axis=0)).max() <= 2 * math.pi * 0.625 * 0.2 / 50 + 1e-9


def test_mock_is_deterministic_with_seed():
    def chunks(seed):
        policy = MockPolicy({"seed": seed})
        policy.reset(make_task())
        return run(policy, 4)

    assert chunks(11) == chunks(11)
    assert chunks(11) != chunks(12)


def test_mock_reset_replays_the_same_episode():
    policy = MockPolicy({"seed": 5})
    policy.reset(make_task())
    first = run(policy, 3)
    policy.reset(make_task())
    assert run(policy, 3) == first


def test_mock_resume_restarts_from_current_pose():
    policy = MockPolicy({"seed": 2})
    policy.reset(make_task())
    run(policy, 5)
    moved = observation({k: -0.5 for k in KEYS if not k.endswith("gripper")})
    policy.resume(moved)
    first = policy.act(moved)[0]
    assert first["right.joint_3"] == pytest.approx(-0.5)


def test_mock_keys_option_emits_exactly_those_keys():
    policy = MockPolicy({"keys": ["arm_a.j1", "arm_b.j2"]})
    policy.reset(make_task())
    chunk = policy.act(observation())
    assert all(set(a) == {"arm_a.j1", "arm_b.j2"} for a in chunk)


def test_mock_values_option_overrides_and_adds_keys():
    policy = MockPolicy({"values": {"left.joint_1": float("nan"), "bogus.key": 9.0}})
    policy.reset(make_task())
    for action in policy.act(observation()):
        assert math.isnan(action["left.joint_1"])
        assert action["bogus.key"] == 9.0
        assert set(action) == set(KEYS) | {"bogus.key"}


def test_end_after_steps_raises_end_episode():
    policy = MockPolicy({"action_horizon": 4, "end_after_steps": 10})
    policy.reset(make_task())
    lengths = [len(policy.act(observation())) for _ in range(3)]
    assert lengths == [4, 4, 2]
    with pytest.raises(EndEpisode):
        policy.act(observation())


def test_end_after_zero_steps_ends_at_first_act():
    policy = MockPolicy({"end_after_steps": 0})
    policy.reset(make_task())
    with pytest.raises(EndEpisode):
        policy.act(observation())


def test_fail_after_steps_raises_policy_error_after_exact_count():
    policy = MockPolicy({"action_horizon": 8, "fail_after_steps": 12})
    policy.reset(make_task())
    assert len(run(policy, 2)) == 12
    with pytest.raises(MockPolicyError):
        policy.act(observation())
    assert not issubclass(MockPolicyError, EndEpisode)


def test_end_after_steps_counter_restarts_on_reset():
    policy = MockPolicy({"action_horizon": 4, "end_after_steps": 4})
    policy.reset(make_task())
    policy.act(observation())
    policy.reset(make_task())
    assert len(policy.act(observation())) == 4


def test_inference_delay_slows_act():
    policy = MockPolicy({"inference_delay_s": 0.05})
    policy.reset(make_task())
    start = time.monotonic()
    policy.act(observation())
    assert time.monotonic() - start >= 0.05


def test_mock_act_before_reset_is_an_error():
    with pytest.raises(RuntimeError, match="reset"):
        MockPolicy().act(observation())


@pytest.mark.parametrize(
    "config",
    [
        {"action_horizon": 0},
        {"action_horizon": "many"},
        {"end_after_steps": -1},
        {"inference_delay_s": -0.1},
        {"keys": "left.joint_1"},
        {"keys": []},
        {"frequency_hz": float("inf")},
    ],
)
def test_mock_invalid_option_is_refused(config):
    with pytest.raises(ValueError):
        MockPolicy(config)


def test_mock_task_without_action_keys_is_refused():
    with pytest.raises(ValueError, match="action_keys"):
        MockPolicy().reset({"instruction": "x"})
