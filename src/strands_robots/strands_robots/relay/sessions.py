"""The policy-session broker: pairs a job's station stream with its policy client's stream.

Each job has at most one station side and one client side at a time; a comparison job has one session per slot
(``compare.slots``), each with its own two sides, keyed by (job, slot) (the slot is "" for a job of one policy).
Messages from the station (``PolicyRequest``) go to the client's outbox, replies from the client (``PolicyReply``)
to the station's outbox; the relay adds only its own kinds:

- ``attached`` to the station when both sides are present (the station waits for it before an episode), with
  the client's declared ``PolicySpec`` from its attach (the station's compatibility gate checks it);
- a station opening a side for a job whose side it still holds replaces it: the old stream is aborted
  ("replaced by a newer policy session ...") and the client told ``station_left``; replies are forwarded
  only for requests the current station side sent, so a late answer to the old side is dropped;
- ``station_left`` to the client when the station's stream ends (the client keeps waiting: a station that
  reconnects opens a new session);
- when the client's stream ends while a station is paired, the station's stream is ended with an
  :class:`Abort` whose reason says so ("... disconnected mid-episode ep_0003 ..."), so the station ends that
  episode instead of waiting for a chunk that will not come;
- a client's ``error`` answer to anything but a preflight is its last: the Evaluation Client ends its stream after
  it and attaches again for the next episode. The client leaves the session when that answer is forwarded, not
  when its stream end reaches the relay (which can come after the station already opened the next episode's
  session): the station is never paired with a client on its way out, so that client's stream end is never
  counted as a disconnect, and its new attach is not refused as a second client. Its stream is ended (``END``);
- ``job_ended`` to the client when the job reaches a terminal state (the last message of its stream).

Requests a station sends before a client is attached wait in the client's outbox (it is created with the
session). The broker pairs the sides present in this relay process; relays sharing a PostgreSQL store bring
both sides of a job to one of them, its home (:mod:`~strands_robots.relay.cluster`).

No grpc here: the servicers in ``server.py`` pump the outboxes onto the streams. An outbox is anything with a
thread-safe ``put``; the broker makes them with ``make_outbox`` (a ``queue.Queue`` by default; the asyncio server
gives one its stream coroutine awaits).
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple


class SessionBusy(Exception):
    """The job already has a policy client; the message says which."""


@dataclass(frozen=True)
class Abort:
    """Put in a side's outbox: end that stream with this reason."""

    reason: str


#: Put in a side's outbox: end that stream normally (after what was queued before it).
END = object()

#: Unanswered requests a client side remembers the kind of (a station sends one at a time; more are timed out).
MAX_ASKED = 256


@dataclass(eq=False)
class Side:
    """One end of a session: who it is and what is waiting to be sent to it."""

    job_id: str
    name: str
    #: the comparison job's slot this session serves ("" for a job of one policy)
    slot: str = ""
    outbox: "queue.Queue[Any]" = field(default_factory=queue.Queue)
    #: request ids this (station) side sent and the client has not answered yet
    pending: set = field(default_factory=set)
    #: the client's declared ``PolicySpec`` from its attach (None: it declared none); the station gets it in
    #: ``attached``
    spec: Any = None
    #: request id -> kind of the requests forwarded to this (client) side and not answered yet, at most
    #: ``MAX_ASKED`` (the oldest forgotten first): whether an ``error`` answers a preflight
    asked: Dict[int, str] = field(default_factory=dict)

    def ask(self, request: Any) -> None:
        """Put a station's request in this (client) side's outbox, noting what it asks."""
        if request.request_id:
            self.asked.pop(request.request_id, None)
            self.asked[request.request_id] = request.WhichOneof("kind")
            while len(self.asked) > MAX_ASKED:
                del self.asked[next(iter(self.asked))]
        self.outbox.put(request)


class _Session:
    __slots__ = ("station", "client", "episode_id", "client_backlog", "ended")

    def __init__(self) -> None:
        self.station: Optional[Side] = None
        self.client: Optional[Side] = None
        self.episode_id = ""
        self.client_backlog: list = []
        self.ended = False


