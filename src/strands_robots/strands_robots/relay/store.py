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

The PostgreSQL store is :mod:`~strands_robots.relay.postgres_store`.

The calls are synchronous (sqlite3, psycopg): the asyncio relay runs them on a small thread pool, never on its
event loop. A store opened on a database an older relay made gains the new columns on open.

Snapshots are opaque bytes here (serialized ``JobStatus`` protobuf; no pickle): the store indexes only the
fields it must query or order by (job ids, station, owner, state, time, sequence, finished episodes).
"""

from __future__ import annotations

import enum
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

from strands_robots.relay.cluster_rows import CLUSTER_SCHEMA, ClusterRows, SessionHome  # noqa: F401 - re-exported

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

    def close(self) -> None: ...


def _now_ms() -> int:
    return int(time.time() * 1000)


_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS jobs (
        job_id TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        station_id TEXT NOT NULL,
        request {blob} NOT NULL,
        submitted_unix_ms BIGINT NOT NULL,
        cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
        cancel_reason TEXT NOT NULL DEFAULT '',
        episodes_total BIGINT NOT NULL DEFAULT 0,
        client_job_id TEXT NOT NULL DEFAULT ''
    )""",
    "CREATE INDEX IF NOT EXISTS jobs_by_station ON jobs (station_id)",
    """CREATE TABLE IF NOT EXISTS snapshots (
        job_id TEXT PRIMARY KEY,
        updated_unix_ms BIGINT NOT NULL,
        state TEXT NOT NULL,
        payload {blob} NOT NULL,
        episodes_done BIGINT NOT NULL DEFAULT 0,
        sequence BIGINT NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE IF NOT EXISTS stations (
        station_id TEXT PRIMARY KEY,
        last_heard_unix_ms BIGINT NOT NULL
    )""",
)

# Columns added since the first schema: (table, column, definition); a store opened on an older database adds them.
_ADDED_COLUMNS = (
    ("jobs", "episodes_total", "BIGINT NOT NULL DEFAULT 0"),
    ("snapshots", "episodes_done", "BIGINT NOT NULL DEFAULT 0"),
    ("jobs", "client_job_id", "TEXT NOT NULL DEFAULT ''"),
    ("snapshots", "sequence", "BIGINT NOT NULL DEFAULT 0"),
)
# After the columns exist: a job of an older relay is named by its client as the relay named it.
_AFTER_COLUMNS = (
    "UPDATE jobs SET client_job_id = job_id WHERE client_job_id = ''",
    "CREATE UNIQUE INDEX IF NOT EXISTS jobs_by_client ON jobs (client_id, client_job_id)",
)

# Both dialects accept this upsert (SQLite >= 3.24, PostgreSQL >= 9.5); the WHERE is rule 2.
_PUT_SNAPSHOT = (
    "INSERT INTO snapshots (job_id, updated_unix_ms, state, payload, episodes_done, sequence) "
    "VALUES ({p}, {p}, {p}, {p}, {p}, {p}) "
    "ON CONFLICT (job_id) DO UPDATE SET updated_unix_ms = excluded.updated_unix_ms, state = excluded.state, "
    "payload = excluded.payload, episodes_done = excluded.episodes_done, sequence = excluded.sequence "
    "WHERE snapshots.state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED') "
    "AND excluded.episodes_done >= snapshots.episodes_done "
    "AND (CASE WHEN excluded.sequence > 0 AND snapshots.sequence > 0 THEN excluded.sequence > snapshots.sequence "
    "WHEN excluded.sequence > 0 OR snapshots.sequence > 0 THEN excluded.sequence > 0 "
    "ELSE excluded.updated_unix_ms >= snapshots.updated_unix_ms END)"
)
_STATION_HEARD = (
    "INSERT INTO stations (station_id, last_heard_unix_ms) VALUES ({p}, {p}) "
    "ON CONFLICT (station_id) DO UPDATE SET last_heard_unix_ms = excluded.last_heard_unix_ms "
    "WHERE excluded.last_heard_unix_ms > stations.last_heard_unix_ms"
)
_JOB_COLUMNS = ("j.job_id, j.client_id, j.station_id, j.request, j.submitted_unix_ms, j.cancel_requested, "
                "j.cancel_reason, j.episodes_total, j.client_job_id")
