"""What the relay's services share: the store on a thread pool, tokens, the policy-session broker, limits.

:class:`RelayCore` lives on the relay's event loop; :class:`Refused` ends a call with a status and a reason;
:class:`Outbox` carries a session side's messages to its stream's coroutine; :func:`pump` feeds a stream's
further messages to the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent import futures
from typing import Any, AsyncIterator, Callable, Dict, Optional

import grpc

from strands_robots.relay.auth import KIND_CLIENT, KIND_STATION, Principal, TokenBook
from strands_robots.relay.config import RelaySettings
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.wire.proto import evaluation_service_pb2 as es
from strands_robots.wire.proto import policy_session_pb2 as ps
from strands_robots.relay.rate_limit import RateLimitedLog
from strands_robots.relay.sessions import Broker
from strands_robots.relay.store import (
    TERMINAL_STATES,
    JobRecord,
    JobView,
    Store,
)
from strands_robots.relay.text_limits import (
    TextTooLong,
)

_log = logging.getLogger("strands_robots.relay")

_DEFAULTS = RelaySettings()
DEFAULT_MAX_MESSAGE_BYTES = _DEFAULTS.max_message_bytes
DEFAULT_WORKERS = _DEFAULTS.workers
CLIENT_GONE = object()

#: The largest request each small unary method accepts (bytes); larger is INVALID_ARGUMENT before it is parsed.
#: SubmitJob, ReportStatus and the streams' messages are bounded by ``max_message_bytes``.
SMALL_REQUEST_BYTES = 16 * 1024
#: Calls in flight at once over all peers (past it a new call is RESOURCE_EXHAUSTED): the bound of the store pool's
#: queue too. Far above legitimate use (every token's streams are bounded by max_streams_per_token).
MAX_CONCURRENT_RPCS = 4096
#: what bounds a small request, said with its refusal
_SMALL_REQUEST_FIELDS = {
    "CancelJobRequest": "job_id at most 128 characters, reason at most 1024",
    "RespondInvitationRequest": "job_id at most 128 characters, reason at most 1024",
}


def now_ms() -> int:
    return int(time.time() * 1000)



class Refused(Exception):
    """End the call with ``code`` and ``reason``; logged (one line, rate-limited) when ``log`` is true."""

    def __init__(self, code: grpc.StatusCode, reason: str, log: bool = True) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.log = log


def checked_text(check: Callable[..., str], *args: Any) -> str:
    """Run a text check where the text enters; a text over its limit is INVALID_ARGUMENT naming the field."""
    try:
        return check(*args)
    except TextTooLong as exc:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None


class Outbox:
    """A side's outbox: the broker puts from any thread, the stream's coroutine awaits ``get``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: "asyncio.Queue[Any]" = asyncio.Queue()

    def put(self, item: Any) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._queue.put_nowait(item)
        else:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def get(self, timeout: float) -> Any:
        return await asyncio.wait_for(self._queue.get(), timeout)


