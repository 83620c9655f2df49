"""Job definitions as plain mappings (a YAML file, the station's persisted state) ⇄ a validated :class:`JobSpec`.

The format (unknown keys are refused, so a typo never silently drops a setting)::

    job_id: demo_job
    client_id: demo
    station_id: sim_station
    episodes_total: 6
    duration_s: 2.0               # default rollout budget per episode (optional, default 10)
    control_frequency: 50         # Hz (optional, default 50)
    max_discards: 3               # optional, default 10
    intervals: wilson             # the rates' 95 % interval: wilson (default) or clopper-pearson
    record: true                  # optional: each episode recorded to MCAP and sent to the team (default false)
    images:                       # optional: the camera frames the policy gets through the relay, every task's
      cameras: scene:224x224,wrist   # default (a task's own cameras/image_format/image_quality parameter wins)
      format: jpeg                # jpeg (default) or png
      quality: 90                 # JPEG quality 1..95 (default 90)
    policy:
      provider: scripted
      config: {mode: torque_ramp}
    tasks:
      - task_id: reach
        instruction: reach the cube
        layout: cube on the left mat      # optional
        parameters: {duration_s: 1.0, policy.end_after_steps: 20}   # scalars, kept as strings; known keys only
        scoring:                          # the success item first
          - {name: reached, question: "Did it reach the cube?", answer_type: yes_no, max_points: 1,
             success_answer: "yes"}
          - {name: grasp, question: "How was the grasp?", answer_type: choice, max_points: 2,
             choices: [none, partial, firm], choice_points: [0, 1, 2]}
          - {name: blocks, question: "Blocks stacked?", answer_type: count, max_points: 3, points_per_unit: 1}

Task parameter keys are those of ``strands_robots.station.task_parameters.TASK_PARAMETERS`` (duration_s,
control_frequency, seed, start_pose_*, operator_*, success_when, fault.*) and the prefixes ``policy.<option>`` /
``answer.<item>``; every value is checked against its range there, the same rules the relay and the rollout use.
Every refusal is a :class:`~strands_robots.station.job.JobSpecError` naming the task index, the field and the
reason. YAML is read with ``yaml.safe_load`` only.

Submitted through a relay (``strands-robots job submit``, ``demo_job``), every setting reaches the station: the
tasks (``images`` in their parameters), ``episodes_total``, ``station_id``, ``duration_s``,
``control_frequency``, ``max_discards``, ``intervals`` and ``record`` (the relay's ``SubmitJobRequest`` and ``Job``
carry each; the relay checks them by the same rules and refuses a value out of range naming it). ``policy`` is served by
the client that submits (the station's provider is ``relay``); ``job_id`` and ``client_id`` are the submit's (a
fresh id per submit, the token's team).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Optional

from strands_robots.job_model.compare import CompareRequest, compare_from_mapping, compare_to_mapping
from strands_robots.job_model.team_keys import TeamJobRefused

from strands_robots.station.job import INTERVAL_METHODS, JobSpec, JobSpecError, validate_job_spec
from strands_robots.station.model import AnswerType, ScoringItemDefinition, ScoringSheet, Task

__all__ = [
    "load_job_file",
    "job_spec_from_yaml",
    "job_spec_from_mapping",
    "job_spec_to_mapping",
    "task_from_mapping",
    "task_to_mapping",
    "sheet_from_items",
    "sheet_to_items",
]

_JOB_KEYS = frozenset({"job_id", "client_id", "station_id", "episodes_total", "duration_s", "control_frequency",
                       "max_discards", "intervals", "record", "policy", "tasks", "images", "compare"})
# images: {key: the task parameter it sets in every task that does not set it} (strands_robots.cameras.request)
_IMAGE_KEYS = {"cameras": "cameras", "format": "image_format", "quality": "image_quality"}
_POLICY_KEYS = frozenset({"provider", "config"})
_TASK_KEYS = frozenset({"task_id", "instruction", "layout", "parameters", "scoring"})
_ITEM_KEYS = frozenset({"name", "question", "answer_type", "max_points", "choices", "choice_points",
                        "points_per_unit", "success_answer"})


def _unknown(data: Mapping, allowed: frozenset) -> list:
    return sorted(str(k) for k in data if k not in allowed)


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    raise TypeError(type(value).__name__)


def _number(value: Any, what: str, field: str, index: "int | None") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise JobSpecError(field, f"{what} must be a finite number, got {value!r}", index)
    return float(value)


# -- score sheet ------------------------------------------------------------------------------------------------
def sheet_from_items(items: Any, task_index: "int | None" = None) -> ScoringSheet:
    """Build a :class:`ScoringSheet` from a list of item mappings (types checked here, rules in score_sheet)."""
    if not isinstance(items, (list, tuple)) or not items:
        raise JobSpecError("scoring", "must be a non-empty list of items, the success item first", task_index)
    out = []
    for i, raw in enumerate(items):
        if not isinstance(raw, Mapping):
            raise JobSpecError("scoring", f"item #{i} must be a mapping, got {type(raw).__name__}", task_index)
        name = raw.get("name", f"#{i}")
        where = f"item {name!r}"
        unknown = _unknown(raw, _ITEM_KEYS)
        if unknown:
            raise JobSpecError("scoring", f"{where}: unknown keys {unknown}; allowed: {sorted(_ITEM_KEYS)}",
                               task_index)
        kind = raw.get("answer_type")
        try:
            answer_type = AnswerType(kind)
        except ValueError:
            raise JobSpecError("scoring", f"{where}: answer_type must be one of "
                                          f"{', '.join(t.value for t in AnswerType)}, got {kind!r}",
                               task_index) from None
        choices = raw.get("choices", ())
        points = raw.get("choice_points", ())
        if not isinstance(choices, (list, tuple)) or not isinstance(points, (list, tuple)):
            raise JobSpecError("scoring", f"{where}: choices and choice_points must be lists", task_index)
        try:
            success_answer = _scalar_text(raw.get("success_answer", ""))
        except TypeError:
            raise JobSpecError("scoring", f"{where}: success_answer must be a scalar", task_index) from None
        if answer_type is AnswerType.YES_NO and isinstance(raw.get("success_answer"), bool):
            success_answer = "yes" if raw["success_answer"] else "no"  # YAML reads a bare yes as True
        out.append(ScoringItemDefinition(
            name=name if isinstance(name, str) else str(name),
            question=raw.get("question", ""),
            answer_type=answer_type,
            max_points=_number(raw.get("max_points", 0.0), f"{where}: max_points", "scoring", task_index),
            choices=tuple(choices),
            choice_points=tuple(_number(p, f"{where}: choice_points", "scoring", task_index) for p in points),
            points_per_unit=_number(raw.get("points_per_unit", 0.0), f"{where}: points_per_unit", "scoring",
                                    task_index),
            success_answer=success_answer,
        ))
    return ScoringSheet(tuple(out))


def sheet_to_items(sheet: ScoringSheet) -> list:
    """Return the item mappings of a sheet (the inverse of :func:`sheet_from_items`)."""
    items = []
    for item in sheet.items:
        entry: dict = {"name": item.name, "question": item.question, "answer_type": item.answer_type.value,
                       "max_points": item.max_points}
        if item.choices:
            entry["choices"] = list(item.choices)
            entry["choice_points"] = list(item.choice_points)
        if item.points_per_unit:
            entry["points_per_unit"] = item.points_per_unit
        if item.success_answer:
            entry["success_answer"] = item.success_answer
        items.append(entry)
    return items


# -- task -------------------------------------------------------------------------------------------------------
def task_from_mapping(data: Any, index: int) -> Task:
    """Build a :class:`Task` from its mapping (``tasks[index]``); types checked, rules in ``validate_task``."""
    if not isinstance(data, Mapping):
        raise JobSpecError("task", f"must be a mapping, got {type(data).__name__}", index)
    unknown = _unknown(data, _TASK_KEYS)
    if unknown:
        raise JobSpecError("task", f"unknown keys {unknown}; allowed: {sorted(_TASK_KEYS)}", index)
    params = data.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise JobSpecError("parameters", f"must be a mapping, got {type(params).__name__}", index)
    parameters = {}
    for key, value in params.items():
        try:
            parameters[str(key)] = _scalar_text(value)
        except TypeError:
            raise JobSpecError(f"parameters[{key!r}]", f"must be a scalar, got {type(value).__name__}",
                               index) from None
    return Task(
        task_id=data.get("task_id", ""),
        instruction=data.get("instruction", ""),
        layout=data.get("layout", "") if data.get("layout") is not None else "",
        parameters=parameters,
        scoring=sheet_from_items(data.get("scoring"), index),
    )


def task_to_mapping(task: Task) -> dict:
    """Return the mapping of a task (the inverse of :func:`task_from_mapping`)."""
    return {"task_id": task.task_id, "instruction": task.instruction, "layout": task.layout,
            "parameters": dict(task.parameters), "scoring": sheet_to_items(task.scoring)}


# -- job --------------------------------------------------------------------------------------------------------
def job_spec_from_mapping(data: Any, **overrides: Any) -> JobSpec:
    """Build a validated :class:`JobSpec` from a job mapping.

    :param overrides: job-level fields that replace the mapping's (e.g. ``job_id``, ``client_id`` assigned
        by the relay), applied before validation.
    :raises JobSpecError: naming the task index (when a task is at fault), the field and the reason.
    """
    if not isinstance(data, Mapping):
        raise JobSpecError("job", f"must be a mapping, got {type(data).__name__}")
    data = dict(data)
    data.update(overrides)
    unknown = _unknown(data, _JOB_KEYS)
    if unknown:
        raise JobSpecError("job", f"unknown keys {unknown}; allowed: {sorted(_JOB_KEYS)}")
    policy = data.get("policy")
    if not isinstance(policy, Mapping):
        raise JobSpecError("policy", "must be a mapping with provider (and optional config)")
    unknown = _unknown(policy, _POLICY_KEYS)
    if unknown:
        raise JobSpecError("policy", f"unknown keys {unknown}; allowed: {sorted(_POLICY_KEYS)}")
    config = policy.get("config") or {}
    if not isinstance(config, Mapping):
        raise JobSpecError("policy_config", f"must be a mapping, got {type(config).__name__}")
    tasks = data.get("tasks")
    if not isinstance(tasks, (list, tuple)) or not tasks:
        raise JobSpecError("tasks", "a job needs a non-empty list of tasks")
    tasks = _with_images(data.get("images"), tasks)
    spec = JobSpec(
        job_id=data.get("job_id", ""),
        client_id=data.get("client_id", ""),
        station_id=data.get("station_id", ""),
        tasks=tuple(task_from_mapping(t, i) for i, t in enumerate(tasks)),
        episodes_total=data.get("episodes_total", 0),
        policy_provider=policy.get("provider", ""),
        policy_config=dict(config),
        duration_s=data.get("duration_s", 10.0),
        control_frequency=data.get("control_frequency", 50.0),
        max_discards=data.get("max_discards", 10),
        intervals=data.get("intervals", INTERVAL_METHODS[0]),
        comparison=_comparison(data.get("compare")),
        record=data.get("record", False),
    )
    return validate_job_spec(spec)


def _comparison(data: Any) -> Optional[CompareRequest]:
    """Read a job's ``compare`` (its slots, stop rule and suite), or None."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise JobSpecError("compare", f"must be a mapping, got {type(data).__name__}")
    suite = data.get("suite", "")
    try:
        compare = compare_from_mapping({k: v for k, v in data.items() if k != "suite"})
    except TeamJobRefused as exc:
        raise JobSpecError(exc.field, exc.reason) from None
    return dataclasses.replace(compare, suite=str(suite))


