"""ReplayPolicy: CSV and MCAP trajectories played in order, then EndEpisode."""

from __future__ import annotations

import math

import pytest
from mcap_ros2.writer import Writer

from strands_robots.policies import EndEpisode, make_policy
from strands_robots.policies.replay import ReplayPolicy

ACTION_COMMAND = "strands_robots_msgs/msg/ActionCommand"
ACTION_COMMAND_DEF = "string[] keys\nfloat64[] values"
TASK = {"instruction": "replay", "action_keys": ("left.joint_1", "left.joint_2"), "control_frequency": 10.0}


def write_csv(path, text):
    path.write_text(text)
    return path


def drain(policy, observation=None):
    """Every action until EndEpisode, and the chunk lengths."""
    actions, lengths = [], []
    for _ in range(1000):
        try:
            chunk = policy.act(observation or {})
        except EndEpisode:
            return actions, lengths
        actions.extend(chunk)
        lengths.append(len(chunk))
    raise AssertionError("replay never ended")


def write_mcap(path, messages, topic="/action_commands", extra_topic=None):
    with open(path, "wb") as f:
        writer = Writer(f)
        schema = writer.register_msgdef(ACTION_COMMAND, ACTION_COMMAND_DEF)
        for i, (keys, values) in enumerate(messages):
            log_time = 1_000_000_000 + i * 50_000_000
            writer.write_message(topic, schema, {"keys": keys, "values": values}, log_time=log_time)
        if extra_topic:
            writer.write_message(extra_topic, schema, {"keys": [], "values": []}, log_time=1)
        writer.finish()
    return path


def test_replay_csv_plays_every_row_then_ends_episode(tmp_path):
    rows = [(0.1 * i, -0.1 * i) for i in range(11)]
    text = "left.joint_1,left.joint_2\n" + "".join(f"{a},{b}\n" for a, b in rows)
    policy = make_policy("replay", {"path": str(write_csv(tmp_path / "traj.csv", text)), "action_horizon": 4})
    policy.reset(TASK)
    actions, lengths = drain(policy)
    assert lengths == [4, 4, 3]
    assert [(a["left.joint_1"], a["left.joint_2"]) for a in actions] == pytest.approx(rows)
    with pytest.raises(EndEpisode):
        policy.act({})


def test_replay_csv_time_column_is_not_an_action_key(tmp_path):
    path = write_csv(tmp_path / "t.csv", "t,left.joint_1\n0.0,1.0\n0.1,2.0\n")
    policy = ReplayPolicy({"path": path})
    policy.reset(TASK)
    actions, _ = drain(policy)
    assert actions == [{"left.joint_1": 1.0}, {"left.joint_1": 2.0}]
    assert policy.trajectory.times == pytest.approx((0.0, 0.1))


def test_replay_csv_empty_cell_leaves_key_out_and_nan_is_kept(tmp_path):
    path = write_csv(tmp_path / "p.csv", "left.joint_1,left.joint_2\n1.0,\nnan,2.0\n")
    policy = ReplayPolicy({"path": path})
    policy.reset(TASK)
    actions, _ = drain(policy)
    assert actions[0] == {"left.joint_1": 1.0}
    assert math.isnan(actions[1]["left.joint_1"]) and actions[1]["left.joint_2"] == 2.0


def test_replay_reset_rewinds_and_consumers_cannot_edit_the_trajectory(tmp_path):
    path = write_csv(tmp_path / "r.csv", "left.joint_1\n1.0\n2.0\n")
    policy = ReplayPolicy({"path": path})
    policy.reset(TASK)
    first, _ = drain(policy)
    first[0]["left.joint_1"] = 99.0
    policy.reset(TASK)
    again, _ = drain(policy)
    assert again == [{"left.joint_1": 1.0}, {"left.joint_1": 2.0}]


