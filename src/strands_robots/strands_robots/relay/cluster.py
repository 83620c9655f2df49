"""Several relays on one store: each registers its address, and a job's policy session meets on one of them.

A relay started with an address others can reach (``--advertise``; by default its listen address when that is
not a wildcard and the store is PostgreSQL) joins the cluster of relays sharing the store:

- every ``heartbeat_s`` it writes ``relays(relay_id, address, heard_unix_ms)`` (its id is new at each start),
  stamped by the database's clock: whether a relay is alive is judged by the database's clock alone
  (:mod:`~strands_robots.relay.cluster_rows`), never by comparing two relays' clocks;
- the first side of a job's policy session (station or client) to reach a relay claims the job's **home** for
  that relay (:mod:`~strands_robots.relay.cluster_rows`); a side reaching any other relay is forwarded there,
  over the relay's own public services with the side's own bearer token (so the home authenticates it exactly
  as if it had come itself) and one extra metadata key naming the forwarding relay, sealed with a key the store
  holds (a forwarded call is never forwarded again: a relay that is not the home refuses it with UNAVAILABLE and
  the sender looks again; the home holds no ``max_streams_per_token`` slot for it, the forwarding relay does);
- a home not heard for ``stale_s`` (killed) is taken over by the next relay a side of the job reaches: the
  client side a relay forwards to a lost home is attached again, on the new home, without its stream ending;
  the station side's stream is ended (ABORTED, with the reason), and the station opens a new session, as it
  does after any lost session (the interrupted episode is an ``infrastructure_fault`` and its task runs again);
- a home that still beats but that a relay could not reach for longer than ``stale_s`` (a wrong advertised
  address, a partition between relays) is taken over by that relay the same way (only while the unreachable
  relay still holds it); a home failing the TLS handshake (its certificate does not chain to this relay's own)
  is a configuration fault: the side is refused, saying so, and the home stays;
- a forward carries the side's own bearer token, so it never crosses between hosts in plaintext: a relay without
  TLS forwards only to a home on a loopback address (the same host), and refuses the side (FAILED_PRECONDITION,
  naming the home and the rule) rather than send its token to another host unencrypted. Give every relay of a
  cluster spanning hosts ``--tls-cert``/``--tls-key`` (they trust their own chain for each other).

Stations and clients accept several relay addresses (``client.relay_targets``), so a station whose relay died
reconnects to another one. No broker process and no relay-to-relay protocol of its own: the store holds who is
where, gRPC carries the forwarded streams.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import uuid
from typing import Any, Awaitable, Callable, Dict, Optional

import grpc

from strands_robots.client.relay_targets import is_loopback
from strands_robots.relay.store import Store, StoreError

_log = logging.getLogger("strands_robots.relay")

#: metadata key a relay adds to a call it forwards: the forwarding relay's id, sealed (``relay_id.mac``)
HOP_KEY = "x-strands-relay-hop"
DEFAULT_STALE_S = 3.0


class PeerLost(Exception):
    """The home relay a call was forwarded to could not be reached, or went away mid-stream."""


class PeerUntrusted(PeerLost):
    """The home relay failed the TLS handshake: its certificate does not chain to this relay's own."""


class PlaintextHop(Exception):
    """This relay has no TLS and the home is on another host: a forward would carry a token in plaintext."""


def plaintext_hop(address: str, tls: bool) -> str:
    """Return why forwarding to the relay at ``address`` is refused ("" when it may go).

    Without TLS only a home on a loopback address (this host) is forwarded to: a forwarded call carries the
    side's bearer token, which must not cross between hosts unencrypted.
    """
    if tls or is_loopback(address):
        return ""
    return (f"the home relay {address} is on another host and this relay has no TLS: forwarding would send the "
            f"side's token there in plaintext, so it is refused; give every relay of the cluster --tls-cert and "
            f"--tls-key (they trust their own certificate chain for each other), or keep the cluster on one host")


