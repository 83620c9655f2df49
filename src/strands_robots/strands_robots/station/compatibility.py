"""The compatibility gate: whether a policy's declared spec fits this station, before any arm moves.

A policy may declare what it needs (:class:`~strands_robots.client.policy_spec.PolicySpec`: actuator keys or
an action count, observation keys, cameras and their image size, control rate, the ranges it commands keys in).
The station's own side is a :class:`StationSpec`: its actuators and their command ranges (``config/arms.yaml``),
the observation keys its rollouts carry, its cameras and their sizes (``config/cameras.yaml``, the ones the
rollout observes) and the control rates of the job's tasks. :func:`check` compares the two and returns every
mismatch, each one line naming the key and both sides:

- an action key the station has no actuator for; an ``action_dim`` (declared without keys) that is not the
  station's actuator count;
- an observation key the station does not send;
- a camera the station does not have, or has at another image size;
- a control rate no task of the job runs at (each task at another rate is named);
- a commanded range outside the actuator's command range (a gripper scaled for [0, 1] on a [0, 0.8] jaw),
  or one that covers less than half of it (a gripper that never opens fully: polarity or scale wrong);
- a gripper the policy closes at another value than this station's (its polarity inverted): this station's
  grippers are jaw openings (arms.yaml), closed at the lower end of their command range;
- an action space other than this station's: every action is applied as an absolute joint position, so a policy
  of joint velocities (openpi's stock DROID checkpoints) or of deltas is refused.

The station runs the gate when the policy attaches, at WAITING_POLICY (``station.episodes``), with the
preflight (:mod:`~strands_robots.station.preflight`: the policy's answer to one observation): any mismatch
FAILs the job with :func:`gate_message`, listing all of them; the lease is never taken. No ROS here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple

from strands_robots.cameras.frames import IMAGE_SUFFIX
from strands_robots.client.policy_spec import PolicySpec

__all__ = ["StationSpec", "station_spec", "check", "gate_message", "OBSERVATION_SUFFIXES", "MIN_RANGE_COVER",
           "RATE_TOLERANCE_HZ", "GRIPPER_JOINT", "STATION_ACTION_SPACE"]

#: The per-actuator observation keys a rollout carries (``right.joint_1.pos``, ...).
OBSERVATION_SUFFIXES = (".pos", ".vel", ".effort")
#: A declared range must cover at least this share of the actuator's command range.
MIN_RANGE_COVER = 0.5
#: Two control rates closer than this are the same.
RATE_TOLERANCE_HZ = 1e-6
_RANGE_SLACK = 1e-9
#: The joint name of a gripper (``right.gripper``): a jaw opening, closed at the lower end of its command range.
GRIPPER_JOINT = "gripper"
#: What this station's arms do with an action: move each joint to it (position control).
STATION_ACTION_SPACE = "joint_position"
_SPACE_WORDS = {"joint_position": "absolute joint positions", "joint_velocity": "joint velocities",
                "delta": "changes from the current state (deltas)"}


@dataclass(frozen=True)
class StationSpec:
    """What this station offers a policy (see the module docstring).

    :param action_limits: actuator key -> its command range ``(lower, upper)``, in actuator order.
    :param cameras: camera name -> ``(height, width)`` of its images.
    :param control_frequencies: task id -> the control rate (Hz) that task's episodes run at.
    :param observation_keys: every observation key; empty: derived from the actuators and cameras.
    :param gripper_closed: gripper key -> the command that closes it; None: every ``<arm>.gripper`` actuator
        closes at the lower end of its range.
    :param action_space: what the arms do with an action (:data:`STATION_ACTION_SPACE`).
    """

    action_limits: Mapping[str, Tuple[float, float]]
    cameras: Mapping[str, Tuple[int, int]] = field(default_factory=dict)
    control_frequencies: Mapping[str, float] = field(default_factory=dict)
    observation_keys: Tuple[str, ...] = ()
    gripper_closed: Optional[Mapping[str, float]] = None
    action_space: str = STATION_ACTION_SPACE

    def __post_init__(self) -> None:
        if self.gripper_closed is None:
            closed = {key: lo for key, (lo, _hi) in self.action_limits.items()
                      if key.rsplit(".", 1)[-1] == GRIPPER_JOINT}
            object.__setattr__(self, "gripper_closed", closed)
        if not self.observation_keys:
            keys = [k + s for k in self.action_limits for s in OBSERVATION_SUFFIXES]
            keys += [name + IMAGE_SUFFIX for name in self.cameras]
            object.__setattr__(self, "observation_keys", tuple(keys))


def station_spec(driver_config: Any, camera_set: Any = None, cameras: Optional[Iterable[str]] = None,
                 control_frequencies: Optional[Mapping[str, float]] = None) -> StationSpec:
    """Build the station's spec from its driver config (arms.yaml) and camera set (cameras.yaml).

    :param driver_config: an :class:`~strands_robots.arm.config.DriverConfig`.
    :param camera_set: a :class:`~strands_robots.cameras.config.CameraSet` (None: no cameras).
    :param cameras: the cameras the rollouts observe (None: every camera of the set).
    :param control_frequencies: task id -> control rate of the job's tasks.
    """
    limits = {key: (float(j.lower), float(j.upper)) for key, j in driver_config.joint_specs().items()}
    sizes = {}
    if camera_set is not None:
        names = camera_set.names if cameras is None else tuple(cameras)
        known = set(camera_set.names)
        for name in names:  # a camera the file does not name has no known size: (0, 0), not compared
            cam = camera_set.camera(name) if name in known else None
            sizes[name] = (int(cam.height), int(cam.width)) if cam is not None else (0, 0)
    return StationSpec(action_limits=limits, cameras=sizes, control_frequencies=dict(control_frequencies or {}))


def _listed(names: Sequence[str], limit: int = 12) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _size(hw: Tuple[int, int]) -> str:
    return f"{hw[0]}x{hw[1]}"


def check(policy: PolicySpec, station: StationSpec) -> List[str]:
    """Return every mismatch between ``policy``'s declared needs and ``station`` (empty: compatible)."""
    out: List[str] = []
    actuators = list(station.action_limits)
    for key in policy.action_keys:
        if key not in station.action_limits:
            out.append(f"action key {key!r}: no actuator of this station has it (its actuators: "
                       f"{_listed(actuators)})")
    if not policy.action_keys and policy.action_dim and policy.action_dim != len(actuators):
        out.append(f"action dimension: the policy outputs {policy.action_dim} actions per step, this station has "
                   f"{len(actuators)} actuators ({_listed(actuators)})")
    offered = set(station.observation_keys)
    for key in policy.observation_keys:
        if key not in offered:
            out.append(f"observation key {key!r}: this station does not send it")
    for need in policy.cameras:
        have = station.cameras.get(need.name)
        if have is None:
            out.append(f"camera {need.name!r}: this station has no such camera (its cameras: "
                       f"{_listed(list(station.cameras))})")
        elif have != (0, 0) and ((need.height and need.height != have[0]) or (need.width and need.width != have[1])):
            out.append(f"camera {need.name!r}: the policy needs {need.height or 'any'}x{need.width or 'any'} "
                       f"images, this station's are {_size(have)}")
    rate = policy.control_frequency_hz
    if rate:
        other = [(task, hz) for task, hz in station.control_frequencies.items()
                 if not math.isclose(hz, rate, rel_tol=0.0, abs_tol=RATE_TOLERANCE_HZ)]
        if other:
            tasks = ", ".join(f"{task!r} at {hz:g} Hz" for task, hz in other)
            out.append(f"control rate: the policy runs at {rate:g} Hz, the job's tasks do not ({tasks})")
    space = policy.action_space
    if space and space != station.action_space:
        out.append(f"action space: the policy's actions are {_SPACE_WORDS.get(space, space)} ({space}); this station "
                   f"applies every action as {_SPACE_WORDS.get(station.action_space, station.action_space)} "
                   f"({station.action_space}), so they would be sent as targets they are not")
    closes = station.gripper_closed or {}
    for r in policy.action_ranges:
        if r.closed is not None and r.key in closes and not math.isclose(r.closed, closes[r.key], rel_tol=0.0,
                                                                            abs_tol=1e-6):
            lower, upper = station.action_limits[r.key]
            out.append(f"gripper polarity of {r.key!r}: the policy closes it at {r.closed:g}, this station's closes at "
                       f"{closes[r.key]:g} (its jaw opening runs [{lower:g}, {upper:g}]): inverted")
    for r in policy.action_ranges:
        limits = station.action_limits.get(r.key)
        if limits is None:
            if r.key not in policy.action_keys:  # an unknown action key is named once, above
                out.append(f"action range of {r.key!r}: no actuator of this station has it")
            continue
        lower, upper = limits
        if r.low < lower - _RANGE_SLACK or r.high > upper + _RANGE_SLACK:
            out.append(f"action range of {r.key!r}: the policy commands [{r.low:g}, {r.high:g}], this station's "
                       f"command range is [{lower:g}, {upper:g}] (targets outside it are refused)")
        elif upper > lower and (r.high - r.low) < MIN_RANGE_COVER * (upper - lower):
            out.append(f"action range of {r.key!r}: the policy commands [{r.low:g}, {r.high:g}], under "
                       f"{MIN_RANGE_COVER:.0%} of this station's [{lower:g}, {upper:g}] (scale or polarity wrong?)")
    return out


def gate_message(mismatches: Sequence[str], source: str = "") -> str:
    """Word a failed gate: how many mismatches, and each of them."""
    what = f"the policy ({source})" if source else "the policy"
    count = len(mismatches)
    return (f"{what} does not fit this station ({count} mismatch{'es' if count != 1 else ''}; no arm moved): "
            + "; ".join(f"{i}. {m}" for i, m in enumerate(mismatches, 1)))
