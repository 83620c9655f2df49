"""The command stream against the SendAction service, over real DDS, the driver in its own process.

Every per-key case the service path answers (full, partial for unknown keys and NaN, none for out-of-range
values and for a foreign lease token, the fail-fast case of keys that match no actuator) gives the same
verdicts, step by step, over the stream; and the streamed episode's observer stream is dense with one Ended.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from test_rollout_node import lifecycle, rig  # noqa: E402,F401  (rig is the fixture)

CASES = {
    "full": dict(policy_provider="mock", max_steps=20),
    "unknown_keys": dict(policy_provider="scripted", max_steps=20, policy_config_json=json.dumps(
        {"mode": "unknown_keys", "unknown_keys": ["left.joint_99", "tool.joint_1"]})),
    "non_finite": dict(policy_provider="scripted", max_steps=20, policy_config_json=json.dumps(
        {"mode": "non_finite", "joint": "left.joint_2"})),
    "out_of_range_all": dict(policy_provider="scripted", max_steps=20, policy_config_json=json.dumps(
        {"mode": "out_of_range", "out_of_range_keys": "all"})),
    "foreign_lease_token": dict(policy_provider="mock", max_steps=20, lease_token="not-a-token"),
    "only_unknown_keys": dict(policy_provider="scripted", max_steps=20, policy_config_json=json.dumps(
        {"mode": "only_unknown_keys", "unknown_keys": ["tool.joint_1"]})),
}


def _verdicts(r, **goal) -> tuple:
    """(per-step verdict tuples, the Ended's outcome and counts) of one episode as received over DDS."""
    result, _ = r.run(**goal)
    ended = result.ended
    assert ended.run_id, result.message
    _, steps, _ = lifecycle(r, ended)
    per_step = [(s.applied_action_index, s.action_resolution, s.applied_action_keys, s.unresolved_action_keys,
                 s.unresolved_action_reasons, s.action_error) for s in steps]
    summary = (ended.outcome, ended.stopped_reason, ended.applied_actions, ended.full_count, ended.partial_count,
               ended.none_count, ended.unknown_count, ended.error_type)
    return per_step, summary


def test_stream_gives_the_same_verdicts_as_the_service_for_every_per_key_case(rig):
    seen: dict = {}
    for path in ("service", "stream"):
        r = rig(driver="process", command_path=path)
        seen[path] = {name: _verdicts(r, **goal) for name, goal in CASES.items()}
        r.close()

    for name in CASES:
        service, stream = seen["service"][name], seen["stream"][name]
        assert stream == service, f"{name}: stream {stream[1]} vs service {service[1]}"

    # The cases do cover every resolution and every per-key reason the rollout can provoke.
    resolutions = {step[1] for steps, _ in seen["stream"].values() for step in steps}
    assert resolutions == {"full", "partial", "none"}
    reasons = {reason for steps, _ in seen["stream"].values() for step in steps for reason in step[4]}
    assert reasons == {"unknown_key", "non_finite", "outside_limits", "not_lease_holder"}
    assert seen["stream"]["only_unknown_keys"][1][7] == "UnknownActionKeys"  # fail fast still works
