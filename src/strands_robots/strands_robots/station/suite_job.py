"""A team's job (``job_model.team_job.TeamJob``) as the station runs it: a :class:`~station.job.JobSpec`.

Each named suite task runs ``trials`` episodes, task by task as listed, trial ``i`` with the suite's seed ``i``
and the suite's own settings (``SuiteTask.station_task``); the team's choices (``choose``, only what the suite's
``team_may_choose`` allows, within its ranges) become those tasks' camera and rate parameters. Free-form tasks
(where the station allows them) follow, each ``trials`` times, with the team's sheet and ``operator_score:
false``: the scripted operator judges only the station's predicates, so it keeps them unscored; a person scores
them at a hardware station. Every refusal is a :class:`~station.job.JobSpecError` naming the job's key.
Pure: no rclpy.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from strands_robots import validation as rules
from strands_robots.job_model.offer import StationOffer
from strands_robots.job_model.team_job import TeamJob, TeamJobRefused, check_against_offer, free_form_parameters
from strands_robots.job_model.team_keys import TASK_PARAMETER, check_team_key
from strands_robots.station.job import JobSpec, JobSpecError, validate_job_spec
from strands_robots.station.model import Task
from strands_robots.station.suite_file import Suite
from strands_robots.station.task_parameters import check_task_parameters

__all__ = ["station_offer", "job_spec_for", "check_free_form_parameters"]

#: The scripted operator keeps a team's own tasks unscored (it judges only the station's predicates).
_UNSCORED_BY_SCRIPT = {"operator_score": "false"}


def station_offer(station_id: str, suites: Mapping[str, Suite], profile: str,
                  allow_free_form_tasks: bool) -> StationOffer:
    """Return what this station offers teams (sent to the relay when the station connects)."""
    return StationOffer(station_id, profile, bool(allow_free_form_tasks),
                        tuple(suites[name].offer() for name in sorted(suites)))


def check_free_form_parameters(parameters: Mapping[str, str], field_prefix: str = "parameters") -> None:
    """Refuse a team's own task parameter that is never a team's (``team_keys``), naming it."""
    for key in parameters:
        check_team_key(str(key), TASK_PARAMETER, f"{field_prefix}[{key!r}]")


def job_spec_for(job: TeamJob, suites: Mapping[str, Suite], *, station_id: str, profile: str,
                 allow_free_form_tasks: bool, job_id: str, client_id: str, policy_provider: Optional[str] = None,
                 policy_config: Optional[Mapping[str, Any]] = None) -> JobSpec:
    """Return the validated JobSpec that runs ``job`` on this station with its suites.

    :param policy_provider: the rollout's provider (``relay`` for a relay job; None: the job's own).
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
    for asked in job.tasks:
        suite_task = suite.task(asked.task)
        tasks.extend(suite_task.station_task(trial, choose) for trial in range(asked.trials))
    from strands_robots.station.job_file import sheet_from_items

    for index, own in enumerate(job.free_form):
        params = {**free_form_parameters(own, choose), **_UNSCORED_BY_SCRIPT}
        task = Task(own.task_id, own.instruction, own.layout, params, sheet_from_items(list(own.scoring), index))
        tasks.extend([task] * own.trials)
    options: dict = {}
    if job.max_discards is not None:
        options["max_discards"] = job.max_discards
    if "control_frequency" in choose:
        options["control_frequency"] = float(choose["control_frequency"])
    return validate_job_spec(JobSpec(
        job_id=job_id, client_id=client_id, station_id=station_id, tasks=tuple(tasks),
        episodes_total=len(tasks), policy_provider=policy_provider or job.policy_provider or "mock",
        policy_config=dict(job.policy_config if policy_config is None else policy_config), **options))