class Cluster:
    """This relay's place among the relays sharing its store (see the module doc).

    :param run: runs a store call off the event loop (``RelayCore.run``).
    :param root_certificates: PEM the peers' TLS certificates chain to (the relays' own chain); None: plain.
    """

    def __init__(self, store: Store, address: str, run: Callable[..., Awaitable[Any]], *,
                 stale_s: float = DEFAULT_STALE_S,
                 root_certificates: Optional[bytes] = None, max_message_bytes: int = 16 * 1024 * 1024) -> None:
        if stale_s <= 0:
            raise ValueError(f"stale_s must be > 0, got {stale_s!r}")
        self.store = store
        self.address = address
        self.relay_id = f"relay-{uuid.uuid4().hex[:12]}"
        self._run = run
        self.stale_ms = int(stale_s * 1000)
        self.heartbeat_s = stale_s / 3.0
        self._root = root_certificates
        self._max_bytes = max_message_bytes
        self._channels: Dict[str, Any] = {}
        self._task: Optional[asyncio.Task] = None
        self._secret = b""

    # -- lifetime ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._secret = (await self._run(self.store.cluster_secret)).encode()
        await self._run(self.store.relay_heard, self.relay_id, self.address)
        # this relay holds the address now: an earlier run of it there (killed, restarted) is gone for good
        earlier = await self._run(self.store.relays_replaced, self.address, self.relay_id)
        if earlier:
            _log.info("relay %s replaces %d earlier relay(s) at %s: their sessions move here at once",
                      self.relay_id, earlier, self.address)
        self._task = asyncio.ensure_future(self._heartbeats())
        _log.info("relay %s in the cluster on %s (homes of relays silent for %.1f s are taken over)",
                  self.relay_id, self.address, self.stale_ms / 1000)
        if self._root is None and not is_loopback(self.address):
            _log.warning("WARNING: relay %s joins the cluster on %s without TLS: policy sessions whose two sides "
                         "reach relays on different hosts are refused (a forward would carry their tokens in "
                         "plaintext); give every relay --tls-cert and --tls-key", self.relay_id, self.address)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self._run(self.store.relay_heard, self.relay_id, self.address)
            except StoreError as exc:  # the store is down: every call says so; the next beat tries again
                _log.warning("relay %s could not record its heartbeat: %s", self.relay_id, exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        try:
            await self._run(self.store.relay_gone, self.relay_id)
        except StoreError:
            pass
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()

    # -- homes --------------------------------------------------------------------------------------------------
    async def home_of(self, job_id: str) -> Optional[str]:
        """Return the address of the relay that brokers ``job_id``'s session; None when it is this one."""
        home = await self._run(self.store.claim_session_home, job_id, self.relay_id, self.stale_ms)
        if home.relay_id == self.relay_id:
            return None
        if not home.address:  # its relay row went between the two reads (a relay stopping): look once more
            home = await self._run(self.store.claim_session_home, job_id, self.relay_id, self.stale_ms)
            if home.relay_id == self.relay_id or not home.address:
                return None
        return home.address

    async def still_home(self, job_id: str) -> bool:
        """Whether this relay still holds ``job_id``'s home (another relay may have taken it over)."""
        home = await self._run(self.store.session_home, job_id)
        return home is None or home.relay_id == self.relay_id

    async def take_over(self, job_id: str, address: str, failing_s: float, reason: str) -> bool:
        """Take ``job_id``'s home from the relay at ``address``: it beats, but this relay could not reach it.

        Forwards to it failed for ``failing_s`` (past the stale bound). True when this relay is the home now.
        """
        taken = await self._run(self.store.take_over_session_home, job_id, address, self.relay_id)
        if taken:
            _log.warning("relay %s takes over the policy session of job %s from the relay at %s: it still beats on "
                         "the store but could not be reached for %.1f s (past the cluster's stale bound of "
                         "%.1f s; last: %s)", self.relay_id, job_id, address, failing_s, self.stale_ms / 1000,
                         reason)
        return bool(taken)

    # -- forwarding -------------------------------------------------------------------------------------------
    def channel(self, address: str) -> Any:
        """Return the channel to the relay at ``address``.

        :raises PlaintextHop: this relay has no TLS and ``address`` is not on this host (:func:`plaintext_hop`).
        """
        refusal = plaintext_hop(address, self._root is not None)
        if refusal:
            raise PlaintextHop(refusal)
        channel = self._channels.get(address)
        if channel is None:
            opts = [("grpc.max_send_message_length", self._max_bytes),
                    ("grpc.max_receive_message_length", self._max_bytes),
                    ("grpc.keepalive_time_ms", 10000), ("grpc.keepalive_timeout_ms", 5000),
                    ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000)]
            if self._root is not None:
                channel = grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(self._root), opts)
            else:
                channel = grpc.aio.insecure_channel(address, opts)
            self._channels[address] = channel
        return channel

    def _seal(self, relay_id: str, authorization: str) -> str:
        return hmac.new(self._secret, f"{relay_id}\n{authorization}".encode(), hashlib.sha256).hexdigest()[:32]

    def forward_metadata(self, context: Any) -> tuple:
        """Return the metadata a forwarded call carries: the side's own bearer token, and this relay's id.

        The id is sealed with the store's cluster key over the token (``relay_id.mac``), so the home can tell a
        call a relay forwarded from one a station or client made with the key set by hand.
        """
        auth = [(k, v) for k, v in context.invocation_metadata() if k == "authorization"]
        token = str(auth[0][1]) if auth else ""
        return (*auth, (HOP_KEY, f"{self.relay_id}.{self._seal(self.relay_id, token)}"))

    def forwarded_by_peer(self, context: Any) -> bool:
        """Whether a relay of this cluster forwarded this call (its hop sealed with the cluster key).

        Such a stream holds a ``max_streams_per_token`` slot on the relay the side reached, not here too.
        """
        relay_id, _, mac = forwarded_by(context).rpartition(".")
        if not relay_id or not self._secret:
            return False
        token = next((str(v) for k, v in context.invocation_metadata() if k == "authorization"), "")
        return hmac.compare_digest(mac, self._seal(relay_id, token))


