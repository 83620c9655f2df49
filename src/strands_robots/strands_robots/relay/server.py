"""The relay server: the Evaluation (client) and Station services over gRPC, on a store, with bearer tokens.

    python -m strands_robots.relay --listen 127.0.0.1:50051 --store sqlite:relay.db --tokens tokens.yaml
    strands-robots relay ...   (the same main)

What it does, and nothing more (it holds no job rules: the station does):

- every call is authenticated (``authorization: Bearer``); a client token may call only Evaluation, a
  station token only Station; every station call records when that station was last heard;
- a client sees only its own jobs: another client's job answers NOT_FOUND, exactly like a missing one, so
  job ids do not leak; a station sees only the jobs addressed to it;
- ``SubmitJob`` checks the job with the station core's rules and stores it; ``TakeJobs`` streams the
  station its open jobs, new ones and cancels (it re-reads the store every ``poll_s``, so a job submitted to
  another relay on the same PostgreSQL store reaches it too);
- ``ReportStatus`` stores each snapshot unless a newer one is stored; ``GetStatus`` returns the latest with
  the station's ``updated_unix_ms`` untouched and ``station_last_heard_unix_ms`` set when the station has
  been heard;
- policy sessions are brokered by :class:`~strands_robots.relay.sessions.Broker`;
- protobuf only (no pickle), bounded message sizes, TLS when a certificate is given.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import logging
import queue
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import grpc

from strands_robots.relay import job_request
from strands_robots.relay.auth import KIND_CLIENT, KIND_STATION, Principal, TokenBook, TokenFileError
from strands_robots.relay.proto import evaluation_pb2 as ev
from strands_robots.relay.proto import evaluation_service_pb2 as es
from strands_robots.relay.proto import evaluation_service_pb2_grpc as es_grpc
from strands_robots.relay.proto import policy_session_pb2 as ps
from strands_robots.relay.proto import station_service_pb2 as ss
from strands_robots.relay.proto import station_service_pb2_grpc as ss_grpc
from strands_robots.relay.sessions import END, Abort, Broker, SessionBusy
from strands_robots.relay.store import (
    TERMINAL_STATES,
    JobExists,
    JobRecord,
    JobView,
    Snapshot,
    Store,
    StoreError,
    open_store,
)

_log = logging.getLogger("strands_robots.relay")

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
DEFAULT_WORKERS = 96
_CLIENT_GONE = object()


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


class _Core:
    """What both servicers share: the store, the tokens, the broker, the wake-up for job streams."""

    def __init__(self, store: Store, tokens: TokenBook, clock_ms: Callable[[], int], poll_s: float) -> None:
        self.store = store
        self.tokens = tokens
        self.clock_ms = clock_ms
        self.poll_s = poll_s
        self.broker = Broker(
            make_attached=lambda client: ps.PolicyReply(attached=ps.PolicyAttached(client_id=client)),
            make_station_left=lambda reason: ps.PolicyRequest(station_left=ps.StationLeft(reason=reason)),
            make_job_ended=lambda status: ps.PolicyRequest(job_ended=ps.JobEnded(status=status)),
        )
        self._changed = threading.Condition()
        self._generation = 0

    # -- auth ----------------------------------------------------------------------------------------------
    def principal(self, context: Any, kind: str) -> Principal:
        result = self.tokens.authenticate(context.invocation_metadata(), kind)
        if result.principal is None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, result.reason)
        if kind == KIND_STATION:
            self.store.station_heard(result.principal.name, self.clock_ms())
        return result.principal

    def own_view(self, context: Any, principal: Principal, job_id: str) -> JobView:
        """Return the job (with its snapshot) if ``principal`` may see it, else abort with NOT_FOUND.

        A missing job and another's get the same answer, so ids do not leak.
        """
        view = self.store.view(job_id) if job_id else None
        job = view.job if view is not None else None
        owner = job.client_id if (job and principal.kind == KIND_CLIENT) else (job.station_id if job else None)
        if view is None or owner != principal.name:
            who = "this client" if principal.kind == KIND_CLIENT else f"station {principal.name!r}"
            context.abort(grpc.StatusCode.NOT_FOUND, f"no job {job_id!r} for {who}")
        return view

    def own_job(self, context: Any, principal: Principal, job_id: str) -> JobRecord:
        return self.own_view(context, principal, job_id).job

    # -- snapshots ------------------------------------------------------------------------------------------
    @staticmethod
    def status_of_view(view: JobView) -> Any:
        job, snap = view.job, view.snapshot
        if snap is not None:
            status = ev.JobStatus.FromString(snap.payload)
        else:
            request = es.SubmitJobRequest.FromString(job.request)
            status = ev.JobStatus(job_id=job.job_id, station_id=job.station_id, state="CREATED",
                                  episodes_total=request.episodes, updated_unix_ms=0,
                                  message=f"submitted; station {job.station_id!r} has not reported on it yet")
        if view.station_last_heard is not None:
            status.station_last_heard_unix_ms = view.station_last_heard
        else:
            status.ClearField("station_last_heard_unix_ms")
        return status

    def status_of(self, job: JobRecord) -> Any:
        return self.status_of_view(self.store.view(job.job_id))

    def terminal_status(self, job: JobRecord) -> Optional[Any]:
        view = self.store.view(job.job_id)
        if view is not None and view.snapshot is not None and view.snapshot.state in TERMINAL_STATES:
            return self.status_of_view(view)
        return None

    # -- wake-ups for TakeJobs -----------------------------------------------------------------------------
    def notify(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def wait_change(self, seen: int, timeout: float) -> int:
        with self._changed:
            if self._generation == seen:
                self._changed.wait(timeout)
            return self._generation

    @property
    def generation(self) -> int:
        with self._changed:
            return self._generation


def _store_guard(method: Callable) -> Callable:
    """Answer a store failure with UNAVAILABLE and the reason (not UNKNOWN with a traceback)."""
    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def streaming(self, request, context):
            try:
                yield from method(self, request, context)
            except StoreError as exc:
                context.abort(grpc.StatusCode.UNAVAILABLE, f"relay store unavailable: {exc}")
        return streaming

    @functools.wraps(method)
    def unary(self, request, context):
        try:
            return method(self, request, context)
        except StoreError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"relay store unavailable: {exc}")
    return unary


def _pump(request_iterator: Any, on_message: Callable[[Any], None], on_end: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            for message in request_iterator:
                on_message(message)
        except Exception:  # the stream broke (peer gone, cancelled): same as its end
            pass
        finally:
            on_end()

    thread = threading.Thread(target=run, name="relay-stream-reader", daemon=True)
    thread.start()
    return thread


class EvaluationServicer(es_grpc.EvaluationServicer):
    def __init__(self, core: _Core) -> None:
        self._core = core

    @_store_guard
    def SubmitJob(self, request, context):
        core = self._core
        principal = core.principal(context, KIND_CLIENT)
        try:
            job_id = job_request.check_submit(request, principal.name, core.tokens.stations)
        except job_request.InvalidJob as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        stored = es.SubmitJobRequest()
        stored.CopyFrom(request)
        stored.job_id = job_id
        record = JobRecord(job_id=job_id, client_id=principal.name, station_id=request.station_id,
                           request=stored.SerializeToString(deterministic=True), submitted_unix_ms=core.clock_ms())
        try:
            core.store.create_job(record)
        except JobExists:
            existing = core.store.get_job(job_id)
            if existing is not None and existing.client_id == principal.name and existing.request == record.request:
                return es.SubmitJobResponse(job_id=job_id)  # a retried submit
            context.abort(grpc.StatusCode.ALREADY_EXISTS, f"job id {job_id!r} is taken; choose another")
        core.notify()
        _log.info("job %s submitted by %s for station %s (%d task(s), %d episode(s))", job_id, principal.name,
                  request.station_id, len(request.tasks), request.episodes)
        return es.SubmitJobResponse(job_id=job_id)

    @_store_guard
    def GetStatus(self, request, context):
        core = self._core
        principal = core.principal(context, KIND_CLIENT)
        return core.status_of_view(core.own_view(context, principal, request.job_id))

    @_store_guard
    def CancelJob(self, request, context):
        core = self._core
        principal = core.principal(context, KIND_CLIENT)
        job = core.own_job(context, principal, request.job_id)
        if core.terminal_status(job) is not None:
            return es.CancelJobResponse(already_terminal=True)
        core.store.request_cancel(job.job_id, request.reason or f"cancelled by {principal.name}")
        core.notify()
        return es.CancelJobResponse(already_terminal=False)

    @_store_guard
    def ServePolicy(self, request_iterator, context):
        core = self._core
        principal = core.principal(context, KIND_CLIENT)
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("kind") != "attach":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message of ServePolicy must be attach")
        job = core.own_job(context, principal, first.attach.job_id)
        final = core.terminal_status(job)
        if final is not None:
            yield ps.PolicyRequest(job_ended=ps.JobEnded(status=final))
            return
        try:
            side = core.broker.open_client(job.job_id, principal.name)
        except SessionBusy as exc:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, str(exc))
        context.add_callback(lambda: side.outbox.put(_CLIENT_GONE))
        _pump(request_iterator, lambda reply: core.broker.from_client(side, reply),
              lambda: side.outbox.put(_CLIENT_GONE))
        try:
            while True:
                try:
                    item = side.outbox.get(timeout=core.poll_s)
                except queue.Empty:  # look for a job end another relay stored
                    final = core.terminal_status(job)
                    if final is not None:
                        yield ps.PolicyRequest(job_ended=ps.JobEnded(status=final))
                        return
                    continue
                if item is END or item is _CLIENT_GONE:
                    return
                yield item
        finally:
            core.broker.close_client(side)


class StationServicer(ss_grpc.StationServicer):
    def __init__(self, core: _Core) -> None:
        self._core = core

    def _check_station_id(self, context: Any, principal: Principal, station_id: str) -> None:
        if station_id and station_id != principal.name:
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"this token is station {principal.name!r}'s, not {station_id!r}'s")

    @_store_guard
    def Heartbeat(self, request, context):
        principal = self._core.principal(context, KIND_STATION)
        self._check_station_id(context, principal, request.station_id)
        return ss.HeartbeatResponse(relay_unix_ms=self._core.clock_ms())

    @_store_guard
    def ReportStatus(self, request, context):
        core = self._core
        principal = core.principal(context, KIND_STATION)
        self._check_station_id(context, principal, request.station_id)
        response = ss.ReportStatusResponse()
        for snapshot in request.snapshots:
            job = core.store.get_job(snapshot.job_id) if snapshot.job_id else None
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
                stored = core.store.put_snapshot(Snapshot(job_id=clean.job_id, updated_unix_ms=clean.updated_unix_ms,
                                                          state=clean.state,
                                                          payload=clean.SerializeToString(deterministic=True)))
            except StoreError as exc:
                response.refused.append(f"{snapshot.job_id}: {exc}")
                continue
            if stored:
                response.stored += 1
                if clean.state in TERMINAL_STATES:
                    core.broker.job_ended(clean.job_id, core.status_of(job))
            else:
                response.stale += 1
        return response

    @_store_guard
    def TakeJobs(self, request, context):
        core = self._core
        principal = core.principal(context, KIND_STATION)
        self._check_station_id(context, principal, request.station_id)
        sent, cancels_sent = set(), set()
        seen = core.generation
        while context.is_active():
            for job in core.store.open_jobs_for_station(principal.name):
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
            seen = core.wait_change(seen, core.poll_s)

    @_store_guard
    def PolicySession(self, request_iterator, context):
        core = self._core
        principal = core.principal(context, KIND_STATION)
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("kind") != "open":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message of PolicySession must be open")
        job = core.own_job(context, principal, first.open.job_id)
        side = core.broker.open_station(job.job_id, principal.name)
        context.add_callback(lambda: side.outbox.put(END))
        _pump(request_iterator, lambda req: core.broker.from_station(side, req), lambda: side.outbox.put(END))
        try:
            while True:
                try:
                    item = side.outbox.get(timeout=core.poll_s)
                except queue.Empty:
                    if not context.is_active():
                        return
                    continue
                if item is END:
                    return
                if isinstance(item, Abort):
                    context.abort(grpc.StatusCode.ABORTED, item.reason)
                yield item
        finally:
            core.broker.close_station(side, f"station {principal.name!r} closed the policy session of job "
                                            f"{job.job_id!r}")


class RelayServer:
    """The relay in this process: ``start()`` returns the bound port, ``stop()`` ends it.

    :param listen: ``host:port`` (port 0 picks a free one).
    :param tls: serve TLS with this certificate and key; plain when None.
    :param poll_s: how often job streams re-read the store (jobs from other relays sharing it).
    """

    def __init__(self, store: Store, tokens: TokenBook, listen: str = "127.0.0.1:0", *,
                 tls: Optional[TlsConfig] = None, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 workers: int = DEFAULT_WORKERS, poll_s: float = 1.0,
                 clock_ms: Callable[[], int] = now_ms) -> None:
        self.core = _Core(store, tokens, clock_ms, poll_s)
        self.listen = listen
        options = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.keepalive_time_ms", 20000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5000),
            ("grpc.so_reuseport", 0),
        ]
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="relay"),
                                   options=options, maximum_concurrent_rpcs=workers * 4)
        es_grpc.add_EvaluationServicer_to_server(EvaluationServicer(self.core), self._server)
        ss_grpc.add_StationServicer_to_server(StationServicer(self.core), self._server)
        if tls is not None:
            creds = grpc.ssl_server_credentials([(tls.private_key, tls.cert_chain)])
            self.port = self._server.add_secure_port(listen, creds)
        else:
            self.port = self._server.add_insecure_port(listen)
        if self.port == 0:
            raise OSError(f"cannot listen on {listen}")

    def start(self) -> int:
        self._server.start()
        return self.port

    def stop(self, grace_s: float = 1.0) -> None:
        self._server.stop(grace_s).wait()

    def wait(self) -> None:
        self._server.wait_for_termination()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strands-robots relay",
                                description="The relay between stations and Evaluation Clients (gRPC).")
    p.add_argument("--listen", default="127.0.0.1:50051", help="host:port to listen on (default %(default)s)")
    p.add_argument("--store", required=True, help="sqlite:PATH or postgresql://USER@HOST:PORT/DB")
    p.add_argument("--tokens", required=True, help="YAML file: clients: {name: token}, stations: {id: token}")
    p.add_argument("--tls-cert", help="PEM certificate chain: serve TLS (with --tls-key)")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    p.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES,
                   help="largest message either way (default %(default)s)")
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                   help="server threads (default %(default)s); every open stream holds one: a station's job "
                        "stream and policy session, a client's serve_policy")
    p.add_argument("--poll-s", type=float, default=1.0, help="job streams re-read the store this often")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the relay until SIGINT/SIGTERM. Exit 0 on a stop signal, 2 on a bad argument or file."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[relay] %(asctime)s %(message)s")
    if bool(args.tls_cert) != bool(args.tls_key):
        print("relay: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    if args.workers < 4:
        print(f"relay: --workers must be >= 4 (streams hold threads), got {args.workers}", file=sys.stderr)
        return 2
    if not args.poll_s > 0:
        print(f"relay: --poll-s must be > 0, got {args.poll_s}", file=sys.stderr)
        return 2
    if args.max_message_bytes < 1024:
        print(f"relay: --max-message-bytes must be >= 1024, got {args.max_message_bytes}", file=sys.stderr)
        return 2
    try:
        tokens = TokenBook.from_file(args.tokens)
        tls = TlsConfig.from_files(args.tls_cert, args.tls_key) if args.tls_cert else None
        store = open_store(args.store)
    except (TokenFileError, StoreError, OSError) as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return 2
    try:
        server = RelayServer(store, tokens, args.listen, tls=tls, max_message_bytes=args.max_message_bytes,
                             workers=args.workers, poll_s=args.poll_s)
    except (OSError, RuntimeError) as exc:
        print(f"relay: cannot listen on {args.listen}: {exc}", file=sys.stderr)
        store.close()
        return 2
    from strands_robots.stop_signals import StopSignals

    # Stop signals set an event from a thread of their own (setting it inside the handler could deadlock the
    # wait below); every further signal during the stop is taken too.
    with StopSignals() as signals:
        server.start()
        print(f"relay listening on {args.listen} ({'TLS' if tls else 'plain'}; store {args.store.split(':')[0]}; "
              f"{len(tokens.clients)} client(s), {len(tokens.stations)} station(s))", flush=True)
        try:
            while not signals.event.wait(0.5):
                pass
        finally:
            server.stop()
            store.close()
    return 0
