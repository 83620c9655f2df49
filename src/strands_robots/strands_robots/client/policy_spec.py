"""What a policy declares it needs from a station: :class:`PolicySpec`.

A policy may declare, with an optional ``spec()`` method returning a :class:`PolicySpec`, the actuator keys it
commands (or only how many: ``action_dim``), the observation keys it reads, the cameras it needs and their
image size, the control rate it was trained at, the range it commands a key in (a gripper's above all) and the
value that closes a gripper (its polarity), and what its actions are (:data:`ACTION_SPACES`: absolute joint
positions, joint velocities or deltas).
The station compares it with its own (``strands_robots.station.compatibility``) when the policy attaches,
before any arm moves: a mismatch fails the job with every mismatch named. A policy without ``spec()`` declares
nothing and is not checked. :class:`~strands_robots.client.openpi.OpenPIPolicy` derives its spec from the
server's metadata and the observation mapping.

Through the relay the spec travels in the policy client's attach (``SessionAttach.spec``), and the station
gets it with ``PolicyAttached``; :func:`spec_to_pb` / :func:`spec_from_pb` convert. :meth:`PolicySpec.to_dict`
is the JSON form the job's provenance carries, in every snapshot of the job. No ROS, no numpy.

Every field is bounded (:data:`SPEC_LIMITS`: how many keys, cameras and ranges, how long each name, the source,
the metadata and the whole spec's JSON), checked wherever a spec is made: by the client before it attaches, by
the relay at the attach (:func:`spec_refusal`, refused INVALID_ARGUMENT naming the field) and by the station when
it reads the spec. A refusal is a :class:`PolicySpecError` naming the field, its size and the limit.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = ["PolicySpec", "CameraNeed", "ActionRange", "PolicySpecError", "spec_of", "spec_to_pb", "spec_from_pb",
           "spec_refusal", "MAX_METADATA_JSON", "MAX_SPEC_JSON", "SPEC_LIMITS", "ACTION_SPACES", "JOINT_POSITION",
           "JOINT_VELOCITY", "DELTA"]

#: Absolute joint targets: what a position-controlled station applies as it is.
JOINT_POSITION = "joint_position"
#: Joint velocities (openpi's stock DROID checkpoints but ``pi05_droid_jointpos``).
JOINT_VELOCITY = "joint_velocity"
#: Changes from the current state (LIBERO's end-effector deltas, delta joint actions).
DELTA = "delta"
#: What a policy's actions may be; "" in a spec: not declared.
ACTION_SPACES = (JOINT_POSITION, JOINT_VELOCITY, DELTA)

#: Longest metadata JSON a spec carries (a server's metadata is small; this bounds what the relay forwards).
MAX_METADATA_JSON = 16 * 1024
#: Longest JSON of a whole spec (:meth:`PolicySpec.to_dict`): what a job's provenance carries in every snapshot.
MAX_SPEC_JSON = 64 * 1024
#: How much a spec may declare. A station has tens of actuators and a few cameras: these are far above any real
#: policy and far below what would make a job's every snapshot large.
SPEC_LIMITS = {
    "action_keys": 256,          # keys it commands
    "observation_keys": 256,     # keys it reads
    "cameras": 32,               # cameras it needs
    "action_ranges": 256,        # ranges it commands keys in
    "name": 128,                 # characters of a key, a camera's name, a range's key
    "source": 1024,              # characters of ``source``
    "pixels": 65535,             # a camera's height or width
    "action_dim": 65535,         # actions per step
}


class PolicySpecError(ValueError):
    """A spec that cannot be built: the message names the field."""


@dataclass(frozen=True)
class CameraNeed:
    """A camera the policy needs (``<name>.image`` in every observation), of ``height`` x ``width`` (0: any)."""

    name: str
    height: int = 0
    width: int = 0


@dataclass(frozen=True)
class ActionRange:
    """The range ``[low, high]`` the policy commands ``key`` in, in the station's units (a gripper's, say).

    ``closed``: the value in that range that closes a gripper (its polarity; None: not declared).
    """

    key: str
    low: float
    high: float
    closed: Optional[float] = None


@dataclass(frozen=True)
class PolicySpec:
    """What a policy needs; every field is optional (empty or 0: not declared, not checked).

    :param action_keys: the actuator keys it commands.
    :param action_dim: how many actions it outputs per step; compared with the station's actuator count only
        when ``action_keys`` is not declared (with keys it is informational: an openpi server's columns).
    :param observation_keys: the observation keys it reads (``right.joint_1.pos``, ...).
    :param cameras: the cameras it needs, with the image size it needs (0 x 0: any size).
    :param control_frequency_hz: the control rate it runs at (0: any).
    :param action_ranges: the ranges it commands keys in (the gripper's: the most common cause of 0 %), with
        the value that closes a gripper.
    :param action_space: what its actions are: ``joint_position`` (absolute targets), ``joint_velocity`` or
        ``delta`` (:data:`ACTION_SPACES`); "" not declared.
    :param source: what the spec describes, in words (``openpi ws://host:8000, obs map droid``).
    :param metadata: the policy's own description (an openpi server's metadata frame), JSON-able.
    """

    action_keys: Tuple[str, ...] = ()
    action_dim: int = 0
    observation_keys: Tuple[str, ...] = ()
    cameras: Tuple[CameraNeed, ...] = ()
    control_frequency_hz: float = 0.0
    action_ranges: Tuple[ActionRange, ...] = ()
    source: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    action_space: str = ""

    def __post_init__(self) -> None:
        for name in ("action_keys", "observation_keys"):
            value = tuple(getattr(self, name))
            _check_count(name, len(value))
            if not all(isinstance(k, str) and k.strip() for k in value):
                raise PolicySpecError(f"policy spec: {name} must be non-empty strings, got {_shown(value)}")
            for index, key in enumerate(value):
                _check_name(f"{name}[{index}]", key)
            object.__setattr__(self, name, value)
        dim = self.action_dim
        if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim <= SPEC_LIMITS["action_dim"]:
            raise PolicySpecError(f"policy spec: action_dim must be an integer in 0..{SPEC_LIMITS['action_dim']}, "
                                  f"got {_shown(dim)}")
        cameras = tuple(self.cameras)
        _check_count("cameras", len(cameras))
        for index, cam in enumerate(cameras):
            if not isinstance(cam, CameraNeed) or not isinstance(cam.name, str) or not cam.name or any(
                    isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= SPEC_LIMITS["pixels"]
                    for v in (cam.height, cam.width)):
                raise PolicySpecError(f"policy spec: cameras[{index}] must be CameraNeed(name, height, width) with "
                                      f"height and width in 0..{SPEC_LIMITS['pixels']}, got {_shown(cam)}")
            _check_name(f"cameras[{index}].name", cam.name)
        object.__setattr__(self, "cameras", cameras)
        rate = self.control_frequency_hz
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or rate < 0:
            raise PolicySpecError(f"policy spec: control_frequency_hz must be a finite number >= 0, got {rate!r}")
        ranges = tuple(self.action_ranges)
        _check_count("action_ranges", len(ranges))
        for index, r in enumerate(ranges):
            if not isinstance(r, ActionRange) or not isinstance(r.key, str) or not r.key or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                    for v in (r.low, r.high)) or r.low > r.high or (r.closed is not None and (
                    isinstance(r.closed, bool) or not isinstance(r.closed, (int, float))
                    or not r.low <= r.closed <= r.high)):
                raise PolicySpecError(f"policy spec: action_ranges[{index}]: an action range must be ActionRange(key, "
                                      f"low <= high, closed in [low, high] or None), got {_shown(r)}")
            _check_name(f"action_ranges[{index}].key", r.key)
        object.__setattr__(self, "action_ranges", ranges)
        if self.action_space not in ("", *ACTION_SPACES):
            raise PolicySpecError(f"policy spec: action_space must be one of {', '.join(ACTION_SPACES)} (or \"\": not "
                                  f"declared), got {_shown(self.action_space)}")
        if not isinstance(self.source, str):
            raise PolicySpecError(f"policy spec: source must be a string, got {type(self.source).__name__}")
        _check_length("source", self.source, SPEC_LIMITS["source"])
        text = json.dumps(dict(self.metadata), sort_keys=True, default=_jsonable)
        if len(text) > MAX_METADATA_JSON:
            raise PolicySpecError(f"policy spec: metadata is {len(text)} characters of JSON, more than "
                                  f"{MAX_METADATA_JSON}")
        object.__setattr__(self, "metadata", json.loads(text))
        whole = len(json.dumps(self.to_dict(), sort_keys=True))
        if whole > MAX_SPEC_JSON:
            raise PolicySpecError(f"policy spec: {whole} characters of JSON in all, more than {MAX_SPEC_JSON}")

    def to_dict(self) -> Dict[str, Any]:
        """Return the JSON form (for a job's provenance)."""
        return {
            "action_keys": list(self.action_keys),
            "action_dim": self.action_dim,
            "observation_keys": list(self.observation_keys),
            "cameras": [{"name": c.name, "height": c.height, "width": c.width} for c in self.cameras],
            "control_frequency_hz": self.control_frequency_hz,
            "action_ranges": [{"key": r.key, "low": r.low, "high": r.high,
                               **({} if r.closed is None else {"closed": r.closed})} for r in self.action_ranges],
            "action_space": self.action_space,
            "source": self.source,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PolicySpec":
        """Build a spec from :meth:`to_dict`'s form."""
        try:
            return cls(
                action_keys=tuple(data.get("action_keys", ())), action_dim=int(data.get("action_dim", 0)),
                observation_keys=tuple(data.get("observation_keys", ())),
                cameras=tuple(CameraNeed(str(c["name"]), int(c.get("height", 0)), int(c.get("width", 0)))
                              for c in data.get("cameras", ())),
                control_frequency_hz=float(data.get("control_frequency_hz", 0.0)),
                action_ranges=tuple(ActionRange(str(r["key"]), float(r["low"]), float(r["high"]),
                                                None if r.get("closed") is None else float(r["closed"]))
                                    for r in data.get("action_ranges", ())),
                source=str(data.get("source", "")), metadata=dict(data.get("metadata", {}) or {}),
                action_space=str(data.get("action_space", "")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, PolicySpecError):
                raise
            raise PolicySpecError(f"policy spec: not a spec mapping ({type(exc).__name__}: {exc})") from None


def _shown(value: Any) -> str:
    """Return ``repr(value)`` short enough for a refusal (a refused value may be megabytes)."""
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:160]}... ({len(text)} characters)"


def _check_count(field: str, count: int) -> None:
    limit = SPEC_LIMITS[field]
    if count > limit:
        raise PolicySpecError(f"policy spec: {field} has {count} entries; at most {limit} are allowed")


def _check_length(field: str, text: str, limit: int) -> None:
    if len(text) > limit:
        raise PolicySpecError(f"policy spec: {field} is {len(text)} characters long; at most {limit} are allowed")


def _check_name(field: str, name: str) -> None:
    _check_length(field, name, SPEC_LIMITS["name"])


def _jsonable(value: Any) -> Any:
    """Make numpy scalars and arrays, bytes and tuples JSON (a server's metadata may hold them)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


def spec_of(policy: Any) -> Optional[PolicySpec]:
    """Return ``policy.spec()`` when the policy declares one (None otherwise); a bad return is refused."""
    method = getattr(policy, "spec", None)
    if not callable(method):
        return None
    spec = method()
    if spec is None:
        return None
    if not isinstance(spec, PolicySpec):
        raise PolicySpecError(f"{type(policy).__name__}.spec() must return a PolicySpec or None, got "
                              f"{type(spec).__name__}")
    return spec


def spec_to_pb(spec: PolicySpec) -> Any:
    """Return the relay's ``PolicySpec`` message for ``spec``."""
    from strands_robots.wire.proto import policy_session_pb2 as ps

    return ps.PolicySpec(
        action_keys=list(spec.action_keys), action_dim=spec.action_dim,
        observation_keys=list(spec.observation_keys),
        cameras=[ps.CameraNeed(name=c.name, height=c.height, width=c.width) for c in spec.cameras],
        control_frequency_hz=spec.control_frequency_hz,
        action_ranges=[ps.ActionRange(key=r.key, low=r.low, high=r.high, closed=r.closed) for r in spec.action_ranges],
        source=spec.source, metadata_json=json.dumps(dict(spec.metadata), sort_keys=True),
        action_space=spec.action_space)


def spec_refusal(msg: Any) -> str:
    """Say why a relay ``PolicySpec`` message is refused, naming the field; "" when it is a valid spec."""
    try:
        spec_from_pb(msg)
    except PolicySpecError as exc:
        return str(exc)
    return ""


def spec_from_pb(msg: Any) -> PolicySpec:
    """Return the :class:`PolicySpec` of a relay ``PolicySpec`` message (a bad one raises PolicySpecError).

    Counts and lengths are checked on the message before anything is built from it.
    """
    for name in ("action_keys", "observation_keys", "cameras", "action_ranges"):
        _check_count(name, len(getattr(msg, name)))
    _check_length("source", msg.source, SPEC_LIMITS["source"])
    _check_length("metadata_json", msg.metadata_json, MAX_SPEC_JSON)
    try:
        metadata = json.loads(msg.metadata_json) if msg.metadata_json else {}
    except ValueError as exc:
        raise PolicySpecError(f"policy spec: metadata_json is not JSON ({exc})") from None
    if not isinstance(metadata, dict):
        raise PolicySpecError("policy spec: metadata_json must be a JSON object")
    return PolicySpec(
        action_keys=tuple(msg.action_keys), action_dim=int(msg.action_dim),
        observation_keys=tuple(msg.observation_keys),
        cameras=tuple(CameraNeed(c.name, int(c.height), int(c.width)) for c in msg.cameras),
        control_frequency_hz=float(msg.control_frequency_hz),
        action_ranges=tuple(ActionRange(r.key, float(r.low), float(r.high),
                                        float(r.closed) if r.HasField("closed") else None) for r in msg.action_ranges),
        source=msg.source, metadata=metadata, action_space=msg.action_space)
