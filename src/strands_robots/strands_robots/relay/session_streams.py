"""The two ends of a policy session as the relay serves them: here (its broker) or forwarded to the job's home.

:func:`serve_client` runs ``Evaluation.ServePolicy`` after its ``attach``, :func:`serve_station` runs
``Station.PolicySession`` after its ``open``. Without a cluster (one relay) both are the broker's sides on this
relay. In a cluster (:mod:`~strands_robots.relay.cluster`) each first asks where the job's home is:

- home here: the broker's side, as on a single relay; the home is checked again every ``poll_s`` and, taken over
  by another relay (this one was thought dead), the client side is forwarded there and the station side ended
  (ABORTED: the station opens a new session, which meets the client on the new home);
- home elsewhere: the stream is forwarded there. The home lost (killed), the client side is attached again on
  whichever relay now claims the home (its stream goes on); the station side is ended (ABORTED, with why).
  Forwards to a home that still beats failing for longer than the stale bound, this relay takes the home over
  and serves the side here; a home failing the TLS handshake refuses the side (UNAVAILABLE, saying so), and so
  does a home on another host when this relay has no TLS (FAILED_PRECONDITION: its token would cross in plaintext).
  A malformed message of the side ends the stream with its INVALID_ARGUMENT, as on the home.

A call another relay forwarded is served only by the home: anywhere else it is refused with UNAVAILABLE and its
sender looks for the home again (a forwarded call is never forwarded a second time).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator

import grpc

from strands_robots.relay.cluster import PeerLost, PeerUntrusted, PlaintextHop, forward_stream, forwarded_by
from strands_robots.relay.core import CLIENT_GONE, Refused, RelayCore, pump
from strands_robots.wire.proto import policy_session_pb2 as ps
from strands_robots.relay.sessions import END, Abort, SessionBusy
from strands_robots.relay.store import JobRecord
from strands_robots.relay.text_limits import cut_policy_reply, cut_policy_request

_log = logging.getLogger("strands_robots.relay")

_EOF = object()
_CLIENT_METHOD = "/strands_robots.relay.v1.Evaluation/ServePolicy"
_STATION_METHOD = "/strands_robots.relay.v1.Station/PolicySession"


class _HomeMoved(Exception):
    """Another relay took over the job's home while this one served a side of it."""


class Inbox:
    """A stream's further messages, read once into a queue each leg of the session (here, forwarded) takes from."""

    def __init__(self, requests: AsyncIterator[Any]) -> None:
        self._queue: "asyncio.Queue[Any]" = asyncio.Queue()
        self._task = asyncio.ensure_future(self._read(requests))

    async def _read(self, requests: AsyncIterator[Any]) -> None:
        try:
            async for message in requests:
                self._queue.put_nowait(message)
        except Refused as refusal:
            self._queue.put_nowait(refusal)
        except Exception:  # noqa: BLE001 - the stream broke (peer gone, cancelled): same as its end
            pass
        finally:
            self._queue.put_nowait(_EOF)

    async def messages(self) -> AsyncIterator[Any]:
        """Yield the messages until the stream ends (a malformed one raises its :class:`Refused`)."""
        while True:
            item = await self._queue.get()
            if item is _EOF:
                self._queue.put_nowait(_EOF)  # the next leg sees the end too
                return
            if isinstance(item, Refused):
                self._queue.put_nowait(_EOF)
                raise item
            yield item

    def close(self) -> None:
        self._task.cancel()


async def _home(core: RelayCore, context: Any, job: JobRecord) -> Any:
    """Return the home's address, or None when it is this relay; refuse a forwarded call anywhere but home."""
    if core.cluster is None:
        return None
    address = await core.cluster.home_of(job.job_id)
    if address is not None and forwarded_by(context):
        raise Refused(grpc.StatusCode.UNAVAILABLE, f"the policy session of job {job.job_id!r} has its home on "
                      f"{address}, not on this relay: look again", log=False)
    return address


class _Unreachable:
    """How long forwards to one home have failed in a row (a new address, or an established call, starts anew)."""

    def __init__(self) -> None:
        self.address = ""
        self.since = 0.0

    def failed(self, address: str, established: bool) -> float:
        now = time.monotonic()
        if established or address != self.address:
            self.address, self.since = address, now
        return now - self.since


async def _lost(core: RelayCore, job: JobRecord, address: str, exc: PeerLost, unreachable: _Unreachable,
                established: bool) -> bool:
    """Return whether this relay took the home over after a failed forward to ``address`` (serve the side here).

    A home that still beats on the store but that this relay could not reach for longer than the cluster's stale
    bound is taken over (its sides there follow within ``poll_s``). A home failing the TLS handshake is a
    configuration fault, not a partition: the side is refused at once, saying so.
    """
    if isinstance(exc, PeerUntrusted):
        raise Refused(grpc.StatusCode.UNAVAILABLE, f"the policy session of job {job.job_id!r} cannot be forwarded "
                      f"to its home: {exc}") from None
    failing_s = unreachable.failed(address, established)
    if failing_s <= core.cluster.stale_ms / 1000:
        return False
    return await core.cluster.take_over(job.job_id, address, failing_s, str(exc))


def _hop_refused(job: JobRecord, exc: PlaintextHop) -> Refused:
    return Refused(grpc.StatusCode.FAILED_PRECONDITION, f"the policy session of job {job.job_id!r} cannot be "
                   f"forwarded to its home: {exc}")


