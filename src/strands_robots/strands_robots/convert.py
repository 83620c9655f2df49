"""The one place that maps core dataclasses <-> ROS messages (the relay's protobuf: ``relay/pb_model.py``).

This module imports without rclpy or any generated message package: the MCAP recorder uses its dict forms
(:func:`event_to_dict`) in a ROS-free process. Message classes are imported on first use.

Three kinds of conversion live here:

- generic, by rosidl introspection: :func:`msg_to_dict` / :func:`dict_to_msg` for any generated message
  (nested types, bounded and unbounded sequences, fixed arrays as lists, ``builtin_interfaces/Time`` as
  ``{"sec", "nanosec"}``). The dict form is the one ``mcap_ros2`` serializes.
- hand-written fast paths for what runs at the control rate: observer events (:func:`event_to_msg`,
  :func:`event_to_dict`, :func:`msg_to_event`), actions (``SendAction`` request, ``ActionCommand``),
  verdicts (``SendAction`` response), observations <-> ``sensor_msgs/JointState``. They assign fields
  directly and hand float arrays over as ``array('d')`` so the generated setters do no per-element work.
- safety: :class:`~strands_robots.arm.safety.SafetyCheck` <-> ``SafetyCheck`` and a trip -> ``SafetyStop``.

Observations are ``Mapping[str, float]`` in the core but may carry other entries (images, nested arrays,
text). Messages carry numeric scalars only (:func:`split_numeric`): int, float and numpy integer/floating
scalars; bools, arrays, text and None are left out of ``observation_keys`` / ``observation_values``.
"""

from __future__ import annotations

import importlib
import os
import re
from array import array
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Mapping, Sequence

PACKAGE = "strands_robots_msgs"

KIND_STARTED = "started"
KIND_STEP = "step"
KIND_ENDED = "ended"

_NS_PER_S = 1_000_000_000

# Payload fields, in .msg order. The event dataclasses carry exactly these (Step: observation/action
# mappings instead of the four parallel arrays). test_convert checks them against the generated messages.
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
    "camera_names", "camera_stamp_ns", "camera_age_steps",
    "observation_keys", "observation_values", "action_keys", "action_values",
)
ENDED_FIELDS: tuple[str, ...] = (
    "schema_version", "run_id", "event_seq", "monotonic_ns", "utc_ns", "outcome", "stopped_reason",
    "end_detail", "applied_actions", "legacy_steps_used", "action_errors", "full_count", "partial_count",
    "none_count", "unknown_count", "full_rate", "partial_rate", "none_rate", "observer_failures",
    "missed_deadlines", "chunks_inferred", "prefetch_hits", "prefetch_blocks", "inference_latency_p50_s",
    "inference_latency_max_s", "elapsed_s", "paused_s", "sim_time_s", "error_type", "error_message",
    "recording_path", "recorded_frames",
)
# Fields that are sequences in the message (tuples in the frozen dataclasses, lists in dict forms).
_STARTED_SEQS = frozenset({"actuator_keys"})
_STEP_SEQS = frozenset({"applied_action_keys", "unresolved_action_keys", "unresolved_action_reasons",
                        "camera_names", "camera_stamp_ns", "camera_age_steps"})
_ENDED_SEQS = frozenset({"action_errors"})
_EVENT_FIELDS = {KIND_STARTED: STARTED_FIELDS, KIND_STEP: STEP_FIELDS, KIND_ENDED: ENDED_FIELDS}
_EVENT_SEQS = {KIND_STARTED: _STARTED_SEQS, KIND_STEP: _STEP_SEQS, KIND_ENDED: _ENDED_SEQS}
_EVENT_CLASS_NAMES = {"RunPolicyStarted": KIND_STARTED, "RunPolicyStep": KIND_STEP, "RunPolicyEnded": KIND_ENDED}

_JOINT_SUFFIXES = (".pos", ".vel", ".effort")
SIM_TIME_KEY = "sim_time_s"


# -- time ---------------------------------------------------------------------------------------------------
def time_dict(ns: int) -> dict[str, int]:
    """``builtin_interfaces/Time`` dict form of integer nanoseconds (nanosec always in [0, 1e9))."""
    sec, nanosec = divmod(int(ns), _NS_PER_S)
    return {"sec": sec, "nanosec": nanosec}


def time_to_ns(stamp: Any) -> int:
    """Integer nanoseconds of a ``builtin_interfaces/Time`` message or its dict form."""
    if isinstance(stamp, Mapping):
        return int(stamp["sec"]) * _NS_PER_S + int(stamp["nanosec"])
    return stamp.sec * _NS_PER_S + stamp.nanosec


