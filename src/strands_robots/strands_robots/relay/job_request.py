"""Checking a submitted job before the relay accepts it (pure: protobuf in, a reason out).

The tasks are checked by the station core's own rules (``station.job.validate_job_spec``: task ids,
instructions, parameters, score sheets), so a job the relay accepts is one the station can run; every
refusal names the task index, the field and the reason, e.g. ``tasks[1].scoring: item 'grasp': ...``.
"""

from __future__ import annotations

import secrets
from typing import AbstractSet, Any

#: Upper bounds that keep one request from tying a station up (a job can be resubmitted).
MAX_TASKS = 1000
MAX_EPISODES = 100000


class InvalidJob(ValueError):
    """The submit request was refused; the message says where and why."""


def new_job_id() -> str:
    """Return a fresh job id: unguessable, so one client cannot probe for another's jobs."""
    return "job-" + secrets.token_hex(8)


def check_submit(request: Any, client_id: str, known_stations: AbstractSet[str]) -> str:
    """Return the job id to create for ``request`` (a ``SubmitJobRequest``); raise :class:`InvalidJob` if refused."""
    from strands_robots.convert import task_from_pb
    from strands_robots.station.job import JobSpec, JobSpecError, validate_job_spec

    if not request.station_id:
        raise InvalidJob("station_id: must name the station to run the job")
    if request.station_id not in known_stations:
        raise InvalidJob(f"station_id: unknown station {request.station_id!r}")
    if not request.tasks:
        raise InvalidJob("tasks: a job needs at least one task")
    if len(request.tasks) > MAX_TASKS:
        raise InvalidJob(f"tasks: at most {MAX_TASKS} tasks per job, got {len(request.tasks)}")
    if request.episodes < 1:
        raise InvalidJob(f"episodes: must be an integer >= 1, got {request.episodes}")
    if request.episodes > MAX_EPISODES:
        raise InvalidJob(f"episodes: at most {MAX_EPISODES} per job, got {request.episodes}")
    tasks = []
    for index, task in enumerate(request.tasks):
        try:
            tasks.append(task_from_pb(task))
        except ValueError as exc:
            raise InvalidJob(f"tasks[{index}].{exc}") from None
    seen = {}
    for index, task in enumerate(tasks):
        if task.task_id in seen and tasks[seen[task.task_id]] != task:
            raise InvalidJob(f"tasks[{index}].task_id: {task.task_id!r} is also tasks[{seen[task.task_id]}] "
                             f"with a different definition")
        seen.setdefault(task.task_id, index)
    job_id = request.job_id if request.HasField("job_id") else new_job_id()
    try:
        validate_job_spec(JobSpec(job_id=job_id, client_id=client_id, station_id=request.station_id,
                                  tasks=tuple(tasks), episodes_total=int(request.episodes),
                                  policy_provider="relay"))
    except JobSpecError as exc:
        raise InvalidJob(str(exc)) from None
    return job_id