def test_replay_resume_continues_where_it_stopped(tmp_path):
    path = write_csv(tmp_path / "c.csv", "left.joint_1\n" + "".join(f"{i}\n" for i in range(6)))
    policy = ReplayPolicy({"path": path, "action_horizon": 2})
    policy.reset(TASK)
    policy.act({})
    policy.resume({"left.joint_1.pos": 42.0})
    assert [a["left.joint_1"] for a in policy.act({})] == [2.0, 3.0]


def test_replay_timing_t_follows_recorded_times_at_control_frequency(tmp_path):
    # Rows at 0, 0.25, 0.5 s played at 10 Hz: steps at 0.0..0.5 s pick the latest row at or before each time.
    path = write_csv(tmp_path / "tt.csv", "t,left.joint_1\n0.0,0\n0.25,1\n0.5,2\n")
    policy = ReplayPolicy({"path": path, "timing": "t", "action_horizon": 4})
    policy.reset(TASK)
    actions, lengths = drain(policy)
    assert [a["left.joint_1"] for a in actions] == [0, 0, 0, 1, 1, 2]
    assert lengths == [4, 2]


def test_replay_timing_t_needs_a_time_column(tmp_path):
    path = write_csv(tmp_path / "nt.csv", "left.joint_1\n0\n")
    with pytest.raises(ValueError, match="'t'"):
        ReplayPolicy({"path": path, "timing": "t"})


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "header"),
        ("left.joint_1\n", "no action rows"),
        ("left.joint_1,left.joint_1\n1,2\n", "duplicate"),
        ("left.joint_1\nabc\n", "not a number"),
        ("t,left.joint_1\n0.2,1\n0.1,2\n", "decrease"),
        ("left.joint_1\n1,2\n", "cells"),
    ],
)
def test_replay_malformed_csv_is_refused_at_construction(tmp_path, text, match):
    path = write_csv(tmp_path / "bad.csv", text)
    with pytest.raises(ValueError, match=match):
        ReplayPolicy({"path": path})


def test_replay_missing_path_is_refused():
    with pytest.raises(ValueError, match="path"):
        ReplayPolicy({})


def test_replay_mcap_reads_parallel_key_value_arrays(tmp_path):
    messages = [(["left.joint_1", "left.joint_2"], [0.1 * i, 0.2 * i]) for i in range(5)]
    path = write_mcap(tmp_path / "episode.mcap", messages)
    policy = make_policy("replay", {"path": str(path), "action_horizon": 3})
    policy.reset(TASK)
    actions, lengths = drain(policy)
    assert lengths == [3, 2]
    assert len(actions) == len(messages)
    for action, (keys, values) in zip(actions, messages):
        assert action == pytest.approx(dict(zip(keys, values)))
    assert policy.trajectory.times == pytest.approx((0.0, 0.05, 0.1, 0.15, 0.2))


def test_replay_mcap_reads_only_the_configured_topic(tmp_path):
    messages = [(["left.joint_1"], [1.0])]
    path = write_mcap(tmp_path / "t.mcap", messages, topic="/arm/commands", extra_topic="/other")
    policy = ReplayPolicy({"path": path, "topic": "/arm/commands"})
    policy.reset(TASK)
    assert drain(policy)[0] == [{"left.joint_1": 1.0}]


def test_replay_mcap_without_the_topic_lists_the_topics_it_has(tmp_path):
    path = write_mcap(tmp_path / "wrong.mcap", [(["left.joint_1"], [1.0])], topic="/action")
    with pytest.raises(ValueError, match="/action") as err:
        ReplayPolicy({"path": path})
    assert "/action_commands" in str(err.value)


def test_replay_mcap_with_mismatched_arrays_is_refused(tmp_path):
    path = write_mcap(tmp_path / "mismatch.mcap", [(["left.joint_1", "left.joint_2"], [1.0])])
    with pytest.raises(ValueError, match="2 keys but 1 values"):
        ReplayPolicy({"path": path})