def time_msg(ns: int) -> Any:
    """``builtin_interfaces/Time`` message of integer nanoseconds."""
    t = _ros().Time()
    t.sec, t.nanosec = divmod(int(ns), _NS_PER_S)
    return t


def seconds_to_ns(seconds: float) -> int:
    """Float seconds to integer nanoseconds, rounded (not truncated) so 0.1 s stays 100000000 ns."""
    return int(round(seconds * _NS_PER_S))


# -- lazy message classes -----------------------------------------------------------------------------------
_ROS: SimpleNamespace | None = None


def _ros() -> SimpleNamespace:
    """Return the message classes the fast paths use, imported once on first use."""
    global _ROS
    if _ROS is None:
        from builtin_interfaces.msg import Time
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Header
        from strands_robots_msgs import msg as m
        from strands_robots_msgs.srv import SendAction

        _ROS = SimpleNamespace(
            Time=Time,
            JointState=JointState,
            ObserverEvent=m.ObserverEvent,
            RunPolicyStarted=m.RunPolicyStarted,
            RunPolicyStep=m.RunPolicyStep,
            RunPolicyEnded=m.RunPolicyEnded,
            ActionCommand=m.ActionCommand,
            SafetyCheck=m.SafetyCheck,
            SafetyStop=m.SafetyStop,
            SendActionRequest=SendAction.Request,
            SendActionResponse=SendAction.Response,
            # Blank instances for the control-rate paths, which assign every field themselves.
            new_time=_blank_factory(Time),
            new_header=_blank_factory(Header),
            new_joint_state=_blank_factory(JointState),
            new_event=_blank_factory(m.ObserverEvent),
            new_step=_blank_factory(m.RunPolicyStep),
            # Kilted's unchecked setters copy an array('d') element by element; the fast paths build exact
            # array('d') values, so they store them in the field's slot where the layout is the known one.
            raw_step_arrays=_plain_slots(m.RunPolicyStep),
            raw_joint_arrays=_plain_slots(JointState),
        )
    return _ROS


def _plain_slots(cls: type) -> bool:
    """Whether the class's state is exactly its fields as ``_<field>`` slots (plus Kilted's ``_check_fields``)."""
    slots = set(getattr(cls, "__slots__", ()))
    fields = {"_" + name for name in cls.get_fields_and_field_types()}
    return fields <= slots and slots - fields <= {"_check_fields"}


def _blank_factory(cls: type) -> Callable[[], Any]:
    """Return a maker of instances whose fields are all still unset, for callers that assign every field.

    The generated ``__init__`` runs every setter once with a default (about 3 us for RunPolicyStep), and the
    fast paths then run them all again. ``__init__`` is only skipped where the class's state is exactly its
    fields (:func:`_plain_slots`; Kilted's ``_check_fields`` switch is kept as the environment sets it); any
    other class gets its ordinary constructor.
    """
    if not _plain_slots(cls):
        return cls
    new = cls.__new__
    if "_check_fields" not in cls.__slots__:
        return lambda: new(cls)
    check = os.environ.get("ROS_PYTHON_CHECK_FIELDS", "") == "1"

    def make() -> Any:
        m = new(cls)
        m._check_fields = check
        return m

    return make


_CLASS_CACHE: dict[str, type] = {}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def message_class(type_name: str) -> type:
    """Return the generated class for a type name.

    Accepts ``pkg/msg/Type``, ``pkg/Type`` (a msg), ``pkg/srv/SendAction_Request``,
    ``pkg/action/RunEpisode_Goal`` and the dotted ``pkg/srv/SendAction.Request`` form.
    """
    cls = _CLASS_CACHE.get(type_name)
    if cls is not None:
        return cls
    parts = type_name.split("/")
    if len(parts) == 2:
        pkg, ns, name = parts[0], "msg", parts[1]
    elif len(parts) == 3:
        pkg, ns, name = parts
    else:
        raise ValueError(f"not a ROS interface type name: {type_name!r}")
    cls = _resolve(pkg, (ns,), name.replace(".", "_"))
    _CLASS_CACHE[type_name] = cls
    return cls


def _resolve(pkg: str, namespaces: Sequence[str], name: str) -> type:
    module = importlib.import_module(".".join((pkg, *namespaces)))
    cls = getattr(module, name, None)
    if cls is None and "_" in name:
        # srv/action parts (SendAction_Request, RunEpisode_Goal) live in the interface's own module.
        base = name.split("_", 1)[0]
        sub = importlib.import_module(f"{module.__name__}._{_snake(base)}")
        cls = getattr(sub, name, None)
    if cls is None:
        raise ImportError(f"no generated class {pkg}/{'/'.join(namespaces)}/{name}")
    return cls


