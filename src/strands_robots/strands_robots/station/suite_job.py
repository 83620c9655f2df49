"""A team's job (``job_model.team_job.TeamJob``) as the station runs it: a :class:`~station.job.JobSpec`.

Each named suite task runs ``trials`` episodes, entry by entry as listed, trial ``i`` with the suite's seed ``i``
(a task named again goes on with its next trials). A comparison job's trials are its blocks (every slot once on
the trial's task and seed), the entries taken in turn (the first trial of each entry, then the second ...) up to
``stop.max_blocks``, so a comparison that stops early has seen every task it names;
and the suite's own settings (``SuiteTask.station_task``); the team's choices (``choose``, only what the suite's
``team_may_choose`` allows, within its ranges) become those tasks' camera and rate parameters. Free-form tasks
(where the station allows them) follow, each ``trials`` times, with the team's sheet and ``operator_score:
false``: the scripted operator judges only the station's predicates, so it keeps them unscored; a person scores
them at a hardware station. Every refusal is a :class:`~station.job.JobSpecError` naming the job's key.
Pure: no rclpy.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from strands_robots import validation as rules
from strands_robots.job_model.offer import StationOffer
from strands_robots.job_model.team_job import TeamJob, TeamJobRefused, check_against_offer, free_form_parameters
from strands_robots.job_model.team_keys import TASK_PARAMETER, check_team_key
from strands_robots.station.job import JobSpec, JobSpecError, validate_job_spec
from strands_robots.station.model import Task
from strands_robots.station.suite_file import Suite
from strands_robots.station.task_parameters import check_task_parameters

__all__ = ["station_offer", "job_spec_for", "free_form_job_spec", "team_task", "check_free_form_parameters"]

#: The scripted operator keeps a team's own tasks unscored (it judges only the station's predicates).
_UNSCORED_BY_SCRIPT = {"operator_score": "false"}


def station_offer(station_id: str, suites: Mapping[str, Suite], profile: str,
                  allow_free_form_tasks: bool, team_recordings: bool = True) -> StationOffer:
    """Return what this station offers teams (sent to the relay when the station connects).

    :param team_recordings: the station records the episodes of a job that asks (``record: true``) and sends
        them to its team; False: such a job is refused.
    """
    return StationOffer(station_id, profile, bool(allow_free_form_tasks),
                        tuple(suites[name].offer() for name in sorted(suites)),
                        refuses_recordings=not team_recordings)


def check_free_form_parameters(parameters: Mapping[str, str], field_prefix: str = "parameters") -> None:
    """Refuse a team's own task parameter that is never a team's (``team_keys``), naming it."""
    for key in parameters:
        check_team_key(str(key), TASK_PARAMETER, f"{field_prefix}[{key!r}]")


def team_task(task: Task) -> Task:
    """Return a team's own task as the station runs it: the scripted operator keeps it unscored."""
    return Task(task.task_id, task.instruction, task.layout, {**dict(task.parameters), **_UNSCORED_BY_SCRIPT},
                task.scoring)


def free_form_job_spec(tasks: Sequence[Task], *, episodes_total: int, allow_free_form_tasks: bool,
                       **spec_fields: Any) -> JobSpec:
    """Return the validated JobSpec of a job of a team's own tasks only (cycled for ``episodes_total``)."""
    if not allow_free_form_tasks:
        raise JobSpecError("tasks", "this station runs only its suites' tasks (it does not allow free-form tasks); "
                                    "name a suite's tasks")
    for index, task in enumerate(tasks):
        try:
            check_free_form_parameters(task.parameters)
        except TeamJobRefused as exc:
            raise JobSpecError(exc.field, exc.reason, index) from None
    return validate_job_spec(JobSpec(tasks=tuple(team_task(t) for t in tasks), episodes_total=episodes_total,
                                     **spec_fields))


