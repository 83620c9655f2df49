"""Simulation.run_policy end to end on the MuJoCo two-arm driver (the spec's example, verbatim)."""

from __future__ import annotations

import pytest

pytest.importorskip("mujoco")

from strands_robots.simulation import Simulation  # noqa: E402
from strands_robots.simulation.observers import RunPolicyEnded, RunPolicyStarted, RunPolicyStep  # noqa: E402

from rollout_fakes import Collect, FakeTime  # noqa: E402


@pytest.fixture
def sim():
    s = Simulation()
    s.add_robot("alice")
    return s


def test_spec_example_runs_verbatim(sim, capsys):
    # The spec's example, exactly as written (the default duration is 10 s of paced control at 50 Hz), on a
    # deterministic clock: alice's runner paces on FakeTime, so the 10 s of rollout time pass at once (the
    # physics advances by the control period per step either way; real-time pacing is test_rollout_pacing's).
    from strands_robots.rollout.runner import PolicyRunner
    from strands_robots.simulation.observers import RunPolicyStep

    t = FakeTime()
    alice = sim.robot("alice")
    alice.runner = PolicyRunner(alice.backend, robot_name="alice", stop=alice.stop_token, clock_ns=t.clock,
                                waiter=t.wait)

    def watch(event):
        if isinstance(event, RunPolicyStep) and event.action_resolution != "full":
            print(event.applied_action_index, event.unresolved_action_keys)

    result = sim.run_policy(robot_name="alice", policy_provider="mock", observer=watch)

    # The run happened: 10 s at 50 Hz, every step dispatched to the observer (which received them all).
    (ep,) = result["episodes"]
    assert result["status"] == "success" and ep["outcome"] == "ok" and ep["stopped_reason"] == "budget"
    assert ep["applied_actions"] == 500 and ep["full_count"] == 500 and result["observer_failures"] == 0
    assert 9.9 <= t.seconds() <= 10.1  # the pacer waited out the 10 s budget on the grid, step by step
    # The mock policy stays inside the limits: every step resolved full, so the example printed nothing.
    assert capsys.readouterr().out == ""
    collect = Collect()
    result = sim.run_policy(robot_name="alice", policy_provider="mock", observer=[watch, collect],
                            n_steps=20, fast_mode=True)
    assert result["status"] == "success"
    steps = collect.of(RunPolicyStep)
    assert len(steps) == 20 and {s.action_resolution for s in steps} == {"full"}
    assert collect.of(RunPolicyStarted)[0].robot_name == "alice"
    assert len(collect.of(RunPolicyStarted)[0].actuator_keys) == 14


def test_spec_example_prints_unresolved_steps(sim, capsys):
    def watch(event):
        if isinstance(event, RunPolicyStep) and event.action_resolution != "full":
            print(event.applied_action_index, event.unresolved_action_keys)

    result = sim.run_policy(robot_name="alice", policy_provider="mock", observer=watch, n_steps=3, fast_mode=True,
                            policy_config={"values": {"left.joint_1": float("nan")}})
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{i} ('left.joint_1',)" for i in range(3)]
    assert result["episodes"][0]["partial_count"] == 3


def test_simulation_reset_before_every_episode():
    sim = Simulation.with_robot("alice")
    robot = sim.robot("alice")
    robot.core.step(0.5)  # the arms ran before: the first episode is reset too
    resets = []
    original = robot.backend.reset
    robot.backend.reset = lambda seed=None: (resets.append(seed), original(seed))[1]
    collect = Collect()
    result = sim.run_policy(robot_name="alice", policy_provider="mock", observer=collect, n_episodes=3, n_steps=5,
                            fast_mode=True, seed=11)
    assert result["status"] == "success" and len(result["episodes"]) == 3
    assert resets == [11, 12, 13]
    firsts = [e for e in collect.of(RunPolicyStep) if e.applied_action_index == 0]
    assert [e.sim_time_s for e in firsts] == [0.0, 0.0, 0.0]
    assert [ep["sim_time_s"] for ep in result["episodes"]] == pytest.approx([0.1, 0.1, 0.1])


def test_simulation_safety_stop_ends_with_detail():
    sim = Simulation.with_robot("alice")
    collect = Collect()
    result = sim.run_policy(robot_name="alice", policy_provider="mock", observer=collect, n_steps=20, fast_mode=True,
                            policy_config={"values": {"right.joint_4": -1.5}})
    (ep,) = result["episodes"]
    assert ep["stopped_reason"] == "safety_stop" and ep["outcome"] == "error"
    assert "right: joint 4" in ep["end_detail"]
    assert len(collect.of(RunPolicyEnded)) == 1


def test_simulation_unknown_robot_is_refused_without_events():
    sim = Simulation.with_robot("alice")
    collect = Collect()
    result = sim.run_policy(robot_name="bob", policy_provider="mock", observer=collect)
    assert result["status"] == "error" and "alice" in result["error_message"] and collect.events == []


def test_a_removed_robot_is_refused_by_name_and_its_name_can_be_taken_again():
    sim = Simulation.with_robot("alice")
    sim.remove_robot("alice")
    sim.remove_robot("alice")  # already gone: no error
    with pytest.raises(KeyError, match="robots: \\(none\\)"):
        sim.robot("alice")
    assert sim.add_robot("alice") is sim.robot("alice")


def test_simulation_fail_fast_on_unknown_keys_lists_valid_keys():
    sim = Simulation.with_robot("alice")

    class ForeignPolicy:  # does not declare its keys: only the loop can find out
        def reset(self, task):
            pass

        def act(self, observation):
            return [{"shoulder_pan": 0.0, "elbow_flex": 0.1}] * 4

        def resume(self, observation):
            pass

    result = sim.run_policy(robot_name="alice", policy_provider=ForeignPolicy(), n_steps=100, fast_mode=True)
    (ep,) = result["episodes"]
    assert ep["outcome"] == "error" and ep["applied_actions"] == 3
    assert "left.joint_1" in ep["error_message"] and "right.gripper" in ep["error_message"]


def test_simulation_async_rtc_reports_prefetch_telemetry():
    sim = Simulation.with_robot("alice")
    collect = Collect()
    result = sim.run_policy(robot_name="alice", policy_provider="mock", observer=collect, n_steps=40,
                            control_frequency=200, async_rtc=True, action_horizon=8)
    (ep,) = result["episodes"]
    assert ep["outcome"] == "ok" and ep["chunks_inferred"] >= 5
    assert ep["prefetch_hits"] + ep["prefetch_blocks"] >= 4
    assert all(s.observation_age_steps >= s.chunk_index for s in collect.of(RunPolicyStep))


def test_simulation_records_every_step_and_event_to_mcap(tmp_path):
    reader_mod = pytest.importorskip("mcap.reader")
    sim = Simulation.with_robot("alice")
    collect = Collect()
    result = sim.run_policy(robot_name="alice", policy_provider="mock", observer=collect, n_steps=12, fast_mode=True,
                            record=True, recording_dir=str(tmp_path), n_episodes=2)
    assert result["status"] == "success"
    paths = [ep["recording_path"] for ep in result["episodes"]]
    assert len(set(paths)) == 2 and all(ep["recorded_frames"] == 12 for ep in result["episodes"])
    assert {s.observation_age_steps for s in collect.of(RunPolicyStep)} == {0}
    for path in paths:
        with open(path, "rb") as f:
            topics = [channel.topic for _, channel, _ in reader_mod.make_reader(f).iter_messages()]
        assert topics.count("/joint_states") == 12 and topics.count("/action_commands") == 12
        assert topics.count("/observer_events") == 14  # Started + 12 steps + Ended