# -- generic, by introspection --------------------------------------------------------------------------------
_PLAIN, _NESTED, _NESTED_SEQ, _PRIM_SEQ = range(4)
_FLOAT_TYPES = frozenset({"float", "double", "long double"})
_PLANS: dict[type, tuple[tuple[str, int, Any, bool], ...]] = {}


def _plan(cls: type) -> tuple[tuple[str, int, Any, bool], ...]:
    """Per field: (name, shape, nested class or None, is a float) from the class's rosidl SLOT_TYPES."""
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    from rosidl_parser.definition import AbstractNestedType, BasicType, NamespacedType

    rows = []
    for name, slot in zip(cls.get_fields_and_field_types(), cls.SLOT_TYPES):
        if isinstance(slot, NamespacedType):
            rows.append((name, _NESTED, _resolve(slot.namespaces[0], slot.namespaces[1:], slot.name), False))
        elif isinstance(slot, AbstractNestedType):
            inner = slot.value_type
            if isinstance(inner, NamespacedType):
                sub = _resolve(inner.namespaces[0], inner.namespaces[1:], inner.name)
                rows.append((name, _NESTED_SEQ, sub, False))
            else:
                is_float = isinstance(inner, BasicType) and inner.typename in _FLOAT_TYPES
                rows.append((name, _PRIM_SEQ, None, is_float))
        else:
            is_float = isinstance(slot, BasicType) and slot.typename in _FLOAT_TYPES
            rows.append((name, _PLAIN, None, is_float))
    plan = tuple(rows)
    _PLANS[cls] = plan
    return plan


def msg_to_dict(msg: Any) -> dict[str, Any]:
    """Any generated message as nested plain data: dicts, lists, str, int, float, bool (and bytes for byte).

    Numeric arrays (``array.array``, numpy) become lists; nested messages become dicts; ``Time`` becomes
    ``{"sec": ..., "nanosec": ...}``. Constants are not fields and are not included.
    """
    out: dict[str, Any] = {}
    for name, shape, _, _ in _plan(type(msg)):
        value = getattr(msg, name)
        if shape == _PLAIN:
            out[name] = value.item() if hasattr(value, "item") else value
        elif shape == _NESTED:
            out[name] = msg_to_dict(value)
        elif shape == _NESTED_SEQ:
            out[name] = [msg_to_dict(v) for v in value]
        else:
            out[name] = value.tolist() if hasattr(value, "tolist") else list(value)
    return out


def dict_to_msg(cls: "type | str", d: Mapping[str, Any]) -> Any:
    """Build a message of ``cls`` (a class or a type name) from its dict form; missing keys keep defaults.

    Ints are accepted for float fields. An unknown key is refused (a typo would otherwise vanish), and on
    distros that support it the generated setters check every value's type and range.

    :raises KeyError: a key that is not a field of ``cls``.
    """
    if isinstance(cls, str):
        cls = message_class(cls)
    plan = _plan(cls)
    unknown = set(d) - {row[0] for row in plan}
    if unknown:
        raise KeyError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    # Kilted+ skips setter checks unless asked; this path is not hot, so ask (Humble always checks).
    msg = cls(check_fields=True) if "_check_fields" in getattr(cls, "__slots__", ()) else cls()
    for name, shape, sub, is_float in plan:
        if name not in d:
            continue
        value = d[name]
        if shape == _PLAIN:
            setattr(msg, name, float(value) if is_float else value)
        elif shape == _NESTED:
            setattr(msg, name, value if isinstance(value, sub) else dict_to_msg(sub, value))
        elif shape == _NESTED_SEQ:
            setattr(msg, name, [v if isinstance(v, sub) else dict_to_msg(sub, v) for v in value])
        else:
            setattr(msg, name, [float(v) for v in value] if is_float else list(value))
    return msg


# Station types: dict <-> msg through the generic path until the station core has its own dataclasses.
def task_to_msg(d: Mapping[str, Any]) -> Any:
    """``strands_robots_msgs/Task`` from its dict form (see :func:`msg_to_dict` for the reverse)."""
    return dict_to_msg(f"{PACKAGE}/msg/Task", d)


def scored_item_to_msg(d: Mapping[str, Any]) -> Any:
    """``strands_robots_msgs/ScoredItem`` from its dict form."""
    return dict_to_msg(f"{PACKAGE}/msg/ScoredItem", d)


def episode_result_to_msg(d: Mapping[str, Any]) -> Any:
    """``strands_robots_msgs/EpisodeResult`` from its dict form."""
    return dict_to_msg(f"{PACKAGE}/msg/EpisodeResult", d)


