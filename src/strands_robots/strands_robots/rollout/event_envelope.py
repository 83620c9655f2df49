"""Observer events as ``ObserverEvent`` dicts: the recorder's own encoding (the core never imports conversions)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["event_envelope", "ros_time"]


def ros_time(stamp_ns: int) -> dict[str, int]:
    """``builtin_interfaces/Time`` of ``stamp_ns`` as a dict."""
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    return {"sec": sec, "nanosec": nanosec}


_EVENT_KINDS = {"RunPolicyStarted": "started", "RunPolicyStep": "step", "RunPolicyEnded": "ended"}
_EVENT_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _numeric_items(mapping: Mapping[str, Any]) -> tuple[list[str], list[float]]:
    """Return the numeric-scalar entries (not bools) of an observation or action, in order."""
    keys: list[str] = []
    values: list[float] = []
    for key, value in mapping.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)) or (getattr(getattr(value, "dtype", None), "kind", None) in ("i", "u", "f")
                                               and getattr(value, "shape", None) == ()):
            keys.append(str(key))
            values.append(float(value))
    return keys, values


def event_envelope(event: Any) -> dict[str, Any]:
    """Encode an observer event dataclass as the dict form of an ``ObserverEvent`` (arrays as lists).

    A step's ``observation``/``action`` become ``observation_keys/values`` and ``action_keys/values``.
    """
    cls = type(event)
    kind = _EVENT_KINDS.get(cls.__name__)
    if kind is None:
        raise ValueError(f"not an observer event: {cls.__qualname__}")
    names = _EVENT_FIELD_NAMES.get(cls)
    if names is None:
        names = tuple(f for f in getattr(cls, "__dataclass_fields__", {}) if f not in ("observation", "action"))
        _EVENT_FIELD_NAMES[cls] = names
    payload: dict[str, Any] = {}
    for name in names:
        value = getattr(event, name)
        payload[name] = list(value) if isinstance(value, tuple) else value
    if kind == "step":
        payload["observation_keys"], payload["observation_values"] = _numeric_items(event.observation)
        payload["action_keys"], payload["action_values"] = _numeric_items(event.action)
    return {
        "stamp": ros_time(event.utc_ns),
        "kind": kind,
        "schema_version": event.schema_version,
        "run_id": event.run_id,
        "event_seq": event.event_seq,
        "monotonic_ns": event.monotonic_ns,
        "utc_ns": event.utc_ns,
        "dropped_before": 0,
        "started": [payload] if kind == "started" else [],
        "step": [payload] if kind == "step" else [],
        "ended": [payload] if kind == "ended" else [],
    }