_N_JOB_COLUMNS = 9
_OPEN = "(s.state IS NULL OR s.state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED'))"
_CLIENT_LOAD = (
    "SELECT count(*), COALESCE(sum(CASE WHEN j.episodes_total > COALESCE(s.episodes_done, 0) "
    "THEN j.episodes_total - COALESCE(s.episodes_done, 0) ELSE 0 END), 0) "
    "FROM jobs j LEFT JOIN snapshots s ON s.job_id = j.job_id WHERE j.client_id = {p} AND " + _OPEN
)
_OPEN_JOBS = (
    "SELECT " + _JOB_COLUMNS + " FROM jobs j LEFT JOIN snapshots s ON s.job_id = j.job_id "
    "WHERE j.station_id = {p} AND " + _OPEN + " ORDER BY j.submitted_unix_ms, j.job_id"
)
_VIEW = (
    "SELECT " + _JOB_COLUMNS + ", s.updated_unix_ms, s.state, s.payload, s.episodes_done, s.sequence, "
    "st.last_heard_unix_ms FROM jobs j "
    "LEFT JOIN snapshots s ON s.job_id = j.job_id LEFT JOIN stations st ON st.station_id = j.station_id "
)
_GET_JOB = "SELECT " + _JOB_COLUMNS + " FROM jobs j WHERE j.job_id = {p}"
_GET_SNAPSHOT = ("SELECT job_id, updated_unix_ms, state, payload, episodes_done, sequence FROM snapshots "
                 "WHERE job_id = {p}")


def _job(row: Sequence) -> JobRecord:
    return JobRecord(
        job_id=row[0], client_id=row[1], station_id=row[2], request=bytes(row[3]),
        submitted_unix_ms=int(row[4]), cancel_requested=bool(row[5]), cancel_reason=row[6] or "",
        episodes_total=int(row[7]), client_job_id=row[8] or "",
    )


def _snapshot(row: Sequence) -> Snapshot:
    return Snapshot(job_id=row[0], updated_unix_ms=int(row[1]), state=row[2], payload=bytes(row[3]),
                    episodes_done=int(row[4]), sequence=int(row[5]))


def _check_snapshot(snapshot: Snapshot) -> None:
    if not snapshot.job_id:
        raise StoreError("snapshot has no job_id")
    if not isinstance(snapshot.updated_unix_ms, int) or snapshot.updated_unix_ms < 0:
        raise StoreError(f"snapshot of job {snapshot.job_id!r}: updated_unix_ms must be an int >= 0, "
                         f"got {snapshot.updated_unix_ms!r}")
    if not isinstance(snapshot.sequence, int) or not 0 <= snapshot.sequence < 2 ** 63:
        raise StoreError(f"snapshot of job {snapshot.job_id!r}: sequence must be an int in [0, 2**63), "
                         f"got {snapshot.sequence!r}")