def job_status_to_msg(d: Mapping[str, Any]) -> Any:
    """``strands_robots_msgs/JobStatus`` from its dict form."""
    return dict_to_msg(f"{PACKAGE}/msg/JobStatus", d)


# -- numeric mappings -----------------------------------------------------------------------------------------
def split_numeric(mapping: Mapping[str, Any]) -> tuple[list[str], array]:
    """Keys and values of the numeric-scalar entries of ``mapping``, in its order.

    A numeric scalar is a real number that is not a bool: int, float, numpy integer or floating scalar.
    Everything else (arrays, images, text, None, bools) is skipped. Fast path: every value is a plain float
    or int, checked by type in one pass.
    """
    values = list(mapping.values())
    if set(map(type, values)) <= _PLAIN_NUMBERS:
        return list(mapping), array("d", values)
    keys: list[str] = []
    out = array("d")
    for key, value in mapping.items():
        if _is_numeric_scalar(value):
            keys.append(key)
            out.append(float(value))
    return keys, out


_PLAIN_NUMBERS = frozenset({float, int})


def _is_numeric_scalar(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    # numpy scalars (and 0-d arrays) without importing numpy: a real dtype kind and no dimensions.
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    return kind in ("i", "u", "f") and getattr(value, "shape", None) == ()


def join_numeric(keys: Iterable[str], values: Iterable[float]) -> dict[str, float]:
    """Return the mapping back from parallel keys and values (plain floats)."""
    return dict(zip(keys, map(float, values)))


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
    r = _ROS or _ros()
    kind = _KIND_BY_TYPE.get(type(event)) or event_kind(event)
    env = r.new_event()  # every field is assigned below
    utc_ns = int(event.utc_ns)
    stamp = r.new_time()
    stamp.sec, stamp.nanosec = divmod(utc_ns, _NS_PER_S)
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


# -- actions and verdicts -------------------------------------------------------------------------------------
def action_to_request(action: Mapping[str, float], lease_token: str = "", step_index: int = 0) -> Any:
    """``SendAction.Request`` for an action mapping (keys in emission order; NaN passes through).

    :raises TypeError: a value that is not a real number.
    """
    req = (_ROS or _ros()).SendActionRequest()
    req.lease_token = lease_token
    req.step_index = step_index
    req.keys = list(action)
    req.values = array("d", action.values())
    return req


def request_to_action(req: Any) -> dict[str, float]:
    """Return the action mapping of a ``SendAction.Request`` (or ``ActionCommand``), in emission order.

    :raises ValueError: keys and values of different lengths.
    """
    keys, values = req.keys, req.values
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
    return dict(zip(keys, values))


def action_to_command(action: Mapping[str, float]) -> Any:
    """``ActionCommand`` (what the rollout emitted) for an action mapping."""
    cmd = (_ROS or _ros()).ActionCommand()
    cmd.keys = list(action)
    cmd.values = array("d", action.values())
    return cmd


command_to_action = request_to_action


def verdict_to_response(verdict: Any, stopped: bool = False, sim_time_s: float = 0.0) -> Any:
    """``SendAction.Response`` for an :class:`~strands_robots.arm.verdict.ActionVerdict`.

    :param stopped: safety stop in force after this call.
    :param sim_time_s: robot time after applying.
    """
    res = (_ROS or _ros()).SendActionResponse()
    res.applied_keys = list(verdict.applied_keys)
    res.unresolved_keys = list(verdict.unresolved_keys)
    res.unresolved_reasons = list(verdict.unresolved_reasons)
    res.error = verdict.error
    res.stopped = bool(stopped)
    res.sim_time_s = float(sim_time_s)
    return res


def response_to_verdict(res: Any) -> Any:
    """Return the :class:`~strands_robots.arm.verdict.ActionVerdict` of a ``SendAction.Response``.

    A response with ``error`` set is a coarse verdict: its key lists are dropped (nothing is known per key).
    """
    from strands_robots.arm.verdict import ActionVerdict

    if res.error:
        return ActionVerdict(error=res.error)
    return ActionVerdict(
        applied_keys=tuple(res.applied_keys),
        unresolved_keys=tuple(res.unresolved_keys),
        unresolved_reasons=tuple(res.unresolved_reasons),
    )


# -- observations <-> JointState ------------------------------------------------------------------------------
_LAYOUTS: dict[tuple[str, ...], tuple[list[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}


def _joint_layout(keys: tuple[str, ...]) -> tuple[list[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Joint names in order of first appearance, and the observation keys of each quantity.

    A quantity that some joint lacks is left out entirely (JointState: each array is empty or one per name).
    """
    names: list[str] = []
    seen: dict[str, set[str]] = {}
    for key in keys:
        base, dot, suffix = key.rpartition(".")
        if dot and "." + suffix in _JOINT_SUFFIXES:
            if base not in seen:
                seen[base] = set()
                names.append(base)
            seen[base].add(suffix)

    def keys_for(suffix: str) -> tuple[str, ...]:
        if names and all(suffix in seen[n] for n in names):
            return tuple(f"{n}.{suffix}" for n in names)
        return ()

    layout = (names, keys_for("pos"), keys_for("vel"), keys_for("effort"))
    if len(_LAYOUTS) > 64:  # a handful of robots per process; bound it anyway
        _LAYOUTS.clear()
    _LAYOUTS[keys] = layout
    return layout


def observation_to_joint_state(observation: Mapping[str, Any], stamp_ns: "int | None" = None,
                               frame_id: str = "") -> Any:
    """``sensor_msgs/JointState`` of an observation (``<arm>.<joint>.pos/.vel/.effort`` and ``sim_time_s``).

    ``name`` is ``<arm>.<joint>``; other keys (cameras, text) are ignored.

    :param stamp_ns: header stamp; by default the observation's ``sim_time_s`` (robot time; 0 when absent).
    """
    keys = tuple(observation)
    layout = _LAYOUTS.get(keys) or _joint_layout(keys)
    names, pos_keys, vel_keys, eff_keys = layout
    get = observation.__getitem__
    r = _ROS or _ros()
    if stamp_ns is None:
        stamp_ns = seconds_to_ns(float(observation.get(SIM_TIME_KEY, 0.0)))
    stamp = r.new_time()
    stamp.sec, stamp.nanosec = divmod(int(stamp_ns), _NS_PER_S)
    header = r.new_header()
    header.stamp = stamp
    header.frame_id = frame_id
    msg = r.new_joint_state()  # every field is assigned below
    msg.header = header
    msg.name = list(names)
    position = array("d", map(get, pos_keys))
    velocity = array("d", map(get, vel_keys))
    effort = array("d", map(get, eff_keys))
    if r.raw_joint_arrays:
        msg._position, msg._velocity, msg._effort = position, velocity, effort
    else:
        msg.position, msg.velocity, msg.effort = position, velocity, effort
    return msg


def joint_state_to_observation(msg: Any, sim_time_s: "float | None" = None) -> dict[str, float]:
    """Return the observation dict of a ``JointState`` (absent arrays add no keys).

    :param sim_time_s: robot time to report; by default the header stamp in seconds.
    """
    obs: dict[str, float] = {}
    names = msg.name
    for suffix, values in (("pos", msg.position), ("vel", msg.velocity), ("effort", msg.effort)):
        if len(values) == len(names):
            obs.update(zip([f"{n}.{suffix}" for n in names], values))
    obs[SIM_TIME_KEY] = sim_time_s if sim_time_s is not None else time_to_ns(msg.header.stamp) / _NS_PER_S
    return obs


# -- safety ---------------------------------------------------------------------------------------------------
def safety_check_to_msg(check: Any) -> Any:
    """``SafetyCheck`` message of a :class:`~strands_robots.arm.safety.SafetyCheck` (with its text form)."""
    m = (_ROS or _ros()).SafetyCheck()
    m.arm = check.arm
    m.joint = check.joint
    m.quantity = check.quantity
    m.value = float(check.value)
    m.limit = float(check.limit)
    m.unit = check.unit
    m.text = check.text()
    return m


def msg_to_safety_check(msg: Any) -> Any:
    """Return the :class:`~strands_robots.arm.safety.SafetyCheck` of a message (``text`` is derived, not stored)."""
    from strands_robots.arm.safety import SafetyCheck

    return SafetyCheck(arm=msg.arm, joint=msg.joint, quantity=msg.quantity, value=msg.value,
                       limit=msg.limit, unit=msg.unit)


def safety_stop_to_msg(checks: Iterable[Any], stopped: bool = True, stamp_ns: int = 0) -> Any:
    """``SafetyStop`` for a trip: every check, and their texts ``"; "``-joined as ``detail``.

    :param stopped: false to publish the release (then ``checks`` is usually empty).
    :param stamp_ns: when the arms were stopped (or released).
    """
    m = (_ROS or _ros()).SafetyStop()
    m.stamp.sec, m.stamp.nanosec = divmod(int(stamp_ns), _NS_PER_S)
    m.stopped = bool(stopped)
    m.checks = [safety_check_to_msg(c) for c in checks]
    m.detail = "; ".join(c.text for c in m.checks)
    return m


def msg_to_safety_checks(msg: Any) -> tuple[Any, ...]:
    """Return the checks of a ``SafetyStop`` message as dataclasses."""
    return tuple(msg_to_safety_check(c) for c in msg.checks)


# -- rollout node messages ----------------------------------------------------------------------------------
# The rollout node's side of the command stream (ActionCommand out, ActionVerdict in) and its EpisodeResult.
def stream_command_msg(action: Mapping[str, float], run_id: str, step_index: int, lease_token: str,
                       sent_ns: int, apply_by_ns: int) -> Any:
    """``ActionCommand`` for one step of the command stream (keys in emission order; NaN passes through).

    The lease token itself is not in the message: ``lease_proof`` is the HMAC of the command keyed by it
    (:mod:`strands_robots.arm.command_auth`), made over the exact doubles the message carries.

    :param sent_ns: when the rollout publishes it, ns since the epoch (the node clock without sim time).
    :param apply_by_ns: the driver refuses the command as ``stale`` after this time (same clock).
    :raises TypeError: a value that is not a real number.
    """
    from strands_robots.arm.command_auth import command_message, sign

    cmd = (_ROS or _ros()).ActionCommand()
    keys = list(action)
    values = array("d", action.values())
    cmd.keys = keys
    cmd.values = values
    cmd.run_id = run_id
    cmd.step_index = int(step_index)
    cmd.lease_proof = sign(lease_token, command_message(run_id, int(step_index), int(apply_by_ns), keys, values))
    cmd.sent.sec, cmd.sent.nanosec = divmod(int(sent_ns), _NS_PER_S)
    cmd.apply_by.sec, cmd.apply_by.nanosec = divmod(int(apply_by_ns), _NS_PER_S)
    return cmd


def verdict_msg_to_verdict(msg: Any) -> Any:
    """Return the :class:`~strands_robots.arm.verdict.ActionVerdict` of an ``ActionVerdict`` message.

    A message with ``error`` set is a coarse verdict: its key lists are dropped (nothing is known per key).
    ``stale`` and ``out_of_order`` refusals are per-key verdicts (every key unresolved with that reason).
    """
    from strands_robots.arm.verdict import ActionVerdict

    if msg.error:
        return ActionVerdict(error=msg.error)
    return ActionVerdict(
        applied_keys=tuple(msg.applied_keys),
        unresolved_keys=tuple(msg.unresolved_keys),
        unresolved_reasons=tuple(msg.unresolved_reasons),
    )


def rollout_episode_result_msg(ended: "Mapping[str, Any] | None", end_condition: str, end_detail: str,
                               task: Any = None) -> Any:
    """Build the ``EpisodeResult`` the rollout node publishes on ``episode_results``.

    Not scored: the station adds the score sheet and the episode id.

    :param ended: the episode's Ended event as a dict (``run_id`` read from it); None when no rollout ran.
    :param task: the goal's ``Task`` message, or None for an empty one.
    """
    msg = message_class(f"{PACKAGE}/msg/EpisodeResult")()
    msg.end_condition = end_condition
    msg.end_detail = end_detail or ""
    if task is not None:
        msg.task = task
    msg.scored = False
    msg.run_id = str(ended.get("run_id", "")) if ended else ""
    return msg


# -- arm driver messages --------------------------------------------------------------------------------------
# Built by the arm driver node: the command/verdict stream, joint_states with the robot time carried beside a
# node-clock stamp, /clock, DriverStatus, LeaseState and the diagnostics.

# JointState.header.stamp is the driver's node clock (ROS time: honours use_sim_time), so a subscriber can judge
# a reading's age; the robot (simulation) time of the reading rides in header.frame_id as
# "sim_time_s=<seconds>" (JointState has no other free field, and joint consumers do not use its frame_id).
ROBOT_TIME_FRAME_PREFIX = "sim_time_s="


def driver_joint_state(observation: Mapping[str, Any], stamp_ns: int) -> Any:
    """``JointState`` as the driver publishes it: stamped ``stamp_ns`` (node clock), robot time in frame_id."""
    robot_time = float(observation.get(SIM_TIME_KEY, 0.0))
    return observation_to_joint_state(observation, stamp_ns=stamp_ns,
                                      frame_id=f"{ROBOT_TIME_FRAME_PREFIX}{robot_time:.9f}")


def joint_state_robot_time_s(msg: Any) -> "float | None":
    """Return the robot time a driver ``JointState`` carries (see :func:`driver_joint_state`).

    None when it carries none (another publisher: then only the stamp is known).
    """
    frame = msg.header.frame_id
    if not frame.startswith(ROBOT_TIME_FRAME_PREFIX):
        return None
    try:
        return float(frame[len(ROBOT_TIME_FRAME_PREFIX):])
    except ValueError:
        return None


def driver_joint_state_to_observation(msg: Any) -> dict[str, float]:
    """Return the observation of a driver ``JointState``, ``sim_time_s`` being the robot time it carries.

    A JointState from elsewhere falls back to its stamp.
    """
    return joint_state_to_observation(msg, sim_time_s=joint_state_robot_time_s(msg))


def clock_msg(robot_time_s: float) -> Any:
    """Build the ``rosgraph_msgs/Clock`` of the robot time (``/clock`` when the driver offers simulation time)."""
    from rosgraph_msgs.msg import Clock

    m = Clock()
    m.clock.sec, m.clock.nanosec = divmod(seconds_to_ns(robot_time_s), _NS_PER_S)
    return m


def msg_to_stream_command(msg: Any) -> Any:
    """Return the :class:`~strands_robots.arm.command_stream.StreamCommand` of an ``ActionCommand``.

    ``apply_by`` becomes nanoseconds; zero means no deadline.
    """
    from strands_robots.arm.command_stream import StreamCommand

    return StreamCommand(tuple(msg.keys), tuple(msg.values), msg.run_id, int(msg.step_index), msg.lease_proof,
                         time_to_ns(msg.apply_by))


_NEW_VERDICT: "Callable[[], Any] | None" = None


def stream_verdict_to_msg(verdict: Any, run_id: str, step_index: int, stopped: bool = False,
                          sim_time_s: float = 0.0, received_ns: int = 0) -> Any:
    """Build the ``ActionVerdict`` message for a core verdict on one streamed command.

    SendAction's response fields, plus the command's run id and step and when it was received.
    """
    global _NEW_VERDICT
    if _NEW_VERDICT is None:
        from strands_robots_msgs.msg import ActionVerdict as VerdictMsg

        _NEW_VERDICT = _blank_factory(VerdictMsg)
    m = _NEW_VERDICT()  # every field is assigned below (the verdict stream runs at the control rate)
    m.run_id = run_id
    m.step_index = int(step_index)
    m.applied_keys = list(verdict.applied_keys)
    m.unresolved_keys = list(verdict.unresolved_keys)
    m.unresolved_reasons = list(verdict.unresolved_reasons)
    m.error = verdict.error
    m.stopped = bool(stopped)
    m.sim_time_s = float(sim_time_s)
    received = (_ROS or _ros()).new_time()
    received.sec, received.nanosec = divmod(int(received_ns), _NS_PER_S)
    m.received = received
    return m


def driver_status_to_msg(status: Any, *, hardware: str, active: bool, physics_rate_hz: float,
                         lease_holder: str, keys: Sequence[str], specs: Mapping[str, Any], stamp_ns: int) -> Any:
    """``DriverStatus`` of a core :class:`~strands_robots.arm.driver.DriverStatus` snapshot."""
    from strands_robots_msgs.msg import DriverStatus as StatusMsg

    m = StatusMsg()
    m.stamp.sec, m.stamp.nanosec = divmod(int(stamp_ns), _NS_PER_S)
    m.hardware = hardware
    m.active = bool(active)
    m.stopped = bool(status.stopped)
    m.safety_detail = status.stop_detail
    m.sim_time_s = float(status.sim_time_s)
    m.physics_rate_hz = float(physics_rate_hz)
    m.actions_applied = int(status.actions_applied)
    m.actions_refused = int(status.actions_refused)
    m.lease_holder = lease_holder
    m.actuator_keys = list(keys)
    m.lower_limits = [float(specs[k].lower) for k in keys]
    m.upper_limits = [float(specs[k].upper) for k in keys]
    return m


def lease_state_to_msg(snapshot: Any, expires_unix_ms: int, stamp_ns: int) -> Any:
    """``LeaseState`` of a :class:`~strands_robots.arm.lease.LeaseSnapshot` (no token: it is never published)."""
    from strands_robots_msgs.msg import LeaseState as LeaseMsg

    m = LeaseMsg()
    m.stamp.sec, m.stamp.nanosec = divmod(int(stamp_ns), _NS_PER_S)
    m.state = snapshot.state
    m.lease_id = snapshot.lease_id
    m.holder = snapshot.holder
    m.priority = int(snapshot.priority)
    m.expires_unix_ms = int(expires_unix_ms)
    m.previous_holder = snapshot.previous_holder
    return m


def driver_diagnostics_to_msg(name: str, hardware_id: str, level: str, message: str,
                              values: Mapping[str, str], stamp_ns: int) -> Any:
    """``DiagnosticArray`` with one status; ``level`` is ``ok``, ``warn`` or ``error``."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

    status = DiagnosticStatus()
    status.name = name
    status.hardware_id = hardware_id
    status.level = {"ok": DiagnosticStatus.OK, "warn": DiagnosticStatus.WARN,
                    "error": DiagnosticStatus.ERROR}[level]
    status.message = message
    status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
    array = DiagnosticArray()
    array.header.stamp.sec, array.header.stamp.nanosec = divmod(int(stamp_ns), _NS_PER_S)
    array.status = [status]
    return array


# -- station messages (station/model.py <-> strands_robots_msgs; the station node's services and topics) ------
def station_task_to_msg(task: Any) -> Any:
    """``station.model.Task`` -> ``strands_robots_msgs/Task`` (parameters as KeyValue pairs, the sheet with it)."""
    from diagnostic_msgs.msg import KeyValue
    from strands_robots_msgs.msg import ScoringItemDefinition, ScoringSheetDefinition, Task

    msg = Task(task_id=task.task_id, instruction=task.instruction, layout=task.layout)
    msg.parameters = [KeyValue(key=str(k), value=str(v)) for k, v in dict(task.parameters).items()]
    sheet = ScoringSheetDefinition()
    sheet.items = [ScoringItemDefinition(
        name=i.name, question=i.question, answer_type=getattr(i.answer_type, "value", i.answer_type),
        max_points=float(i.max_points), choices=list(i.choices), choice_points=[float(p) for p in i.choice_points],
        points_per_unit=float(i.points_per_unit), success_answer=i.success_answer) for i in task.scoring.items]
    msg.scoring = sheet
    return msg


def station_task_from_msg(msg: Any) -> Any:
    """``strands_robots_msgs/Task`` -> ``station.model.Task``; ValueError names the item of a bad answer type."""
    from strands_robots.station.model import AnswerType, ScoringItemDefinition, ScoringSheet, Task

    items = []
    for index, item in enumerate(msg.scoring.items):
        try:
            answer_type = AnswerType(item.answer_type)
        except ValueError:
            raise ValueError(f"scoring.items[{index}] ({item.name!r}): unknown answer_type {item.answer_type!r}; "
                             "expected yes_no, count or choice") from None
        items.append(ScoringItemDefinition(
            name=item.name, question=item.question, answer_type=answer_type, max_points=float(item.max_points),
            choices=tuple(item.choices), choice_points=tuple(float(p) for p in item.choice_points),
            points_per_unit=float(item.points_per_unit), success_answer=item.success_answer))
    return Task(task_id=msg.task_id, instruction=msg.instruction, layout=msg.layout,
                parameters={kv.key: kv.value for kv in msg.parameters}, scoring=ScoringSheet(tuple(items)))


def station_episode_to_msg(result: Any) -> Any:
    """``station.model.EpisodeResult`` -> ``strands_robots_msgs/EpisodeResult`` (answers as text)."""
    from strands_robots.station.model import AnswerType
    from strands_robots_msgs.msg import EpisodeResult, ScoredItem

    msg = EpisodeResult(episode_id=result.episode_id, end_condition=result.end_condition, scored=bool(result.scored),
                        success=bool(result.success), score=float(result.score), taken_over=bool(result.taken_over),
                        end_detail=result.end_detail or "", run_id=result.run_id or "")
    by_name = {i.name: i for i in result.task.scoring.items}
    items = []
    for item in result.items:
        kind = AnswerType(getattr(item.answer_type, "value", item.answer_type))
        if kind is AnswerType.YES_NO:
            text = "yes" if item.answer else "no"
        elif kind is AnswerType.COUNT:
            text = str(int(item.answer))
        else:
            choices = by_name[item.name].choices if item.name in by_name else ()
            text = choices[int(item.answer)] if 0 <= int(item.answer) < len(choices) else str(int(item.answer))
        items.append(ScoredItem(name=item.name, question=item.question, answer_type=kind.value, answer=text,
                                points=float(item.points), max_points=float(item.max_points),
                                is_success_item=bool(item.is_success_item)))
    msg.items = items
    msg.task = station_task_to_msg(result.task)
    return msg


def station_status_to_msg(status: Any) -> Any:
    """``station.model.JobStatus`` -> ``strands_robots_msgs/JobStatus``."""
    from strands_robots_msgs.msg import JobStatus

    msg = JobStatus(job_id=status.job_id, station_id=status.station_id,
                    state=getattr(status.state, "value", status.state), episodes_total=int(status.episodes_total),
                    updated_unix_ms=int(status.updated_unix_ms), message=status.message or "")
    msg.episodes = [station_episode_to_msg(e) for e in status.episodes]
    return msg


def station_answers_from_msg(items: Iterable[Any]) -> list:
    """SubmitScoreSheet answers -> ``[(name, text answer)]`` for ``OperatorConsole.submit_score_sheet``."""
    return [(item.name, item.answer) for item in items]