class Broker:
    """Thread-safe registry of policy sessions, one per job.

    :param make_attached: ``client_id -> PolicyReply`` announcing the client to the station.
    :param make_station_left: ``reason -> PolicyRequest`` telling the client the station went away.
    :param make_job_ended: ``JobStatus -> PolicyRequest`` telling the client the job ended.
    :param make_outbox: makes each side's outbox (``put`` from any thread).
    """

    def __init__(self, make_attached: Callable[[str], Any], make_station_left: Callable[[str], Any],
                 make_job_ended: Callable[[Any], Any], make_outbox: Callable[[], Any] = queue.Queue) -> None:
        self._lock = threading.Lock()
        self._make_outbox = make_outbox
        self._sessions: Dict[Tuple[str, str], _Session] = {}
        self._make_attached = make_attached
        self._make_station_left = make_station_left
        self._make_job_ended = make_job_ended

    def _session(self, key: Tuple[str, str]) -> _Session:
        s = self._sessions.get(key)
        if s is None:
            s = self._sessions[key] = _Session()
        return s

    def _attached(self, client: Side) -> Any:
        reply = self._make_attached(client.name)
        if client.spec is not None:
            reply.attached.spec.CopyFrom(client.spec)
        return reply

    def _drop_if_idle(self, key: Tuple[str, str]) -> None:
        s = self._sessions.get(key)
        if s is not None and s.station is None and s.client is None:
            del self._sessions[key]

    # -- the two ends open and close ---------------------------------------------------------------------------
    def open_station(self, job_id: str, station_id: str, slot: str = "") -> Side:
        """Open the station's side of (job, slot); a side the station still had for it is replaced (and aborted).

        Only the job's own station can open it, so a second open means the first is stale: a station that
        restarted, or a connection the relay has not yet seen die. Waiting for it would block the recovery.
        """
        with self._lock:
            s = self._session((job_id, slot))
            if s.station is not None:
                reason = f"replaced by a newer policy session of station {station_id!r} for {_what(job_id, slot)}"
                s.station.outbox.put(Abort(reason))
                s.client_backlog.clear()
                if s.client is not None:
                    s.client.outbox.put(self._make_station_left(reason))
            side = s.station = Side(job_id, station_id, slot, outbox=self._make_outbox())
            s.episode_id = ""
            if s.client is not None:
                side.outbox.put(self._attached(s.client))
            return side

    def open_client(self, job_id: str, client_id: str, spec: Any = None, slot: str = "") -> Side:
        """Open the client side of (job, slot); ``spec`` (its attach's ``PolicySpec`` or None) goes in ``attached``."""
        with self._lock:
            s = self._session((job_id, slot))
            if s.client is not None:
                raise SessionBusy(f"a policy client ({s.client.name!r}) already serves {_what(job_id, slot)}")
            side = s.client = Side(job_id, client_id, slot, outbox=self._make_outbox(), spec=spec)
            for msg in s.client_backlog:
                side.ask(msg)
            s.client_backlog.clear()
            if s.station is not None:
                s.station.outbox.put(self._attached(side))
            return side

    def close_station(self, side: Side, reason: str) -> None:
        """Forget the station's side (its stream ended); the client, if any, is told ``station_left``."""
        with self._lock:
            s = self._sessions.get((side.job_id, side.slot))
            if s is None or s.station is not side:
                return
            s.station = None
            s.episode_id = ""
            s.client_backlog.clear()
            if s.client is not None:
                s.client.outbox.put(self._make_station_left(reason))
            self._drop_if_idle((side.job_id, side.slot))

    def close_client(self, side: Side) -> None:
        """Forget the client's side (its stream ended); a paired station's stream is aborted with the reason."""
        with self._lock:
            s = self._sessions.get((side.job_id, side.slot))
            if s is None or s.client is not side:
                return
            s.client = None
            if s.station is not None and s.ended:
                s.station.outbox.put(END)  # the job is over: nothing is lost
                s.station = None
            elif s.station is not None:
                where = f"mid-episode {s.episode_id}" if s.episode_id else "between episodes"
                s.station.outbox.put(Abort(f"policy client {side.name!r} disconnected {where} of "
                                           f"{_what(side.job_id, side.slot)}"))
                s.station = None
                s.episode_id = ""
            self._drop_if_idle((side.job_id, side.slot))

    # -- traffic ---------------------------------------------------------------------------------------------
    def from_station(self, side: Side, request: Any) -> None:
        """Forward a ``PolicyRequest`` from the station to the client (queued until one attaches)."""
        kind = request.WhichOneof("kind")
        with self._lock:
            s = self._sessions.get((side.job_id, side.slot))
            if s is None or s.station is not side:
                return
            if kind == "episode_start":
                s.episode_id = request.episode_start.episode_id
            elif kind == "episode_end":
                s.episode_id = ""
            if request.request_id:
                side.pending.add(request.request_id)
            if s.client is not None:
                s.client.ask(request)
            else:
                s.client_backlog.append(request)

    def from_client(self, side: Side, reply: Any) -> None:
        """Forward a ``PolicyReply`` to the station; dropped unless it answers that station's open request.

        So a late answer to a replaced (or closed) station side never reaches the next one, whose request ids
        start again at 1. An ``error`` to anything but a preflight is the client's last answer: it leaves the
        session here (see the module docstring).
        """
        with self._lock:
            s = self._sessions.get((side.job_id, side.slot))
            if s is None or s.client is not side:
                return
            asked = side.asked.pop(reply.request_id, "")
            if s.station is not None and reply.request_id in s.station.pending:
                s.station.pending.discard(reply.request_id)
                s.station.outbox.put(reply)
            if reply.WhichOneof("kind") == "error" and asked != "preflight":
                s.client = None
                side.outbox.put(END)
                self._drop_if_idle((side.job_id, side.slot))

    def job_ended(self, job_id: str, status: Any, scope: Optional[Callable[[Any, str], Any]] = None) -> None:
        """Tell the job's clients (every slot's) that the job reached a terminal state (``job_ended``); streams end.

        :param scope: ``(status, client_id) -> status`` as that client may read it (None: the same for all).
        """
        with self._lock:
            for key, s in self._sessions.items():
                if key[0] != job_id:
                    continue
                s.ended = True
                if s.client is not None:
                    seen = status if scope is None else scope(status, s.client.name)
                    s.client.outbox.put(self._make_job_ended(seen))
                    s.client.outbox.put(END)


def _what(job_id: str, slot: str) -> str:
    """Name a session in a message: the job, and its slot when it is a comparison's."""
    return f"job {job_id!r} slot {slot!r}" if slot else f"job {job_id!r}"
