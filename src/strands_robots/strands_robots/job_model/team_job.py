"""A team's evaluation job: the suite tasks it names and how many trials each, its choices, its own tasks.

The job file (``strands-robots job submit``, ``demo-job``)::

    station_id: sim_station
    suite: demo                                   # one of the suites the station offers (job suites)
    tasks: [{task: hold_pose, trials: 2}, {task: reach_cube, trials: 5}]   # run entry by entry, in this order
    choose: {cameras: "scene:224x224,wrist", image_format: jpeg, control_frequency: 50}  # team_may_choose only
    free_form:                                    # where the station allows: the team's own tasks, scored only
      - task_id: wave                             # by the station's operator (a scripted operator keeps them
        instruction: wave at the camera           # unscored)
        layout: empty table                       # optional
        trials: 2                                 # optional, default 1
        budget_s: 5                               # optional: the episode budget (default: the station's)
        scoring:                                  # the questions the operator answers, the success item first
          - {name: waved, question: "Did it wave?", answer_type: yes_no, max_points: 1, success_answer: "yes"}
    policy: {provider: scripted, config: {mode: torque_ramp}}   # the team's policy, served by the client
    max_discards: 2                               # optional: discarded episodes tolerated (default 10)
    intervals: wilson                             # optional: the rates' 95 % interval, wilson or clopper-pearson
    compare: {slots: [vision, blind], stop: {when: separated, alpha: 0.05, max_blocks: 40}}   # optional: A/B
    record: true                                  # optional: each episode's recording (MCAP) comes home: job
                                                  # recordings downloads them (default false)
    job_id: my_job                                # optional; client_id is the token's team

Trial ``i`` of a suite task runs with the suite's seed ``i`` (a task named again goes on with its next
trials); the station fills in everything else from its suite file (instruction, scene, start pose, budget,
predicate, sheet, operator and fault settings). A key that would let a team score itself, inject faults or drive
the scripted operator is refused naming it (:mod:`~strands_robots.job_model.team_keys`), and so is any key this
format does not know.

:func:`team_job_from_mapping` checks what a job says on its own; :func:`check_against_offer` checks it against
what its station offers (the relay does, and the client can before it submits). Pure: the standard library;
PyYAML only in :func:`load_team_job`.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Optional, Tuple

from strands_robots.job_model.compare import CompareRequest, compare_from_mapping, compare_to_mapping
from strands_robots.job_model.offer import CAMERA_CHOICES, CHOOSABLE, StationOffer
from strands_robots.job_model.team_keys import (
    CHOICE,
    FREE_FORM_TASK,
    JOB,
    SUITE_TASK,
    TASK_PARAMETER,
    TeamJobRefused,
    check_team_key,
)

__all__ = [
    "MAX_EPISODES",
    "MAX_DISCARDS",
    "SuiteTrials",
    "FreeFormTask",
    "TeamJob",
    "TeamJobRefused",
    "team_job_from_mapping",
    "team_job_from_yaml",
    "load_team_job",
    "team_job_to_mapping",
    "check_against_offer",
    "free_form_parameters",
]

#: Episodes one job may ask for (every trial of every task): ``validation.JOB_LIMITS['episodes_total']``.
MAX_EPISODES = 100000
#: How a job's success rates get their 95 % interval (the first is the default).
INTERVAL_METHODS = ("wilson", "clopper-pearson")
#: Why a station whose config forbids recordings leaving it refuses a job with ``record: true`` (the relay and the
#: station say the same).
RECORDINGS_REFUSED = ("station {station!r} does not send recordings to teams (its team_recordings parameter is "
                      "false); submit the job without record: true")
#: Discarded episodes a job may tolerate at most: ``validation.JOB_LIMITS['max_discards']``.
MAX_DISCARDS = 1000
#: A job id a team names: letters, digits, '.', '_', '-', starting with a letter or digit, at most 128.
JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_ID = re.compile(JOB_ID_PATTERN)
#: The longest each text field may be, in characters.
TEXT_LIMITS = {"station_id": 128, "suite": 64, "task": 128, "task_id": 128, "instruction": 4096, "layout": 1024,
               "policy.provider": 128, "job_id": 128, "client_id": 128}

_JOB_KEYS = ("job_id", "client_id", "station_id", "suite", "tasks", "choose", "free_form", "policy", "max_discards",
             "intervals", "compare", "record")
# a key of the job format before suites, and where its setting went
_MOVED = {
    "episodes_total": "the episodes are each task's trials: tasks: [{task: <id>, trials: <n>}]",
    "duration_s": "a suite task's budget is the suite's; a free_form task has budget_s",
    "control_frequency": "choose: {control_frequency: <Hz>} (where the suite lets the team choose it)",
    "images": "choose: {cameras: ..., image_format: ..., image_quality: ...} (where the suite lets the team)",
}
_SUITE_TASK_KEYS = ("task", "trials")
_FREE_FORM_KEYS = ("task_id", "instruction", "layout", "scoring", "trials", "budget_s")
_POLICY_KEYS = ("provider", "config")


@dataclass(frozen=True)
class SuiteTrials:
    """``trials`` episodes of the suite task ``task`` (trial i with the suite's seed i)."""

    task: str
    trials: int = 1


@dataclass(frozen=True)
class FreeFormTask:
    """A team's own task: scored only by the station's operator. ``scoring`` holds the sheet's item mappings."""

    task_id: str
    instruction: str
    scoring: Tuple[Mapping[str, Any], ...]
    layout: str = ""
    trials: int = 1
    budget_s: Optional[float] = None


@dataclass(frozen=True)
class TeamJob:
    """A team's job, checked on its own (:func:`team_job_from_mapping`); ``episodes`` is every trial's."""

    station_id: str
    suite: str = ""
    tasks: Tuple[SuiteTrials, ...] = ()
    free_form: Tuple[FreeFormTask, ...] = ()
    choose: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    policy_provider: str = ""
    policy_config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    max_discards: Optional[int] = None
    intervals: Optional[str] = None
    record: bool = False
    job_id: str = ""
    client_id: str = ""
    compare: Optional[CompareRequest] = None

    def __post_init__(self) -> None:
        for name in ("choose", "policy_config"):
            value = getattr(self, name)
            if not isinstance(value, MappingProxyType):
                object.__setattr__(self, name, MappingProxyType(dict(value)))

    @property
    def control_frequency(self) -> Optional[float]:
        """The control rate the team chose (Hz), or None for the station's."""
        text = self.choose.get("control_frequency")
        return None if text is None else float(text)

    @property
    def blocks(self) -> int:
        """A comparison job's blocks at most (one per suite trial, up to ``stop.max_blocks``); 0 for other jobs."""
        if self.compare is None:
            return 0
        return self.compare.blocks(sum(t.trials for t in self.tasks))

    @property
    def episodes(self) -> int:
        """Episodes the job asks for: every trial of every suite task and free-form task.

        A comparison job: every slot once in each of its blocks, at most.
        """
        if self.compare is not None:
            return self.blocks * len(self.compare.slots)
        return sum(t.trials for t in self.tasks) + sum(t.trials for t in self.free_form)


# -- reading ----------------------------------------------------------------------------------------------------
def _refuse_unknown(data: Mapping, allowed: Tuple[str, ...], place: str, where: str) -> None:
    for key in data:
        name = str(key)
        field_name = f"{where}.{name}" if where else name
        check_team_key(name, place, field_name)
        if name in allowed:
            continue
        if place == JOB and name in _MOVED:
            raise TeamJobRefused(field_name, f"{name!r} is not a job key: {_MOVED[name]}")
        close = difflib.get_close_matches(name, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TeamJobRefused(field_name, f"unknown key {name!r}{hint}; allowed: {', '.join(allowed)}")


def _text(value: Any, field_name: str, *, required: bool = False, limit: int = 1024) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise TeamJobRefused(field_name, f"must be a {'non-empty ' if required else ''}string, got {value!r}")
    if len(value) > limit:
        raise TeamJobRefused(field_name, f"is {len(value)} characters long; at most {limit} are allowed")
    return value


def _count(value: Any, field_name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise TeamJobRefused(field_name, f"{value!r} refused: must be an integer in [{low}, {high}]")
    return value


def _scalar_text(value: Any, field_name: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise TeamJobRefused(field_name, f"{value!r} refused: must be finite")
        return str(value)
    if isinstance(value, str):
        return value
    raise TeamJobRefused(field_name, f"must be a scalar, got {type(value).__name__}")


def _suite_task(data: Any, index: int) -> SuiteTrials:
    where = f"tasks[{index}]"
    if isinstance(data, str):  # a bare task id: one trial
        return SuiteTrials(_text(data, where, required=True, limit=TEXT_LIMITS["task"]), 1)
    if not isinstance(data, Mapping):
        raise TeamJobRefused(where, f"must be {{task: <suite task id>, trials: <n>}}, got {type(data).__name__}")
    if "task_id" in data and "task" not in data:
        params = data.get("parameters")  # the old shape: a refusal of a station key says the most
        for key in params if isinstance(params, Mapping) else ():
            check_team_key(str(key), TASK_PARAMETER, f"{where}.parameters[{str(key)!r}]")
        raise TeamJobRefused(where, "a suite task is {task: <suite task id>, trials: <n>}; a team's own task "
                                    "(task_id, instruction, scoring) belongs in free_form")
    _refuse_unknown(data, _SUITE_TASK_KEYS, SUITE_TASK, where)
    return SuiteTrials(_text(data.get("task"), f"{where}.task", required=True, limit=TEXT_LIMITS["task"]),
                       _count(data.get("trials", 1), f"{where}.trials", 1, MAX_EPISODES))


def _free_form(data: Any, index: int) -> FreeFormTask:
    where = f"free_form[{index}]"
    if not isinstance(data, Mapping):
        raise TeamJobRefused(where, f"must be a mapping, got {type(data).__name__}")
    _refuse_unknown(data, _FREE_FORM_KEYS, FREE_FORM_TASK, where)
    scoring = data.get("scoring")
    if not isinstance(scoring, (list, tuple)) or not scoring or not all(isinstance(i, Mapping) for i in scoring):
        raise TeamJobRefused(f"{where}.scoring", "must be a non-empty list of item mappings, the success item first "
                                                 "(the questions the station's operator answers)")
    budget = data.get("budget_s")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                               or not math.isfinite(budget) or budget <= 0):
        raise TeamJobRefused(f"{where}.budget_s", f"{budget!r} refused: must be a number of seconds > 0")
    return FreeFormTask(
        task_id=_text(data.get("task_id"), f"{where}.task_id", required=True, limit=TEXT_LIMITS["task_id"]),
        instruction=_text(data.get("instruction"), f"{where}.instruction", required=True,
                          limit=TEXT_LIMITS["instruction"]),
        layout=_text(data.get("layout"), f"{where}.layout", limit=TEXT_LIMITS["layout"]),
        scoring=tuple(MappingProxyType(dict(i)) for i in scoring),
        trials=_count(data.get("trials", 1), f"{where}.trials", 1, MAX_EPISODES),
        budget_s=None if budget is None else float(budget),
    )


def team_job_from_mapping(data: Any, **overrides: Any) -> TeamJob:
    """Build a :class:`TeamJob` from a job file's mapping; ``overrides`` replace fields (``station_id`` ...).

    :raises TeamJobRefused: naming the key (``tasks[1].trials``, ``choose.seed``) and why.
    """
    if not isinstance(data, Mapping):
        raise TeamJobRefused("job", f"a job file holds a mapping, got {type(data).__name__}")
    _refuse_unknown(data, _JOB_KEYS, JOB, "")
    raw_tasks = data.get("tasks") or []
    raw_free = data.get("free_form") or []
    if not isinstance(raw_tasks, (list, tuple)):
        raise TeamJobRefused("tasks", f"must be a list of {{task, trials}}, got {type(raw_tasks).__name__}")
    if not isinstance(raw_free, (list, tuple)):
        raise TeamJobRefused("free_form", f"must be a list of tasks, got {type(raw_free).__name__}")
    suite = _text(data.get("suite"), "suite", limit=TEXT_LIMITS["suite"])
    if raw_tasks and not suite:
        raise TeamJobRefused("suite", "tasks name a suite's tasks: say which suite (job suites lists them)")
    if suite and not raw_tasks:
        raise TeamJobRefused("tasks", f"name at least one task of suite {suite!r} ({{task: <id>, trials: <n>}})")
    tasks = tuple(_suite_task(t, i) for i, t in enumerate(raw_tasks))
    free = tuple(_free_form(t, i) for i, t in enumerate(raw_free))
    if not tasks and not free:
        raise TeamJobRefused("tasks", "a job names at least one suite task (suite, tasks) or free_form task")
    seen = {task.task for task in tasks}
    free_ids: dict = {}
    for index, task in enumerate(free):
        if task.task_id in free_ids or task.task_id in seen:
            raise TeamJobRefused(f"free_form[{index}].task_id", f"{task.task_id!r} names another task of this job")
        free_ids[task.task_id] = index
    choose_raw = data.get("choose") or {}
    if not isinstance(choose_raw, Mapping):
        raise TeamJobRefused("choose", f"must be a mapping of settings, got {type(choose_raw).__name__}")
    choose = {}
    for key, value in choose_raw.items():
        name = str(key)
        check_team_key(name, CHOICE, f"choose.{name}")
        if name not in CHOOSABLE:
            raise TeamJobRefused(f"choose.{name}", f"{name!r} is not a setting a team may choose; choosable: "
                                                   f"{', '.join(CHOOSABLE)} (where the suite allows)")
        choose[name] = _scalar_text(value, f"choose.{name}")
    policy = data.get("policy") or {}
    if not isinstance(policy, Mapping):
        raise TeamJobRefused("policy", f"must be {{provider, config}}, got {type(policy).__name__}")
    _refuse_unknown(policy, _POLICY_KEYS, JOB, "policy")
    config = policy.get("config") or {}
    if not isinstance(config, Mapping):
        raise TeamJobRefused("policy.config", f"must be a mapping, got {type(config).__name__}")
    max_discards = data.get("max_discards")
    if max_discards is not None:
        max_discards = _count(max_discards, "max_discards", 0, MAX_DISCARDS)
    intervals = data.get("intervals")
    if intervals is not None and intervals not in INTERVAL_METHODS:
        raise TeamJobRefused("intervals", f"{intervals!r} refused: must be one of {', '.join(INTERVAL_METHODS)}")
    compare = None
    if data.get("compare") is not None:
        compare = compare_from_mapping(data["compare"])
        if not tasks:
            raise TeamJobRefused("compare", "a comparison runs a suite's tasks (its blocks are a suite task and "
                                            "seed): name the suite and its tasks")
        if free:
            raise TeamJobRefused("free_form", "a comparison job runs only suite tasks: every slot on the same task "
                                              "and seed")
        trials = sum(t.trials for t in tasks)
        if compare.stop is not None and compare.stop.max_blocks is not None and compare.stop.max_blocks > trials:
            raise TeamJobRefused("compare.stop.max_blocks", f"{compare.stop.max_blocks} refused: the job's tasks make "
                                                            f"{trials} block(s) (one per trial); ask for more trials")
    record = data.get("record", False)
    if not isinstance(record, bool):
        raise TeamJobRefused("record", f"must be true or false, got {record!r}")
    fields = dict(
        station_id=_text(data.get("station_id"), "station_id", limit=TEXT_LIMITS["station_id"]),
        suite=suite, tasks=tasks, free_form=free, choose=choose,
        policy_provider=_text(policy.get("provider"), "policy.provider", limit=TEXT_LIMITS["policy.provider"]),
        policy_config=dict(config), max_discards=max_discards, intervals=intervals, record=record,
        job_id=_text(data.get("job_id"), "job_id", limit=TEXT_LIMITS["job_id"]),
        client_id=_text(data.get("client_id"), "client_id", limit=TEXT_LIMITS["client_id"]),
        compare=compare,
    )
    fields.update(overrides)
    job = TeamJob(**fields)
    if job.job_id and not _ID.match(job.job_id):
        raise TeamJobRefused("job_id", f"must be 1-128 letters, digits, '.', '_', '-' starting with a letter or "
                                       f"digit, got {job.job_id!r}")
    if job.episodes > MAX_EPISODES:
        raise TeamJobRefused("tasks", f"{job.episodes} trials in all; a job runs at most {MAX_EPISODES}")
    return job


def team_job_from_yaml(text: str, **overrides: Any) -> TeamJob:
    """Build a :class:`TeamJob` from YAML text (``yaml.safe_load``)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TeamJobRefused("job", f"not valid YAML: {exc}") from exc
    return team_job_from_mapping(data, **overrides)


def load_team_job(path: str, **overrides: Any) -> TeamJob:
    """Read a job file (YAML) into a :class:`TeamJob`."""
    with open(path, encoding="utf-8") as handle:
        return team_job_from_yaml(handle.read(), **overrides)


def team_job_to_mapping(job: TeamJob) -> dict:
    """Return the job file mapping of ``job`` (the inverse of :func:`team_job_from_mapping`)."""
    out: dict = {"station_id": job.station_id}
    if job.job_id:
        out["job_id"] = job.job_id
    if job.client_id:
        out["client_id"] = job.client_id
    if job.suite:
        out["suite"] = job.suite
        out["tasks"] = [{"task": t.task, "trials": t.trials} for t in job.tasks]
    if job.free_form:
        out["free_form"] = [
            {"task_id": t.task_id, "instruction": t.instruction, "layout": t.layout, "trials": t.trials,
             "scoring": [dict(i) for i in t.scoring], **({} if t.budget_s is None else {"budget_s": t.budget_s})}
            for t in job.free_form]
    if job.choose:
        out["choose"] = dict(job.choose)
    if job.policy_provider or job.policy_config:
        out["policy"] = {"provider": job.policy_provider, "config": dict(job.policy_config)}
    if job.max_discards is not None:
        out["max_discards"] = job.max_discards
    if job.intervals is not None:
        out["intervals"] = job.intervals
    if job.compare is not None:
        out["compare"] = compare_to_mapping(job.compare)
    if job.record:
        out["record"] = True
    return out


def free_form_parameters(task: FreeFormTask, choose: Mapping[str, str]) -> dict:
    """Return the task parameters a team's own task runs with: its budget and the job's choices."""
    params = dict(choose)
    if task.budget_s is not None:
        params["duration_s"] = f"{task.budget_s:g}"
    return params


# -- against what the station offers ----------------------------------------------------------------------------
def check_against_offer(job: TeamJob, offer: StationOffer) -> None:
    """Refuse ``job`` when its station does not offer what it names: the suite, a task, the trials, a choice.

    :raises TeamJobRefused: naming the key (``suite``, ``tasks[i].task``, ``tasks[i].trials``, ``choose.<key>``,
        ``free_form``) and what the station offers instead.
    """
    if job.suite:
        suite = offer.suite(job.suite)
        if suite is None:
            offered = ", ".join(s.suite for s in offer.suites) or "none"
            raise TeamJobRefused("suite", f"station {offer.station_id!r} offers no suite {job.suite!r} (its suites: "
                                          f"{offered})")
        for index, asked in enumerate(job.tasks):
            task = suite.task(asked.task)
            if task is None:
                close = difflib.get_close_matches(asked.task, [t.task_id for t in suite.tasks], n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise TeamJobRefused(f"tasks[{index}].task", f"suite {suite.suite!r} has no task {asked.task!r}"
                                                             f"{hint}; its tasks: "
                                                             f"{', '.join(t.task_id for t in suite.tasks)}")
            asked_in_all = sum(t.trials for t in job.tasks[:index + 1] if t.task == asked.task)
            if asked_in_all > task.trials:
                in_all = "" if asked_in_all == asked.trials else f", and this job asks {asked_in_all} in all"
                raise TeamJobRefused(f"tasks[{index}].trials", f"{asked.trials} refused: suite {suite.suite!r} has "
                                                               f"{task.trials} trial(s) (seeds) of {task.task_id!r}"
                                                               f"{in_all}")
        for key, value in job.choose.items():
            rule = suite.choice(key) or (suite.choice("cameras") if key in CAMERA_CHOICES else None)
            if rule is None:
                allowed = ", ".join(c.allowed() for c in suite.team_may_choose) or "nothing"
                raise TeamJobRefused(f"choose.{key}", f"suite {suite.suite!r} does not let a team choose {key!r}; "
                                                      f"it lets the team choose: {allowed}")
            reason = rule.refusal(value) if rule.key == key else None
            if reason:
                raise TeamJobRefused(f"choose.{key}", reason)
    if job.record and offer.refuses_recordings:
        raise TeamJobRefused("record", RECORDINGS_REFUSED.format(station=offer.station_id))
    if job.free_form and not offer.allow_free_form_tasks:
        raise TeamJobRefused("free_form", f"station {offer.station_id!r} runs only its suites' tasks (it does not "
                                          f"allow free-form tasks)")
