"""The relay server: the Evaluation (client) and Station services over gRPC, on a store, with bearer tokens.

    python -m strands_robots.relay --listen 127.0.0.1:50051 --store sqlite:relay.db --tokens tokens.yaml
    strands-robots relay ...   (the same main; --config config/relay.yaml for the limits)

What it does, and nothing more (it holds no job rules: the station does):

- every call is authenticated (``authorization: Bearer``); a client token may call only Evaluation, a
  station token only Station; every station call records when that station was last heard;
- a client sees only its own jobs: another client's job answers NOT_FOUND, exactly like a missing one, so
  job ids do not leak; a client's job ids are its own (two teams may both name a job ``nightly-1``: the relay
  gives the station-side job an id of its own when the name is taken, and never tells the client); a station
  sees only the jobs addressed to it;
- ``SubmitJob`` checks the job with the station core's rules and the team's quotas and stores it; ``TakeJobs``
  streams the station its open jobs, new ones and cancels (it re-reads the store every ``poll_s``, so a job
  submitted to another relay on the same PostgreSQL store reaches it too);
- ``ReportStatus`` stores each snapshot by the store's order (the station's per-job ``sequence``; a terminal
  state is final; a snapshot removing finished episodes is refused); ``GetStatus`` returns the latest with
  the station's ``updated_unix_ms`` untouched and ``station_last_heard_unix_ms`` set when the station has
  been heard;
- policy sessions are brokered by :class:`~strands_robots.relay.sessions.Broker`;
- protobuf only (no pickle), bounded message sizes, TLS when a certificate is given.

No peer can freeze it: the server is asyncio (``grpc.aio``), so an open stream holds no thread, only a coroutine;
store calls (synchronous SQLite / psycopg) run on a small thread pool (``workers``), never on the event loop;
``GetStatus``, the poll every client repeats, runs whole on that pool (one thread hop, not two).
A policy stream must send its first message within ``first_message_deadline_s``; one token holds at most
``max_streams_per_token`` streams; keepalive pings drop peers that vanished. Every refused or malformed request
is logged as one line (never a traceback), at a bounded rate (:class:`~strands_robots.relay.rate_limit.RateLimitedLog`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Dict, Optional, Sequence

import grpc
from google.protobuf.message import DecodeError

from strands_robots.relay import job_request
from strands_robots.relay.auth import KIND_CLIENT, KIND_STATION, Principal, TokenBook, TokenFileError
from strands_robots.relay.config import RelayConfigError, RelaySettings, flag_of, load_relay_settings
from strands_robots.relay.proto import evaluation_pb2 as ev
from strands_robots.relay.proto import evaluation_service_pb2 as es
from strands_robots.relay.proto import policy_session_pb2 as ps
from strands_robots.relay.proto import station_service_pb2 as ss
from strands_robots.relay.rate_limit import RateLimitedLog
from strands_robots.relay.sessions import END, Abort, Broker, SessionBusy
from strands_robots.relay.store import (
    TERMINAL_STATES,
    JobExists,
    JobRecord,
    JobView,
    Snapshot,
    Store,
    StoreError,
    Verdict,
    open_store,
)
from strands_robots.relay.text_limits import (
    TextTooLong,
    check_cancel_reason,
    check_id,
    cut_policy_reply,
    cut_policy_request,
    snapshot_refusal,
)

_log = logging.getLogger("strands_robots.relay")

_DEFAULTS = RelaySettings()
DEFAULT_MAX_MESSAGE_BYTES = _DEFAULTS.max_message_bytes
DEFAULT_WORKERS = _DEFAULTS.workers
_CLIENT_GONE = object()

#: The largest request each small unary method accepts (bytes); larger is INVALID_ARGUMENT before it is parsed.
#: SubmitJob, ReportStatus and the streams' messages are bounded by ``max_message_bytes``.
SMALL_REQUEST_BYTES = 16 * 1024
#: Calls in flight at once over all peers (past it a new call is RESOURCE_EXHAUSTED): the bound of the store pool's
#: queue too. Far above legitimate use (every token's streams are bounded by max_streams_per_token).
MAX_CONCURRENT_RPCS = 4096
#: what bounds a small request, said with its refusal
_SMALL_REQUEST_FIELDS = {
    "CancelJobRequest": "job_id at most 128 characters, reason at most 1024",
}


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class TlsConfig:
    """PEM certificate chain and private key of the relay."""

    cert_chain: bytes
    private_key: bytes

    @classmethod
    def from_files(cls, cert: "str | Path", key: "str | Path") -> "TlsConfig":
        return cls(Path(cert).read_bytes(), Path(key).read_bytes())


class Refused(Exception):
    """End the call with ``code`` and ``reason``; logged (one line, rate-limited) when ``log`` is true."""

    def __init__(self, code: grpc.StatusCode, reason: str, log: bool = True) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.log = log


def _text(check: Callable[..., str], *args: Any) -> str:
    """Run a text check where the text enters; a text over its limit is INVALID_ARGUMENT naming the field."""
    try:
        return check(*args)
    except TextTooLong as exc:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None


class _Outbox:
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


class _Core:
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
            make_outbox=lambda: _Outbox(loop),
        )
        self.refusals = RateLimitedLog(_log)
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
    def stream_slot(self, principal: Principal):
        """Hold one of ``principal``'s ``max_streams_per_token`` stream slots for the stream's life."""
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

    def streams_of(self, principal: Principal) -> int:
        return self._streams.get(principal, 0)

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

    @staticmethod
    def status_of_view(view: JobView) -> Any:
        """Return the job's ``JobStatus`` as its client sees it (the client's job id)."""
        job, snap = view.job, view.snapshot
        if snap is not None:
            status = ev.JobStatus.FromString(snap.payload)
        else:
            request = es.SubmitJobRequest.FromString(job.request)
            status = ev.JobStatus(job_id=job.job_id, station_id=job.station_id, state="CREATED",
                                  episodes_total=request.episodes, updated_unix_ms=0,
                                  message=f"submitted; station {job.station_id!r} has not reported on it yet")
        status.job_id = job.client_job_id
        if view.station_last_heard is not None:
            status.station_last_heard_unix_ms = view.station_last_heard
        else:
            status.ClearField("station_last_heard_unix_ms")
        return status

    async def status_of(self, job: JobRecord) -> Any:
        return self.status_of_view(await self.run(self.store.view, job.job_id))

    async def terminal_status(self, job: JobRecord) -> Optional[Any]:
        view = await self.run(self.store.view, job.job_id)
        if view is not None and view.snapshot is not None and view.snapshot.state in TERMINAL_STATES:
            return self.status_of_view(view)
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


async def _pump(requests: AsyncIterator[Any], on_message: Callable[[Any], None], outbox: Any, end: Any) -> None:
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


class EvaluationServicer:
    """The client-facing service (``SubmitJob``, ``GetStatus``, ``CancelJob``, ``ServePolicy``), as coroutines."""

    def __init__(self, core: _Core) -> None:
        self._core = core

    async def SubmitJob(self, request, context):
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        _text(check_id, request.station_id, "station_id")
        if request.HasField("job_id"):
            _text(check_id, request.job_id, "job_id")
        try:
            job_id = job_request.check_submit(request, principal.name, core.tokens.stations)
        except job_request.InvalidJob as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        stored = es.SubmitJobRequest()
        stored.CopyFrom(request)
        stored.job_id = job_id
        content = stored.SerializeToString(deterministic=True)
        async with core.submit_lock(principal.name):
            if await self._same_job(principal, job_id, content):
                return es.SubmitJobResponse(job_id=job_id)  # a retried submit
            load = await core.run(core.store.client_load, principal.name)
            limits = core.settings
            if load.open_jobs + 1 > limits.max_open_jobs_per_token:
                raise Refused(grpc.StatusCode.RESOURCE_EXHAUSTED,
                              f"max_open_jobs_per_token ({limits.max_open_jobs_per_token}) reached: client "
                              f"{principal.name!r} has {load.open_jobs} job(s) not ended")
            if load.queued_episodes + int(request.episodes) > limits.max_queued_episodes_per_token:
                raise Refused(grpc.StatusCode.RESOURCE_EXHAUSTED,
                              f"max_queued_episodes_per_token ({limits.max_queued_episodes_per_token}) would be "
                              f"passed: client {principal.name!r} has {load.queued_episodes} episode(s) still to "
                              f"run and this job adds {request.episodes}")
            relay_id = job_id  # the station-side id: the client's, unless another job holds it
            for _ in range(3):
                record = JobRecord(job_id=relay_id, client_id=principal.name, station_id=request.station_id,
                                   request=content, submitted_unix_ms=core.clock_ms(),
                                   episodes_total=int(request.episodes), client_job_id=job_id)
                try:
                    await core.run(core.store.create_job, record)
                    break
                except JobExists:
                    if await self._same_job(principal, job_id, content):  # a retry another relay stored
                        return es.SubmitJobResponse(job_id=job_id)
                    # another team's job holds the id on the station side: ours gets a relay id, silently
                    relay_id = job_request.new_job_id()
            else:
                raise Refused(grpc.StatusCode.UNAVAILABLE, f"could not store job {job_id!r}; submit it again")
        core.notify()
        _log.info("job %s (%s's %r) submitted for station %s (%d task(s), %d episode(s))", relay_id, principal.name,
                  job_id, request.station_id, len(request.tasks), request.episodes)
        return es.SubmitJobResponse(job_id=job_id)

    async def _same_job(self, principal: Principal, job_id: str, content: bytes) -> bool:
        """Return True when the client already holds ``job_id`` with this content; refuse other content."""
        existing = await self._core.run(self._core.store.view_for_client, principal.name, job_id)
        if existing is None:
            return False
        if existing.job.request == content:
            return True
        raise Refused(grpc.StatusCode.ALREADY_EXISTS,
                      f"job id {job_id!r} is taken by another of your jobs (with other tasks or episodes); "
                      f"choose another")

    def GetStatus(self, request, context):
        """Answer a poll on a pool thread (kind ``in_thread``): the hot call makes one thread hop, not two."""
        core = self._core
        result = core.tokens.authenticate(context.invocation_metadata(), KIND_CLIENT)
        if result.principal is None:
            raise Refused(grpc.StatusCode.UNAUTHENTICATED, result.reason)
        _text(check_id, request.job_id, "job_id")
        view = core.store.view_for_client(result.principal.name, request.job_id) if request.job_id else None
        if view is None:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"no job {request.job_id!r} for this client")
        return core.status_of_view(view)

    async def CancelJob(self, request, context):
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        _text(check_id, request.job_id, "job_id")
        _text(check_cancel_reason, request.reason)
        job = await core.own_job(principal, request.job_id)
        if await core.terminal_status(job) is not None:
            return es.CancelJobResponse(already_terminal=True)
        await core.run(core.store.request_cancel, job.job_id, request.reason or f"cancelled by {principal.name}")
        core.notify()
        return es.CancelJobResponse(already_terminal=False)

    async def ServePolicy(self, requests, context):
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        with core.stream_slot(principal):
            await context.send_initial_metadata(())  # the relay holds the stream: the peer may wait on this
            first = await core.first_message(requests, "ServePolicy", "attach")
            job = await core.own_job(principal, _text(check_id, first.attach.job_id, "attach.job_id"))
            final = await core.terminal_status(job)
            if final is not None:
                yield ps.PolicyRequest(job_ended=ps.JobEnded(status=final))
                return
            try:
                side = core.broker.open_client(job.job_id, principal.name)
            except SessionBusy as exc:
                raise Refused(grpc.StatusCode.ALREADY_EXISTS, str(exc)) from None
            pump = asyncio.ensure_future(_pump(
                requests, lambda reply: core.broker.from_client(side, cut_policy_reply(reply)), side.outbox,
                _CLIENT_GONE))
            try:
                while True:
                    try:
                        item = await side.outbox.get(core.poll_s)
                    except asyncio.TimeoutError:  # look for a job end another relay stored
                        final = await core.terminal_status(job)
                        if final is not None:
                            yield ps.PolicyRequest(job_ended=ps.JobEnded(status=final))
                            return
                        continue
                    if item is END or item is _CLIENT_GONE:
                        return
                    if isinstance(item, Refused):
                        raise item
                    yield item
            finally:
                pump.cancel()
                core.broker.close_client(side)


class StationServicer:
    """The station-facing service (``Heartbeat``, ``ReportStatus``, ``TakeJobs``, ``PolicySession``)."""

    def __init__(self, core: _Core) -> None:
        self._core = core

    @staticmethod
    def _check_station_id(principal: Principal, station_id: str) -> None:
        _text(check_id, station_id, "station_id")
        if station_id and station_id != principal.name:
            raise Refused(grpc.StatusCode.PERMISSION_DENIED,
                          f"this token is station {principal.name!r}'s, not {station_id!r}'s")

    async def Heartbeat(self, request, context):
        principal = await self._core.principal(context, KIND_STATION)
        self._check_station_id(principal, request.station_id)
        return ss.HeartbeatResponse(relay_unix_ms=self._core.clock_ms())

    async def ReportStatus(self, request, context):
        core = self._core
        principal = await core.principal(context, KIND_STATION)
        self._check_station_id(principal, request.station_id)
        for index, snapshot in enumerate(request.snapshots):  # the whole report, before anything is stored
            reason = snapshot_refusal(snapshot)
            if reason:
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                              f"snapshots[{index}] (job {snapshot.job_id[:128]!r}): {reason}; nothing of this "
                              f"report was stored")
        response = ss.ReportStatusResponse()
        for snapshot in request.snapshots:
            job = await core.run(core.store.get_job, snapshot.job_id) if snapshot.job_id else None
            if job is None or job.station_id != principal.name:
                response.refused.append(f"{snapshot.job_id}: no such job for station {principal.name!r}")
                continue
            if snapshot.station_id and snapshot.station_id != principal.name:
                response.refused.append(f"{snapshot.job_id}: station_id {snapshot.station_id!r} is not this "
                                        f"token's station")
                continue
            if snapshot.state not in ("CREATED", "WAITING_POLICY", "RUNNING", "FINALIZING", *TERMINAL_STATES):
                response.refused.append(f"{snapshot.job_id}: unknown state {snapshot.state!r}")
                continue
            clean = ev.JobStatus()
            clean.CopyFrom(snapshot)
            clean.station_id = principal.name
            clean.ClearField("station_last_heard_unix_ms")  # the relay's to set, on every GetStatus
            try:
                verdict = await core.run(core.store.put_snapshot, Snapshot(
                    job_id=clean.job_id, updated_unix_ms=clean.updated_unix_ms, state=clean.state,
                    payload=clean.SerializeToString(deterministic=True), episodes_done=len(clean.episodes),
                    sequence=clean.sequence))
            except StoreError as exc:
                response.refused.append(f"{snapshot.job_id}: {exc}")
                continue
            if verdict is Verdict.STORED:
                response.stored += 1
                if clean.state in TERMINAL_STATES:
                    core.broker.job_ended(clean.job_id, await core.status_of(job))
            elif verdict is Verdict.FEWER_EPISODES:
                response.refused.append(
                    f"{snapshot.job_id}: snapshot (sequence {clean.sequence}) has {len(clean.episodes)} finished "
                    f"episode(s), fewer than the stored one: the relay never accepts a snapshot that removes "
                    f"finished episodes")
            else:  # STALE, or FINAL: a stored terminal state is never replaced
                response.stale += 1
        return response

    async def TakeJobs(self, request, context):
        core = self._core
        principal = await core.principal(context, KIND_STATION)
        self._check_station_id(principal, request.station_id)
        with core.stream_slot(principal):
            await context.send_initial_metadata(())
            sent, cancels_sent = set(), set()
            seen = core.generation
            while True:
                for job in await core.run(core.store.open_jobs_for_station, principal.name):
                    if job.job_id not in sent:
                        submit = es.SubmitJobRequest.FromString(job.request)
                        yield ss.JobAssignment(job=ss.Job(
                            job_id=job.job_id, client_id=job.client_id, station_id=job.station_id,
                            tasks=list(submit.tasks), episodes_total=submit.episodes,
                            submitted_unix_ms=job.submitted_unix_ms))
                        sent.add(job.job_id)
                    if job.cancel_requested and job.job_id not in cancels_sent:
                        yield ss.JobAssignment(cancel=ss.JobCancel(job_id=job.job_id, reason=job.cancel_reason))
                        cancels_sent.add(job.job_id)
                seen = await core.wait_change(seen, core.poll_s)

    async def PolicySession(self, requests, context):
        core = self._core
        principal = await core.principal(context, KIND_STATION)
        with core.stream_slot(principal):
            await context.send_initial_metadata(())
            first = await core.first_message(requests, "PolicySession", "open")
            job = await core.own_job(principal, _text(check_id, first.open.job_id, "open.job_id"))
            side = core.broker.open_station(job.job_id, principal.name)
            pump = asyncio.ensure_future(_pump(
                requests, lambda req: core.broker.from_station(side, cut_policy_request(req)), side.outbox, END))
            try:
                while True:
                    try:
                        item = await side.outbox.get(core.poll_s)
                    except asyncio.TimeoutError:
                        continue
                    if item is END:
                        return
                    if isinstance(item, Abort):
                        raise Refused(grpc.StatusCode.ABORTED, item.reason, log=False)
                    if isinstance(item, Refused):
                        raise item
                    yield item
            finally:
                pump.cancel()
                core.broker.close_station(side, f"station {principal.name!r} closed the policy session of job "
                                                f"{job.job_id!r}")


# -- method table: raw bytes in, parsed here (a malformed message is one logged line, never a traceback) --------
_SERVICES = {
    "strands_robots.relay.v1.Evaluation": (EvaluationServicer, {
        "SubmitJob": ("unary", es.SubmitJobRequest, es.SubmitJobResponse, None),
        # the poll every client repeats: run whole on a pool thread (it touches only the store and immutable state)
        "GetStatus": ("in_thread", es.GetStatusRequest, ev.JobStatus, SMALL_REQUEST_BYTES),
        "CancelJob": ("unary", es.CancelJobRequest, es.CancelJobResponse, SMALL_REQUEST_BYTES),
        "ServePolicy": ("bidi", ps.PolicyReply, ps.PolicyRequest, None),
    }),
    "strands_robots.relay.v1.Station": (StationServicer, {
        "Heartbeat": ("unary", ss.HeartbeatRequest, ss.HeartbeatResponse, SMALL_REQUEST_BYTES),
        "ReportStatus": ("unary", ss.ReportStatusRequest, ss.ReportStatusResponse, None),
        "TakeJobs": ("server_stream", ss.TakeJobsRequest, ss.JobAssignment, SMALL_REQUEST_BYTES),
        "PolicySession": ("bidi", ps.PolicyRequest, ps.PolicyReply, None),
    }),
}


def _parse(core: _Core, method: str, cls: Any, raw: bytes, limit: Optional[int]) -> Any:
    if limit is not None and len(raw) > limit:
        fields = _SMALL_REQUEST_FIELDS.get(cls.DESCRIPTOR.name, "ids at most 128 characters")
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                      f"{method}: a {cls.DESCRIPTOR.name} of {len(raw)} bytes is larger than the {limit} bytes "
                      f"this call accepts ({fields})")
    try:
        return cls.FromString(raw)
    except (DecodeError, ValueError) as exc:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                      f"{method}: malformed {cls.DESCRIPTOR.name} ({len(raw)} bytes): {exc}") from None


async def _refuse(core: _Core, context: Any, method: str, refusal: Refused) -> None:
    if refusal.log:
        core.refusals.warning(f"relay refused {method} from {context.peer()}: {refusal.code.name}: {refusal.reason}")
    await context.abort(refusal.code, refusal.reason)


async def _failed(core: _Core, context: Any, method: str, exc: BaseException) -> None:
    if isinstance(exc, StoreError):
        reason, code = f"relay store unavailable: {exc}", grpc.StatusCode.UNAVAILABLE
    else:
        reason, code = f"relay error in {method}: {type(exc).__name__}: {exc}", grpc.StatusCode.INTERNAL
        _log.debug("%s failed", method, exc_info=exc)
    core.refusals.warning(f"relay {method} from {context.peer()}: {code.name}: {reason}")
    await context.abort(code, reason)


def _handler(core: _Core, method: str, kind: str, request_cls: Any, response_cls: Any, limit: Optional[int],
             impl: Callable) -> Any:
    serialize = response_cls.SerializeToString

    async def requests_of(raw_iterator: AsyncIterator[bytes]) -> AsyncIterator[Any]:
        async for raw in raw_iterator:
            yield _parse(core, method, request_cls, raw, limit)

    if kind == "in_thread":  # a plain function: the aio server runs it on its thread pool (the store's)
        def in_thread(raw: bytes, context: Any) -> Any:
            try:
                return impl(_parse(core, method, request_cls, raw, limit), context)
            except Refused as refusal:
                if refusal.log:
                    core.refusals.warning(f"relay refused {method} from {context.peer()}: {refusal.code.name}: "
                                          f"{refusal.reason}")
                context.abort(refusal.code, refusal.reason)
            except Exception as exc:  # noqa: BLE001 - answered with its reason, logged as one line
                if isinstance(exc, StoreError):
                    code, reason = grpc.StatusCode.UNAVAILABLE, f"relay store unavailable: {exc}"
                else:
                    code, reason = grpc.StatusCode.INTERNAL, f"relay error in {method}: {type(exc).__name__}: {exc}"
                core.refusals.warning(f"relay {method} from {context.peer()}: {code.name}: {reason}")
                context.abort(code, reason)
        return grpc.unary_unary_rpc_method_handler(in_thread, response_serializer=serialize)

    if kind == "unary":
        async def unary(raw: bytes, context: Any) -> Any:
            try:
                return await impl(_parse(core, method, request_cls, raw, limit), context)
            except Refused as refusal:
                await _refuse(core, context, method, refusal)
            except (StoreError, Exception) as exc:  # noqa: BLE001 - answered with its reason, logged as one line
                if isinstance(exc, grpc.aio.AbortError):
                    raise
                await _failed(core, context, method, exc)
        return grpc.unary_unary_rpc_method_handler(unary, response_serializer=serialize)

    async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            if kind == "bidi":
                source = impl(requests_of(request), context)
            else:
                source = impl(_parse(core, method, request_cls, request, limit), context)
            async for item in source:
                yield item
        except Refused as refusal:
            await _refuse(core, context, method, refusal)
        except (StoreError, Exception) as exc:  # noqa: BLE001 - answered with its reason, logged as one line
            if isinstance(exc, grpc.aio.AbortError):
                raise
            await _failed(core, context, method, exc)

    if kind == "bidi":
        return grpc.stream_stream_rpc_method_handler(streaming, response_serializer=serialize)
    return grpc.unary_stream_rpc_method_handler(streaming, response_serializer=serialize)


def _generic_handlers(core: _Core) -> list:
    out = []
    for service, (servicer_cls, methods) in _SERVICES.items():
        servicer = servicer_cls(core)
        handlers = {name: _handler(core, f"{service.rsplit('.', 1)[-1]}.{name}", kind, req, resp, limit,
                                   getattr(servicer, name))
                    for name, (kind, req, resp, limit) in methods.items()}
        out.append(grpc.method_handlers_generic_handler(service, handlers))
    return out


def server_options(settings: RelaySettings) -> list:
    """Return the gRPC server options: message sizes, and keepalive that drops dead peers."""
    return [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        # ping every connection; one that does not answer within the timeout is closed (its streams end)
        ("grpc.keepalive_time_ms", int(settings.keepalive_time_s * 1000)),
        ("grpc.keepalive_timeout_ms", int(settings.keepalive_timeout_s * 1000)),
        ("grpc.http2.ping_timeout_ms", int(settings.keepalive_timeout_s * 1000)),  # newer cores time pings by this
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),  # keep pinging an idle stream: that is where a peer dies unseen
        # clients may ping every 5 s even with no call open (theirs ping every 20 s); more often is a strike,
        # and a peer with 2 strikes is sent GOAWAY
        ("grpc.http2.min_ping_interval_without_data_ms", 5000),
        ("grpc.http2.max_ping_strikes", 2),
        ("grpc.max_connection_idle_ms", int(settings.max_connection_idle_s * 1000)),
        ("grpc.so_reuseport", 0),
    ]


class RelayServer:
    """The relay in this process, on an asyncio event loop of its own thread: ``start()`` returns the port.

    :param listen: ``host:port`` (port 0 picks a free one).
    :param tls: serve TLS with this certificate and key; plain when None.
    :param settings: limits, deadlines and keepalive (:class:`~strands_robots.relay.config.RelaySettings`);
        ``max_message_bytes``, ``workers`` and ``poll_s`` given as keywords override it.
    """

    def __init__(self, store: Store, tokens: TokenBook, listen: str = "127.0.0.1:0", *,
                 tls: Optional[TlsConfig] = None, settings: Optional[RelaySettings] = None,
                 max_message_bytes: Optional[int] = None, workers: Optional[int] = None,
                 poll_s: Optional[float] = None, clock_ms: Callable[[], int] = now_ms) -> None:
        import dataclasses

        settings = settings or RelaySettings()
        overrides = {k: v for k, v in (("max_message_bytes", max_message_bytes), ("workers", workers),
                                        ("poll_s", poll_s)) if v is not None}
        self.settings = dataclasses.replace(settings, **overrides)
        self.listen = listen
        self._executor = futures.ThreadPoolExecutor(max_workers=self.settings.workers,
                                                    thread_name_prefix="relay-store")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="relay-loop", daemon=True)
        self._thread.start()
        try:
            self.core, self._server, self.port = self._call(self._build(store, tokens, tls, clock_ms))
        except BaseException:
            self._close_loop()
            raise

    def _call(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _build(self, store: Store, tokens: TokenBook, tls: Optional[TlsConfig], clock_ms: Callable) -> Any:
        core = _Core(store, tokens, clock_ms, self.settings, self._loop, self._executor)
        server = grpc.aio.server(migration_thread_pool=self._executor, handlers=_generic_handlers(core),
                                 options=server_options(self.settings), maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS)
        if tls is not None:
            creds = grpc.ssl_server_credentials([(tls.private_key, tls.cert_chain)])
            port = server.add_secure_port(self.listen, creds)
        else:
            port = server.add_insecure_port(self.listen)
        if port == 0:
            raise OSError(f"cannot listen on {self.listen}")
        return core, server, port

    def start(self) -> int:
        self._call(self._server.start())
        return self.port

    def stop(self, grace_s: float = 1.0) -> None:
        if not self._loop.is_closed():
            try:
                self._call(self._server.stop(grace_s), timeout=grace_s + 30.0)
            finally:
                self._close_loop()

    def _close_loop(self) -> None:
        core = getattr(self, "core", None)  # absent when the constructor failed
        if core is not None:
            core.refusals.flush()
        async def cancel_the_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self._call(cancel_the_rest(), timeout=10.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        if not self._loop.is_running():
            self._loop.close()
        self._executor.shutdown(wait=True)

    def wait(self) -> None:
        self._thread.join()


def is_loopback(listen: str) -> bool:
    """Return True when ``host:port`` names a loopback address (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    import ipaddress

    host = listen.rsplit(":", 1)[0].strip("[]") if ":" in listen else listen
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def plaintext_warning(listen: str, tls: Optional[TlsConfig]) -> str:
    """Return the warning for a plaintext relay on a non-loopback address; "" when there is nothing to say."""
    if tls is not None or is_loopback(listen):
        return ""
    return (f"WARNING: the relay serves PLAINTEXT on {listen}, a non-loopback address: every token, job and result "
            f"crosses the network unencrypted and readable by anyone on the path; give --tls-cert and --tls-key "
            f"(or listen on 127.0.0.1 behind a TLS proxy)")


def _parser(defaults: RelaySettings) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strands-robots relay",
                                description="The relay between stations and Evaluation Clients (gRPC).")
    p.add_argument("--config", help="relay settings file (config/relay.yaml); flags given beside it win")
    p.add_argument("--listen", default=None, help="host:port to listen on (default: the config's host and port, "
                                                  "else 127.0.0.1:50051)")
    p.add_argument("--store", default=None, help="sqlite:PATH or postgresql://USER@HOST:PORT/DB")
    p.add_argument("--tokens", required=True, help="YAML file: clients: {name: token}, stations: {id: token}")
    p.add_argument("--tls-cert", help="PEM certificate chain: serve TLS (with --tls-key)")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    helps = {
        "poll_s": "job streams re-read the store this often (s)",
        "workers": "threads running store calls off the event loop (streams hold none)",
        "max_message_bytes": "largest message either way",
        "first_message_deadline_s": "a policy stream's attach/open must come within this (s)",
        "max_streams_per_token": "streams one token may hold open at once",
        "max_open_jobs_per_token": "jobs not ended per client token",
        "max_queued_episodes_per_token": "episodes a client's open jobs may still have to run",
        "keepalive_time_s": "ping every connection this often (s)",
        "keepalive_timeout_s": "drop a connection whose ping is unanswered this long (s)",
        "max_connection_idle_s": "close a connection with no call for this long (s)",
    }
    for key, text in helps.items():
        default = getattr(defaults, key)
        p.add_argument(flag_of(key), dest=key, type=type(default), default=default,
                       help=f"{text} (default %(default)s)")
    return p


