"""Which policy session of a job a side opens: a comparison job's slot, checked against the job's own slots.

A comparison (A/B) job (``suite_job.compare.slots``) has one policy session per slot: each slot is served by its
own ``job serve JOB --slot NAME`` and the station opens each slot's session by name. A job of one policy has one
session, opened without a slot. Any other pairing is refused where the side enters, naming what the job has: a
comparison served without a slot (listing its slots), a slot the job does not have (listing them), a slot on a
job of one policy: each INVALID_ARGUMENT (the client's ``InvalidTask``), the stream ending before anything is
forwarded.
"""

from __future__ import annotations

from typing import Tuple

import grpc

from strands_robots.relay.core import Refused
from strands_robots.relay.store import JobRecord
from strands_robots.wire.proto import evaluation_service_pb2 as es

__all__ = ["job_slots", "checked_slot"]

_SHOWN = 64  # a refused slot is quoted at most this long (a slot name is at most 64 characters)


def job_slots(job: JobRecord) -> Tuple[str, ...]:
    """Return the comparison job's slots in the job's order; () for a job of one policy."""
    request = es.SubmitJobRequest.FromString(job.request)
    if not request.HasField("suite_job") or not request.suite_job.HasField("compare"):
        return ()
    return tuple(request.suite_job.compare.slots)


def checked_slot(job: JobRecord, slot: str, field: str) -> str:
    """Return ``slot`` when the job has it ("" for a job of one policy); refuse it otherwise, naming the slots.

    :param field: the message field that carried it (``attach.slot``, ``open.slot``), named in the refusal.
    """
    slots = job_slots(job)
    job_id = job.client_job_id
    if not slots:
        if slot:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"{field}: job {job_id!r} is not a comparison (it has "
                          f"one policy): serve it without a slot", log=False)
        return ""
    listed = ", ".join(slots)
    if not slot:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"job {job_id!r} is a comparison of slots {listed}: "
                      f"serve each slot with its own `job serve {job_id} --slot NAME`", log=False)
    if slot not in slots:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"{field}: job {job_id!r} has no slot "
                      f"{slot[:_SHOWN]!r}; its slots: {listed}", log=False)
    return slot
