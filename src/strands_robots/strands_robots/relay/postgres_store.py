"""The PostgreSQL store: the one several relays share (psycopg 3, autocommit; the rules are store.py's).

A pool of connections (``pool_size``), each call committed; schema changes serialised by an advisory lock so
relays starting together do not race; ``create_job`` with an ``admit`` check holds a transaction-scoped
advisory lock per client (``pg_advisory_xact_lock``), so a team's quota check and its new job are one step
across every relay.
"""

from __future__ import annotations

import queue
from typing import Any, Callable, Sequence

from strands_robots.relay.cluster_rows import CLUSTER_SCHEMA
from strands_robots.relay.sql_store import ADDED_COLUMNS, AFTER_COLUMNS, SCHEMA, SqlStore
from strands_robots.relay.store import StoreError

#: advisory-lock namespace of the per-client admission lock (the schema lock is 7262001)
ADMISSION_LOCK = 7262002


class PostgresStore(SqlStore):
    """A store several relays share: PostgreSQL through psycopg 3, autocommit (every call committed).

    Calls run on a small pool of connections (``pool_size``), so concurrent polls do not queue behind one
    connection. A connection that breaks (server restarted) is replaced on its next use, and the call is
    tried once more on the new one; a failure after that raises :class:`StoreError`.

    :param conninfo: a ``postgresql://`` URL or a libpq connection string.
    """

    _p = "%s"
    _now_ms = "CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)"
    blob_type = "BYTEA"

    def __init__(self, conninfo: str, pool_size: int = 4) -> None:
        super().__init__()
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise StoreError(f"the PostgreSQL store needs psycopg: {exc}") from exc
        if pool_size < 1:
            raise StoreError(f"pool_size must be >= 1, got {pool_size}")
        self._psycopg = psycopg
        self.conninfo = conninfo
        self._pool: "queue.Queue[Any]" = queue.Queue()
        self._all: list = []
        self._closed = False
        try:
            first = self._connect()
            # One relay creating the tables while another does: the advisory lock serialises the DDL.
            with first.transaction():
                first.execute("SELECT pg_advisory_xact_lock(7262001)")
                for stmt in SCHEMA + CLUSTER_SCHEMA:
                    first.execute(stmt.format(blob="BYTEA"))
                for table, column, definition in ADDED_COLUMNS:
                    first.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {definition}")
                for stmt in AFTER_COLUMNS:
                    first.execute(stmt)
            self._pool.put(first)
            for _ in range(pool_size - 1):
                self._pool.put(self._connect())
        except psycopg.Error as exc:
            self.close()
            raise StoreError(f"cannot open PostgreSQL store: {exc}") from exc

    def _connect(self) -> Any:
        conn = self._psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10)
        with self._lock:
            self._all.append(conn)
        return conn

    def _integrity_errors(self) -> tuple:
        return (self._psycopg.errors.UniqueViolation,)

    @staticmethod
    def _run(conn: Any, sql: str, params: Sequence) -> list:
        cur = conn.execute(sql, tuple(params))
        try:
            return cur.fetchall() if cur.description is not None else []
        finally:
            cur.close()

    def _execute(self, sql: str, params: Sequence = ()) -> list:
        # The pool holds connections, or None where one broke and could not be replaced yet.
        psycopg = self._psycopg
        if self._closed:
            raise StoreError("the PostgreSQL store is closed")
        try:
            conn = self._pool.get(timeout=30.0)
        except queue.Empty:
            raise StoreError("no PostgreSQL connection came free within 30 s") from None
        try:
            if conn is None:
                conn = self._connect()
            try:
                return self._run(conn, sql, params)
            except psycopg.OperationalError:
                if not (conn.closed or conn.broken):
                    raise
            # the connection broke (server restarted, network): once more on a new one
            self._drop(conn)
            conn = None
            conn = self._connect()
            return self._run(conn, sql, params)
        except psycopg.IntegrityError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL store: {exc}") from exc
        finally:
            self._pool.put(conn)

    def _exclusive(self, key: str, body: Callable[[Callable[[str, Sequence], list]], None]) -> None:
        psycopg = self._psycopg
        if self._closed:
            raise StoreError("the PostgreSQL store is closed")
        try:
            conn = self._pool.get(timeout=30.0)
        except queue.Empty:
            raise StoreError("no PostgreSQL connection came free within 30 s") from None
        try:
            if conn is None or conn.closed or conn.broken:
                if conn is not None:
                    self._drop(conn)
                conn = None
                conn = self._connect()
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (ADMISSION_LOCK, key))
                body(lambda sql, params: self._run(conn, sql, params))
        except psycopg.IntegrityError:
            raise
        except psycopg.Error as exc:
            if conn is not None and (conn.closed or conn.broken):
                self._drop(conn)
                conn = None
            raise StoreError(f"PostgreSQL store: {exc}") from exc
        finally:
            self._pool.put(conn)

    def _drop(self, conn: Any) -> None:
        with self._lock:
            if conn in self._all:
                self._all.remove(conn)
        try:
            conn.close()
        except Exception:  # already broken
            pass

    def close(self) -> None:
        self._closed = True
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
