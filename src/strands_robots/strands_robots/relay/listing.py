"""``Evaluation.ListJobs``: a client's own jobs, newest submitted first, page by page, filtered by state.

Only the calling client's jobs are ever read (the query is by its name), with the comparisons other teams invited
it to (``relay.job_teams``; by the relay's id, naming the submitting team, its answer and its slots); the page
token is the position after the page's last job (its submit time and the client's id for it), so pages stay
consistent while new jobs come in (a new job is newer than every page already read and never shifts them). A job
the station has not reported on is ``CREATED``. A bad page size, page token or state is INVALID_ARGUMENT naming it.
"""

from __future__ import annotations

import base64
import json
from typing import Any, List, Optional, Sequence, Tuple

import grpc

from strands_robots.relay.auth import KIND_CLIENT
from strands_robots.relay.core import Refused, RelayCore
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.wire.proto import evaluation_service_pb2 as es

STATES = ("CREATED", "WAITING_POLICY", "RUNNING", "FINALIZING", "SUCCEEDED", "FAILED", "CANCELLED")
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100

# A client's own jobs by its id for each, and the comparisons other teams invited it to by the relay's id.
_SHOWN = "(CASE WHEN j.client_id = {p} THEN j.client_job_id ELSE j.job_id END)"
_SELECT = (
    "SELECT " + _SHOWN + ", j.station_id, COALESCE(s.state, 'CREATED'), j.episodes_total, "
    "COALESCE(s.episodes_done, 0), j.submitted_unix_ms, COALESCE(s.updated_unix_ms, 0), s.payload, j.client_id, "
    "t.answer, j.request FROM jobs j LEFT JOIN snapshots s ON s.job_id = j.job_id "
    "LEFT JOIN job_teams t ON t.job_id = j.job_id AND t.team = {p} "
    "WHERE (j.client_id = {p} OR t.team IS NOT NULL)"
)


def encode_token(submitted_unix_ms: int, client_job_id: str) -> str:
    raw = json.dumps([int(submitted_unix_ms), client_job_id], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_token(token: str) -> Optional[Tuple[int, str]]:
    """Return the position a page token names, or None when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        submitted, job_id = json.loads(raw.decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
    if not isinstance(submitted, int) or isinstance(submitted, bool) or not isinstance(job_id, str):
        return None
    return submitted, job_id


def check_request(request: Any) -> Tuple[int, Optional[Tuple[int, str]], Tuple[str, ...]]:
    """Return (page size, position after which to start or None, states); refuse what is not valid."""
    size = int(request.page_size) or DEFAULT_PAGE_SIZE
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                      f"ListJobs: page_size must be 1..{MAX_PAGE_SIZE} (0: {DEFAULT_PAGE_SIZE}), got {size}")
    after = None
    if request.page_token:
        after = decode_token(request.page_token[:512]) if len(request.page_token) <= 512 else None
        if after is None:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                          "ListJobs: page_token is not a next_page_token this relay gave")
    states = tuple(dict.fromkeys(request.states))
    unknown = [s for s in states if s not in STATES]
    if unknown:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                      f"ListJobs: unknown state(s) {', '.join(repr(s[:40]) for s in unknown[:5])}; "
                      f"states are {', '.join(STATES)}")
    return size, after, states


def page(store: Any, client_id: str, size: int, after: Optional[Tuple[int, str]],
         states: Sequence[str]) -> Tuple[List[Any], str]:
    """Read one page of ``client_id``'s jobs (synchronous: on the store's pool); (summaries, next token)."""
    from strands_robots.relay import job_teams
    from strands_robots.relay.store import JobRecord

    sql, params = _SELECT, [client_id, client_id, client_id]
    if states:
        sql += " AND COALESCE(s.state, 'CREATED') IN (" + ", ".join("{p}" for _ in states) + ")"
        params += list(states)
    if after is not None:
        sql += (" AND (j.submitted_unix_ms < {p} OR (j.submitted_unix_ms = {p} AND " + _SHOWN + " < {p}))")
        params += [after[0], after[0], client_id, after[1]]
    sql += " ORDER BY j.submitted_unix_ms DESC, " + _SHOWN + " DESC LIMIT " + str(int(size) + 1)
    params.append(client_id)
    rows = store.read_sql(sql, params)
    jobs = []
    for row in rows[:size]:
        message = ev.JobStatus.FromString(bytes(row[7])).message if row[7] is not None else ""
        summary = es.JobSummary(job_id=row[0], station_id=row[1], state=row[2], episodes_total=int(row[3]),
                                episodes_done=int(row[4]), submitted_unix_ms=int(row[5]),
                                updated_unix_ms=int(row[6]), message=message)
        if row[8] != client_id:  # a comparison another team invited this client to
            record = JobRecord(job_id=row[0], client_id=row[8], station_id=row[1], request=bytes(row[10]),
                               submitted_unix_ms=int(row[5]))
            summary.owner = row[8]
            summary.invitation = row[9] or job_teams.PENDING
            summary.slots.extend(job_teams.slot_teams(record).slots_of(client_id))
        jobs.append(summary)
    token = ""
    if len(rows) > size:
        last = rows[size - 1]
        token = encode_token(int(last[5]), last[0])
    return jobs, token


class ListingService:
    """The ``ListJobs`` RPC; the method table (``handlers.py``) binds it."""

    def __init__(self, core: RelayCore) -> None:
        self._core = core

    async def ListJobs(self, request: Any, context: Any) -> Any:
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        size, after, states = check_request(request)
        from strands_robots.relay import job_teams

        await core.run(job_teams.settle_due, core.store, core.clock_ms(), core.settings.invitation_timeout_s)
        jobs, token = await core.run(page, core.store, principal.name, size, after, states)
        return es.ListJobsResponse(jobs=jobs, next_page_token=token)
