"""strands_robots.conversions: observer events, actions, verdicts, joint states and safety checks <-> messages."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import fields

import pytest

from strands_robots.conversions.actions import (
    action_to_command, action_to_request, command_to_action, msg_to_stream_command, request_to_action,
    response_to_verdict, stream_command_msg, verdict_msg_to_verdict, verdict_to_response,
)
from strands_robots.conversions.events import (
    ENDED_FIELDS, STARTED_FIELDS, STEP_FIELDS, event_to_dict, event_to_msg, msg_to_event,
)
from strands_robots.conversions.introspection import dict_to_msg, msg_to_dict
from strands_robots.conversions.joint_state import joint_state_to_observation, observation_to_joint_state
from strands_robots.conversions.messages import message_class, seconds_to_ns, time_dict, time_msg, time_to_ns
from strands_robots.conversions.safety import msg_to_safety_checks, safety_stop_to_msg
from strands_robots.conversions.station import rollout_episode_result_msg
from strands_robots.arm.command_auth import proves
from strands_robots.arm.safety import SafetyCheck
from strands_robots.arm.verdict import REASON_NON_FINITE, REASON_UNKNOWN_KEY, ActionVerdict
from strands_robots.simulation.observers import RunPolicyEnded, RunPolicyStarted, RunPolicyStep

PKG_ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
KEYS = tuple(f"{arm}.{joint}" for arm in ("left", "right")
             for joint in ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_6", "gripper"))
UTC_NS = 1_760_000_000_123_456_789


def _msgs():
    return pytest.importorskip("strands_robots_msgs.msg", reason="generated messages not importable")


def observation(sim_time_s: float = 12.5) -> dict:
    obs = {}
    for suffix, scale in (("pos", 0.1), ("vel", -0.01), ("effort", 1.5)):
        obs.update({f"{k}.{suffix}": scale * (i + 1) for i, k in enumerate(KEYS)})
    obs["sim_time_s"] = sim_time_s
    return obs


def started() -> RunPolicyStarted:
    return RunPolicyStarted(
        run_id="a" * 32, event_seq=0, monotonic_ns=5_000_000_001, utc_ns=UTC_NS, robot_name="bimanual",
        policy="scripted", instruction="stack the cubes", control_frequency=500.0, action_horizon=8,
        total_steps=5000, async_rtc=True, episode_index=1, n_episodes=3, actuator_keys=KEYS,
        recording_path="/tmp/ep_0001.mcap")


def step() -> RunPolicyStep:
    return RunPolicyStep(
        run_id="a" * 32, event_seq=7, monotonic_ns=5_014_000_001, utc_ns=UTC_NS + 14_000_000,
        applied_action_index=6, legacy_step_index=6, action_resolution="partial",
        applied_action_keys=KEYS[:-1], unresolved_action_keys=(KEYS[-1],),
        unresolved_action_reasons=(REASON_NON_FINITE,), action_error="", observation_is_chunk_reused=True,
        observation_age_steps=2, legacy_hook_outcome="ok", chunk_index=2, elapsed_s=0.014, sim_time_s=12.5,
        deadline_missed=True, observation=observation(), action={k: 0.25 * i for i, k in enumerate(KEYS)})


def ended() -> RunPolicyEnded:
    return RunPolicyEnded(
        run_id="a" * 32, event_seq=5001, monotonic_ns=15_000_000_001, utc_ns=UTC_NS + 10 ** 10,
        outcome="error", stopped_reason="safety_stop", end_detail="right: joint 4 reads +3.4 N*m",
        applied_actions=4999, legacy_steps_used=4998, action_errors=("step 12: driver timeout",),
        full_count=4000, partial_count=900, none_count=98, unknown_count=1, full_rate=4000 / 4998,
        partial_rate=900 / 4998, none_rate=98 / 4998, observer_failures=2, missed_deadlines=3,
        chunks_inferred=625, prefetch_hits=600, prefetch_blocks=25, inference_latency_p50_s=0.004,
        inference_latency_max_s=0.02, elapsed_s=9.998, paused_s=1.5, sim_time_s=10.0, error_type="SafetyStop",
        error_message="arms stopped", recording_path="/tmp/ep_0001.mcap", recorded_frames=4999)


EVENTS = {"started": started, "step": step, "ended": ended}


# -- observer events ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(EVENTS))
def test_event_dataclass_round_trips_through_message(kind, dds_echo):
    event = EVENTS[kind]()
    msg = event_to_msg(event, dropped_before=3)

    received = dds_echo(msg)

    assert received.kind == kind
    assert received.dropped_before == 3
    assert (received.stamp.sec, received.stamp.nanosec) == divmod(event.utc_ns, 10 ** 9)
    assert (received.run_id, received.event_seq, received.monotonic_ns, received.utc_ns,
            received.schema_version) == (event.run_id, event.event_seq, event.monotonic_ns, event.utc_ns, 2)
    assert {k: len(getattr(received, k)) for k in EVENTS} == {k: int(k == kind) for k in EVENTS}
    assert msg_to_event(received) == event
    # the recorder's ROS-free dict form is the message's dict form
    assert msg_to_dict(received) == event_to_dict(event, dropped_before=3)


@pytest.mark.parametrize("kind", list(EVENTS))
def test_event_dict_form_reads_back_to_the_same_event(kind):
    event = EVENTS[kind]()
    as_dict = event_to_dict(event)
    assert msg_to_event(as_dict) == event
    assert msg_to_event(as_dict[kind][0]) == event  # a bare payload dict too


def test_step_message_carries_numeric_observation_scalars_only():
    np = pytest.importorskip("numpy")
    obs = {"left.joint_1.pos": 0.5, "count": 3, "np_float": np.float32(0.25), "np_int": np.int64(7),
           "image": np.zeros((4, 4, 3)), "joints": [0.1, 0.2], "label": "cube", "grasped": True, "none": None}
    event = step()
    event = RunPolicyStep(**{f.name: getattr(event, f.name) for f in fields(event) if f.name != "observation"},
                          observation=obs)
    payload = event_to_dict(event)["step"][0]
    assert payload["observation_keys"] == ["left.joint_1.pos", "count", "np_float", "np_int"]
    assert payload["observation_values"] == [0.5, 3.0, 0.25, 7.0]
    assert all(type(v) is float for v in payload["observation_values"])
    if importlib_available("strands_robots_msgs.msg"):
        msg = event_to_msg(event).step[0]
        assert list(msg.observation_keys) == payload["observation_keys"]
        assert list(msg.observation_values) == payload["observation_values"]


def importlib_available(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def test_event_to_msg_coerces_numbers_the_message_would_misread():
    """Kilted's setters check nothing by default and the C side reads an int in a float64 field as garbage."""
    _msgs()
    event = step()
    event = RunPolicyStep(**{**{f.name: getattr(event, f.name) for f in fields(event)},
                             "elapsed_s": 1, "sim_time_s": 2, "deadline_missed": 1})
    payload = event_to_msg(event).step[0]
    assert (payload.elapsed_s, payload.sim_time_s, payload.deadline_missed) == (1.0, 2.0, True)
    assert type(payload.elapsed_s) is float and payload.deadline_missed is True


