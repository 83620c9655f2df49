"""The wire format.

Committed modules match the .proto files; protobuf semantics as the spec describes them; station model <->
protobuf conversions lose nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from strands_robots.wire import pb_model
from strands_robots.client import pb
from strands_robots.client import codec
from strands_robots.wire.proto import generate
from strands_robots.station.model import (
    AnswerType,
    EpisodeResult,
    JobState,
    JobStatus,
    ScoredItem,
    ScoringItemDefinition,
    ScoringSheet,
    Task,
)


def test_committed_generated_modules_match_the_proto_files(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools is needed to regenerate the modules")
    import importlib.metadata
    import re

    committed_grpc = (generate.PROTO_DIR / "evaluation_service_pb2_grpc.py").read_text()
    generated_with = re.search(r"GRPC_GENERATED_VERSION = '([^']+)'", committed_grpc).group(1)
    installed = importlib.metadata.version("grpcio-tools")
    if installed != generated_with:
        pytest.skip(f"the modules were generated with grpcio-tools {generated_with} (requirements/constraints.txt); "
                    f"{installed} is installed here, and its output differs in its version lines")
    written = generate.generate(tmp_path)
    assert written, "protoc wrote nothing"
    committed_dir = generate.PROTO_DIR
    drift = []
    for path in written:
        committed = committed_dir / path.name
        if not committed.exists():
            drift.append(f"{path.name}: not committed")
        elif committed.read_bytes() != path.read_bytes():
            drift.append(f"{path.name}: differs")
    committed_names = {p.name for p in committed_dir.iterdir() if p.name.endswith(("_pb2.py", "_pb2.pyi",
                                                                                    "_pb2_grpc.py"))}
    drift += [f"{n}: committed but not generated" for n in committed_names - {p.name for p in written}]
    assert not drift, "run python -m strands_robots.wire.proto.generate: " + "; ".join(drift)


def test_message_modules_load_without_grpc():
    code = ("import sys; import strands_robots.wire.proto.evaluation_pb2, "
            "strands_robots.wire.proto.policy_session_pb2, strands_robots.wire.pb_model; "
            "print('grpc' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(pb_model.__file__).resolve().parents[2])})
    assert out.stdout.strip() == "False"


def _status_with_answers():
    status = pb.JobStatus(job_id="job-1", station_id="sim_station", state=pb.JOB_RUNNING, episodes_total=3,
                          updated_unix_ms=1700000000123, message="episode 2 of 3")
    ep = status.episodes.add(episode_id="ep_0000", end_condition=pb.END_TIMEOUT, scored=True, success=False,
                             score=0.0)
    ep.items.add(name="placed", answer_type=pb.ANSWER_TYPE_YES_NO, yes_no=False, max_points=1.0,
                 is_success_item=True)
    ep.items.add(name="which_bin", answer_type=pb.ANSWER_TYPE_CHOICE, choice_index=0, max_points=2.0)
    ep.items.add(name="drops", answer_type=pb.ANSWER_TYPE_COUNT, count=0, max_points=1.0)
    ep.items.add(name="unanswered", answer_type=pb.ANSWER_TYPE_COUNT)
    status.episodes.add(episode_id="ep_0001", end_condition=pb.END_START_POSE_UNREACHED, scored=False)
    return pb.JobStatus.FromString(status.SerializeToString())


def test_status_fields_read_as_attributes_and_episodes_as_a_sequence():
    status = _status_with_answers()
    assert status.state == "RUNNING" and isinstance(status.state, str)
    assert status.updated_unix_ms == 1700000000123
    assert len(status.episodes) == 2
    assert [e.episode_id for e in status.episodes] == ["ep_0000", "ep_0001"]
    assert status.episodes[1].scored is False and len(status.episodes[1].items) == 0


def test_answer_type_is_an_int_enum_with_named_constants():
    item = _status_with_answers().episodes[0].items[0]
    assert isinstance(item.answer_type, int)
    assert item.answer_type == pb.ANSWER_TYPE_YES_NO
    assert pb.AnswerType.Name(item.answer_type) == "ANSWER_TYPE_YES_NO"
    assert {pb.ANSWER_TYPE_YES_NO, pb.ANSWER_TYPE_COUNT, pb.ANSWER_TYPE_CHOICE} == {1, 2, 3}


def test_a_false_answer_and_a_zero_index_are_present_answers():
    items = _status_with_answers().episodes[0].items
    assert items[0].WhichOneof("answer") == "yes_no" and items[0].yes_no is False
    assert items[1].WhichOneof("answer") == "choice_index" and items[1].choice_index == 0
    assert items[2].WhichOneof("answer") == "count" and items[2].count == 0
    assert items[3].WhichOneof("answer") is None
    assert items[0].HasField("yes_no") and not items[3].HasField("count")


def test_optional_fields_answer_has_field():
    status = _status_with_answers()
    assert not status.HasField("station_last_heard_unix_ms")
    status.station_last_heard_unix_ms = 0
    again = pb.JobStatus.FromString(status.SerializeToString())
    assert again.HasField("station_last_heard_unix_ms") and again.station_last_heard_unix_ms == 0
    assert again.episodes[0].HasField("task") is False


def _model_status():
    sheet = ScoringSheet((
        ScoringItemDefinition("placed", "Is the cube in the bin?", AnswerType.YES_NO, 1.0, success_answer="yes"),
        ScoringItemDefinition("bin", "Which bin?", AnswerType.CHOICE, 2.0, choices=("left", "right"),
                              choice_points=(0.0, 2.0)),
        ScoringItemDefinition("drops", "How many drops?", AnswerType.COUNT, 3.0, points_per_unit=1.5),
    ))
    task = Task("pick", "pick the cube", layout="table", parameters={"duration_s": "2.5", "seed": "7"},
                scoring=sheet)
    items = (
        ScoredItem("placed", "Is the cube in the bin?", AnswerType.YES_NO, False, 0.0, 1.0, True),
        ScoredItem("bin", "Which bin?", AnswerType.CHOICE, 0, 0.0, 2.0, False),
        ScoredItem("drops", "How many drops?", AnswerType.COUNT, 2, 3.0, 3.0, False),
    )
    ep0 = EpisodeResult("ep_0000", "safety_stop", True, False, 0.5, items, task, True,
                        "right: joint 4 reads +3.4 N*m", run_id="r-1")
    ep1 = EpisodeResult("ep_0001", "start_pose_unreached", False, False, 0.0, (), task, False, "")
    return JobStatus("job-1", "sim_station", JobState.FINALIZING, 2, (ep0, ep1), 1700000000999, "finishing")


def test_job_status_round_trips_between_model_and_protobuf():
    model = _model_status()
    wire = pb.JobStatus.FromString(pb_model.job_status_to_pb(model).SerializeToString())
    assert wire.state == "FINALIZING"
    assert wire.episodes[0].items[0].WhichOneof("answer") == "yes_no"
    assert wire.episodes[0].items[1].WhichOneof("answer") == "choice_index"
    assert wire.episodes[0].task.scoring.items[1].answer_type == pb.ANSWER_TYPE_CHOICE
    assert dict(wire.episodes[0].task.parameters) == {"duration_s": "2.5", "seed": "7"}
    back = pb_model.job_status_from_pb(wire)
    assert back == model


def test_both_successes_and_the_read_against_figures_cross_the_wire_with_their_presence():
    import dataclasses

    model = _model_status()
    judged = dataclasses.replace(model.episodes[0], success_at_end=False, success_ever=True,
                                 inference_latency_p50_ms=12.5, inference_latency_p99_ms=80.25,
                                 mean_observation_age_steps=1.5, missed_deadlines=0)
    model = dataclasses.replace(model, episodes=(judged, model.episodes[1]))
    wire = pb.JobStatus.FromString(pb_model.job_status_to_pb(model).SerializeToString())
    first, second = wire.episodes
    assert first.HasField("success_at_end") and first.success_at_end is False  # a False is present
    assert first.HasField("missed_deadlines") and first.missed_deadlines == 0  # and so is a zero
    assert (first.success_ever, first.inference_latency_p50_ms, first.inference_latency_p99_ms,
            first.mean_observation_age_steps) == (True, 12.5, 80.25, 1.5)
    assert not any(second.HasField(name) for name in ("success_at_end", "success_ever", "inference_latency_p50_ms",
                                                      "inference_latency_p99_ms", "mean_observation_age_steps",
                                                      "missed_deadlines"))
    back = pb_model.job_status_from_pb(wire)
    assert back == model and back.episodes[1].success_at_end is None


def test_job_status_sequence_crosses_the_wire_unchanged():
    import dataclasses

    model = dataclasses.replace(_model_status(), sequence=41)
    wire = pb.JobStatus.FromString(pb_model.job_status_to_pb(model).SerializeToString())
    assert wire.sequence == 41
    assert pb_model.job_status_from_pb(wire).sequence == 41
    assert pb.JobStatus().sequence == 0  # an older station's snapshot: unnumbered


def test_scored_item_with_its_answer_in_the_wrong_field_is_refused():
    msg = pb.ScoredItem(name="placed", answer_type=pb.ANSWER_TYPE_YES_NO, count=1)
    with pytest.raises(ValueError, match="'placed'.*needs its answer in 'yes_no', got count"):
        pb_model.scored_item_from_pb(msg)
    with pytest.raises(ValueError, match="not one of yes_no, count, choice"):
        pb_model.answer_type_from_pb(pb.ANSWER_TYPE_UNSPECIFIED)


def test_observation_and_chunk_codec_keeps_numbers_text_flags_and_arrays():
    np = pytest.importorskip("numpy")
    obs = {"left/joint_1": 0.25, "step": 3, "instruction": "pick", "gripper_closed": False,
           "image": np.arange(12, dtype=np.uint8).reshape(2, 3, 2), "vec": [[1, 2], [3, 4]]}
    wire = pb.Observation.FromString(codec.observation_to_pb(obs).SerializeToString())
    back = codec.observation_from_pb(wire)
    assert back["left/joint_1"] == 0.25 and back["step"] == 3.0
    assert back["instruction"] == "pick" and back["gripper_closed"] is False
    assert wire.values["image"].tensor.dtype == "uint8" and len(wire.values["image"].tensor.data) == 12
    assert back["image"].shape == (2, 3, 2) and back["image"].dtype == np.uint8 and back["image"][1, 2, 1] == 11
    floats = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    packed = pb.Observation.FromString(codec.observation_to_pb({"f": floats}).SerializeToString())
    assert packed.values["f"].tensor.dtype == "float32" and len(packed.values["f"].tensor.data) == 24
    assert np.array_equal(codec.observation_from_pb(packed)["f"], floats)
    assert back["vec"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    chunk = [{"left/joint_1": 0.5}, {"left/joint_1": 0.75, "right/joint_2": -1.0}]
    assert codec.action_chunk_from_pb(pb.ActionChunk.FromString(
        codec.action_chunk_to_pb(chunk).SerializeToString())) == chunk


def test_codec_sends_any_array_layout_in_c_order_and_keys_alike_as_text_keep_the_last_whole():
    np = pytest.importorskip("numpy")
    image = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    obs = {"strided": image[::2, ::-1], "fortran": np.asfortranarray(image), "chw": image.transpose(2, 0, 1),
           "big_endian": np.arange(4, dtype=">f8")}
    back = codec.observation_from_pb(pb.Observation.FromString(codec.observation_to_pb(obs).SerializeToString()))
    for key, array in obs.items():
        assert back[key].shape == array.shape and np.array_equal(back[key], array), key
    assert back["big_endian"].dtype == np.float64 and back["big_endian"].flags.writeable
    # 1 and "1" are one key on the wire: the later value replaces the earlier whole (its shape not appended)
    msg = codec.observation_to_pb({1: np.zeros((2, 2)), "1": np.ones(3)})
    assert list(msg.values["1"].tensor.shape) == [3] and codec.observation_from_pb(msg)["1"].tolist() == [1, 1, 1]
    # a value that cannot go leaves nothing of itself behind, even under an earlier key of the same text
    assert "1" not in codec.observation_to_pb({1: 0.5, "1": object()}, skip_unsupported=True).values


def test_codec_refuses_what_it_cannot_send_naming_the_key():
    with pytest.raises(codec.CodecError, match=r"observation\['thing'\]"):
        codec.observation_to_pb({"thing": object()})
    assert "thing" not in codec.observation_to_pb({"thing": object(), "x": 1.0}, skip_unsupported=True).values
    with pytest.raises(codec.CodecError, match=r"chunk\[1\]\['k'\]: not a number"):
        codec.action_chunk_to_pb([{"k": 1.0}, {"k": "fast"}])
    with pytest.raises(codec.CodecError, match="single mapping"):
        codec.action_chunk_to_pb({"k": 1.0})


def test_no_pickle_in_the_relay_or_the_client():
    import ast

    banned = {"pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle"}
    root = Path(pb_model.__file__).resolve().parents[1]
    offenders = []
    for d in ("relay", "client"):
        for path in (root / d).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name.split(".")[0] for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module.split(".")[0]]
                offenders += [f"{path.relative_to(root)}: {n}" for n in names if n in banned]
    assert offenders == []
    assert (root / "relay" / "server.py").exists()  # the walk saw the relay


def test_a_relay_job_becomes_the_station_cores_job_spec_or_is_refused_naming_the_task():
    from strands_robots.wire.proto import station_service_pb2 as ss
    from strands_robots.station.job import JobSpecError

    model = _model_status()
    job = ss.Job(job_id="job-7", client_id="team_a", station_id="sim_station", episodes_total=3,
                 tasks=[pb_model.task_to_pb(model.episodes[0].task)])
    spec = pb_model.job_spec_from_pb(job, duration_s=4.0)
    assert (spec.job_id, spec.client_id, spec.station_id, spec.episodes_total, spec.policy_provider) == (
        "job-7", "team_a", "sim_station", 3, "relay")
    assert spec.tasks == (model.episodes[0].task,) and spec.duration_s == 4.0
    job.tasks.add(task_id="blank", instruction="")
    with pytest.raises(JobSpecError, match=r"tasks\[1\]\.instruction"):
        pb_model.job_spec_from_pb(job)


def test_packed_arrays_decode_to_nested_lists_without_numpy(monkeypatch):
    np = pytest.importorskip("numpy")
    wire = codec.observation_to_pb({"img": np.arange(6, dtype=np.uint16).reshape(2, 3) * 1000,
                                    "v": np.array([0.5, -2.0])})
    monkeypatch.setattr(codec, "_np", None)
    back = codec.observation_from_pb(wire)
    assert back == {"img": [[0, 1000, 2000], [3000, 4000, 5000]], "v": [0.5, -2.0]}


def test_a_packed_tensor_of_the_wrong_size_or_dtype_is_refused():
    bad = pb.Observation()
    bad.values["img"].tensor.shape.extend([2, 2])
    bad.values["img"].tensor.dtype = "uint8"
    bad.values["img"].tensor.data = b"abc"
    with pytest.raises(codec.CodecError, match=r"shape \[2, 2\] and dtype uint8 carries 3 bytes, not 4"):
        codec.observation_from_pb(bad)
    bad.values["img"].tensor.dtype = "complex128"
    with pytest.raises(codec.CodecError, match="'complex128' is not one of"):
        codec.observation_from_pb(bad)