class _SqlStore(ClusterRows):
    """The SQL both dialects share; subclasses provide the connection, the placeholder and the blob type.

    The relays' rows (their addresses, policy-session homes):
    :class:`~strands_robots.relay.cluster_rows.ClusterRows`.
    """

    _p = "?"

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def _execute(self, sql: str, params: Sequence = ()) -> list:
        raise NotImplementedError

    def _sql(self, template: str) -> str:
        return template.format(p=self._p)

    def create_job(self, job: JobRecord, admit: Optional[Callable[[ClientLoad], None]] = None) -> None:
        """Store a new job (rule 1); with ``admit``, only if ``admit(load)`` does not raise (rule 6).

        The client's load is read, ``admit`` may refuse, and the job is written, all under one lock per client
        that every relay on the store shares, so two relays never both admit past a quota.
        """
        if not job.job_id or not job.client_id or not job.station_id:
            raise StoreError("a job needs job_id, client_id and station_id")
        insert = self._sql("INSERT INTO jobs (job_id, client_id, station_id, request, submitted_unix_ms, "
                           "cancel_requested, cancel_reason, episodes_total, client_job_id) "
                           "VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})")
        params = (job.job_id, job.client_id, job.station_id, job.request, job.submitted_unix_ms,
                  job.cancel_requested, job.cancel_reason, int(job.episodes_total), job.client_job_id)

        def admitted(run: Callable[[str, Sequence], list]) -> None:
            rows = run(self._sql(_CLIENT_LOAD), (job.client_id,))
            admit(ClientLoad(open_jobs=int(rows[0][0]), queued_episodes=int(rows[0][1])))
            run(insert, params)

        try:
            if admit is None:
                self._execute(insert, params)
            else:
                self._exclusive(job.client_id, admitted)
        except self._integrity_errors() as exc:
            raise JobExists(f"job {job.job_id!r} (client {job.client_id!r}'s {job.client_job_id!r}) already exists") \
                from exc

    def _integrity_errors(self) -> tuple:
        raise NotImplementedError

    def _exclusive(self, key: str, body: Callable[[Callable[[str, Sequence], list]], None]) -> None:
        """Run ``body(run)`` in one transaction, holding the lock named ``key`` across every store process."""
        raise NotImplementedError

    def get_job(self, job_id: str) -> Optional[JobRecord]:
        rows = self._execute(self._sql(_GET_JOB), (job_id,))
        return _job(rows[0]) if rows else None

    def view(self, job_id: str) -> Optional[JobView]:
        return self._view(self._read(self._sql(_VIEW + "WHERE j.job_id = {p}"), (job_id,)))

    def view_for_client(self, client_id: str, client_job_id: str) -> Optional[JobView]:
        return self._view(self._read(self._sql(_VIEW + "WHERE j.client_id = {p} AND j.client_job_id = {p}"),
                                     (client_id, client_job_id)))

    @staticmethod
    def _view(rows: list) -> Optional[JobView]:
        if not rows:
            return None
        r, n = rows[0], _N_JOB_COLUMNS
        snapshot = None if r[n] is None else _snapshot((r[0], *r[n:n + 5]))
        heard = r[n + 5]
        return JobView(job=_job(r[:n]), snapshot=snapshot, station_last_heard=None if heard is None else int(heard))

    def _read(self, sql: str, params: Sequence = ()) -> list:
        return self._execute(sql, params)

    def open_jobs_for_station(self, station_id: str) -> Sequence[JobRecord]:
        return [_job(r) for r in self._execute(self._sql(_OPEN_JOBS), (station_id,))]

    def request_cancel(self, job_id: str, reason: str) -> bool:
        rows = self._execute(
            self._sql("UPDATE jobs SET cancel_requested = TRUE, cancel_reason = {p} WHERE job_id = {p} "
                      "RETURNING job_id"),
            (reason, job_id),
        )
        return bool(rows)

    def put_snapshot(self, snapshot: Snapshot) -> Verdict:
        _check_snapshot(snapshot)
        rows = self._execute(
            self._sql(_PUT_SNAPSHOT) + " RETURNING updated_unix_ms",
            (snapshot.job_id, snapshot.updated_unix_ms, snapshot.state, snapshot.payload, int(snapshot.episodes_done),
             int(snapshot.sequence)),
        )
        if rows:
            return Verdict.STORED
        stored = self.get_snapshot(snapshot.job_id)  # why not: the rule that kept it out
        if stored is None or stored.state in TERMINAL_STATES:
            return Verdict.FINAL
        if replaces(snapshot, stored) and snapshot.episodes_done < stored.episodes_done:
            return Verdict.FEWER_EPISODES
        return Verdict.STALE

    def get_snapshot(self, job_id: str) -> Optional[Snapshot]:
        rows = self._execute(self._sql(_GET_SNAPSHOT), (job_id,))
        return _snapshot(rows[0]) if rows else None

    def client_load(self, client_id: str) -> ClientLoad:
        rows = self._read(self._sql(_CLIENT_LOAD), (client_id,))
        return ClientLoad(open_jobs=int(rows[0][0]), queued_episodes=int(rows[0][1]))

    def station_heard(self, station_id: str, unix_ms: int) -> None:
        self._execute(self._sql(_STATION_HEARD), (station_id, int(unix_ms)))

    def station_last_heard(self, station_id: str) -> Optional[int]:
        rows = self._execute(
            self._sql("SELECT last_heard_unix_ms FROM stations WHERE station_id = {p}"), (station_id,)
        )
        return int(rows[0][0]) if rows else None

    # -- for modules beside the store with tables and queries of their own (relay/recordings.py, listing.py) --
    blob_type = "BLOB"

    def run_sql(self, template: str, params: Sequence = ()) -> list:
        """Run one statement (``{p}`` placeholders, ``{blob}`` the dialect's blob type), committed; its rows."""
        return self._execute(template.replace("{blob}", self.blob_type).replace("{p}", self._p), params)

    def read_sql(self, template: str, params: Sequence = ()) -> list:
        """Run one query on a reader (SQLite: beside the writer); its rows."""
        return self._read(template.replace("{blob}", self.blob_type).replace("{p}", self._p), params)