class RelayCore:
    """What both servicers share: the store (through the thread pool), tokens, broker, limits, job-stream wake-ups.

    Lives on the event loop: everything but the store calls runs on the loop's thread, so the counters need no lock.
    """

    def __init__(self, store: Store, tokens: TokenBook, clock_ms: Callable[[], int], settings: RelaySettings,
                 loop: asyncio.AbstractEventLoop, executor: futures.ThreadPoolExecutor) -> None:
        self.store = store
        self.tokens = tokens
        self.clock_ms = clock_ms
        self.settings = settings
        self.poll_s = settings.poll_s
        self.loop = loop
        self.executor = executor
        self.broker = Broker(
            make_attached=lambda client: ps.PolicyReply(attached=ps.PolicyAttached(client_id=client)),
            make_station_left=lambda reason: ps.PolicyRequest(station_left=ps.StationLeft(reason=reason)),
            make_job_ended=lambda status: ps.PolicyRequest(job_ended=ps.JobEnded(status=status)),
            make_outbox=lambda: Outbox(loop),
        )
        self.refusals = RateLimitedLog(_log)
        #: this relay's place among relays sharing the store (:mod:`~strands_robots.relay.cluster`); None: alone
        self.cluster: Any = None
        self._changed = asyncio.Event()
        self.generation = 0
        self._streams: Dict[Principal, int] = {}
        self._submit_locks: Dict[str, asyncio.Lock] = {}

    async def run(self, fn: Callable, *args: Any) -> Any:
        """Run a store call on the thread pool and await it (the event loop never blocks on the store)."""
        return await self.loop.run_in_executor(self.executor, fn, *args)

    # -- auth and limits -----------------------------------------------------------------------------------
    async def principal(self, context: Any, kind: str) -> Principal:
        result = self.tokens.authenticate(context.invocation_metadata(), kind)
        if result.principal is None:
            raise Refused(grpc.StatusCode.UNAUTHENTICATED, result.reason)
        if kind == KIND_STATION:
            await self.run(self.store.station_heard, result.principal.name, self.clock_ms())
        return result.principal

    @contextlib.contextmanager
    def stream_slot(self, principal: Principal, counted: bool = True):
        """Hold one of ``principal``'s ``max_streams_per_token`` stream slots for the stream's life.

        ``counted=False``: a stream another relay of the cluster forwarded here (it holds the slot there).
        """
        if not counted:
            yield
            return
        held = self._streams.get(principal, 0)
        limit = self.settings.max_streams_per_token
        if held >= limit:
            raise Refused(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"max_streams_per_token ({limit}) reached: {principal.kind} {principal.name!r} already "
                          f"holds {held} open stream(s) on this relay")
        self._streams[principal] = held + 1
        try:
            yield
        finally:
            left = self._streams.get(principal, 1) - 1
            if left > 0:
                self._streams[principal] = left
            else:
                self._streams.pop(principal, None)

    def submit_lock(self, client_id: str) -> asyncio.Lock:
        lock = self._submit_locks.get(client_id)
        if lock is None:
            lock = self._submit_locks[client_id] = asyncio.Lock()
        return lock

    async def first_message(self, requests: AsyncIterator[Any], method: str, kind: str) -> Any:
        """Return the stream's first message, of ``kind``; refuse one that is late, missing or of another kind."""
        deadline = self.settings.first_message_deadline_s
        try:
            first = await asyncio.wait_for(requests.__anext__(), deadline)
        except asyncio.TimeoutError:
            raise Refused(grpc.StatusCode.DEADLINE_EXCEEDED,
                          f"no {kind} within the relay's first-message deadline of {deadline:g} s "
                          f"(first_message_deadline_s): {method} ended") from None
        except StopAsyncIteration:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                          f"the first message of {method} must be {kind}; the stream ended before it") from None
        if first.WhichOneof("kind") != kind:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"the first message of {method} must be {kind}")
        return first

    # -- jobs ------------------------------------------------------------------------------------------------
    async def own_view(self, principal: Principal, job_id: str) -> JobView:
        """Return the job (with its snapshot) if ``principal`` may see it, else refuse with NOT_FOUND.

        A missing job and another's get the same answer, so ids do not leak.
        """
        if not job_id:
            view = None
        elif principal.kind == KIND_CLIENT:  # by the client's own name for the job
            view = await self.run(self.store.view_for_client, principal.name, job_id)
        else:
            view = await self.run(self.store.view, job_id)
        job = view.job if view is not None else None
        owner = job.client_id if (job and principal.kind == KIND_CLIENT) else (job.station_id if job else None)
        if view is None or owner != principal.name:
            who = "this client" if principal.kind == KIND_CLIENT else f"station {principal.name!r}"
            raise Refused(grpc.StatusCode.NOT_FOUND, f"no job {job_id!r} for {who}")
        return view

    async def own_job(self, principal: Principal, job_id: str) -> JobRecord:
        return (await self.own_view(principal, job_id)).job

    def visible_view_now(self, principal: Principal, job_id: str) -> JobView:
        """Return the job a client may see (synchronous: on the store's pool): its own, or one it is invited to.

        A client's own job is found by its own id for it; a comparison another team invited it to by the relay's
        id (``relay.job_teams``). A held job whose invitation passed its bound is ended first. Anything else is
        NOT_FOUND with the same words as an unknown job, so ids do not leak.
        """
        from strands_robots.relay import job_teams

        view = self.store.view_for_client(principal.name, job_id) if job_id else None
        if view is None or view.job.client_id != principal.name:
            view = job_teams.invited_view(self.store, principal.name, job_id) if job_id else None
        if view is None:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"no job {job_id!r} for this client")
        if (view.snapshot is None or view.snapshot.state not in TERMINAL_STATES) and \
                job_teams.settle(self.store, view.job, self.clock_ms(), self.settings.invitation_timeout_s):
            view = self.store.view(view.job.job_id) or view
        return view

    async def visible_view(self, principal: Principal, job_id: str) -> JobView:
        return await self.run(self.visible_view_now, principal, job_id)

    def client_status_now(self, principal: Principal, view: JobView) -> Any:
        """Return the job's ``JobStatus`` as ``principal`` sees it (synchronous).

        With its id for the job, and what a held job waits for.
        """
        from strands_robots.relay import job_teams

        status = job_teams.scoped_status(self.status_of_view(view, shown_id(principal, view)),
                                         job_teams.slot_teams(view.job), principal.name)
        if view.snapshot is None:
            waiting = job_teams.held_message(self.store, view.job, self.settings.invitation_timeout_s)
            if waiting:
                status.message = waiting
        return status

    @staticmethod
    def status_of_view(view: JobView, shown: str = "") -> Any:
        """Return the job's ``JobStatus`` as its client sees it (the client's job id, or ``shown``)."""
        job, snap = view.job, view.snapshot
        if snap is not None:
            status = ev.JobStatus.FromString(snap.payload)
        else:
            request = es.SubmitJobRequest.FromString(job.request)
            status = ev.JobStatus(job_id=job.job_id, station_id=job.station_id, state="CREATED",
                                  episodes_total=request.episodes, updated_unix_ms=0,
                                  message=f"submitted; station {job.station_id!r} has not reported on it yet")
        status.job_id = shown or job.client_job_id
        if view.station_last_heard is not None:
            status.station_last_heard_unix_ms = view.station_last_heard
        else:
            status.ClearField("station_last_heard_unix_ms")
        return status

    async def status_of(self, job: JobRecord) -> Any:
        return self.status_of_view(await self.run(self.store.view, job.job_id))

    async def terminal_status(self, job: JobRecord, team: str = "") -> Optional[Any]:
        """Return the job's final status once it ended (None before); as ``team`` may read it when given."""
        view = await self.run(self.store.view, job.job_id)
        if view is not None and view.snapshot is not None and view.snapshot.state in TERMINAL_STATES:
            status = self.status_of_view(view)
            if team:
                from strands_robots.relay import job_teams

                status = job_teams.scoped_status(status, job_teams.slot_teams(job), team)
            return status
        return None

    # -- wake-ups for TakeJobs -----------------------------------------------------------------------------
    def notify(self) -> None:
        self.generation += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_change(self, seen: int, timeout: float) -> int:
        if self.generation == seen:
            changed = self._changed
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout)
        return self.generation


def shown_id(principal: Principal, view: JobView) -> str:
    """Return the id ``principal`` knows the job by.

    Its submitter's own id for it; the relay's for an invited team and a station.
    """
    job = view.job
    return job.client_job_id if principal.kind == KIND_CLIENT and job.client_id == principal.name else job.job_id


async def pump(requests: AsyncIterator[Any], on_message: Callable[[Any], None], outbox: Any, end: Any) -> None:
    """Hand every further message of a stream to ``on_message``; put ``end`` in ``outbox`` when the stream ends.

    A malformed message puts its :class:`Refused` there instead, so the stream ends with that reason.
    """
    last: Any = end
    try:
        async for message in requests:
            on_message(message)
    except Refused as refusal:
        last = refusal
    except Exception:  # the stream broke (peer gone, cancelled): same as its end
        pass
    finally:
        outbox.put(last)