def job_spec_for(job: TeamJob, suites: Mapping[str, Suite], *, station_id: str, profile: str,
                 allow_free_form_tasks: bool, job_id: str, client_id: str, policy_provider: Optional[str] = None,
                 policy_config: Optional[Mapping[str, Any]] = None,
                 free_form_tasks: Optional[Sequence[Task]] = None,
                 options: Optional[Mapping[str, Any]] = None) -> JobSpec:
    """Return the validated JobSpec that runs ``job`` on this station with its suites.

    :param policy_provider: the rollout's provider (``relay`` for a relay job; None: the job's own).
    :param free_form_tasks: the team's own tasks as they came on the wire (each once, after the suite tasks);
        None: ``job.free_form``.
    :param options: other JobSpec settings the job carries (``duration_s`` ...), under the job's own.
    :raises JobSpecError: naming the job key (``suite``, ``tasks[i].trials``, ``choose.<key>``, ``free_form``).
    """
    offer = station_offer(station_id, suites, profile, allow_free_form_tasks)
    try:
        check_against_offer(job, offer)
    except TeamJobRefused as exc:
        raise JobSpecError(exc.field, exc.reason) from None
    choose = dict(job.choose)
    for key, value in choose.items():
        try:
            check_task_parameters({key: value})
        except rules.ValueRefused as exc:
            raise JobSpecError(f"choose.{key}", exc.reason) from None
    tasks = []
    suite = suites.get(job.suite) if job.suite else None
    provider = policy_provider or job.policy_provider or "mock"
    config = dict(job.policy_config if policy_config is None else policy_config)
    next_trial: dict = {}  # a task named again goes on with its next trials (seeds)
    entries = []
    for asked in job.tasks:
        suite_task = suite.task(asked.task)
        first = next_trial.get(asked.task, 0)
        next_trial[asked.task] = first + asked.trials
        entries.append([_hints_the_policy_takes(suite_task.station_task(trial, choose), provider, config)
                        for trial in range(first, first + asked.trials)])
    if job.compare is None:
        tasks.extend(task for entry in entries for task in entry)
    else:  # blocks take the entries in turn, so a comparison that stops early has seen every task
        tasks.extend(_interleaved(entries)[:job.blocks])
    from strands_robots.station.job_file import sheet_from_items

    if free_form_tasks is not None:
        if free_form_tasks and not allow_free_form_tasks:
            raise JobSpecError("tasks", "this station runs only its suites' tasks (it does not allow free-form "
                                        "tasks)")
        for index, task in enumerate(free_form_tasks):
            try:
                check_free_form_parameters(task.parameters, f"tasks[{index}].parameters")
            except TeamJobRefused as exc:
                raise JobSpecError(exc.field, exc.reason) from None
            tasks.append(team_task(task))
    for index, own in enumerate(job.free_form):
        params = {**free_form_parameters(own, choose), **_UNSCORED_BY_SCRIPT}
        task = Task(own.task_id, own.instruction, own.layout, params, sheet_from_items(list(own.scoring), index))
        tasks.extend([task] * own.trials)
    options = dict(options or {})
    if job.compare is not None:
        options["comparison"] = dataclasses.replace(job.compare, suite=job.suite)
    if job.max_discards is not None:
        options["max_discards"] = job.max_discards
    if job.record:
        options["record"] = True
    if "control_frequency" in choose:
        options["control_frequency"] = float(choose["control_frequency"])
    slots = 1 if job.compare is None else len(job.compare.slots)
    return validate_job_spec(JobSpec(
        job_id=job_id, client_id=client_id, station_id=station_id, tasks=tuple(tasks),
        episodes_total=len(tasks) * slots, policy_provider=provider, policy_config=config, **options))


def _interleaved(entries: Sequence[Sequence[Task]]) -> list:
    """Return the entries' tasks taken in turn: a1, b1, a2, b2, b3 ... (an entry that ran out is skipped)."""
    out = []
    for index in range(max((len(e) for e in entries), default=0)):
        out.extend(entry[index] for entry in entries if index < len(entry))
    return out


def _hints_the_policy_takes(task: Task, provider: str, config: Mapping[str, Any]) -> Task:
    """Leave out a suite's policy hint (``policy.<key>``) a policy built at submit does not take.

    Hints are information for the policy, never part of the exam: a station-run mock or scripted policy that
    does not know an option runs without it (a relay policy gets every hint and reads what it knows).
    """
    if provider not in rules.POLICIES_BUILT_AT_SUBMIT:
        return task
    from strands_robots.station.job import POLICY_PARAM_PREFIX, _policy_value

    kept = {}
    for key, value in task.parameters.items():
        if key.startswith(POLICY_PARAM_PREFIX):
            try:
                rules.check_policy(provider, {**dict(config), key[len(POLICY_PARAM_PREFIX):]: _policy_value(value)})
            except rules.ValueRefused:
                continue
        kept[key] = value
    if len(kept) == len(task.parameters):
        return task
    return Task(task.task_id, task.instruction, task.layout, kept, task.scoring)
