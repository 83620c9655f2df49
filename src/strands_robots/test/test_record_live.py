"""strands-robots record: live publishers recorded to MCAP with rosbag2's conventions, read back with mcap_ros2."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("mcap_ros2", reason="mcap-ros2-support is not installed (requirements/python.txt)")

from mcap.reader import make_reader  # noqa: E402
from mcap_ros2.decoder import DecoderFactory  # noqa: E402
from monitor_helpers import (Publishers, driver_status_dict, ended, job_status_dict, lease_dict,  # noqa: E402
                             safety_stop_dict, start_module, started, step, stop_process)

from strands_robots.monitoring.topic_recorder import TopicRecorder  # noqa: E402
from strands_robots.monitoring.topics import STRANDS_TOPICS, camera_topics, topics_in  # noqa: E402
from strands_robots.rollout.msg_schema import DELIMITER, MsgDefinitions, full_text  # noqa: E402
from strands_robots.rollout.recording import ros_distro  # noqa: E402

NS = "rec_test"
LATCHED = {"job_status", "safety_stop", "driver_status", "lease_state"}


def read_file(path: Path):
    with open(path, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        header = reader.get_header()
        summary = reader.get_summary()
        metadata = {m.name: dict(m.metadata) for m in reader.iter_metadata()}
        messages = [(channel.topic, schema.name, message, decoded)
                    for schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=False)]
    return header, summary, metadata, messages


def installed_root_text(type_name: str) -> str:
    return MsgDefinitions().msg_file(type_name).read_text()


def test_recorder_writes_latched_state_before_messages_that_arrived_first(tmp_path):
    """The capture window: an event offered before the latched samples still lands after them in the file."""
    from strands_robots.conversions.events import event_to_msg
    from strands_robots.conversions.introspection import dict_to_msg
    from rclpy.serialization import serialize_message

    topics = topics_in(NS, ["observer_events", "job_status", "lease_state"])
    recorder = TopicRecorder(tmp_path / "r.mcap", topics, started_ns=1_000)
    recorder.offer(f"/{NS}/observer_events", serialize_message(event_to_msg(started("r1"))), 2_000)
    recorder.offer(f"/{NS}/lease_state", serialize_message(dict_to_msg("strands_robots_msgs/msg/LeaseState",
                                                                        lease_dict())), 3_000)
    recorder.offer(f"/{NS}/job_status", serialize_message(dict_to_msg("strands_robots_msgs/msg/JobStatus",
                                                                       job_status_dict())), 4_000)
    assert recorder.captured_latched() == {f"/{NS}/lease_state", f"/{NS}/job_status"}
    recorder.end_capture()
    recorder.offer(f"/{NS}/observer_events", serialize_message(event_to_msg(step("r1", 1, 0))), 5_000)
    counts = recorder.close()
    assert counts[f"/{NS}/observer_events"] == 2
    _, _, _, messages = read_file(tmp_path / "r.mcap")
    assert [t for t, *_ in messages] == [f"/{NS}/job_status", f"/{NS}/lease_state", f"/{NS}/observer_events",
                                         f"/{NS}/observer_events"]
    assert [m.log_time for _, _, m, _ in messages[:2]] == [1_000, 1_000]  # the state in force at the start
    assert [m.publish_time for _, _, m, _ in messages[:2]] == [4_000, 3_000]


def test_offered_qos_is_written_as_the_distro_s_rosbag2_writes_it():
    from strands_robots.monitoring.topic_recorder import qos_yaml

    assert "durability: transient_local" in qos_yaml("latched", "jazzy")
    assert "reliability: reliable" in qos_yaml("event", "kilted")
    humble = qos_yaml("latched", "humble")  # rmw enum numbers before bag format 9
    assert "history: 1" in humble and "reliability: 1" in humble and "durability: 1" in humble
    assert "durability: 2" in qos_yaml("event", "humble")
    assert "reliability: best_effort" in qos_yaml("sensor", "kilted")  # the cameras' sensor-data profile
    assert "reliability: 2" in qos_yaml("sensor", "humble")


def test_record_refuses_an_existing_file(tmp_path):
    from strands_robots.monitoring.topic_recorder import RecordRefused

    path = tmp_path / "x.mcap"
    path.write_bytes(b"")
    with pytest.raises(RecordRefused, match="already exists"):
        TopicRecorder(path, topics_in(NS))


def test_record_captures_live_topics_latched_state_first_with_installed_schemas(ros_context, tmp_path):
    pubs = Publishers(ros_context, NS)
    out = tmp_path / "live.mcap"
    proc = None
    try:
        # The latched state exists before the recorder does.
        pubs.publish_dict("job_status", "strands_robots_msgs/msg/JobStatus", job_status_dict("job-42"))
        pubs.publish_dict("lease_state", "strands_robots_msgs/msg/LeaseState", lease_dict("station"))
        pubs.publish_dict("driver_status", "strands_robots_msgs/msg/DriverStatus", driver_status_dict())
        pubs.publish_dict("safety_stop", "strands_robots_msgs/msg/SafetyStop", safety_stop_dict())
        proc = start_module("strands_robots.monitoring.record", "-o", str(out), "--namespace", NS,
                            "--latch-wait", "5")
        assert pubs.wait_subscribed("observer_events"), "record never subscribed to observer_events"
        assert pubs.wait_subscribed("action_verdicts")
        time.sleep(1.0)  # both ends matched; reliable delivery from here
        events = [started("run-a"), *[step("run-a", i + 1, i) for i in range(5)], ended("run-a", 6)]
        for event in events:
            pubs.publish_event(event)
        pubs.publish_dict("joint_states", "sensor_msgs/msg/JointState",
                          {"name": ["left.joint_1"], "position": [0.5]})
        pubs.publish_dict("action_commands", "strands_robots_msgs/msg/ActionCommand",
                          {"keys": ["left.joint_1"], "values": [0.6], "run_id": "run-a", "step_index": 3})
        pubs.publish_dict("action_verdicts", "strands_robots_msgs/msg/ActionVerdict",
                          {"run_id": "run-a", "step_index": 3, "applied_keys": ["left.joint_1"]})
        pubs.publish_dict("episode_results", "strands_robots_msgs/msg/EpisodeResult",
                          {"episode_id": "ep_0000", "end_condition": "timeout", "run_id": "run-a"})
        time.sleep(1.5)
    finally:
        if proc is not None:
            stdout, stderr = stop_process(proc)
        pubs.destroy()
    assert proc.returncode == 0, stderr
    assert "wrote" in stdout, stdout

    header, summary, metadata, messages = read_file(out)
    assert header.profile == "ros2"
    assert metadata["rosbag2"]["ROS_DISTRO"] == ros_distro() != "unknown"
    # live topic names, every strands topic and the JPEG and camera info of each camera of config/cameras.yaml
    cameras = {t.resolve(NS) for t in camera_topics(["scene", "wrist"])}
    assert cameras == {f"/{NS}/{c}/{s}" for c in ("scene", "wrist") for s in ("image_raw/compressed", "camera_info")}
    assert {c.topic for c in summary.channels.values()} == {t.resolve(NS) for t in STRANDS_TOPICS} | cameras
    assert all(c.message_encoding == "cdr" for c in summary.channels.values())
    # every schema is the installed definition, verbatim
    for schema in summary.schemas.values():
        assert schema.encoding == "ros2msg"
        text = schema.data.decode()
        assert text == full_text(schema.name)
        assert text.split(f"\n{DELIMITER}\n")[0] == installed_root_text(schema.name)
    # the latched state first, as published before the recorder started
    first = {topic.rsplit("/", 1)[1]: decoded for topic, _, _, decoded in messages[:4]}
    assert set(first) == LATCHED
    assert first["job_status"].job_id == "job-42"
    assert first["lease_state"].holder == "station"
    assert [c.text for c in first["safety_stop"].checks] == ["right: joint 4 reads +3.4 N*m",
                                                            "left: joint 2 reads -2.6 rad/s"]
    latched_qos = [c.metadata["offered_qos_profiles"] for c in summary.channels.values()
                   if c.topic == f"/{NS}/job_status"][0]
    assert "durability: transient_local" in latched_qos
    # the live stream after it, complete and in order
    seqs = [d.event_seq for t, _, _, d in messages if t == f"/{NS}/observer_events"]
    assert seqs == list(range(7))
    by_topic = {t: d for t, _, _, d in messages}
    assert list(by_topic[f"/{NS}/joint_states"].position) == [0.5]
    assert by_topic[f"/{NS}/action_commands"].step_index == 3
    assert by_topic[f"/{NS}/episode_results"].episode_id == "ep_0000"