def _settings_from_args(args: argparse.Namespace, base: RelaySettings) -> "tuple[RelaySettings, str]":
    import dataclasses

    from strands_robots.relay.config import settings_refusal

    values = {}
    for field in dataclasses.fields(RelaySettings):
        if field.name not in ("host", "port", "store") and hasattr(args, field.name):
            value = getattr(args, field.name)
            reason = settings_refusal(field.name, value)
            if reason:
                return base, f"{flag_of(field.name)}: {reason.split(': ', 1)[1]}"
            values[field.name] = value
    return dataclasses.replace(base, **values), ""


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the relay until SIGINT/SIGTERM. Exit 0 on a stop signal, 2 on a bad argument or file."""
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    base = RelaySettings()
    if known.config:
        try:
            base = load_relay_settings(known.config)
        except RelayConfigError as exc:
            print(f"relay: {exc}", file=sys.stderr)
            return 2
    args = _parser(base).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[relay] %(asctime)s %(message)s")
    if bool(args.tls_cert) != bool(args.tls_key):
        print("relay: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    settings, reason = _settings_from_args(args, base)
    if reason:
        print(f"relay: {reason}", file=sys.stderr)
        return 2
    listen = args.listen or f"{settings.host}:{settings.port or 50051}"
    store_url = args.store or settings.store
    if not store_url:
        print("relay: --store is required (sqlite:PATH or postgresql://...), or a config file's store", file=sys.stderr)
        return 2
    try:
        tokens = TokenBook.from_file(args.tokens)
        tls = TlsConfig.from_files(args.tls_cert, args.tls_key) if args.tls_cert else None
        store = open_store(store_url)
    except (TokenFileError, StoreError, OSError) as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return 2
    warning = plaintext_warning(listen, tls)
    if warning:
        _log.warning("%s", warning)
    try:
        server = RelayServer(store, tokens, listen, tls=tls, settings=settings)
    except (OSError, RuntimeError) as exc:
        print(f"relay: cannot listen on {listen}: {exc}", file=sys.stderr)
        store.close()
        return 2
    from strands_robots.stop_signals import StopSignals

    # Stop signals set an event from a thread of their own (setting it inside the handler could deadlock the
    # wait below); every further signal during the stop is taken too.
    with StopSignals() as signals:
        server.start()
        print(f"relay listening on {listen} ({'TLS' if tls else 'plain'}; store {store_url.split(':')[0]}; "
              f"{len(tokens.clients)} client(s), {len(tokens.stations)} station(s))", flush=True)
        try:
            while not signals.event.wait(0.5):
                pass
        finally:
            server.stop()
            store.close()
    return 0
