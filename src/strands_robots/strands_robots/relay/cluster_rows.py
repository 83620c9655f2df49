"""The store's rows for relays sharing it: each relay's address and when it was alive; each session's home.

Which relay is the home of each job's policy session, and where every relay of the cluster is.

A policy session has one **home**: the relay whose broker pairs the job's station side with its client side.
The first side to arrive claims the job's row for the relay it reached; a side reaching another relay is
forwarded there (:mod:`~strands_robots.relay.cluster`). A home whose relay was not heard for ``stale_ms``
(killed, partitioned from the store) is taken over by the next relay that claims it, in one statement, so two
relays never both believe they hold it for long: a relay that lost its claim finds out on its next check
(:meth:`ClusterRows.session_home`) and lets its sides go.

Every time here is the database's clock (``{now_ms}``: SQLite's ``julianday('now')``, PostgreSQL's ``now()``),
read in the statement that uses it: a heartbeat is stamped by the database, and a claim compares it with the
database's time. No relay's own clock is compared with another's, so a relay whose clock runs ahead (or behind)
neither takes a live relay's sessions nor loses its own.

No grpc and no broker here: SQL only, shared by both dialects (SQLite >= 3.35, PostgreSQL >= 9.5). Mixed into
the store (:class:`~strands_robots.relay.sql_store.SqlStore`), which provides ``_execute`` and ``_sql``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from strands_robots.relay.store import StoreError

CLUSTER_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS relays (
        relay_id TEXT PRIMARY KEY,
        address TEXT NOT NULL,
        heard_unix_ms BIGINT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS policy_homes (
        job_id TEXT PRIMARY KEY,
        relay_id TEXT NOT NULL,
        claimed_unix_ms BIGINT NOT NULL
    )""",
    # the key relays sign their forwarded calls with (made once by the first relay; only the store's users read it)
    """CREATE TABLE IF NOT EXISTS cluster_secret (
        name TEXT PRIMARY KEY,
        secret TEXT NOT NULL
    )""",
)

_RELAY_HEARD = (
    "INSERT INTO relays (relay_id, address, heard_unix_ms) VALUES ({p}, {p}, {now_ms}) "
    "ON CONFLICT (relay_id) DO UPDATE SET address = excluded.address, heard_unix_ms = excluded.heard_unix_ms "
    "WHERE excluded.heard_unix_ms >= relays.heard_unix_ms RETURNING heard_unix_ms"
)
# Claim the home: insert it, keep it (ours already), or take it over from a relay not heard since the bound.
_CLAIM = (
    "INSERT INTO policy_homes (job_id, relay_id, claimed_unix_ms) VALUES ({p}, {p}, {now_ms}) "
    "ON CONFLICT (job_id) DO UPDATE SET relay_id = excluded.relay_id, claimed_unix_ms = excluded.claimed_unix_ms "
    "WHERE policy_homes.relay_id = excluded.relay_id OR NOT EXISTS (SELECT 1 FROM relays r WHERE "
    "r.relay_id = policy_homes.relay_id AND r.heard_unix_ms >= {now_ms} - {p}) RETURNING relay_id, claimed_unix_ms"
)
# Take the home over from the relay advertising an address the taker cannot reach (only while that relay holds it).
_TAKE_OVER = (
    "UPDATE policy_homes SET relay_id = {p}, claimed_unix_ms = {now_ms} WHERE job_id = {p} AND relay_id IN "
    "(SELECT relay_id FROM relays WHERE address = {p} AND relay_id <> {p}) RETURNING relay_id"
)
_HOME = (
    "SELECT h.relay_id, r.address, r.heard_unix_ms FROM policy_homes h LEFT JOIN relays r "
    "ON r.relay_id = h.relay_id WHERE h.job_id = {p}"
)


@dataclass(frozen=True)
class SessionHome:
    """The relay that brokers a job's policy session: its id and the address other relays reach it on."""

    relay_id: str
    address: str
    heard_unix_ms: int = 0


