"""EpisodeRecorder and msg_schema: MCAP with ROS 2 CDR read back, refusals, I/O failures, schema texts."""

from __future__ import annotations

import math
import os
import resource
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest
from mcap.exceptions import EndOfFile
from mcap.reader import make_reader
from mcap.records import Message
from mcap.stream_reader import StreamReader
from mcap_ros2.decoder import DecoderFactory

from strands_robots.arm.verdict import ActionVerdict
from strands_robots.rollout.msg_schema import (
    DELIMITER,
    MsgDefinitionNotFound,
    MsgDefinitions,
    field_dependencies,
    full_text,
)
from strands_robots.rollout.recording import (
    ACTION_COMMAND_TYPE,
    JOINT_STATE_TYPE,
    OBSERVER_EVENT_TYPE,
    EpisodeRecorder,
    RecordingError,
    RecordingRefused,
)

JOINTS = tuple(f"{arm}.joint_{i}" for arm in ("left", "right") for i in range(1, 7))
KEYS = JOINTS + ("left.gripper", "right.gripper")
T0 = 1_700_000_000_000_000_000
PERIOD_NS = 20_000_000  # 50 Hz


def observation(step, keys=KEYS, quantities=("pos", "vel", "effort")):
    obs = {"sim_time_s": step * 0.02}
    for j, key in enumerate(keys):
        for q, quantity in enumerate(quantities):
            # distinct, non-repeating values so compression cannot hide a dropped step
            obs[f"{key}.{quantity}"] = math.sin(step * 0.37 + j * 1.3 + q) * (q + 1)
    return obs


def action(step, keys=KEYS):
    return {key: math.cos(step * 0.11 + j) for j, key in enumerate(keys)}


def read_back(path):
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        out = [(channel.topic, schema.name, message, ros_msg)
               for schema, channel, message, ros_msg in reader.iter_decoded_messages(log_time_order=False)]
        summary_schemas = {s.name: s.data.decode() for s in reader.get_summary().schemas.values()}
    return out, summary_schemas


def open_recorder(path, **kwargs):
    settings = {"control_frequency": 50.0, "fps": 50.0, "actuator_keys": KEYS, "robot_name": "two_arms"}
    settings.update(kwargs)
    return EpisodeRecorder.open(path, **settings)


def step_event(seq, step):
    return {
        "stamp": {"sec": 1, "nanosec": 2},
        "kind": "step",
        "schema_version": 2,
        "run_id": "run-1",
        "event_seq": seq,
        "monotonic_ns": 10 + seq,
        "utc_ns": T0 + step * PERIOD_NS,
        "dropped_before": 0,
        "started": [],
        "step": [{
            "schema_version": 2,
            "run_id": "run-1",
            "event_seq": seq,
            "applied_action_index": step,
            "legacy_step_index": step,
            "action_resolution": "partial",
            "applied_action_keys": ("left.joint_1",),
            "unresolved_action_keys": ("bogus",),
            "unresolved_action_reasons": ("unknown_key",),
            "observation_is_chunk_reused": True,
            "observation_age_steps": 3,
            "legacy_hook_outcome": "ok",
            "action_keys": ["left.joint_1", "bogus"],
            "action_values": [0.5, 1.5],
        }],
        "ended": [],
    }