class SqliteStore(_SqlStore):
    """The embedded default: one SQLite file in WAL mode, one writer (a lock), committed on every call.

    :param path: the database file (created with its tables if missing); ``":memory:"`` for a throwaway.
    """

    _p = "?"

    def __init__(self, path: str) -> None:
        super().__init__()
        if sqlite3.sqlite_version_info < (3, 35, 0):  # RETURNING
            raise StoreError(f"SQLite {sqlite3.sqlite_version} is too old: the store needs 3.35 or newer")
        self.path = path
        try:
            self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30.0)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            for stmt in _SCHEMA + CLUSTER_SCHEMA:
                self._conn.execute(stmt.format(blob="BLOB"))
            for table, column, definition in _ADDED_COLUMNS:
                have = {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
            for stmt in _AFTER_COLUMNS:
                self._conn.execute(stmt)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {path!r}: {exc}") from exc
        self._readers = threading.local()
        self._reader_conns: list = []
        self._readers_lock = threading.Lock()  # not the writer's lock: a reader never waits for a write
        self._closed = False

    def _integrity_errors(self) -> tuple:
        return (sqlite3.IntegrityError,)

    def _read(self, sql: str, params: Sequence = ()) -> list:
        # WAL lets readers run beside the one writer: each thread reads on a connection of its own, so polls
        # (get_status) neither wait for the writer's lock nor for each other.
        if self._closed:
            raise StoreError(f"SQLite store {self.path!r} is closed")
        conn = getattr(self._readers, "conn", None)
        if conn is None:
            if self.path == ":memory:":
                return self._execute(sql, params)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
            self._readers.conn = conn
            with self._readers_lock:
                self._reader_conns.append(conn)
        try:
            cur = conn.execute(sql, tuple(params))
            try:
                return cur.fetchall()
            finally:
                cur.close()
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite store {self.path!r}: {exc}") from exc

    def _execute(self, sql: str, params: Sequence = ()) -> list:
        with self._lock:
            try:
                cur = self._conn.execute(sql, tuple(params))
                try:
                    return cur.fetchall()
                finally:
                    cur.close()
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite store {self.path!r}: {exc}") from exc

    def _exclusive(self, key: str, body: Callable[[Callable[[str, Sequence], list]], None]) -> None:
        # BEGIN IMMEDIATE takes the file's write lock: another process on the same file waits for it too
        def run(sql: str, params: Sequence) -> list:
            cur = self._conn.execute(sql, tuple(params))
            try:
                return cur.fetchall()
            finally:
                cur.close()

        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite store {self.path!r}: {exc}") from exc
            try:
                body(run)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock, self._readers_lock:
            self._closed = True
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()
            self._conn.close()


def open_store(url: str) -> Store:
    """Open the store a ``--store`` argument names: ``sqlite:PATH`` or ``postgresql://...`` (``postgres://``)."""
    if url.startswith("sqlite:"):
        path = url[len("sqlite:"):]
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise StoreError("sqlite: store needs a path, e.g. sqlite:/var/lib/strands_robots/relay.db")
        return SqliteStore(path)
    if url.startswith(("postgresql://", "postgres://")):
        from strands_robots.relay.postgres_store import PostgresStore

        return PostgresStore(url)
    raise StoreError(f"unknown store {url!r}: use sqlite:PATH or postgresql://USER@HOST:PORT/DB")


def __getattr__(name: str) -> Any:
    """``store.PostgresStore``: imported when asked for (its module builds on ``_SqlStore`` above)."""
    if name == "PostgresStore":
        from strands_robots.relay.postgres_store import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
