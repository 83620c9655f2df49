"""The SQL both store dialects share (SQLite >= 3.35, PostgreSQL >= 9.5): the schema and the rules' queries.

:class:`SqlStore` keeps :mod:`~strands_robots.relay.store`'s rules on any connection; a dialect
(:class:`~strands_robots.relay.sqlite_store.SqliteStore`, :class:`~strands_robots.relay.postgres_store.PostgresStore`)
provides the connection, the placeholder, the blob type and the lock :meth:`SqlStore.create_job` admits under.
The relays' own rows (addresses, policy-session homes) are mixed in from :mod:`~strands_robots.relay.cluster_rows`.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional, Sequence

from strands_robots.relay.cluster_rows import ClusterRows
from strands_robots.relay.store import (
    TERMINAL_STATES,
    ClientLoad,
    JobExists,
    JobRecord,
    JobView,
    Snapshot,
    StationOfferRecord,
    StoreError,
    Verdict,
    replaces,
)

__all__ = ["SqlStore", "SCHEMA", "ADDED_COLUMNS", "AFTER_COLUMNS"]

SCHEMA = (
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
    """CREATE TABLE IF NOT EXISTS station_offers (
        station_id TEXT PRIMARY KEY,
        offer {blob} NOT NULL,
        offered_unix_ms BIGINT NOT NULL
    )""",
    # a comparison's invited teams and their answers (relay.job_teams): pending | accepted | declined
    """CREATE TABLE IF NOT EXISTS job_teams (
        job_id TEXT NOT NULL,
        team TEXT NOT NULL,
        answer TEXT NOT NULL,
        answered_unix_ms BIGINT NOT NULL,
        reason TEXT NOT NULL,
        PRIMARY KEY (job_id, team)
    )""",
    "CREATE INDEX IF NOT EXISTS job_teams_by_team ON job_teams (team)",
)

# Columns added since the first schema: (table, column, definition); a store opened on an older database adds them.
ADDED_COLUMNS = (
    ("jobs", "episodes_total", "BIGINT NOT NULL DEFAULT 0"),
    ("snapshots", "episodes_done", "BIGINT NOT NULL DEFAULT 0"),
    ("jobs", "client_job_id", "TEXT NOT NULL DEFAULT ''"),
    ("snapshots", "sequence", "BIGINT NOT NULL DEFAULT 0"),
)
# After the columns exist: a job of an older relay is named by its client as the relay named it.
AFTER_COLUMNS = (
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
_PUT_OFFER = (
    "INSERT INTO station_offers (station_id, offer, offered_unix_ms) VALUES ({p}, {p}, {p}) "
    "ON CONFLICT (station_id) DO UPDATE SET offer = excluded.offer, offered_unix_ms = excluded.offered_unix_ms"
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


class SqlStore(ClusterRows):
    """The SQL both dialects share; subclasses provide the connection, the placeholder and the blob type.

    The relays' rows (their addresses, policy-session homes):
    :class:`~strands_robots.relay.cluster_rows.ClusterRows`.
    """

    _p = "?"
    #: the database's clock, in ms since the epoch, as an SQL expression (cluster_rows.py's ``{now_ms}``)
    _now_ms = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def _execute(self, sql: str, params: Sequence = ()) -> list:
        raise NotImplementedError

    def _sql(self, template: str) -> str:
        return template.format(p=self._p, now_ms=self._now_ms)

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

    def put_station_offer(self, station_id: str, offer: bytes, unix_ms: int) -> None:
        if not station_id:
            raise StoreError("a station offer needs its station_id")
        self._execute(self._sql(_PUT_OFFER), (station_id, bytes(offer), int(unix_ms)))

    def station_offers(self, station_id: Optional[str] = None) -> Sequence[StationOfferRecord]:
        sql = "SELECT station_id, offer, offered_unix_ms FROM station_offers"
        rows = (self._read(self._sql(sql + " WHERE station_id = {p}"), (station_id,)) if station_id
                else self._read(self._sql(sql + " ORDER BY station_id")))
        return [StationOfferRecord(r[0], bytes(r[1]), int(r[2])) for r in rows]

    # -- for modules beside the store with tables and queries of their own (relay/recordings.py, listing.py) --
    blob_type = "BLOB"

    def run_sql(self, template: str, params: Sequence = ()) -> list:
        """Run one statement (``{p}`` placeholders, ``{blob}`` the dialect's blob type), committed; its rows."""
        return self._execute(template.replace("{blob}", self.blob_type).replace("{p}", self._p), params)

    def read_sql(self, template: str, params: Sequence = ()) -> list:
        """Run one query on a reader (SQLite: beside the writer); its rows."""
        return self._read(template.replace("{blob}", self.blob_type).replace("{p}", self._p), params)