def test_replay_format_option_overrides_suffix(tmp_path):
    path = write_mcap(tmp_path / "episode.bin", [(["left.joint_1"], [3.0])])
    policy = ReplayPolicy({"path": path, "format": "mcap"})
    policy.reset(TASK)
    assert policy.act({}) == [{"left.joint_1": 3.0}]


def test_replay_mcap_topic_without_parallel_arrays_is_refused(tmp_path):
    path = tmp_path / "string.mcap"
    with open(path, "wb") as f:
        writer = Writer(f)
        schema = writer.register_msgdef("std_msgs/msg/String", "string data")
        writer.write_message("/action_commands", schema, {"data": "hello"}, log_time=1)
        writer.finish()
    with pytest.raises(ValueError, match="std_msgs/msg/String"):
        ReplayPolicy({"path": path})


def test_replay_finds_the_namespaced_actions_topic_of_a_rollout_recording(tmp_path):
    from rollout_fakes import FakeBackend, ScriptedPolicy as Constant

    from strands_robots.rollout.runner import PolicyRunner

    out = PolicyRunner(FakeBackend()).run(Constant(horizon=2), n_steps=4, fast_mode=True, record=True,
                                          recording_dir=str(tmp_path), recording_topic_prefix="/strands")
    policy = ReplayPolicy({"path": out["episodes"][0]["recording_path"]})
    assert len(policy.trajectory.actions) == 4
    assert policy.trajectory.actions[1] == {"a": 0.1, "b": 0.1}


def test_replay_reads_a_recordings_namespaced_actions_topic_when_it_has_no_action_commands(tmp_path):
    path = write_mcap(tmp_path / "namespaced.mcap", [(["left.joint_1"], [1.5]), (["left.joint_1"], [2.5])],
                      topic="/strands/actions")
    policy = ReplayPolicy({"path": path})
    assert [a["left.joint_1"] for a in policy.trajectory.actions] == [1.5, 2.5]


def test_replay_with_several_actions_topics_asks_for_the_topic(tmp_path):
    path = write_mcap(tmp_path / "two.mcap", [(["left.joint_1"], [1.0])], topic="/a/action_commands",
                      extra_topic="/b/action_commands")
    with pytest.raises(ValueError, match="several command topics"):
        ReplayPolicy({"path": path})


def test_replay_reads_recordings_made_before_and_after_commands_carried_a_lookahead(tmp_path):
    from strands_robots.rollout.msg_schema import full_text

    now = full_text(ACTION_COMMAND)  # the installed definition (a lookahead and its period)
    assert "float64[] lookahead" in now
    before = "\n".join(line for line in now.splitlines() if not line.startswith(("float64[] lookahead",
                                                                                 "builtin_interfaces/Duration")))
    stamp = {"sec": 0, "nanosec": 0}
    base = {"run_id": "r", "step_index": 0, "lease_proof": "", "sent": stamp, "apply_by": stamp}
    rows = [(["left.joint_1", "left.joint_2"], [0.1, 0.2]), (["left.joint_1", "left.joint_2"], [0.3, 0.4])]
    for name, definition, extra in (("before", before, {}),
                                    ("after", now, {"lookahead": [0.5, 0.6], "lookahead_period": stamp})):
        path = tmp_path / f"{name}.mcap"
        with open(path, "wb") as f:
            writer = Writer(f)
            schema = writer.register_msgdef(ACTION_COMMAND, definition)
            for i, (keys, values) in enumerate(rows):
                writer.write_message("/action_commands", schema, {**base, "keys": keys, "values": values, **extra},
                                     log_time=1_000_000_000 + i * 100_000_000)
            writer.finish()
        policy = make_policy("replay", {"path": str(path)})
        policy.reset(TASK)
        actions, _ = drain(policy)
        assert actions == [{"left.joint_1": 0.1, "left.joint_2": 0.2}, {"left.joint_1": 0.3, "left.joint_2": 0.4}], name
