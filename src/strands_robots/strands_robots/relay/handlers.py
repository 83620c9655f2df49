"""The relay's gRPC method table and handlers: raw bytes in, parsed here, refusals answered as one logged line.

A malformed or oversized message is INVALID_ARGUMENT before any servicer sees it; a store failure is
UNAVAILABLE; anything else INTERNAL with its reason (never a traceback to the peer).
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable, Optional

import grpc
from google.protobuf.message import DecodeError

from strands_robots.relay.config import RelaySettings
from strands_robots.relay.core import _SMALL_REQUEST_FIELDS, SMALL_REQUEST_BYTES, Refused, RelayCore, _log
from strands_robots.relay.evaluation_service import EvaluationServicer
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.wire.proto import evaluation_service_pb2 as es
from strands_robots.wire.proto import policy_session_pb2 as ps
from strands_robots.wire.proto import station_service_pb2 as ss
from strands_robots.relay.station_service import StationServicer
from strands_robots.relay.store import (
    StoreError,
)

# -- method table: raw bytes in, parsed here (a malformed message is one logged line, never a traceback) --------
_SERVICES = {
    "strands_robots.relay.v1.Evaluation": (EvaluationServicer, {
        "SubmitJob": ("unary", es.SubmitJobRequest, es.SubmitJobResponse, None),
        # the poll every client repeats: run whole on a pool thread (it touches only the store and immutable state)
        "GetStatus": ("in_thread", es.GetStatusRequest, ev.JobStatus, SMALL_REQUEST_BYTES),
        "CancelJob": ("unary", es.CancelJobRequest, es.CancelJobResponse, SMALL_REQUEST_BYTES),
        "ServePolicy": ("bidi", ps.PolicyReply, ps.PolicyRequest, None),
        "RespondInvitation": ("unary", es.RespondInvitationRequest, es.RespondInvitationResponse,
                              SMALL_REQUEST_BYTES),
    }),
    "strands_robots.relay.v1.Station": (StationServicer, {
        "Heartbeat": ("unary", ss.HeartbeatRequest, ss.HeartbeatResponse, SMALL_REQUEST_BYTES),
        "ReportStatus": ("unary", ss.ReportStatusRequest, ss.ReportStatusResponse, None),
        "TakeJobs": ("server_stream", ss.TakeJobsRequest, ss.JobAssignment, SMALL_REQUEST_BYTES),
        "PolicySession": ("bidi", ps.PolicyRequest, ps.PolicyReply, None),
    }),
}


def _parse(core: RelayCore, method: str, cls: Any, raw: bytes, limit: Optional[int]) -> Any:
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


async def _refuse(core: RelayCore, context: Any, method: str, refusal: Refused) -> None:
    if refusal.log:
        core.refusals.warning(f"relay refused {method} from {context.peer()}: {refusal.code.name}: {refusal.reason}")
    await context.abort(refusal.code, refusal.reason)


async def _failed(core: RelayCore, context: Any, method: str, exc: BaseException) -> None:
    if isinstance(exc, StoreError):
        reason, code = f"relay store unavailable: {exc}", grpc.StatusCode.UNAVAILABLE
    else:
        reason, code = f"relay error in {method}: {type(exc).__name__}: {exc}", grpc.StatusCode.INTERNAL
        _log.debug("%s failed", method, exc_info=exc)
    core.refusals.warning(f"relay {method} from {context.peer()}: {code.name}: {reason}")
    await context.abort(code, reason)


def _handler(core: RelayCore, method: str, kind: str, request_cls: Any, response_cls: Any, limit: Optional[int],
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

    if kind in ("unary", "client_stream"):
        async def unary(raw: Any, context: Any) -> Any:
            try:
                if kind == "client_stream":
                    return await impl(requests_of(raw), context)
                return await impl(_parse(core, method, request_cls, raw, limit), context)
            except Refused as refusal:
                await _refuse(core, context, method, refusal)
            except (StoreError, Exception) as exc:  # noqa: BLE001 - answered with its reason, logged as one line
                if isinstance(exc, grpc.aio.AbortError):
                    raise
                await _failed(core, context, method, exc)
        if kind == "client_stream":
            return grpc.stream_unary_rpc_method_handler(unary, response_serializer=serialize)
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


def _more_methods() -> dict:
    """Methods served by modules of their own beside the two servicers: service -> [(class, methods)]."""
    from strands_robots.relay.leaderboard import LeaderboardService
    from strands_robots.relay.listing import ListingService
    from strands_robots.wire.proto import recording_pb2 as rp
    from strands_robots.relay.recordings import RecordingService
    from strands_robots.relay.suite_offers import SuiteOfferService
    from strands_robots.wire.proto import suites_pb2 as sp

    return {
        "strands_robots.relay.v1.Evaluation": [
            (ListingService, {"ListJobs": ("unary", es.ListJobsRequest, es.ListJobsResponse, SMALL_REQUEST_BYTES)}),
            (SuiteOfferService, {"ListSuites": ("unary", sp.ListSuitesRequest, sp.ListSuitesResponse,
                                                SMALL_REQUEST_BYTES)}),
            (LeaderboardService, {"Leaderboard": ("unary", es.LeaderboardRequest, es.LeaderboardResponse,
                                                  SMALL_REQUEST_BYTES)}),
            (RecordingService, {
                "ListRecordings": ("unary", rp.ListRecordingsRequest, rp.ListRecordingsResponse, SMALL_REQUEST_BYTES),
                "DownloadRecording": ("server_stream", rp.DownloadRecordingRequest, rp.RecordingChunk,
                                      SMALL_REQUEST_BYTES),
            }),
        ],
        "strands_robots.relay.v1.Station": [
            (RecordingService, {"UploadRecording": ("client_stream", rp.RecordingChunk, rp.UploadRecordingResponse,
                                                    None)}),
        ],
    }


def generic_handlers(core: RelayCore) -> list:
    """Bind every method to its servicer (one instance per class), counted and timed by ``core.metrics``."""
    metrics = getattr(core, "metrics", None)
    more = _more_methods()
    instances: dict = {}
    out = []
    for service, (servicer_cls, methods) in _SERVICES.items():
        handlers = {}
        for cls, table in [(servicer_cls, methods), *more.get(service, ())]:
            servicer = instances.get(cls) or instances.setdefault(cls, cls(core))
            for name, (kind, req, resp, limit) in table.items():
                method = f"{service.rsplit('.', 1)[-1]}.{name}"
                impl = getattr(servicer, name)
                if metrics is not None:
                    impl = metrics.instrument(method, kind, impl)
                handlers[name] = _handler(core, method, kind, req, resp, limit, impl)
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

