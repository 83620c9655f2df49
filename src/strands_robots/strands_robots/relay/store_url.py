"""Open the relay store a ``--store`` URL names: ``sqlite:PATH`` or ``postgresql://...``."""

from __future__ import annotations

from strands_robots.relay.postgres_store import PostgresStore
from strands_robots.relay.sqlite_store import SqliteStore
from strands_robots.relay.store import Store, StoreError

__all__ = ["open_store"]


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
        return PostgresStore(url)
    raise StoreError(f"unknown store {url!r}: use sqlite:PATH or postgresql://USER@HOST:PORT/DB")