async def _moved(core: RelayCore, job: JobRecord, last: list) -> bool:
    """Every ``poll_s`` (``last`` holds the time of the previous look): whether the job's home left this relay."""
    if core.cluster is None or time.monotonic() - last[0] < core.poll_s:
        return False
    last[0] = time.monotonic()
    return not await core.cluster.still_home(job.job_id)


# -- the client's side -------------------------------------------------------------------------------------------
async def serve_client(core: RelayCore, context: Any, principal: Any, job: JobRecord, first: Any,
                       requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    inbox = Inbox(requests)
    unreachable = _Unreachable()
    try:
        while True:
            address = await _home(core, context, job)
            if address is None:
                try:
                    async for item in _client_here(core, principal, job, first, inbox):
                        yield item
                    return
                except _HomeMoved:
                    _log.info("job %s: the policy session's home moved to another relay; the client follows it",
                              job.job_id)
                    continue
            established: list = []
            try:
                async for item in forward_stream(core.cluster, address, _CLIENT_METHOD, first, inbox, context,
                                                 ps.PolicyReply, ps.PolicyRequest, established):
                    yield item
                return
            except PlaintextHop as exc:
                raise _hop_refused(job, exc) from None
            except PeerLost as exc:
                _log.info("job %s: %s; attaching the client again where the home now is", job.job_id, exc)
                if await _lost(core, job, address, exc, unreachable, bool(established)):
                    continue
            except grpc.aio.AioRpcError as exc:
                raise Refused(exc.code(), exc.details() or exc.code().name, log=False) from None
            final = await core.terminal_status(job, principal.name)
            if final is not None:
                yield ps.PolicyRequest(job_ended=ps.JobEnded(status=final))
                return
            await asyncio.sleep(core.poll_s)
    finally:
        inbox.close()


def _spec_of(first: Any) -> tuple:
    """Return the attach's declared ``PolicySpec`` as the broker's extra argument (none declared: no argument)."""
    return (first.attach.spec,) if first.attach.HasField("spec") else ()


async def _client_here(core: RelayCore, principal: Any, job: JobRecord, first: Any,
                       inbox: Inbox) -> AsyncIterator[Any]:
    try:
        side = core.broker.open_client(job.job_id, principal.name, *_spec_of(first), slot=first.attach.slot)
    except SessionBusy as exc:
        raise Refused(grpc.StatusCode.ALREADY_EXISTS, str(exc)) from None
    pumping = asyncio.ensure_future(pump(
        inbox.messages(), lambda reply: core.broker.from_client(side, cut_policy_reply(reply)), side.outbox,
        CLIENT_GONE))
    last = [time.monotonic()]
    try:
        while True:
            try:
                item = await side.outbox.get(core.poll_s)
            except asyncio.TimeoutError:  # look for a job end another relay stored
                final = await core.terminal_status(job, principal.name)
                if final is not None:
                    yield ps.PolicyRequest(job_ended=ps.JobEnded(status=final))
                    return
            else:
                if item is END or item is CLIENT_GONE:
                    return
                if isinstance(item, Refused):
                    raise item
                yield item
            if await _moved(core, job, last):
                raise _HomeMoved()
    finally:
        pumping.cancel()
        core.broker.close_client(side)


# -- the station's side ------------------------------------------------------------------------------------------
async def serve_station(core: RelayCore, context: Any, principal: Any, job: JobRecord, first: Any,
                        requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    inbox = Inbox(requests)
    unreachable = _Unreachable()
    try:
        while True:
            address = await _home(core, context, job)
            if address is None:
                async for item in _station_here(core, principal, job, first.open.slot, inbox):
                    yield item
                return
            established: list = []
            try:
                async for item in forward_stream(core.cluster, address, _STATION_METHOD, first, inbox, context,
                                                 ps.PolicyRequest, ps.PolicyReply, established):
                    yield item
                return
            except PlaintextHop as exc:
                raise _hop_refused(job, exc) from None
            except PeerLost as exc:
                if established:
                    raise Refused(grpc.StatusCode.ABORTED, f"the relay brokering the policy session of job "
                                  f"{job.job_id!r} went away ({exc}); open a new session", log=False) from None
                _log.info("job %s: %s; looking for the policy session's home again", job.job_id, exc)
                if await _lost(core, job, address, exc, unreachable, False):
                    continue
            except grpc.aio.AioRpcError as exc:
                raise Refused(exc.code(), exc.details() or exc.code().name, log=False) from None
            await asyncio.sleep(core.poll_s)
    finally:
        inbox.close()


async def _station_here(core: RelayCore, principal: Any, job: JobRecord, slot: str,
                        inbox: Inbox) -> AsyncIterator[Any]:
    side = core.broker.open_station(job.job_id, principal.name, slot)
    pumping = asyncio.ensure_future(pump(
        inbox.messages(), lambda req: core.broker.from_station(side, cut_policy_request(req)), side.outbox, END))
    last = [time.monotonic()]
    try:
        while True:
            try:
                item = await side.outbox.get(core.poll_s)
            except asyncio.TimeoutError:
                pass
            else:
                if item is END:
                    return
                if isinstance(item, Abort):
                    raise Refused(grpc.StatusCode.ABORTED, item.reason, log=False)
                if isinstance(item, Refused):
                    raise item
                yield item
            if await _moved(core, job, last):
                raise Refused(grpc.StatusCode.ABORTED, f"the policy session of job {job.job_id!r} moved to another "
                              f"relay; open a new session", log=False)
    finally:
        pumping.cancel()
        core.broker.close_station(side, f"station {principal.name!r} closed the policy session of job "
                                        f"{job.job_id!r}")