def test_payload_field_lists_match_messages_and_event_dataclasses():
    for cls, names in ((RunPolicyStarted, STARTED_FIELDS), (RunPolicyEnded, ENDED_FIELDS)):
        assert tuple(f.name for f in fields(cls)) == names
    assert tuple(f.name for f in fields(RunPolicyStep)) == STEP_FIELDS[:-4] + ("observation", "action")
    msgs = pytest.importorskip("strands_robots_msgs.msg", reason="generated messages not importable")
    assert tuple(msgs.RunPolicyStarted.get_fields_and_field_types()) == STARTED_FIELDS
    assert tuple(msgs.RunPolicyStep.get_fields_and_field_types()) == STEP_FIELDS
    assert tuple(msgs.RunPolicyEnded.get_fields_and_field_types()) == ENDED_FIELDS
    for kind in EVENTS:
        assert getattr(msgs.ObserverEvent, f"KIND_{kind.upper()}") == kind


def test_envelope_refuses_a_kind_without_exactly_one_payload():
    as_dict = event_to_dict(step())
    as_dict["step"] = []
    with pytest.raises(ValueError, match="0 step payloads"):
        msg_to_event(as_dict)
    with pytest.raises(ValueError, match="unknown kind"):
        msg_to_event({**as_dict, "kind": "paused"})
    with pytest.raises(TypeError, match="not an observer event"):
        event_to_dict(object())