def _with_images(images: Any, tasks: Any) -> list:
    """Return the tasks with the job's ``images`` settings as parameters of every task that does not set them."""
    if images is None:
        return list(tasks)
    if not isinstance(images, Mapping):
        raise JobSpecError("images", f"must be a mapping ({', '.join(_IMAGE_KEYS)}), got {type(images).__name__}")
    unknown = _unknown(images, frozenset(_IMAGE_KEYS))
    if unknown:
        raise JobSpecError("images", f"unknown keys {unknown}; allowed: {sorted(_IMAGE_KEYS)}")
    defaults = {}
    for key, value in images.items():
        try:
            defaults[_IMAGE_KEYS[key]] = _scalar_text(value)
        except TypeError:
            raise JobSpecError(f"images.{key}", f"must be a scalar, got {type(value).__name__}") from None
    out = []
    for task in tasks:
        if isinstance(task, Mapping) and isinstance(task.get("parameters") or {}, Mapping):
            task = dict(task, parameters={**defaults, **dict(task.get("parameters") or {})})
        out.append(task)
    return out


def job_spec_to_mapping(spec: JobSpec) -> dict:
    """Return the mapping of a job (the inverse of :func:`job_spec_from_mapping`; JSON- and YAML-compatible)."""
    return {
        "job_id": spec.job_id,
        "client_id": spec.client_id,
        "station_id": spec.station_id,
        "episodes_total": spec.episodes_total,
        "duration_s": spec.duration_s,
        "control_frequency": spec.control_frequency,
        "max_discards": spec.max_discards,
        "intervals": spec.intervals,
        "record": spec.record,
        "policy": {"provider": spec.policy_provider, "config": dict(spec.policy_config)},
        "tasks": [task_to_mapping(t) for t in spec.tasks],
        **({} if spec.comparison is None else {"compare": {**compare_to_mapping(spec.comparison),
                                                           "suite": spec.comparison.suite}}),
    }


def job_spec_from_yaml(text: str, **overrides: Any) -> JobSpec:
    """Build a validated :class:`JobSpec` from YAML text (``yaml.safe_load``)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise JobSpecError("job", f"not valid YAML: {exc}") from exc
    return job_spec_from_mapping(data, **overrides)


def load_job_file(path: str, **overrides: Any) -> JobSpec:
    """Load a validated :class:`JobSpec` from a YAML job file."""
    with open(path, encoding="utf-8") as handle:
        return job_spec_from_yaml(handle.read(), **overrides)
