"""A station's suites: its benchmarks, one YAML file each in its suites directory, validated when loaded.

A suite file (``config/suites/demo.yaml`` is the demo station's)::

    suite: demo                       # id: [A-Za-z0-9._-]{1,64}
    title: Demo bench                 # one line
    headline: success_at_end          # success_at_end | success_ever: which success the rates use
    team_may_choose:                  # the only settings a team's job may give for this suite's tasks
      cameras: true                   # the camera request (cameras / image_format / image_quality)
      control_frequency: {min: 25, max: 50}
    tasks:
      - task_id: hold_pose
        instruction: hold the right wrist steady
        layout: empty table
        budget_s: 2.0                 # the episode budget
        scene: {object_x: 0.4}        # object_x, object_y, camera_cover
        start_pose: {timeout_s: 5, tolerance_rad: 0.05}       # optional
        success: {when: "right.joint_4.pos > 0.95"}           # station.success_predicate's forms
        scoring: [ ... ]              # the sheet, the success item first
        seeds: [11, 12, 13]           # or seed_rule: {first: 100, count: 50}; trial i uses seed i
        operator: {takeover_at_s: 0.5, discard: true, answers: {motion: smooth}}   # simulated profile only
        faults: {stop_heartbeat_at_s: 1.0}                                          # simulated profile only
        policy_hints: {end_after_steps: 40}   # reach the policy as policy.<key> task parameters

A suite task becomes the station's :class:`~strands_robots.station.model.Task` (:meth:`Suite.station_task`):
the suite's settings turn into the task parameters the episode procedure, the scripted operator and the rollout
already read (``duration_s``, ``success_when``, ``operator_*``, ``answer.*``, ``fault.*``, ``seed``,
``object_*`` ...), each checked by ``station.task_parameters`` when the file loads. A ``hardware`` station
refuses a suite whose tasks carry ``operator`` or ``faults`` settings (a person operates it; nothing is
injected). Every refusal is a :class:`SuiteError` naming the file, the task and the key. Pure: no rclpy.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from strands_robots import validation as rules
from strands_robots.job_model.offer import (
    CHOOSABLE,
    HARDWARE,
    HEADLINES,
    PROFILES,
    ChoiceRule,
    OfferedTask,
    SuiteOffer,
)
from strands_robots.station.model import ScoringSheet, Task
from strands_robots.station.task_parameters import check_task_parameters

__all__ = ["SuiteError", "SuiteTask", "Suite", "load_suite", "load_suites", "suite_from_mapping", "MAX_TRIALS"]

_SUITE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
#: Seeds (trials) one suite task may have.
MAX_TRIALS = int(rules.JOB_LIMITS["episodes_total"].maximum)
_SUITE_KEYS = ("suite", "title", "headline", "team_may_choose", "tasks")
_TASK_KEYS = ("task_id", "instruction", "layout", "budget_s", "scene", "start_pose", "success", "scoring", "seeds",
              "seed_rule", "operator", "faults", "policy_hints")
# suite section -> {suite key: the task parameter it sets}
_SCENE = {"object_x": "object_x", "object_y": "object_y", "camera_cover": "camera_cover"}
_START_POSE = {"timeout_s": "start_pose_timeout_s", "tolerance_rad": "start_pose_tolerance_rad"}
_SUCCESS = {"when": "success_when"}
_OPERATOR = {"takeover_at_s": "operator_takeover_at_s", "takeover_for_s": "operator_takeover_for_s",
             "claim_at_s": "operator_claim_at_s", "discard": "operator_discard", "score": "operator_score",
             "answers": None}
_FAULTS = {"stop_heartbeat_at_s": "fault.stop_heartbeat_at_s", "policy_lost_at_s": "fault.policy_lost_at_s"}


class SuiteError(ValueError):
    """A suite file was refused: ``path``, ``task`` (None for a suite-level key), ``key`` and ``reason``."""

    def __init__(self, path: str, key: str, reason: str, task: Optional[str] = None) -> None:
        self.path, self.key, self.reason, self.task = path, key, reason, task
        where = f"task {task!r}: " if task is not None else ""
        super().__init__(f"{path}: {where}{key}: {reason}")


@dataclass(frozen=True)
class SuiteTask:
    """One task of a suite: what the station runs for each trial (``parameters`` without the seed)."""

    task_id: str
    instruction: str
    layout: str
    budget_s: float
    scoring: ScoringSheet
    seeds: Tuple[int, ...]
    parameters: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def station_task(self, trial: int, choose: Mapping[str, str] = MappingProxyType({})) -> Task:
        """Return the station's Task of trial ``trial`` (0-based): the suite's parameters, seed i, the choices."""
        if not 0 <= trial < len(self.seeds):
            raise IndexError(f"task {self.task_id!r} has {len(self.seeds)} trial(s); trial {trial} asked")
        params = {**dict(choose), **dict(self.parameters), "seed": str(self.seeds[trial])}
        return Task(self.task_id, self.instruction, self.layout, params, self.scoring)

    def offered(self) -> OfferedTask:
        return OfferedTask(self.task_id, self.instruction, self.layout, len(self.seeds), self.budget_s,
                           tuple(item.question for item in self.scoring.items))


@dataclass(frozen=True)
class Suite:
    """A validated suite: its id, title, headline success, tasks and what a team may choose."""

    suite: str
    title: str
    headline: str
    tasks: Tuple[SuiteTask, ...]
    team_may_choose: Tuple[ChoiceRule, ...] = ()
    path: str = ""

    def task(self, task_id: str) -> Optional[SuiteTask]:
        return next((t for t in self.tasks if t.task_id == task_id), None)

    def offer(self) -> SuiteOffer:
        """Return what the relay lists of this suite (no predicates, points, seeds, operator or fault settings)."""
        return SuiteOffer(self.suite, self.title, self.headline, tuple(t.offered() for t in self.tasks),
                          self.team_may_choose)


# -- reading ----------------------------------------------------------------------------------------------------
def _unknown(path: str, data: Mapping, allowed: Any, what: str, task: Optional[str] = None) -> None:
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), list(allowed), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SuiteError(path, f"{what}{key}" if what else str(key),
                             f"unknown key{hint}; allowed: {', '.join(allowed)}", task)


def _mapping(path: str, value: Any, key: str, task: Optional[str] = None) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SuiteError(path, key, f"must be a mapping, got {type(value).__name__}", task)
    return value


def _text(path: str, value: Any, key: str, task: Optional[str] = None, *, required: bool = True,
          limit: int = 1024) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()) or "\n" in value:
        raise SuiteError(path, key, f"must be a {'non-empty ' if required else ''}one-line string, got {value!r}",
                         task)
    if len(value) > limit:
        raise SuiteError(path, key, f"is {len(value)} characters long; at most {limit} are allowed", task)
    return value


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    return json.dumps(value)


def _choices(path: str, data: Any) -> Tuple[ChoiceRule, ...]:
    data = _mapping(path, data, "team_may_choose")
    out = []
    for key, value in data.items():
        where = f"team_may_choose.{key}"
        if key not in CHOOSABLE:
            raise SuiteError(path, where, f"not a setting a team may choose; choosable: {', '.join(CHOOSABLE)}")
        if value is False or value is None:
            continue
        if value is True:
            out.append(ChoiceRule(key))
            continue
        if key != "control_frequency" or not isinstance(value, Mapping) or set(value) - {"min", "max"}:
            raise SuiteError(path, where, "true, or for control_frequency {min: <Hz>, max: <Hz>}")
        limit = rules.RUN_LIMITS["control_frequency"]
        bounds = {}
        for end in ("min", "max"):
            if end in value:
                number = value[end]
                if isinstance(number, bool) or not isinstance(number, (int, float)) or not limit.contains(number):
                    raise SuiteError(path, f"{where}.{end}", f"{number!r} refused: {limit.allowed()}")
                bounds[end] = float(number)
        if "min" in bounds and "max" in bounds and bounds["min"] > bounds["max"]:
            raise SuiteError(path, where, f"min {bounds['min']:g} is above max {bounds['max']:g}")
        out.append(ChoiceRule(key, bounds.get("min"), bounds.get("max")))
    return tuple(out)


def _seeds(path: str, data: Mapping, task: str) -> Tuple[int, ...]:
    limit = rules.RUN_LIMITS["seed"]
    if ("seeds" in data) == ("seed_rule" in data):
        raise SuiteError(path, "seeds", "give seeds: [...] or seed_rule: {first, count} (trial i uses seed i)", task)
    if "seeds" in data:
        seeds = data["seeds"]
        if not isinstance(seeds, (list, tuple)) or not seeds or len(seeds) > MAX_TRIALS:
            raise SuiteError(path, "seeds", f"must be a list of 1..{MAX_TRIALS} seeds", task)
    else:
        rule = _mapping(path, data["seed_rule"], "seed_rule", task)
        _unknown(path, rule, ("first", "count"), "seed_rule.", task)
        first, count = rule.get("first", 0), rule.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_TRIALS:
            raise SuiteError(path, "seed_rule.count", f"{count!r} refused: an integer in [1, {MAX_TRIALS}]", task)
        if isinstance(first, bool) or not isinstance(first, int):
            raise SuiteError(path, "seed_rule.first", f"{first!r} refused: must be an integer", task)
        seeds = list(range(first, first + count))
    for index, seed in enumerate(seeds):
        if isinstance(seed, bool) or not isinstance(seed, int) or not limit.contains(seed):
            raise SuiteError(path, "seeds" if "seeds" in data else "seed_rule",
                             f"seed #{index} ({seed!r}) refused: {limit.allowed()}", task)
    if len(set(seeds)) != len(seeds):
        raise SuiteError(path, "seeds", "every trial has its own seed: a seed is listed twice", task)
    return tuple(int(s) for s in seeds)


def _check(path: str, task: str, key: str, params: Dict[str, str], sheet: ScoringSheet) -> None:
    """Check the parameters one suite key set, naming the suite key on a refusal."""
    try:
        check_task_parameters(params, sheet)
    except rules.ValueRefused as exc:
        raise SuiteError(path, key, exc.reason, task) from None


def _task(path: str, data: Any, index: int, profile: str) -> SuiteTask:
    from strands_robots.station.job import JobSpecError
    from strands_robots.station.job_file import sheet_from_items
    from strands_robots.station.score_sheet import ScoreSheetError, validate_sheet

    if not isinstance(data, Mapping):
        raise SuiteError(path, f"tasks[{index}]", f"must be a mapping, got {type(data).__name__}")
    task_id = _text(path, data.get("task_id"), f"tasks[{index}].task_id", limit=128)
    _unknown(path, data, _TASK_KEYS, "", task_id)
    instruction = _text(path, data.get("instruction"), "instruction", task_id, limit=4096)
    layout = _text(path, data.get("layout"), "layout", task_id, required=False)
    try:
        rules.check_task_text(task_id, instruction, layout)
    except rules.ValueRefused as exc:
        raise SuiteError(path, exc.field, exc.reason, task_id) from None
    try:
        sheet = sheet_from_items(data.get("scoring"))
        validate_sheet(sheet)
    except (JobSpecError, ScoreSheetError) as exc:
        raise SuiteError(path, "scoring", getattr(exc, "reason", str(exc)), task_id) from None
    budget = data.get("budget_s")
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not math.isfinite(budget):
        raise SuiteError(path, "budget_s", f"{budget!r} refused: the episode budget, a number of seconds", task_id)
    params: Dict[str, str] = {}

    def put(key: str, param: str, value: Any) -> None:
        one = {param: _scalar(value)}
        _check(path, task_id, key, one, sheet)
        params.update(one)

    put("budget_s", "duration_s", float(budget))
    for section, table in (("scene", _SCENE), ("start_pose", _START_POSE), ("success", _SUCCESS),
                           ("operator", _OPERATOR), ("faults", _FAULTS)):
        values = _mapping(path, data.get(section), section, task_id)
        if values and section in ("operator", "faults") and profile == HARDWARE:
            raise SuiteError(path, section, f"a hardware station runs no scripted operator and injects no faults: "
                                            f"{section} settings belong to a simulated station's suites", task_id)
        _unknown(path, values, tuple(table), f"{section}.", task_id)
        for key, value in values.items():
            if section == "operator" and key == "answers":
                for item, answer in _mapping(path, value, "operator.answers", task_id).items():
                    put(f"operator.answers.{item}", f"answer.{item}", answer)
                continue
            put(f"{section}.{key}", table[key], value)
    for key, value in _mapping(path, data.get("policy_hints"), "policy_hints", task_id).items():
        put(f"policy_hints.{key}", f"policy.{key}", value)
    seeds = _seeds(path, data, task_id)
    return SuiteTask(task_id, instruction, layout, float(budget), sheet, seeds, params)


def suite_from_mapping(data: Any, path: str = "<suite>", profile: str = HARDWARE) -> Suite:
    """Build a validated :class:`Suite` from a suite file's mapping, for a station of ``profile``."""
    if profile not in PROFILES:
        raise SuiteError(path, "profile", f"must be one of {', '.join(PROFILES)}, got {profile!r}")
    if not isinstance(data, Mapping):
        raise SuiteError(path, "suite", f"a suite file holds a mapping, got {type(data).__name__}")
    _unknown(path, data, _SUITE_KEYS, "")
    suite_id = data.get("suite")
    if not isinstance(suite_id, str) or not _SUITE_ID.match(suite_id):
        raise SuiteError(path, "suite", f"must be 1-64 letters, digits, '.', '_', '-', got {suite_id!r}")
    title = _text(path, data.get("title", suite_id), "title", limit=256)
    headline = data.get("headline", HEADLINES[0])
    if headline not in HEADLINES:
        raise SuiteError(path, "headline", f"must be one of {', '.join(HEADLINES)}, got {headline!r}")
    tasks_raw = data.get("tasks")
    if not isinstance(tasks_raw, (list, tuple)) or not tasks_raw:
        raise SuiteError(path, "tasks", "a suite has at least one task")
    tasks = tuple(_task(path, t, i, profile) for i, t in enumerate(tasks_raw))
    seen: dict = {}
    for task in tasks:
        if task.task_id in seen:
            raise SuiteError(path, "task_id", "two tasks of the suite have this id", task.task_id)
        seen[task.task_id] = task
    return Suite(suite_id, title, headline, tasks, _choices(path, data.get("team_may_choose")), path)


def load_suite(path: str, profile: str = HARDWARE) -> Suite:
    """Read and validate one suite file (``yaml.safe_load``)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise SuiteError(path, "file", f"cannot be read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise SuiteError(path, "file", f"not valid YAML: {exc}") from None
    return suite_from_mapping(data, path, profile)


def load_suites(directory: str, profile: str = HARDWARE,
                on_refused: Optional[Callable[[SuiteError], None]] = None) -> Dict[str, Suite]:
    """Read every ``*.yaml`` / ``*.yml`` suite file of ``directory`` (none: no suites); ids must differ.

    :param on_refused: called with each refused file's :class:`SuiteError`, which is then left out (the station
        offers the rest); None: the first refusal raises.
    """
    if not directory or not os.path.isdir(directory):
        return {}
    suites: Dict[str, Suite] = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith((".yaml", ".yml")):
            continue
        try:
            suite = load_suite(os.path.join(directory, name), profile)
            if suite.suite in suites:
                raise SuiteError(suite.path, "suite", f"{suite.suite!r} is also the id of {suites[suite.suite].path}")
        except SuiteError as exc:
            if on_refused is None:
                raise
            on_refused(exc)
            continue
        suites[suite.suite] = suite
    return suites
