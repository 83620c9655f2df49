"""The preflight: one observation sent to an attached policy before any lease, and its answer checked.

The compatibility gate (:mod:`~strands_robots.station.compatibility`) compares what a policy *declares* with the
station; a policy can declare a fitting spec and still answer with keys no actuator has, NaN, a gripper outside
its range, or raise on the station's observation (an openpi server behind a mapping for another robot). So when
the policy attaches, before any lease or motion, the station builds one observation of the arms as they stand and
the cameras the task asks for (the observation an episode's first step sends), sends it as a preflight (the
client answers it as an episode's first step: ``reset`` then ``act``; the answer is never applied) and checks the
answer here against the station and the declared spec:

- the policy raised, ended the episode at once, or did not answer: its words;
- an empty chunk; an action key no actuator of this station has, or that the episode does not offer; steps
  that command different keys; a declared ``action_keys`` key (an actuator of this station) it does not command,
  or another count than a declared ``action_dim`` (a policy may command more keys than it declared: holding
  the others where they are is commanding them);
- a value that is not finite; a target outside the actuator's command range (the driver would refuse it) or
  outside the range the policy declared for it.

With it, :func:`camera_refusals` names every camera a task of the job asks for (its ``cameras`` parameter)
that the station does not have. The job runner (``station.episodes``) lists every reason of both and of the
gate in one message (:func:`~strands_robots.station.compatibility.gate_message`) and FAILs the job at
WAITING_POLICY: no lease was taken, no arm moved, no episode is charged. No ROS here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple

from strands_robots.client.policy_spec import PolicySpec
from strands_robots.station.compatibility import StationSpec

__all__ = ["PreflightAnswer", "answer_refusals", "camera_refusals", "PREFIX", "LISTED_MAX"]

#: Begins every reason found in the answer, so a reader tells them from the declared spec's.
PREFIX = "preflight: "
#: Most values named per kind of fault (the count of the rest is given).
LISTED_MAX = 6
_SLACK = 1e-9


@dataclass(frozen=True)
class PreflightAnswer:
    """What the policy answered the station's preflight (exactly one of ``chunk``, ``error``, ``ended`` is set).

    :param chunk: the actions it answered, one ``{key: value}`` per step.
    :param error: why there is no chunk: the policy raised (``"<type>: <message>"``), did not answer in time or
        its session ended.
    :param ended: the policy raised ``EndEpisode`` at the first observation (its reason, possibly empty).
    :param offered_keys: the actuator keys the episode offers the policy (empty: not checked).
    :param cameras: the cameras whose frames the observation carried.
    :param slot: the comparison slot whose policy answered ("" for a job of one policy); the gate checks the
        answer against that slot's declared spec and names the slot in every reason.
    """

    chunk: Optional[Tuple[Mapping[str, float], ...]] = None
    error: str = ""
    ended: Optional[str] = None
    offered_keys: Tuple[str, ...] = ()
    cameras: Tuple[str, ...] = field(default_factory=tuple)
    slot: str = ""


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:LISTED_MAX])
    return shown + (f" and {len(items) - LISTED_MAX} more" if len(items) > LISTED_MAX else "")


def answer_refusals(answer: PreflightAnswer, station: StationSpec, declared: Optional[PolicySpec] = None) -> List[str]:
    """Return every reason the preflight's answer does not fit ``station`` (and ``declared``); empty: it fits."""
    if answer.error:
        return [f"{PREFIX}the policy could not answer the station's first observation: {answer.error}"]
    if answer.ended is not None:
        why = f" ({answer.ended})" if answer.ended else ""
        return [f"{PREFIX}the policy ended the episode at its first observation (EndEpisode{why}): it would run no "
                "step"]
    chunk = tuple(answer.chunk or ())
    if not chunk:
        return [f"{PREFIX}the policy answered an empty chunk: no action to check"]
    out: List[str] = []
    keys_by_step = [tuple(action) for action in chunk]
    answered = list(dict.fromkeys(k for keys in keys_by_step for k in keys))
    unknown = [k for k in answered if k not in station.action_limits]
    if unknown:
        out.append(f"{PREFIX}the policy commands {_listed([repr(k) for k in unknown])}: no actuator of this "
                   f"station has {'it' if len(unknown) == 1 else 'them'} (its actuators: "
                   f"{_listed(list(station.action_limits))})")
    offered = set(answer.offered_keys)
    not_offered = [k for k in answered if offered and k not in offered and k not in unknown]
    if not_offered:
        out.append(f"{PREFIX}the policy commands {_listed([repr(k) for k in not_offered])}, which the episode does "
                   f"not offer it")
    first = set(keys_by_step[0])
    differ = [i for i, keys in enumerate(keys_by_step) if set(keys) != first]
    if differ:
        out.append(f"{PREFIX}the chunk's steps command different keys: step 0 commands {len(first)}, step "
                   f"{differ[0]} {len(keys_by_step[differ[0]])} ({len(differ)} of {len(chunk)} steps differ from "
                   "step 0)")
    if declared is not None and declared.action_keys:
        # a declared key no actuator has is the gate's reason already
        missing = [k for k in declared.action_keys if k not in answered and k in station.action_limits]
        if missing:
            out.append(f"{PREFIX}the policy declared it commands {_listed([repr(k) for k in missing])} and its "
                       f"answer does not")
    elif declared is not None and declared.action_dim and declared.action_dim != len(first):
        out.append(f"{PREFIX}the policy declared {declared.action_dim} actions per step and answered "
                   f"{len(first)} per step")
    out += _value_refusals(chunk, station, declared)
    return out


