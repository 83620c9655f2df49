"""Checking a submitted job before the relay accepts it (pure: protobuf in, a reason out).

A job names its station's suite tasks and trials (``suite_job``: checked against what the station offered, and
by ``job_model``'s rules) and/or the team's own free-form tasks (``tasks``, where the station allows them). A key
that would let a team score itself, inject faults or drive the scripted operator is refused naming it
(``job_model.team_keys``, the rule the station keeps too).

Every value is checked by the rules the station and the rollout use (``strands_robots.validation``, through
``station.job.validate_job_spec``): the episode count and task count (``validation.JOB_LIMITS``), the job's
settings (``duration_s``, ``control_frequency``, ``max_discards``), each task's free text, parameters (known keys
only, every value in its range) and score sheet, so a job the relay accepts is one the station can run. Every
refusal names the task index, the key, the value and the allowed range, e.g.
``tasks[1].parameters['duration_s']: duration_s='1e9' refused: allowed range (0, 86400] s: ...``; the relay
answers it as INVALID_ARGUMENT (the client's ``InvalidTask``).
"""

from __future__ import annotations

import secrets
from typing import AbstractSet, Any, Optional

from strands_robots import validation as rules

#: Upper bounds that keep one request from tying a station up (a job can be resubmitted).
MAX_TASKS = int(rules.JOB_LIMITS["tasks"].maximum)
MAX_EPISODES = int(rules.JOB_LIMITS["episodes_total"].maximum)


class InvalidJob(ValueError):
    """The submit request was refused; the message says where and why."""


def new_job_id() -> str:
    """Return a fresh job id: unguessable, so one client cannot probe for another's jobs."""
    return "job-" + secrets.token_hex(8)


def check_submit(request: Any, client_id: str, known_stations: AbstractSet[str],
                 max_message_bytes: Optional[int] = None, offer: Any = None) -> str:
    """Return the job id to create for ``request`` (a ``SubmitJobRequest``); raise :class:`InvalidJob` if refused.

    A job naming a suite (``suite_job``) is checked against what its station offered (``offer``, a
    ``job_model.offer.StationOffer``; None when the station has not connected since this relay's store began: the
    station checks it then, and a job it cannot run FAILs naming why). Every key a team must never set is refused
    by ``job_model.team_keys`` (the station's own rule), in the choices and in every free-form task's parameters.

    :param max_message_bytes: this relay's largest message: a task's images must fit one (None: the default).
    """
    from strands_robots.job_model.team_job import INTERVAL_METHODS, TeamJobRefused, check_against_offer
    from strands_robots.job_model.team_keys import TASK_PARAMETER, TeamKeyRefused, check_team_key
    from strands_robots.station.task_parameters import check_choices
    from strands_robots.wire.pb_model import job_options_from_pb, task_from_pb, team_job_from_pb
    from strands_robots.station.job import JobSpec, JobSpecError, check_job_images, validate_job_spec

    if not request.station_id:
        raise InvalidJob("station_id: must name the station to run the job")
    if request.station_id not in known_stations:
        raise InvalidJob(f"station_id: unknown station {request.station_id!r}")
    suite_job = request.HasField("suite_job")
    if not request.tasks and not suite_job:
        raise InvalidJob("tasks: a job needs at least one task (a suite's, suite_job, or the team's own)")
    try:
        rules.check_number("episodes", request.episodes, rules.JOB_LIMITS["episodes_total"])
        if request.tasks or not suite_job:
            rules.check_number("tasks", len(request.tasks), rules.JOB_LIMITS["tasks"])
    except rules.ValueRefused as exc:
        raise InvalidJob(f"{exc.field}: {exc.reason}") from None
    for index, task in enumerate(request.tasks):  # a team's own task: never a station's key
        for key in task.parameters:
            try:
                check_team_key(key, TASK_PARAMETER, f"tasks[{index}].parameters[{key!r}]")
            except TeamKeyRefused as exc:
                raise InvalidJob(str(exc)) from None
    if suite_job:
        try:
            team = team_job_from_pb(request.suite_job, station_id=request.station_id,
                                    max_discards=request.max_discards if request.HasField("max_discards") else None)
            check_choices(team)
            if offer is not None:
                check_against_offer(team, offer)
        except TeamJobRefused as exc:
            raise InvalidJob(str(exc)) from None  # the job file's field: what the team wrote
        _check_chosen_images(team.choose, max_message_bytes)
        expected = team.episodes + len(request.tasks)
        if request.episodes != expected:
            raise InvalidJob(f"episodes: {request.episodes} refused: the suite tasks' trials and the job's own tasks "
                             f"make {expected} episode(s)")
    if request.HasField("record") and request.record and offer is not None and offer.refuses_recordings:
        from strands_robots.job_model.team_job import RECORDINGS_REFUSED

        raise InvalidJob(f"record: {RECORDINGS_REFUSED.format(station=request.station_id)}")
    if request.tasks and offer is not None and not offer.allow_free_form_tasks:
        raise InvalidJob(f"tasks: station {request.station_id!r} runs only its suites' tasks (it does not allow "
                         f"free-form tasks); name a suite's tasks (job suites lists them)")
    job_id = request.job_id if request.HasField("job_id") else new_job_id()
    if not request.tasks:
        try:
            for name, value in job_options_from_pb(request).items():
                if name == "record":  # a bool by the wire's own type: nothing to range-check
                    continue
                if name == "intervals":
                    if value not in INTERVAL_METHODS:
                        raise rules.ValueRefused(name, value, f"{value!r} refused: must be one of "
                                                              f"{', '.join(INTERVAL_METHODS)}")
                    continue
                limits = rules.JOB_LIMITS if name == "max_discards" else rules.RUN_LIMITS
                rules.check_number(name, value, limits[name])
        except rules.ValueRefused as exc:
            raise InvalidJob(f"{exc.field}: {exc.reason}") from None
        return job_id
    tasks = []
    for index, task in enumerate(request.tasks):
        try:
            tasks.append(task_from_pb(task))
        except ValueError as exc:
            raise InvalidJob(f"tasks[{index}].{exc}") from None
    try:
        spec = validate_job_spec(JobSpec(job_id=job_id, client_id=client_id, station_id=request.station_id,
                                         tasks=tuple(tasks), episodes_total=len(tasks) if suite_job
                                         else int(request.episodes),
                                         policy_provider="relay", **job_options_from_pb(request)))
        check_job_images(spec, None, max_message_bytes)
    except JobSpecError as exc:
        raise InvalidJob(str(exc)) from None
    return job_id


def _check_chosen_images(choose: Any, max_message_bytes: Optional[int]) -> None:
    """Refuse camera choices whose frames can never fit one relay message (``cameras.image_budget``)."""
    from types import SimpleNamespace

    from strands_robots.station.job import DEFAULT_CONTROL_FREQUENCY_HZ, JobSpecError, check_job_images
    from strands_robots.station.model import Task

    if not any(key in choose for key in ("cameras", "image_format", "image_quality")):
        return
    chosen = Task("choose", "", "", {k: v for k, v in choose.items()})
    try:
        check_job_images(SimpleNamespace(tasks=(chosen,), control_frequency=DEFAULT_CONTROL_FREQUENCY_HZ,
                                         policy_provider="relay"), None,
                         max_message_bytes)
    except JobSpecError as exc:
        raise InvalidJob(f"choose: {exc.reason}") from None