def test_recording_reads_back_every_step(tmp_path):
    path = tmp_path / "episodes" / "ep_0000.mcap"
    n = 300
    recorder = open_recorder(path, chunk_size=4096)  # several chunks
    recorder.write_latched("/lease_state", "strands_robots_msgs/msg/LeaseState",
                           {"state": "held", "holder": "rollout", "priority": 5})
    verdict = ActionVerdict(applied_keys=KEYS)
    for step in range(n):
        recorder.write_step(step, T0 + step * PERIOD_NS, observation(step), action(step), verdict)
        recorder.write_event(step_event(step, step))
    assert recorder.accepted_frames == n
    assert recorder.frames <= n  # the frames of the open chunk count once it is written (at the latest, close)
    assert recorder.close() == n
    assert recorder.close() == n  # idempotent
    assert recorder.path == path

    messages, schemas = read_back(path)
    joint_states = [m for m in messages if m[0] == "/joint_states"]
    actions = [m for m in messages if m[0] == "/action_commands"]
    events = [m for m in messages if m[0] == "/observer_events"]
    latched = [m for m in messages if m[0] == "/lease_state"]
    assert len(joint_states) == len(actions) == len(events) == n
    assert {m[1] for m in joint_states} == {JOINT_STATE_TYPE}
    assert {m[1] for m in actions} == {ACTION_COMMAND_TYPE}
    assert {m[1] for m in events} == {OBSERVER_EVENT_TYPE}
    for step, (_, _, record, msg) in enumerate(joint_states):
        obs = observation(step)
        assert record.sequence == step
        assert record.log_time == T0 + step * PERIOD_NS
        assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == T0 + step * PERIOD_NS
        assert list(msg.name) == list(KEYS)
        assert list(msg.position) == [obs[f"{k}.pos"] for k in KEYS]
        assert list(msg.velocity) == [obs[f"{k}.vel"] for k in KEYS]
        assert list(msg.effort) == [obs[f"{k}.effort"] for k in KEYS]
    for step, (_, _, record, msg) in enumerate(actions):
        assert record.sequence == step
        assert list(msg.keys) == list(action(step))
        assert list(msg.values) == list(action(step).values())
    for seq, (_, _, record, msg) in enumerate(events):
        assert msg.event_seq == seq and record.sequence == seq
        assert msg.kind == "step" and msg.started == [] and msg.ended == []
        (payload,) = msg.step
        assert payload.applied_action_index == seq
        assert list(payload.unresolved_action_reasons) == ["unknown_key"]
        assert payload.observation_age_steps == 3 and payload.observation_is_chunk_reused
    (lease,) = latched
    assert lease[1] == "strands_robots_msgs/msg/LeaseState"
    assert (lease[3].state, lease[3].holder, lease[3].priority) == ("held", "rollout", 5)
    assert set(schemas) == {JOINT_STATE_TYPE, ACTION_COMMAND_TYPE, OBSERVER_EVENT_TYPE,
                            "strands_robots_msgs/msg/LeaseState"}

    with open(path, "rb") as f:
        metadata = {m.name: m.metadata for m in make_reader(f).iter_metadata()}
    assert metadata["strands_robots.episode"]["robot_name"] == "two_arms"
    assert metadata["strands_robots.episode"]["actuator_keys"].split(",") == list(KEYS)
    assert metadata["strands_robots.recording"]["frames"] == str(n)


def test_joint_state_leaves_missing_quantities_empty_and_missing_values_nan(tmp_path):
    path = tmp_path / "ep.mcap"
    obs = observation(0, quantities=("pos", "vel"))
    del obs["right.gripper.vel"]
    with open_recorder(path) as recorder:
        recorder.write_step(0, T0, obs, action(0), ActionVerdict(applied_keys=KEYS))
    (message,) = [m[3] for m in read_back(path)[0] if m[0] == "/joint_states"]
    assert list(message.effort) == []
    assert len(message.velocity) == len(KEYS) and math.isnan(message.velocity[-1])
    assert list(message.position) == [obs[f"{k}.pos"] for k in KEYS]


@pytest.mark.parametrize("fps, control_frequency", [(30.0, 50.0), (50.0 + 1e-6, 50.0), (0.0, 0.0), (-50.0, -50.0),
                                                    (float("nan"), 50.0), (float("inf"), float("inf"))])
def test_recording_refused_before_any_file_when_fps_differs(tmp_path, fps, control_frequency):
    path = tmp_path / "not_created" / "ep.mcap"
    with pytest.raises(RecordingRefused):
        open_recorder(path, fps=fps, control_frequency=control_frequency)
    assert not path.exists()
    assert not path.parent.exists()


def test_recording_accepts_fps_equal_within_relative_tolerance(tmp_path):
    recorder = open_recorder(tmp_path / "ep.mcap", fps=500.0 * (1 + 1e-12), control_frequency=500.0)
    assert recorder.close() == 0


def test_recording_refuses_to_overwrite_an_existing_recording(tmp_path):
    path = tmp_path / "ep.mcap"
    path.write_bytes(b"earlier episode")
    with pytest.raises(RecordingRefused, match="already exists"):
        open_recorder(path)
    assert path.read_bytes() == b"earlier episode"


def test_recording_refused_when_a_schema_is_not_installed(tmp_path):
    path = tmp_path / "ep.mcap"
    with pytest.raises(RecordingRefused, match="no .msg definition"):
        open_recorder(path, msg_search_path=[tmp_path / "empty_share"])
    assert not path.exists()


@contextmanager
def file_size_limit(limit_bytes):
    """Make writes fail for real (EFBIG, as a full quota), also for root: RLIMIT_FSIZE, SIGXFSZ ignored."""
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous_handler)


