"""The relay's embedded default store: one SQLite file in WAL mode (the rules are :mod:`~strands_robots.relay.store`'s).

One writer at a time (a lock; every call committed, ``synchronous=FULL``); each reading thread reads on a
connection of its own beside it, so polls never wait for the writer. ``create_job`` with an ``admit`` check runs
under ``BEGIN IMMEDIATE``, the file's write lock, which another process on the same file waits for too.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Callable, Sequence

from strands_robots.relay.cluster_rows import CLUSTER_SCHEMA
from strands_robots.relay.sql_store import ADDED_COLUMNS, AFTER_COLUMNS, SCHEMA, SqlStore
from strands_robots.relay.store import StoreError

__all__ = ["SqliteStore"]


class SqliteStore(SqlStore):
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
            for stmt in SCHEMA + CLUSTER_SCHEMA:
                self._conn.execute(stmt.format(blob="BLOB"))
            for table, column, definition in ADDED_COLUMNS:
                have = {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
            for stmt in AFTER_COLUMNS:
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