def forwarded_by(context: Any) -> str:
    """Return the hop of a forwarded call (``relay_id.mac``; "" for a call a station or client made itself)."""
    for key, value in context.invocation_metadata():
        if key == HOP_KEY:
            return str(value)
    return ""


async def forward_stream(cluster: Cluster, address: str, method: str, first: Any, inbox: Any, context: Any,
                         request_cls: Any, response_cls: Any, established: list):
    """Forward one bidi stream to the home relay at ``address``; yield what the home answers.

    It sends ``first``, then ``inbox.messages()`` until the stream ends.

    ``established`` gets ``True`` once the home accepted the call. Raises :class:`PeerLost` when the home cannot
    be reached or its connection breaks (UNAVAILABLE), ``grpc.aio.AioRpcError`` for the home's own refusals, and
    the sender's own :class:`~strands_robots.relay.core.Refused` for a malformed message it sent (parsed here,
    as on a direct stream: the forwarded call is cancelled, so the home lets its side go, and the sender gets
    the status and message a direct stream gives).
    """
    from strands_robots.relay.core import Refused

    call = cluster.channel(address).stream_stream(
        method, request_serializer=request_cls.SerializeToString,
        response_deserializer=response_cls.FromString)(metadata=cluster.forward_metadata(context))
    refused: list = []

    async def send() -> None:
        try:
            await call.write(first)
            async for item in inbox.messages():
                await call.write(item)
            await call.done_writing()
        except Refused as refusal:
            refused.append(refusal)
            call.cancel()

    sender = asyncio.ensure_future(send())
    try:
        try:
            await call.wait_for_connection()
            established.append(True)
            async for item in call:
                yield item
        except (grpc.aio.AioRpcError, asyncio.CancelledError, asyncio.InvalidStateError) as exc:
            if refused:  # the sender's malformed message cancelled the call
                raise refused[0] from None
            if isinstance(exc, asyncio.CancelledError):
                raise
            if isinstance(exc, asyncio.InvalidStateError):  # the call ended while the sender wrote
                raise PeerLost(f"relay {address}: the stream ended") from None
            if exc.code() == grpc.StatusCode.UNAVAILABLE and "handshake failed" in (exc.details() or "").lower():
                raise PeerUntrusted(f"relay {address} failed the TLS handshake (relays of a cluster trust their "
                                    f"own certificate chain for each other): {exc.details()}") from None
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                raise PeerLost(f"relay {address}: {exc.code().name}: {exc.details()}") from None
            raise
        if refused:
            raise refused[0]
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        call.cancel()