def _value_refusals(chunk: Sequence[Mapping[str, float]], station: StationSpec,
                    declared: Optional[PolicySpec]) -> List[str]:
    """Non-finite values, targets outside the command range and outside the declared range, each named."""
    not_finite: List[str] = []
    outside: dict = {}
    outside_declared: dict = {}
    ranges = {} if declared is None else {r.key: r for r in declared.action_ranges}
    for step, action in enumerate(chunk):
        for key, value in action.items():
            value = float(value)
            if not math.isfinite(value):
                not_finite.append(f"step {step} {key!r} is {value}")
                continue
            limits = station.action_limits.get(key)
            if limits is not None and not limits[0] - _SLACK <= value <= limits[1] + _SLACK:
                outside.setdefault(key, []).append(value)
            r = ranges.get(key)
            if r is not None and not r.low - _SLACK <= value <= r.high + _SLACK:
                outside_declared.setdefault(key, []).append(value)
    out: List[str] = []
    if not_finite:
        out.append(f"{PREFIX}the policy answered values that are not finite numbers ({len(not_finite)}: "
                   f"{_listed(not_finite)})")
    for key, values in outside.items():
        lower, upper = station.action_limits[key]
        out.append(f"{PREFIX}{key!r}: the policy commands {_values(values)}, outside this station's command range "
                   f"[{lower:g}, {upper:g}] (the driver refuses such targets)")
    for key, values in outside_declared.items():
        r = ranges[key]
        out.append(f"{PREFIX}{key!r}: the policy commands {_values(values)}, outside the range it declared "
                   f"[{r.low:g}, {r.high:g}]")
    return out


def _values(values: Sequence[float]) -> str:
    shown = ", ".join(f"{v:g}" for v in values[:3])
    return shown + (f" ({len(values)} steps)" if len(values) > 3 else "")


def camera_refusals(tasks: Iterable[Any], cameras: Iterable[str]) -> List[str]:
    """Name every camera a task asks for (its ``cameras`` parameter) that is not one of ``cameras``.

    ``tasks``: the job's tasks (``station.model.Task``: ``task_id`` and ``parameters``). A request that does not
    parse is named too (the job's validation refuses it at submit; this is the station's own look).
    """
    from strands_robots.cameras.request import CameraRequestError, image_request

    have = list(cameras)
    out: List[str] = []
    seen = set()
    for task in tasks:
        if task.task_id in seen:
            continue
        seen.add(task.task_id)
        try:
            request = image_request(dict(task.parameters or {}))
        except CameraRequestError as exc:
            out.append(f"task {task.task_id!r}: its camera request is refused: {exc}")
            continue
        for camera in request.cameras or ():
            if camera.name not in have:
                out.append(f"task {task.task_id!r} asks for camera {camera.name!r}: this station has no such camera "
                           f"(its cameras: {', '.join(have) or 'none'})")
    return out
