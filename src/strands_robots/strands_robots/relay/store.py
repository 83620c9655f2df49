"""The relay's durable store: jobs and their owners, the latest snapshot per job, when each station was heard.

The relay keeps no other state, so any number of relay processes may share one store (PostgreSQL); SQLite
is the embedded default (one file, WAL, one writer at a time).

Rules every store keeps (``test_store_contract.py`` runs the same tests against both):

1. A job is created once: a second ``create_job`` with the same id, or with a ``client_job_id`` its client
   already holds, raises :class:`JobExists`. A job has two ids: ``job_id`` (the relay's, what its station sees)
   and ``client_job_id`` (what its client named it; unique per client only), so teams never share an id space.
2. Snapshots are ordered by the station's per-job ``sequence``, never by its clock: a snapshot replaces the
   stored one only when its sequence is higher (:func:`replaces`), so a backlog re-reported after a reconnect or
   a station clock that jumped never rolls a job back. Sequence 0 (an older station) orders by
   ``updated_unix_ms`` among unnumbered snapshots (equal times replace) and never replaces a numbered one.
   A stored terminal snapshot (SUCCEEDED, FAILED, CANCELLED) is never replaced, and a snapshot with fewer
   finished episodes than the stored one is refused: ``put_snapshot`` says which (:class:`Verdict`).
3. ``station_heard`` only moves forward.
4. Everything written is committed before the call returns (SQLite ``synchronous=FULL``; PostgreSQL commits).
5. ``client_load`` counts a client's jobs not ended and the episodes they still have to run (``episodes_total``
   minus the finished episodes of the latest snapshot), for the relay's per-team quotas.
6. ``create_job(job, admit)`` reads that load, lets ``admit`` refuse, and writes the job under one lock per
   client shared by every relay on the store (PostgreSQL: a transaction-scoped advisory lock; SQLite: the
   file's write lock), so relays sharing a store keep a team's quotas exactly, not each its own share.
7. ``put_station_offer`` keeps each station's latest offer (its suites, serialized ``StationOffer``); the
   relay lists it and checks a job naming a suite against it.

This module is the contract: the records, the rules' :class:`Verdict`, the errors and the :class:`Store`
protocol. The SQL both dialects share is :mod:`~strands_robots.relay.sql_store`; the stores are
:mod:`~strands_robots.relay.sqlite_store` (the embedded default) and :mod:`~strands_robots.relay.postgres_store`;
:func:`~strands_robots.relay.store_url.open_store` opens the one a ``--store`` URL names.

The calls are synchronous (sqlite3, psycopg): the asyncio relay runs them on a small thread pool, never on its
event loop. A store opened on a database an older relay made gains the new columns on open.

Snapshots are opaque bytes here (serialized ``JobStatus`` protobuf; no pickle): the store indexes only the
fields it must query or order by (job ids, station, owner, state, time, sequence, finished episodes).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Optional, Protocol, Sequence

TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


class Verdict(enum.Enum):
    """What ``put_snapshot`` did with a snapshot."""

    STORED = "stored"                  # it became the job's latest
    STALE = "stale"                    # the stored one is newer (higher sequence): kept out, not an error
    FINAL = "final"                    # the stored one is terminal: a terminal state is never replaced
    FEWER_EPISODES = "fewer_episodes"  # it would remove finished episodes: refused


class StoreError(Exception):
    """A store could not be opened or used; the message says why."""


class JobExists(StoreError):
    """``create_job`` with an id that is already taken."""


@dataclass(frozen=True)
class JobRecord:
    """A submitted job: who owns it, which station runs it, and the submit request (serialized protobuf)."""

    job_id: str
    client_id: str
    station_id: str
    request: bytes
    submitted_unix_ms: int
    cancel_requested: bool = False
    cancel_reason: str = ""
    episodes_total: int = 0
    client_job_id: str = ""  # the client's name for the job ("" = job_id)

    def __post_init__(self) -> None:
        if not self.client_job_id:
            object.__setattr__(self, "client_job_id", self.job_id)


@dataclass(frozen=True)
class Snapshot:
    """The latest snapshot of a job: the station's time, its state, and the serialized ``JobStatus``."""

    job_id: str
    updated_unix_ms: int
    state: str
    payload: bytes
    episodes_done: int = 0  # finished episodes in the snapshot
    sequence: int = 0       # the station's per-job snapshot number (0: an older, unnumbered station)


def replaces(new: Snapshot, old: Snapshot) -> bool:
    """Return True when ``new`` comes after ``old`` by rule 2's order (sequence; time only between unnumbered)."""
    if new.sequence > 0 and old.sequence > 0:
        return new.sequence > old.sequence
    if new.sequence > 0 or old.sequence > 0:
        return new.sequence > 0
    return new.updated_unix_ms >= old.updated_unix_ms


@dataclass(frozen=True)
class StationOfferRecord:
    """What a station offers (serialized ``StationOffer``: its suites), as it last sent it, and when (relay ms)."""

    station_id: str
    offer: bytes
    offered_unix_ms: int


@dataclass(frozen=True)
class ClientLoad:
    """A client's jobs not ended, and the episodes those jobs still have to run."""

    open_jobs: int
    queued_episodes: int


@dataclass(frozen=True)
class JobView:
    """A job with its latest snapshot (None before the first report) and when its station was last heard."""

    job: JobRecord
    snapshot: Optional[Snapshot]
    station_last_heard: Optional[int]


class Store(Protocol):
    """What the relay needs from its store. Implementations are thread-safe."""

    def create_job(self, job: JobRecord, admit: Optional[Callable[[ClientLoad], None]] = None) -> None: ...

    def get_job(self, job_id: str) -> Optional[JobRecord]: ...

    def view(self, job_id: str) -> Optional[JobView]:
        """Read the job, its latest snapshot and its station's last-heard time together (one query)."""
        ...

    def view_for_client(self, client_id: str, client_job_id: str) -> Optional[JobView]:
        """Like :meth:`view`, by the client's own id for the job (rule 1)."""
        ...

    def open_jobs_for_station(self, station_id: str) -> Sequence[JobRecord]:
        """Jobs addressed to ``station_id`` whose latest snapshot is not terminal (or that have none)."""
        ...

    def request_cancel(self, job_id: str, reason: str) -> bool:
        """Mark the job for cancelling; False when there is no such job."""
        ...

    def put_snapshot(self, snapshot: Snapshot) -> Verdict:
        """Store ``snapshot`` if rule 2 lets it replace the stored one; say what was done."""
        ...

    def get_snapshot(self, job_id: str) -> Optional[Snapshot]: ...

    def client_load(self, client_id: str) -> ClientLoad:
        """Count ``client_id``'s jobs not ended and the episodes they still have to run (rule 5)."""
        ...

    def station_heard(self, station_id: str, unix_ms: int) -> None: ...

    def station_last_heard(self, station_id: str) -> Optional[int]: ...

    def put_station_offer(self, station_id: str, offer: bytes, unix_ms: int) -> None:
        """Store ``station_id``'s offer, replacing the one it sent before (rule 7)."""
        ...

    def station_offers(self, station_id: Optional[str] = None) -> Sequence[StationOfferRecord]:
        """Every station's latest offer, by station id (or only ``station_id``'s)."""
        ...

    def close(self) -> None: ...
