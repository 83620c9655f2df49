"""Observer events (``simulation/observers.py``) <-> ``ObserverEvent`` messages and their dict forms.

:func:`event_to_dict` needs no ROS (the MCAP recorder uses it in a ROS-free process); :func:`event_to_msg` is the
rollout node's control-rate path (direct assignment, float arrays handed over as ``array('d')``);
:func:`msg_to_event` reads either form back.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any, Mapping

from strands_robots.conversions.introspection import dict_to_msg
from strands_robots.conversions.messages import NS_PER_S, PACKAGE, ros, time_dict
from strands_robots.conversions.numeric import join_numeric, split_numeric

KIND_STARTED = "started"
KIND_STEP = "step"
KIND_ENDED = "ended"


# Payload fields, in .msg order. The event dataclasses carry exactly these (Step: observation/action
# mappings instead of the four parallel arrays). test_convert.py checks them against the generated messages.
STARTED_FIELDS: tuple[str, ...] = (
    "schema_version", "run_id", "event_seq", "monotonic_ns", "utc_ns", "robot_name", "policy",
    "instruction", "control_frequency", "action_horizon", "total_steps", "async_rtc", "episode_index",
    "n_episodes", "actuator_keys", "recording_path",
)
STEP_FIELDS: tuple[str, ...] = (
    "schema_version", "run_id", "event_seq", "monotonic_ns", "utc_ns", "applied_action_index",
    "legacy_step_index", "action_resolution", "applied_action_keys", "unresolved_action_keys",
    "unresolved_action_reasons", "action_error", "observation_is_chunk_reused", "observation_age_steps",
    "legacy_hook_outcome", "chunk_index", "elapsed_s", "sim_time_s", "deadline_missed",
    "camera_names", "camera_stamp_ns", "camera_age_steps", "success_input_keys", "success_input_values",
    "success_holds", "observation_keys", "observation_values", "action_keys", "action_values",
)
ENDED_FIELDS: tuple[str, ...] = (
    "schema_version", "run_id", "event_seq", "monotonic_ns", "utc_ns", "outcome", "stopped_reason",
    "end_detail", "applied_actions", "legacy_steps_used", "action_errors", "full_count", "partial_count",
    "none_count", "unknown_count", "full_rate", "partial_rate", "none_rate", "observer_failures",
    "missed_deadlines", "chunks_inferred", "prefetch_hits", "prefetch_blocks", "inference_latency_p50_s",
    "inference_latency_max_s", "inference_latency_p99_s", "mean_observation_age_steps", "elapsed_s", "paused_s",
    "sim_time_s", "error_type", "error_message", "recording_path", "recorded_frames", "success_when", "success_ever",
    "success_first_step", "end_input_keys", "end_input_values",
)
# Fields that are sequences in the message (tuples in the frozen dataclasses, lists in dict forms).
_STARTED_SEQS = frozenset({"actuator_keys"})
_STEP_SEQS = frozenset({"applied_action_keys", "unresolved_action_keys", "unresolved_action_reasons",
                        "camera_names", "camera_stamp_ns", "camera_age_steps", "success_input_keys",
                        "success_input_values"})
_ENDED_SEQS = frozenset({"action_errors", "end_input_keys", "end_input_values"})
_EVENT_FIELDS = {KIND_STARTED: STARTED_FIELDS, KIND_STEP: STEP_FIELDS, KIND_ENDED: ENDED_FIELDS}
_EVENT_SEQS = {KIND_STARTED: _STARTED_SEQS, KIND_STEP: _STEP_SEQS, KIND_ENDED: _ENDED_SEQS}
_EVENT_CLASS_NAMES = {"RunPolicyStarted": KIND_STARTED, "RunPolicyStep": KIND_STEP, "RunPolicyEnded": KIND_ENDED}


# -- observer events ------------------------------------------------------------------------------------------
_KIND_BY_TYPE: dict[type, str] = {}


def event_kind(event: Any) -> str:
    """Return ``started`` / ``step`` / ``ended`` for an event dataclass (by class name, so no import is needed)."""
    t = type(event)
    kind = _KIND_BY_TYPE.get(t)
    if kind is None:
        kind = _EVENT_CLASS_NAMES.get(t.__name__)
        if kind is None:
            raise TypeError(f"not an observer event: {t.__qualname__}")
        _KIND_BY_TYPE[t] = kind
    return kind


def _payload_dict(kind: str, event: Any) -> dict[str, Any]:
    if kind == KIND_STEP:
        return _step_dict(event)
    seqs = _EVENT_SEQS[kind]
    out: dict[str, Any] = {}
    for name in _EVENT_FIELDS[kind]:
        value = getattr(event, name)
        out[name] = list(value) if name in seqs else value
    return out


def _step_dict(e: Any) -> dict[str, Any]:
    # Per step when recording: spelled out rather than looped over field names.
    obs_keys, obs_values = split_numeric(e.observation)
    act_keys, act_values = split_numeric(e.action)
    return {
        "schema_version": e.schema_version,
        "run_id": e.run_id,
        "event_seq": e.event_seq,
        "monotonic_ns": e.monotonic_ns,
        "utc_ns": e.utc_ns,
        "applied_action_index": e.applied_action_index,
        "legacy_step_index": e.legacy_step_index,
        "action_resolution": e.action_resolution,
        "applied_action_keys": list(e.applied_action_keys),
        "unresolved_action_keys": list(e.unresolved_action_keys),
        "unresolved_action_reasons": list(e.unresolved_action_reasons),
        "action_error": e.action_error,
        "observation_is_chunk_reused": e.observation_is_chunk_reused,
        "observation_age_steps": e.observation_age_steps,
        "legacy_hook_outcome": e.legacy_hook_outcome,
        "chunk_index": e.chunk_index,
        "elapsed_s": e.elapsed_s,
        "sim_time_s": e.sim_time_s,
        "deadline_missed": e.deadline_missed,
        "camera_names": list(e.camera_names),
        "camera_stamp_ns": list(e.camera_stamp_ns),
        "camera_age_steps": list(e.camera_age_steps),
        "success_input_keys": list(e.success_input_keys),
        "success_input_values": [float(v) for v in e.success_input_values],
        "success_holds": bool(e.success_holds),
        "observation_keys": obs_keys,
        "observation_values": obs_values.tolist(),
        "action_keys": act_keys,
        "action_values": act_values.tolist(),
    }


def event_to_dict(event: Any, dropped_before: int = 0) -> dict[str, Any]:
    """Return an event dataclass as the dict form of an ``ObserverEvent`` envelope (no ROS needed).

    Equal to ``msg_to_dict(event_to_msg(event, dropped_before))``; ``mcap_ros2`` serializes it with the
    ``ObserverEvent`` schema.

    :param dropped_before: events the publisher dropped since the previous one it sent.
    """
    kind = event_kind(event)
    payload = _payload_dict(kind, event)
    return {
        "stamp": time_dict(event.utc_ns),
        "kind": kind,
        "schema_version": event.schema_version,
        "run_id": event.run_id,
        "event_seq": event.event_seq,
        "monotonic_ns": event.monotonic_ns,
        "utc_ns": event.utc_ns,
        "dropped_before": dropped_before,
        "started": [payload] if kind == KIND_STARTED else [],
        "step": [payload] if kind == KIND_STEP else [],
        "ended": [payload] if kind == KIND_ENDED else [],
    }


def _step_msg(r: SimpleNamespace, e: Any, observation: "Mapping[str, Any] | None" = None,
              action: "Mapping[str, Any] | None" = None) -> Any:
    # Kilted's generated setters check nothing by default and the C side reads an int in a float64 field
    # (or 1 in a bool) as garbage, so numbers are coerced here: cheap, and safe on every distro.
    m = r.new_step()
    m.schema_version = int(e.schema_version)
    m.run_id = e.run_id
    m.event_seq = int(e.event_seq)
    m.monotonic_ns = int(e.monotonic_ns)
    m.utc_ns = int(e.utc_ns)
    m.applied_action_index = int(e.applied_action_index)
    m.legacy_step_index = int(e.legacy_step_index)
    m.action_resolution = e.action_resolution
    m.applied_action_keys = list(e.applied_action_keys)
    m.unresolved_action_keys = list(e.unresolved_action_keys)
    m.unresolved_action_reasons = list(e.unresolved_action_reasons)
    m.action_error = e.action_error
    m.observation_is_chunk_reused = bool(e.observation_is_chunk_reused)
    m.observation_age_steps = int(e.observation_age_steps)
    m.legacy_hook_outcome = e.legacy_hook_outcome
    m.chunk_index = int(e.chunk_index)
    m.elapsed_s = float(e.elapsed_s)
    m.sim_time_s = float(e.sim_time_s)
    m.deadline_missed = bool(e.deadline_missed)
    m.camera_names = list(e.camera_names)
    m.camera_stamp_ns = [int(v) for v in e.camera_stamp_ns]
    m.camera_age_steps = [int(v) for v in e.camera_age_steps]
    m.success_input_keys = list(e.success_input_keys)
    m.success_input_values = [float(v) for v in e.success_input_values]
    m.success_holds = bool(e.success_holds)
    obs_keys, obs_values = split_numeric(e.observation if observation is None else observation)
    act_keys, act_values = split_numeric(e.action if action is None else action)
    m.observation_keys = obs_keys
    m.action_keys = act_keys
    if r.raw_step_arrays:
        m._observation_values = obs_values
        m._action_values = act_values
    else:
        m.observation_values = obs_values
        m.action_values = act_values
    return m


def _payload_msg(kind: str, event: Any) -> Any:
    # Started and Ended come once per episode: the checked generic path is cheap enough and validates.
    return dict_to_msg(f"{PACKAGE}/msg/RunPolicy{kind.capitalize()}", _payload_dict(kind, event))


def event_to_msg(event: Any, dropped_before: int = 0, observation: "Mapping[str, Any] | None" = None,
                 action: "Mapping[str, Any] | None" = None) -> Any:
    """Wrap an event dataclass in an ``ObserverEvent`` envelope (stamp from ``utc_ns``).

    On the rollout node's publishing path at the control rate: no introspection, direct assignment.

    :param dropped_before: events the publisher dropped since the previous one it sent.
    :param observation: for a Step converted after its dispatch returned: the copy of the borrowed
        observation taken during the call (the event's own may no longer be read); default the event's.
    :param action: likewise for the action.
    """
    r = ros()
    kind = _KIND_BY_TYPE.get(type(event)) or event_kind(event)
    env = r.new_event()  # every field is assigned below
    utc_ns = int(event.utc_ns)
    stamp = r.new_time()
    stamp.sec, stamp.nanosec = divmod(utc_ns, NS_PER_S)
    env.stamp = stamp
    env.kind = kind
    env.schema_version = int(event.schema_version)
    env.run_id = event.run_id
    env.event_seq = int(event.event_seq)
    env.monotonic_ns = int(event.monotonic_ns)
    env.utc_ns = utc_ns
    env.dropped_before = int(dropped_before)
    if kind == KIND_STEP:
        env.started, env.step, env.ended = [], [_step_msg(r, event, observation, action)], []
    elif kind == KIND_STARTED:
        env.started, env.step, env.ended = [_payload_msg(kind, event)], [], []
    else:
        env.started, env.step, env.ended = [], [], [_payload_msg(kind, event)]
    return env


def _observers_module() -> Any:
    return importlib.import_module("strands_robots.simulation.observers")


def _get(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, Mapping) else getattr(obj, name)


def _payload_to_event(kind: str, p: Any) -> Any:
    cls = getattr(_observers_module(), {KIND_STARTED: "RunPolicyStarted", KIND_STEP: "RunPolicyStep",
                                        KIND_ENDED: "RunPolicyEnded"}[kind])
    seqs = _EVENT_SEQS[kind]
    if kind == KIND_STEP:
        kwargs = {name: _get(p, name) for name in STEP_FIELDS[:-4]}
        kwargs["observation"] = join_numeric(_get(p, "observation_keys"), _get(p, "observation_values"))
        kwargs["action"] = join_numeric(_get(p, "action_keys"), _get(p, "action_values"))
    else:
        kwargs = {name: _get(p, name) for name in _EVENT_FIELDS[kind]}
    for name in seqs:
        kwargs[name] = tuple(kwargs[name])
    return cls(**kwargs)


def msg_to_event(msg: Any) -> Any:
    """Return the event dataclass of an ``ObserverEvent`` envelope, or of a bare ``RunPolicy*`` payload message.

    Also accepts the dict forms (:func:`event_to_dict`, :func:`msg_to_dict`), e.g. read back from MCAP.

    :raises ValueError: an envelope whose ``kind`` payload is not exactly one element.
    """
    if isinstance(msg, Mapping):
        if "kind" not in msg:
            kind = _payload_kind_of_dict(msg)
            return _payload_to_event(kind, msg)
    else:
        name = type(msg).__name__
        if name in _EVENT_CLASS_NAMES:
            return _payload_to_event(_EVENT_CLASS_NAMES[name], msg)
    kind = _get(msg, "kind")
    if kind not in _EVENT_FIELDS:
        raise ValueError(f"ObserverEvent has an unknown kind {kind!r}")
    payload = _get(msg, kind)
    if len(payload) != 1:
        raise ValueError(f"ObserverEvent of kind {kind!r} carries {len(payload)} {kind} payloads, not 1")
    return _payload_to_event(kind, payload[0])


def _payload_kind_of_dict(d: Mapping[str, Any]) -> str:
    if "observation_keys" in d:
        return KIND_STEP
    if "outcome" in d:
        return KIND_ENDED
    if "robot_name" in d:
        return KIND_STARTED
    raise ValueError("dict is neither an ObserverEvent nor a RunPolicy* payload")

