"""Checking a submitted job before the relay accepts it (pure: protobuf in, a reason out).

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
                 max_message_bytes: Optional[int] = None) -> str:
    """Return the job id to create for ``request`` (a ``SubmitJobRequest``); raise :class:`InvalidJob` if refused.

    :param max_message_bytes: this relay's largest message: a task's images must fit one (None: the default).
    """
    from strands_robots.wire.pb_model import job_options_from_pb, task_from_pb
    from strands_robots.station.job import JobSpec, JobSpecError, check_job_images, validate_job_spec

    if not request.station_id:
        raise InvalidJob("station_id: must name the station to run the job")
    if request.station_id not in known_stations:
        raise InvalidJob(f"station_id: unknown station {request.station_id!r}")
    if not request.tasks:
        raise InvalidJob("tasks: a job needs at least one task")
    try:
        rules.check_number("episodes", request.episodes, rules.JOB_LIMITS["episodes_total"])
        rules.check_number("tasks", len(request.tasks), rules.JOB_LIMITS["tasks"])
    except rules.ValueRefused as exc:
        raise InvalidJob(f"{exc.field}: {exc.reason}") from None
    tasks = []
    for index, task in enumerate(request.tasks):
        try:
            tasks.append(task_from_pb(task))
        except ValueError as exc:
            raise InvalidJob(f"tasks[{index}].{exc}") from None
    job_id = request.job_id if request.HasField("job_id") else new_job_id()
    try:
        spec = validate_job_spec(JobSpec(job_id=job_id, client_id=client_id, station_id=request.station_id,
                                         tasks=tuple(tasks), episodes_total=int(request.episodes),
                                         policy_provider="relay", **job_options_from_pb(request)))
        check_job_images(spec, None, max_message_bytes)
    except JobSpecError as exc:
        raise InvalidJob(str(exc)) from None
    return job_id