@dataclass(frozen=True)
class RelayRow:
    relay_id: str
    address: str
    heard_unix_ms: int


class ClusterRows:
    """Relays and policy-session homes (see the module doc). Needs ``_execute`` and ``_sql`` of the store."""

    def _execute(self, sql: str, params: Sequence = ()) -> list:  # pragma: no cover - the store's
        raise NotImplementedError

    def _sql(self, template: str) -> str:  # pragma: no cover - the store's (``{p}`` and ``{now_ms}`` filled in)
        raise NotImplementedError

    def relay_heard(self, relay_id: str, address: str) -> int:
        """Record that relay ``relay_id`` (reachable on ``address``) is alive now; return now (the database's ms)."""
        if not relay_id or not address:
            raise StoreError("a relay needs an id and an address")
        rows = self._execute(self._sql(_RELAY_HEARD), (relay_id, address))
        return int(rows[0][0]) if rows else 0

    def relay_gone(self, relay_id: str) -> None:
        """Forget a relay that stops (its homes go to the next relay that claims them, at once)."""
        self._execute(self._sql("DELETE FROM relays WHERE relay_id = {p}"), (relay_id,))

    def relays_replaced(self, address: str, relay_id: str) -> int:
        """Forget the other relays registered at ``address``; return how many there were.

        They are earlier runs of the relay that now holds the address: their homes pass to the next claim at once.
        """
        rows = self._execute(
            self._sql("DELETE FROM relays WHERE address = {p} AND relay_id <> {p} RETURNING relay_id"),
            (address, relay_id))
        return len(rows)

    def cluster_secret(self) -> str:
        """Return the key the relays on this store sign their forwarded calls with (made on the first call)."""
        import secrets

        self._execute(self._sql("INSERT INTO cluster_secret (name, secret) VALUES ('forward', {p}) "
                                "ON CONFLICT (name) DO NOTHING"), (secrets.token_hex(32),))
        return str(self._execute(self._sql("SELECT secret FROM cluster_secret WHERE name = 'forward'"))[0][0])

    def relays(self) -> "list[RelayRow]":
        rows = self._execute(self._sql("SELECT relay_id, address, heard_unix_ms FROM relays ORDER BY relay_id"))
        return [RelayRow(r[0], r[1], int(r[2])) for r in rows]

    def claim_session_home(self, job_id: str, relay_id: str, stale_ms: int) -> SessionHome:
        """Return the home of ``job_id``'s policy session, claiming it for ``relay_id`` when free or stale.

        Free: no relay holds it; stale: its relay was not heard for ``stale_ms`` by the database's clock.
        """
        rows = self._execute(self._sql(_CLAIM), (job_id, relay_id, int(stale_ms)))
        if rows:
            return SessionHome(relay_id=rows[0][0], address="", heard_unix_ms=int(rows[0][1]))
        home = self.session_home(job_id)
        if home is None:  # deleted between the two statements: claim again
            return self.claim_session_home(job_id, relay_id, stale_ms)
        return home

    def take_over_session_home(self, job_id: str, address: str, relay_id: str) -> bool:
        """Make ``relay_id`` the home of ``job_id``'s session if the relay at ``address`` still holds it.

        For a home that still beats but that ``relay_id`` cannot reach; False when another relay holds it now
        (another taker was first, or the home moved on): the caller looks for the home again.
        """
        rows = self._execute(self._sql(_TAKE_OVER), (relay_id, job_id, address, relay_id))
        return bool(rows)

    def session_home(self, job_id: str) -> Optional[SessionHome]:
        """Return the home of ``job_id``'s policy session (None when no relay claimed it)."""
        rows = self._execute(self._sql(_HOME), (job_id,))
        if not rows:
            return None
        relay_id, address, heard = rows[0]
        return SessionHome(relay_id=relay_id, address=address or "", heard_unix_ms=int(heard or 0))