def test_recording_io_failure_raises_recording_error(tmp_path):
    path = tmp_path / "ep.mcap"
    recorder = open_recorder(path, chunk_size=2048)
    verdict = ActionVerdict(applied_keys=KEYS)
    failed_at = None
    with file_size_limit(32 * 1024):
        for step in range(5000):
            try:
                recorder.write_step(step, T0 + step * PERIOD_NS, observation(step), action(step), verdict)
            except RecordingError as exc:
                failed_at = step
                assert isinstance(exc.__cause__, OSError)
                break
        assert failed_at is not None, "a write past the file size limit must raise"
        assert recorder.frames < failed_at  # the open chunk's frames are lost
        with pytest.raises(RecordingError, match="already failed"):  # the recorder stays failed
            recorder.write_step(failed_at + 1, T0, observation(0), action(0), verdict)
        with pytest.raises(RecordingError):
            recorder.write_event(step_event(0, 0))
    frames = recorder.frames
    assert recorder.close() == frames  # releases the file; the failure was already reported
    # the file is left as far as it got: a streaming reader recovers the complete chunks
    recovered = []
    with open(path, "rb") as f:
        try:
            for record in StreamReader(f).records:
                if isinstance(record, Message):
                    recovered.append(record.sequence)
        except EndOfFile:
            pass
    assert recovered and max(recovered) <= failed_at
    assert len(recovered) // 2 == frames  # a joint_states and an actions message per frame


def test_recording_failure_to_finish_the_file_raises_recording_error(tmp_path):
    path = tmp_path / "ep.mcap"
    recorder = open_recorder(path)  # default chunk size: these steps stay in the open chunk
    for step in range(20):
        recorder.write_step(step, T0 + step * PERIOD_NS, observation(step), action(step), None)
    with file_size_limit(path.stat().st_size + 16):
        with pytest.raises(RecordingError, match="cannot finish"):
            recorder.close()
    assert recorder.accepted_frames == 20
    assert recorder.close() == recorder.frames == 0  # idempotent; the open chunk never reached the file


def test_recording_open_failure_raises_recording_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(RecordingError):
        open_recorder(blocker / "ep.mcap")


def test_recording_header_write_failure_leaves_no_file(tmp_path):
    path = tmp_path / "ep.mcap"
    with file_size_limit(4):
        with pytest.raises(RecordingError):
            open_recorder(path)
    assert not path.exists()


def test_recording_encoding_failure_is_a_recording_error_and_writes_nothing(tmp_path):
    path = tmp_path / "ep.mcap"
    with open_recorder(path) as recorder:
        bad = step_event(0, 0)
        bad["event_seq"] = "not a number"
        with pytest.raises(RecordingError):
            recorder.write_event(bad)
        recorder.write_event(step_event(1, 1))  # a bad message does not break the file
    events = [m for m in read_back(path)[0] if m[0] == "/observer_events"]
    assert [m[3].event_seq for m in events] == [1]


def test_step_index_must_increase(tmp_path):
    with open_recorder(tmp_path / "ep.mcap") as recorder:
        recorder.write_step(0, T0, observation(0), action(0), None)
        with pytest.raises(ValueError):
            recorder.write_step(0, T0, observation(0), action(0), None)
        assert recorder.accepted_frames == 1


# ---------------------------------------------------------------------------------------------- schemas

def installed_share_dirs():
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    return [Path(p) / "share" for p in prefixes]


def installed_msg(type_key):
    package, name = type_key.split("/")
    for share in installed_share_dirs():
        path = share / package / "msg" / f"{name}.msg"
        if path.is_file():
            return path
    pytest.skip(f"{type_key} is not installed (build the workspace and source scripts/env.sh)")


def split_full_text(text):
    """[(type or None for the root, text)] from a complete definition."""
    blocks = text.split(f"\n{DELIMITER}\n")
    out = [(None, blocks[0])]
    for block in blocks[1:]:
        header, _, body = block.partition("\n")
        assert header.startswith("MSG: ")
        out.append((header[len("MSG: "):], body))
    return out


