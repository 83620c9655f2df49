"""Episode recordings in the relay's store: one row per (job, episode) and its bytes in ordered chunks.

The tables live in the same database as the jobs (SQLite or PostgreSQL), so a recording uploaded through one
relay is downloadable through any relay sharing the store. A recording is **complete** only after its last
chunk was stored and its size and SHA-256 matched the header the station sent; a refused one keeps its row with
the reason (so the team is told why, not "not found") and no chunks. A new upload of the same episode replaces
the old one, unless the complete one has the same SHA-256 and its stored bytes still hash to it (a station's
retry: nothing is rewritten; a damaged copy is).

Synchronous (the store's connections): the relay calls these on its store thread pool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, List, Optional

__all__ = ["ConcurrentUpload", "RecordingRow", "SHA256_HEX",
           "ensure_tables", "info", "infos", "begin", "put_chunk", "finish", "refuse",
           "chunk", "chunk_count", "stored_digest"]

SHA256_HEX = re.compile(r"[0-9a-f]{64}")

_TABLES = (
    """CREATE TABLE IF NOT EXISTS recordings (
        job_id TEXT NOT NULL,
        episode_id TEXT NOT NULL,
        size_bytes BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        file_name TEXT NOT NULL DEFAULT '',
        complete BOOLEAN NOT NULL DEFAULT FALSE,
        refused TEXT NOT NULL DEFAULT '',
        chunks BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (job_id, episode_id)
    )""",
    """CREATE TABLE IF NOT EXISTS recording_chunks (
        job_id TEXT NOT NULL,
        episode_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        data {blob} NOT NULL,
        PRIMARY KEY (job_id, episode_id, seq)
    )""",
)


@dataclass(frozen=True)
class RecordingRow:
    """What the relay holds of one episode's recording."""

    job_id: str
    episode_id: str
    size_bytes: int
    sha256: str
    file_name: str
    complete: bool
    refused: str
    chunks: int


_COLUMNS = "job_id, episode_id, size_bytes, sha256, file_name, complete, refused, chunks"


def _row(r: Any) -> RecordingRow:
    return RecordingRow(job_id=r[0], episode_id=r[1], size_bytes=int(r[2]), sha256=r[3], file_name=r[4] or "",
                        complete=bool(r[5]), refused=r[6] or "", chunks=int(r[7]))


def ensure_tables(store: Any) -> None:
    """Create the tables if missing (every relay opening the store does; idempotent)."""
    for statement in _TABLES:
        try:
            store.run_sql(statement)
        except Exception:  # noqa: BLE001 - another relay created it at the same instant (PostgreSQL): once more
            store.run_sql(statement)


def info(store: Any, job_id: str, episode_id: str) -> Optional[RecordingRow]:
    rows = store.read_sql(f"SELECT {_COLUMNS} FROM recordings WHERE job_id = {{p}} AND episode_id = {{p}}",
                          (job_id, episode_id))
    return _row(rows[0]) if rows else None


def infos(store: Any, job_id: str) -> List[RecordingRow]:
    rows = store.read_sql(f"SELECT {_COLUMNS} FROM recordings WHERE job_id = {{p}} ORDER BY episode_id", (job_id,))
    return [_row(r) for r in rows]


def _drop_chunks(store: Any, job_id: str, episode_id: str) -> None:
    store.run_sql("DELETE FROM recording_chunks WHERE job_id = {p} AND episode_id = {p}", (job_id, episode_id))


def begin(store: Any, job_id: str, episode_id: str, size_bytes: int, sha256: str, file_name: str) -> None:
    """Start (or restart) an upload: the old bytes go, the row says incomplete until :func:`finish`."""
    _drop_chunks(store, job_id, episode_id)
    store.run_sql(
        "INSERT INTO recordings (job_id, episode_id, size_bytes, sha256, file_name, complete, refused, chunks) "
        "VALUES ({p}, {p}, {p}, {p}, {p}, FALSE, '', 0) ON CONFLICT (job_id, episode_id) DO UPDATE SET "
        "size_bytes = excluded.size_bytes, sha256 = excluded.sha256, file_name = excluded.file_name, "
        "complete = FALSE, refused = '', chunks = 0",
        (job_id, episode_id, int(size_bytes), sha256, file_name))


class ConcurrentUpload(Exception):
    """Another upload of the same episode (through another relay on the store) wrote the same chunk."""


def put_chunk(store: Any, job_id: str, episode_id: str, seq: int, data: bytes) -> None:
    try:
        store.run_sql("INSERT INTO recording_chunks (job_id, episode_id, seq, data) VALUES ({p}, {p}, {p}, {p})",
                      (job_id, episode_id, int(seq), bytes(data)))
    except Exception as exc:
        if any(cls.__name__ == "IntegrityError" for cls in type(exc).__mro__):  # sqlite3's, psycopg's
            raise ConcurrentUpload(f"another upload of episode {episode_id!r} of job {job_id!r} is under way") \
                from None
        raise


def finish(store: Any, job_id: str, episode_id: str, chunks: int) -> None:
    """Mark the upload complete (its size and SHA-256 were checked by the caller)."""
    store.run_sql("UPDATE recordings SET complete = TRUE, refused = '', chunks = {p} "
                  "WHERE job_id = {p} AND episode_id = {p}", (int(chunks), job_id, episode_id))


def refuse(store: Any, job_id: str, episode_id: str, size_bytes: int, sha256: str, file_name: str,
           reason: str) -> None:
    """Keep the refusal (and no bytes), so a download is told why."""
    _drop_chunks(store, job_id, episode_id)
    store.run_sql(
        "INSERT INTO recordings (job_id, episode_id, size_bytes, sha256, file_name, complete, refused, chunks) "
        "VALUES ({p}, {p}, {p}, {p}, {p}, FALSE, {p}, 0) ON CONFLICT (job_id, episode_id) DO UPDATE SET "
        "size_bytes = excluded.size_bytes, sha256 = excluded.sha256, file_name = excluded.file_name, "
        "complete = FALSE, refused = excluded.refused, chunks = 0",
        (job_id, episode_id, int(size_bytes), sha256, file_name, reason))


def chunk(store: Any, job_id: str, episode_id: str, seq: int) -> Optional[bytes]:
    rows = store.read_sql("SELECT data FROM recording_chunks WHERE job_id = {p} AND episode_id = {p} AND seq = {p}",
                          (job_id, episode_id, int(seq)))
    return bytes(rows[0][0]) if rows else None


def stored_digest(store: Any, job_id: str, episode_id: str, chunks: int) -> "tuple[int, str]":
    """Return the size and SHA-256 of the bytes the store holds for the recording (read chunk by chunk)."""
    import hashlib

    digest, size = hashlib.sha256(), 0
    for seq in range(chunks):
        data = chunk(store, job_id, episode_id, seq)
        if data is None:
            break
        digest.update(data)
        size += len(data)
    return size, digest.hexdigest()


def chunk_count(store: Any, job_id: str, episode_id: str) -> int:
    rows = store.read_sql("SELECT count(*) FROM recording_chunks WHERE job_id = {p} AND episode_id = {p}",
                          (job_id, episode_id))
    return int(rows[0][0])