def test_convert_builds_event_dicts_without_ros_installed():
    """The recorder's path: no rclpy, no generated messages, no rosidl anywhere on the import path."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        top = name.split('.')[0]\n"
        "        if top in ('rclpy', 'rosidl_parser', 'builtin_interfaces', 'sensor_msgs', 'std_msgs')"
        " or top.endswith('_msgs'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "sys.path.insert(0, 'test')\n"
        "from strands_robots.conversions.events import event_to_dict, msg_to_event\n"
        "from strands_robots.conversions.messages import time_dict\n"
        "from strands_robots.conversions.camera import image_topic\n"
        "from test_convert import step, started, ended\n"
        "for make in (started, step, ended):\n"
        "    d = event_to_dict(make(), dropped_before=1)\n"
        "    assert msg_to_event(d) == make()\n"
        "assert time_dict(-1) == {'sec': -1, 'nanosec': 999999999}\n"
        "assert image_topic('wrist') == 'wrist/image_raw'\n"
        "assert not [m for m in sys.modules if m.startswith(('rclpy', 'rosidl'))]\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=PKG_ROOT, capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                [PKG_ROOT, os.environ.get("PYTHONPATH", "")])})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# -- actions and verdicts -------------------------------------------------------------------------------------
def test_verdict_round_trip_keeps_breakdown_and_coarse_error(dds_echo):
    breakdown = ActionVerdict(applied_keys=("left.joint_1", "left.joint_2"),
                              unresolved_keys=("left.bogus", "right.joint_1"),
                              unresolved_reasons=(REASON_UNKNOWN_KEY, REASON_NON_FINITE))
    response = dds_echo(verdict_to_response(breakdown, stopped=True, sim_time_s=3.25))
    assert (response.stopped, response.sim_time_s) == (True, 3.25)
    back = response_to_verdict(response)
    assert back == breakdown
    assert back.reasons() == {"left.bogus": REASON_UNKNOWN_KEY, "right.joint_1": REASON_NON_FINITE}

    coarse = ActionVerdict.coarse("driver unreachable")
    back = response_to_verdict(dds_echo(verdict_to_response(coarse)))
    assert back == coarse and back.is_coarse_error
    assert back.applied_keys == back.unresolved_keys == ()

    # a response that names an error is coarse even if a confused driver also listed keys
    muddled = verdict_to_response(coarse)
    muddled.applied_keys = ["left.joint_1"]
    assert response_to_verdict(muddled) == coarse


def test_action_round_trips_through_send_action_request_and_action_command(dds_echo):
    action = {"right.gripper": 0.02, "left.joint_3": -1.25, "left.joint_1": float("nan")}
    request = dds_echo(action_to_request(action, lease_token="tok-1", step_index=41))
    assert (request.lease_token, request.step_index) == ("tok-1", 41)
    back = request_to_action(request)
    assert list(back) == list(action)  # emission order kept
    assert back["left.joint_3"] == -1.25 and math.isnan(back["left.joint_1"])  # NaN reaches the driver

    command = dds_echo(action_to_command({"left.joint_1": 0.5}))
    assert command_to_action(command) == {"left.joint_1": 0.5}

    with pytest.raises(TypeError):
        action_to_request({"left.joint_1": "fast"})
    command.values = [0.5, 0.25]
    with pytest.raises(ValueError, match="1 keys but 2 values"):
        command_to_action(command)


# -- joint states ---------------------------------------------------------------------------------------------
def test_joint_state_round_trip(dds_echo):
    obs = observation(sim_time_s=12.5)
    with_extras = {**obs, "camera.rgb": b"\x00" * 12, "task_done": 0.0}

    msg = dds_echo(observation_to_joint_state(with_extras, frame_id="world"))

    assert list(msg.name) == list(KEYS)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id) == (12, 500_000_000, "world")
    assert joint_state_to_observation(msg) == obs


def test_joint_state_leaves_out_a_quantity_some_joint_lacks():
    _msgs()
    obs = {"left.joint_1.pos": 0.1, "left.joint_1.vel": 0.2, "left.joint_2.pos": 0.3, "sim_time_s": 1.0}
    msg = observation_to_joint_state(obs, stamp_ns=7_000_000_001)
    assert list(msg.name) == ["left.joint_1", "left.joint_2"]
    assert list(msg.position) == [0.1, 0.3] and len(msg.velocity) == 0 and len(msg.effort) == 0
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (7, 1)
    back = joint_state_to_observation(msg, sim_time_s=1.0)
    assert back == {"left.joint_1.pos": 0.1, "left.joint_2.pos": 0.3, "sim_time_s": 1.0}


# -- safety ---------------------------------------------------------------------------------------------------
def test_safety_checks_become_a_safety_stop_with_the_spec_text(dds_echo):
    checks = (SafetyCheck("right", "joint_4", "torque", 3.4, 3.0, "N*m"),
              SafetyCheck("left", "gripper", "velocity", -2.25, 2.0, "rad/s"))
    stop = dds_echo(safety_stop_to_msg(checks, stamp_ns=UTC_NS))
    assert stop.stopped and time_ns(stop.stamp) == UTC_NS
    assert [c.text for c in stop.checks] == ["right: joint 4 reads +3.4 N*m", "left: gripper reads -2.2 rad/s"]
    assert stop.detail == "right: joint 4 reads +3.4 N*m; left: gripper reads -2.2 rad/s"
    assert msg_to_safety_checks(stop) == checks

    release = safety_stop_to_msg((), stopped=False)
    assert not release.stopped and list(release.checks) == [] and release.detail == ""


def time_ns(stamp) -> int:
    return time_to_ns(stamp)


# -- generic path and station types ---------------------------------------------------------------------------
def test_station_types_round_trip_through_their_dict_forms():
    _msgs()
    task = {"task_id": "stack", "instruction": "stack the cubes", "layout": "two cubes",
            "parameters": [{"key": "cubes", "value": "2"}],
            "scoring": {"items": [{"name": "success", "question": "Stacked?", "answer_type": "yes_no",
                                   "max_points": 1, "choices": [], "choice_points": [],
                                   "points_per_unit": 0.0, "success_answer": "yes"}]}}
    item = {"name": "success", "question": "Stacked?", "answer_type": "yes_no", "answer": "yes", "points": 1.0,
            "max_points": 1.0, "is_success_item": True}
    episode = {"episode_id": "ep_0000", "end_condition": "timeout", "scored": True, "success": True,
               "score": 1.0, "items": [item], "task": task, "taken_over": False, "end_detail": "",
               "run_id": "a" * 32, "recording_sha256": "b" * 64, "success_at_end": [True], "success_ever": [True],
               "inference_latency_p50_ms": [4.5], "inference_latency_p99_ms": [9.0],
               "mean_observation_age_steps": [1.25], "missed_deadlines": [0]}
    provenance = {"software_version": "0.1.0", "git_revision": "c" * 40,
                  "config_files": [{"name": "arms.yaml", "path": "/cfg/arms.yaml", "sha256": "d" * 64}],
                  "policy_spec_json": '{"action_keys": ["right.joint_1"]}',
                  "slot_specs": [{"slot": "vision", "policy_spec_json": '{"action_keys": ["right.joint_1"]}'}]}
    status = {"job_id": "job-1", "station_id": "st-1", "state": "RUNNING", "episodes_total": 4,
              "episodes": [episode], "updated_unix_ms": 1_760_000_000_123, "message": "", "provenance": provenance,
              "summary": [], "comparison": []}

    back = msg_to_dict(dict_to_msg("strands_robots_msgs/msg/JobStatus", status))
    task["scoring"]["items"][0]["max_points"] = 1.0  # an int is accepted for a float field, read back a float
    assert back == status
    assert msg_to_dict(dict_to_msg("strands_robots_msgs/msg/Task", task)) == task
    assert msg_to_dict(dict_to_msg("strands_robots_msgs/msg/ScoredItem", item)) == item
    assert msg_to_dict(dict_to_msg("strands_robots_msgs/msg/EpisodeResult", episode)) == episode
    assert msg_to_dict(dict_to_msg("strands_robots_msgs/EpisodeResult", {})) == \
        msg_to_dict(message_class("strands_robots_msgs/msg/EpisodeResult")())


def test_dict_to_msg_refuses_an_unknown_field():
    _msgs()
    with pytest.raises(KeyError, match="scroe"):
        dict_to_msg("strands_robots_msgs/msg/ScoredItem", {"name": "x", "scroe": 1.0})
    with pytest.raises(KeyError, match="no field"):
        dict_to_msg("strands_robots_msgs/msg/Task", {"scoring": {"itmes": []}})


def test_message_class_resolves_msg_srv_and_action_parts():
    _msgs()
    from strands_robots_msgs.action import RunEpisode
    from strands_robots_msgs.msg import Task
    from strands_robots_msgs.srv import SendAction

    assert message_class("strands_robots_msgs/Task") is Task
    assert message_class("strands_robots_msgs/srv/SendAction.Request") is SendAction.Request
    assert message_class("strands_robots_msgs/srv/SendAction_Response") is SendAction.Response
    assert message_class("strands_robots_msgs/action/RunEpisode_Goal") is RunEpisode.Goal
    with pytest.raises(ValueError):
        message_class("Task")


def test_time_conversions_keep_nanoseconds_and_negative_times():
    assert time_dict(UTC_NS) == {"sec": 1_760_000_000, "nanosec": 123_456_789}
    assert time_to_ns(time_dict(-1)) == -1
    assert seconds_to_ns(0.1) == 100_000_000
    if importlib_available("builtin_interfaces.msg"):
        assert time_to_ns(time_msg(UTC_NS)) == UTC_NS


# -- rollout node messages ------------------------------------------------------------------------------------
def test_stream_command_carries_run_step_lease_proof_and_deadline_over_dds(dds_echo):
    action = {"right.gripper": 0.02, "left.joint_3": -1.25, "left.joint_1": float("nan")}
    sent_ns = UTC_NS
    msg = dds_echo(stream_command_msg(action, "r" * 32, 41, "tok-1", sent_ns, sent_ns + 6_000_000))
    assert (msg.run_id, msg.step_index) == ("r" * 32, 41)
    # the token never travels: the message carries its HMAC over the command, which the driver can check
    assert "tok-1" not in msg.lease_proof and len(msg.lease_proof) == 64
    received = msg_to_stream_command(msg)
    assert proves("tok-1", received.message(), received.lease_proof)
    assert not proves("tok-2", received.message(), received.lease_proof)
    assert time_to_ns(msg.sent) == sent_ns
    assert time_to_ns(msg.apply_by) - time_to_ns(msg.sent) == 6_000_000
    back = command_to_action(msg)
    assert list(back) == list(action) and math.isnan(back["left.joint_1"])  # order kept, NaN reaches the driver
    with pytest.raises(TypeError):
        stream_command_msg({"left.joint_1": "fast"}, "r", 0, "", 0, 0)


def test_stream_command_carries_its_signed_lookahead_over_dds_and_a_malformed_one_is_refused_where_it_enters(
        dds_echo):
    from strands_robots.arm.lookahead import LOOKAHEAD_MAX_POINTS, LookaheadError

    action = {"left.joint_1": 0.1, "left.joint_2": 0.2}
    ahead = [0.11, 0.21, 0.12, 0.22]
    msg = dds_echo(stream_command_msg(action, "run", 3, "tok-1", UTC_NS, UTC_NS + 6_000_000, ahead, 20_000_000))
    assert list(msg.lookahead) == ahead and time_to_ns(msg.lookahead_period) == 20_000_000
    received = msg_to_stream_command(msg)
    assert received.lookahead == tuple(ahead) and received.lookahead_period_ns == 20_000_000
    assert proves("tok-1", received.message(), received.lease_proof)
    # the lookahead is signed: a value changed in transit no longer proves
    msg.lookahead = [0.11, 0.21, 0.5, 0.22]
    assert not proves("tok-1", msg_to_stream_command(msg).message(), received.lease_proof)
    plain = dds_echo(stream_command_msg(action, "run", 4, "tok-1", UTC_NS, UTC_NS + 1))
    assert list(plain.lookahead) == [] and time_to_ns(plain.lookahead_period) == 0
    assert msg_to_stream_command(plain).lookahead == ()
    too_long = stream_command_msg(action, "run", 5, "tok-1", UTC_NS, UTC_NS + 1,
                                  [0.0] * 2 * (LOOKAHEAD_MAX_POINTS + 1), 20_000_000)
    with pytest.raises(LookaheadError, match=f"at most {LOOKAHEAD_MAX_POINTS}"):
        msg_to_stream_command(too_long)
    ragged = stream_command_msg(action, "run", 6, "tok-1", UTC_NS, UTC_NS + 1, [0.0] * 3, 20_000_000)
    with pytest.raises(LookaheadError, match="not a whole number of points"):
        msg_to_stream_command(ragged)


def test_verdict_message_gives_the_per_key_verdict_and_a_coarse_error_drops_keys(dds_echo):
    m = _msgs()
    msg = m.ActionVerdict()
    msg.run_id, msg.step_index = "r" * 32, 7
    msg.applied_keys = ["left.joint_1"]
    msg.unresolved_keys = ["left.bogus", "right.joint_1"]
    msg.unresolved_reasons = [m.ActionVerdict.REASON_UNKNOWN_KEY, m.ActionVerdict.REASON_STALE]
    back = verdict_msg_to_verdict(dds_echo(msg))
    assert back == ActionVerdict(("left.joint_1",), ("left.bogus", "right.joint_1"), ("unknown_key", "stale"))

    msg.error = "driver not active"
    back = verdict_msg_to_verdict(dds_echo(msg))
    assert back == ActionVerdict.coarse("driver not active") and back.applied_keys == back.unresolved_keys == ()


def test_rollout_episode_result_names_the_run_and_end_condition_and_is_not_scored(dds_echo):
    m = _msgs()
    task = m.Task()
    task.instruction = "stack the cubes"
    msg = dds_echo(rollout_episode_result_msg({"run_id": "r" * 32}, "safety_stop",
                                                       "right: joint 4 reads +3.4 N*m", task))
    assert (msg.run_id, msg.end_condition, msg.end_detail) == ("r" * 32, "safety_stop", "right: joint 4 reads +3.4 N*m")
    assert msg.task.instruction == "stack the cubes" and not msg.scored and list(msg.items) == []
    none_ran = rollout_episode_result_msg(None, "start_pose_unreached", "left.joint_2 off by 0.2 rad")
    assert none_ran.run_id == "" and none_ran.end_condition == "start_pose_unreached"


def test_the_station_status_carries_the_recording_hash_and_the_provenance_to_ros_and_protobuf():
    _msgs()
    from strands_robots.conversions.station import station_status_to_msg
    from strands_robots.wire.pb_model import job_status_from_pb, job_status_to_pb
    from strands_robots.station.model import (AnswerType, ConfigHash, EpisodeResult, JobState, JobStatus, Provenance,
                                              ScoringItemDefinition, ScoringSheet, SlotPolicySpec, Task)

    sheet = ScoringSheet((ScoringItemDefinition("ok", "Ok?", AnswerType.YES_NO, 1.0, success_answer="yes"),))
    episode = EpisodeResult(episode_id="ep_0000", end_condition="timeout", scored=False, success=False, score=0.0,
                            items=(), task=Task("t", "do t", scoring=sheet), taken_over=False, end_detail="",
                            run_id="r" * 32, recording_sha256="e" * 64)
    provenance = Provenance(software_version="0.1.0", git_revision="f" * 40,
                            config_files=(ConfigHash("arms.yaml", "/a/arms.yaml", "1" * 64),
                                          ConfigHash("job", "", "2" * 64)),
                            policy_spec_json='{"source": "s"}',
                            slot_specs=(SlotPolicySpec("vision", '{"source": "s"}'), SlotPolicySpec("theirs", "")))
    status = JobStatus(job_id="j", station_id="s", state=JobState.SUCCEEDED, episodes_total=1, episodes=(episode,),
                       updated_unix_ms=5, message="done", sequence=3, provenance=provenance)
    ros = station_status_to_msg(status)
    assert ros.episodes[0].recording_sha256 == "e" * 64
    assert list(ros.episodes[0].success_at_end) == [] and list(ros.episodes[0].missed_deadlines) == []  # absent
    import dataclasses

    judged = dataclasses.replace(episode, success_at_end=False, success_ever=True, inference_latency_p50_ms=3.5,
                                 inference_latency_p99_ms=9.0, mean_observation_age_steps=0.5, missed_deadlines=2)
    figures = station_status_to_msg(dataclasses.replace(status, episodes=(judged,))).episodes[0]
    assert (list(figures.success_at_end), list(figures.success_ever), list(figures.inference_latency_p50_ms),
            list(figures.inference_latency_p99_ms), list(figures.mean_observation_age_steps),
            list(figures.missed_deadlines)) == ([False], [True], [3.5], [9.0], [0.5], [2])
    assert (ros.provenance.software_version, ros.provenance.git_revision) == ("0.1.0", "f" * 40)
    assert [(f.name, f.path, f.sha256) for f in ros.provenance.config_files] == [
        ("arms.yaml", "/a/arms.yaml", "1" * 64), ("job", "", "2" * 64)]
    assert ros.provenance.policy_spec_json == '{"source": "s"}'
    assert [(s.slot, s.policy_spec_json) for s in ros.provenance.slot_specs] == [("vision", '{"source": "s"}'),
                                                                                   ("theirs", "")]
    assert job_status_from_pb(job_status_to_pb(status)) == status
    bare = JobStatus(job_id="j", station_id="s", state=JobState.RUNNING, episodes_total=1, episodes=(),
                     updated_unix_ms=5, message="")
    assert not job_status_to_pb(bare).HasField("provenance") and job_status_from_pb(job_status_to_pb(bare)) == bare


def test_a_comparison_reaches_ros_with_every_figure_and_explicit_presence():
    _msgs()
    from comparison_message import comparison_message, seeded_outcomes

    from strands_robots.conversions.station import comparison_to_msg
    from strands_robots.stats.sequential import StopRule

    pb_msg = comparison_message(seeded_outcomes(0.9, 0.2, 60, seed=1), rule=StopRule(max_blocks=60))
    ros = comparison_to_msg(pb_msg)
    assert (ros.suite, list(ros.slots), ros.labels_revealed) == ("demo", ["vision", "blind"], True)
    for got, sent in zip(ros.figures, pb_msg.figures):
        assert (got.slot, got.success.successes, got.success.trials) == (sent.slot, sent.success.successes,
                                                                         sent.success.trials)
        assert (list(got.success.low), list(got.success.high)) == ([sent.success.low], [sent.success.high])
    pair, sent = ros.pairs[0], pb_msg.pairs[0]
    assert (pair.only_a, pair.only_b, list(pair.difference), list(pair.low), list(pair.high), list(pair.p_value)) == \
        (sent.only_a, sent.only_b, [sent.difference], [sent.low], [sent.high], [sent.p_value])
    assert [b.block_id for b in ros.blocks] == [b.block_id for b in pb_msg.blocks]
    assert [[(o.slot, o.success, o.blind_label) for o in b.outcomes] for b in ros.blocks] == \
        [[(o.slot, o.success, o.blind_label) for o in b.outcomes] for b in pb_msg.blocks]
    stop = ros.stop[0]
    assert (stop.verdict, list(stop.stopped_at_block), stop.e_value) == (
        "a_better", [pb_msg.stop.stopped_at_block], pb_msg.stop.e_value)
    running = comparison_message(seeded_outcomes(0.5, 0.5, 3, seed=2), revealed=False)
    bare = comparison_to_msg(running)
    assert list(bare.stop) == [] and bare.labels_revealed is False  # no stop rule asked: empty, not zeros
    empty = comparison_to_msg(comparison_message([]))
    assert list(empty.pairs[0].difference) == [] and list(empty.figures[0].success.rate) == []


def test_a_comparison_and_figures_read_back_from_ros_equal_what_was_sent():
    _msgs()
    from comparison_message import comparison_message, seeded_outcomes

    from strands_robots.conversions.station import comparison_to_msg, job_figures_to_msg, pb_from_msg
    from strands_robots.station.model import EpisodeResult, Task
    from strands_robots.station.summary import summarize
    from strands_robots.stats.sequential import StopRule
    from strands_robots.wire.pb_model import summary_to_pb

    for sent in (comparison_message(seeded_outcomes(0.9, 0.2, 60, seed=1), rule=StopRule(max_blocks=60)),
                 comparison_message(seeded_outcomes(0.5, 0.5, 3, seed=2), revealed=False),
                 comparison_message([])):
        assert pb_from_msg(comparison_to_msg(sent), type(sent)()) == sent
    episodes = [EpisodeResult(episode_id=f"ep_{i:04d}", end_condition="timeout", scored=i != 4, success=i % 3 != 0,
                              score=(i % 3) / 2, items=(), task=Task(f"t{i % 2}", "x"), taken_over=False,
                              end_detail="")
                for i in range(7)]
    figures = summary_to_pb(summarize(episodes, discarded=["ep_0007"]))
    assert figures.tasks and figures.success.HasField("low")  # the check below is not of an empty message
    assert pb_from_msg(job_figures_to_msg(figures), type(figures)()) == figures


def test_the_station_topics_comparison_is_the_operators_blind_view_until_the_job_ends():
    _msgs()
    from known_rate_port import run_comparison

    from strands_robots.conversions.station import station_status_to_msg
    from strands_robots.station.scripted_operator import ScriptedOperator

    snapshots: list = []
    final, _ = run_comparison({"seeing": 0.9, "guessing": 0.1}, 5, ScriptedOperator(), 40, publish=snapshots.append)
    running = [s for s in snapshots if s.comparison is not None and s.comparison.blocks and
               not s.comparison.labels_revealed]
    assert running, "no running snapshot with complete blocks"
    msg = station_status_to_msg(running[-1])
    (comparison,) = msg.comparison
    text = repr(msg.comparison)
    assert "seeing" not in text and "guessing" not in text and list(comparison.slots) == ["A", "B"]
    assert len(comparison.blocks) == len(running[-1].comparison.blocks) and not comparison.labels_revealed
    (ended,) = station_status_to_msg(final).comparison
    assert ended.labels_revealed and list(ended.slots) == ["seeing", "guessing"]
    assert ended.stop[0].verdict == "a_better" and list(ended.stop[0].stopped_at_block) == [len(ended.blocks)]