@pytest.mark.parametrize("type_name, dependencies", [
    ("strands_robots_msgs/msg/ObserverEvent", {"builtin_interfaces/Time", "strands_robots_msgs/RunPolicyStarted",
                                                "strands_robots_msgs/RunPolicyStep",
                                                "strands_robots_msgs/RunPolicyEnded"}),
    ("strands_robots_msgs/msg/ActionCommand", {"builtin_interfaces/Time", "builtin_interfaces/Duration"}),
    ("sensor_msgs/msg/JointState", {"std_msgs/Header", "builtin_interfaces/Time"}),
    ("strands_robots_msgs/msg/JobStatus", {"strands_robots_msgs/EpisodeResult", "strands_robots_msgs/ScoredItem",
                                           "strands_robots_msgs/Task", "diagnostic_msgs/KeyValue",
                                           "strands_robots_msgs/ScoringSheetDefinition",
                                           "strands_robots_msgs/ScoringItemDefinition",
                                           "strands_robots_msgs/Provenance", "strands_robots_msgs/ConfigHash",
                                           "strands_robots_msgs/SlotPolicySpec",
                                           *(f"strands_robots_msgs/{name}" for name in (
                                               "JobFigures", "TaskFigures", "Rate", "MeanScore", "Coverage",
                                               "Comparison", "SlotFigures", "PairDifference", "ComparisonBlock",
                                               "SlotOutcome", "SequentialStop"))}),
])
def test_schema_text_matches_installed_msg_files(type_name, dependencies):
    package, _, name = type_name.split("/")
    root = installed_msg(f"{package}/{name}")
    blocks = split_full_text(full_text(type_name))
    assert blocks[0] == (None, root.read_text())  # verbatim: comments and constants kept
    assert {dep for dep, _ in blocks[1:]} == dependencies
    assert len(blocks) == len(dependencies) + 1  # each dependency once
    for dep, body in blocks[1:]:
        assert body == installed_msg(dep).read_text()
    # read from the installed share directory, not the source tree
    assert MsgDefinitions().msg_file(type_name) == root


def test_recorded_schemas_are_the_installed_definitions(tmp_path):
    path = tmp_path / "ep.mcap"
    with open_recorder(path) as recorder:
        recorder.write_step(0, T0, observation(0), action(0), None)
    _, schemas = read_back(path)
    for type_name in (JOINT_STATE_TYPE, ACTION_COMMAND_TYPE, OBSERVER_EVENT_TYPE):
        assert schemas[type_name] == full_text(type_name)


def installed_types(package):
    share = installed_msg(f"{package}/ActionCommand").parent
    return sorted(f"{package}/msg/{p.stem}" for p in share.glob("*.msg"))


def test_every_message_type_round_trips_through_mcap(tmp_path):
    types = installed_types("strands_robots_msgs") + [JOINT_STATE_TYPE]
    assert "strands_robots_msgs/msg/ObserverEvent" in types
    path = tmp_path / "all_types.mcap"
    with open_recorder(path) as recorder:
        for type_name in types:
            recorder.write_latched("/" + type_name.split("/")[-1].lower(), type_name, {})
    messages, schemas = read_back(path)
    assert sorted(m[1] for m in messages) == sorted(types)
    for type_name in types:
        assert schemas[type_name] == full_text(type_name)


def test_msg_search_path_overrides_the_environment(tmp_path):
    msg_dir = tmp_path / "share" / "my_msgs" / "msg"
    msg_dir.mkdir(parents=True)
    (msg_dir / "Outer.msg").write_text("# outer\nInner[<=2] inner  # same package\nstring<=8 NAME=\"x\"\n")
    (msg_dir / "Inner.msg").write_text("float64 value\n")
    text = full_text("my_msgs/Outer", search_path=[tmp_path])  # an install prefix
    outer = (msg_dir / "Outer.msg").read_text()
    assert text == f"{outer}\n{DELIMITER}\nMSG: my_msgs/Inner\nfloat64 value\n"
    assert full_text("my_msgs/msg/Outer", search_path=[tmp_path / "share"]) == text  # a share directory
    with pytest.raises(MsgDefinitionNotFound):
        full_text("std_msgs/msg/Header", search_path=[tmp_path])


def test_field_dependencies_skip_primitives_constants_and_bounds():
    text = "uint8 A=1\nstring<=5 s\nint32[3] fixed\nfloat64[<=4] bounded\nfoo/Bar[] bars\nBaz baz # c\n"
    assert field_dependencies(text, "pkg") == ["foo/Bar", "pkg/Baz"]


def test_misspelt_field_is_refused_not_recorded_as_its_default(tmp_path):
    path = tmp_path / "ep.mcap"
    with open_recorder(path) as recorder:
        event = step_event(0, 0)
        event["step"][0]["observation_age"] = 3  # the field is observation_age_steps
        with pytest.raises(RecordingError, match="observation_age"):
            recorder.write_event(event)
        with pytest.raises(RecordingError, match="no field"):
            recorder.write_latched("/lease_state", "strands_robots_msgs/LeaseState", {"holdr": "x"})
    assert not [m for m in read_back(path)[0] if m[0] in ("/observer_events", "/lease_state")]
