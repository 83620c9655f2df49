"""``strands-robots rescore`` on a rollout's own episode recording (monitoring/rescore.py), no ROS needed.

A real in-process rollout (the scripted policy ramps the right wrist) records its episode with the task's
predicate judged on every step; rescore recomputes the rollout's verdict from the recorded inputs alone. A copy
whose early step inputs are changed must rescore differently. The whole station chain (job_status recorded beside
the nodes, scores and sheets) is test/test_rescore_main_job_recording.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mujoco", reason="the simulated arms need mujoco")
pytest.importorskip("mcap_ros2", reason="recordings are MCAP (mcap-ros2-support)")

from strands_robots.monitoring import rescore  # noqa: E402

PREDICATE = "right.joint_4.pos < 0.5"


def _record(out: Path) -> Path:
    from strands_robots.simulation import Simulation

    sim = Simulation.with_robot("alice")
    result = sim.run_policy(robot_name="alice", policy_provider="scripted",
                            policy_config={"mode": "torque_ramp", "joint": "right.joint_4", "target": 1.5},
                            duration=1.0, control_frequency=50.0, record=True, recording_dir=str(out),
                            task={"task_id": "ramp", "parameters": {"success_when": PREDICATE}})
    return Path(result["episodes"][0]["recording_path"])


def _rewrite_steps(source: Path, target: Path, change) -> int:
    """Copy an MCAP recording, each step event passed through ``change(step)``; the number of steps it changed."""
    from mcap.reader import make_reader
    from mcap.writer import Writer
    from mcap_ros2._dynamic import generate_dynamic, serialize_dynamic

    changed = 0
    with open(source, "rb") as src, open(target, "wb") as dst:
        reader = make_reader(src)
        writer = Writer(dst)
        writer.start(profile="ros2", library="test")
        schemas: dict = {}
        channels: dict = {}
        codecs: dict = {}
        for schema, channel, message in reader.iter_messages(log_time_order=True):
            if schema.id not in schemas:
                schemas[schema.id] = writer.register_schema(schema.name, schema.encoding, schema.data)
                text = schema.data.decode()
                codecs[schema.id] = (generate_dynamic(schema.name, text)[schema.name],
                                     serialize_dynamic(schema.name, text)[schema.name])
            if channel.id not in channels:
                channels[channel.id] = writer.register_channel(channel.topic, channel.message_encoding,
                                                               schemas[schema.id], dict(channel.metadata))
            data = message.data
            if schema.name.endswith("ObserverEvent"):
                decode, encode = codecs[schema.id]
                event = decode(data)
                if event.kind == "step" and change(event.step[0]):
                    data = encode(event)
                    changed += 1
            writer.add_message(channels[channel.id], log_time=message.log_time, data=data,
                               publish_time=message.publish_time, sequence=message.sequence)
        writer.finish()
    return changed


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    return _record(tmp_path_factory.mktemp("rescore"))


def test_rescore_recomputes_the_rollouts_verdict_from_the_recorded_inputs(recording, capsys):
    (episode,) = rescore.rescore_recording([recording])
    assert episode.predicate == PREDICATE and episode.steps == 50 and episode.end_condition == "timeout"
    # The wrist starts below 0.5 rad and ramps to 1.5: the predicate held from the first step, not at the end.
    assert episode.live == {"rollout_ever": True, "first_step": 0}
    assert episode.rescored == {"rollout_ever": True, "first_step": 0, "success_at_end": False,
                                "success_ever": True}
    assert not episode.differences and "no station result recorded" in episode.note
    assert rescore.main([str(recording)]) == 0
    assert "every one agrees" in capsys.readouterr().out


def test_changed_step_inputs_rescore_differently_and_exit_1(recording, tmp_path, capsys):
    def lift(step):  # the first ten steps now read 0.9 rad: the predicate held only from step 10
        if step.applied_action_index >= 10:
            return False
        step.success_input_values = [0.9]
        return True

    tampered = tmp_path / "tampered.mcap"
    assert _rewrite_steps(recording, tampered, lift) == 10
    (episode,) = rescore.rescore_recording([tampered])
    assert episode.live["first_step"] == 0 and episode.rescored["first_step"] > 0
    assert episode.differences == ["first_step"]
    assert rescore.main([str(tampered)]) == 1
    assert "1 differ" in capsys.readouterr().out


def test_a_file_that_is_not_a_recording_exits_2_with_one_line(tmp_path, capsys):
    bogus = tmp_path / "notes.mcap"
    bogus.write_text("not an mcap file")
    assert rescore.main([str(bogus)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("strands-robots rescore: ") and err.count("\n") == 1
