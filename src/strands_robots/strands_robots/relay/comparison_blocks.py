"""Every ended comparison job's complete blocks, kept per suite in the relay's store: what rankings are fitted on.

One row per (job, block): the job's owning client (the submitting team), its suite and station, the block's task
and seed, and each slot's outcome (JSON ``{slot: true/false}``); one row per (job, team) of every team that took
part (the submitter and the teams it invited, ``relay.job_teams``) with the team serving each slot: a team's
ranking reads the blocks of the comparisons it took part in, and never another's. The tables live in the same
database as the jobs (SQLite or PostgreSQL, through the store's ``run_sql``), so every relay sharing the store
ranks the same blocks.

Written when a comparison job's terminal snapshot is reported (``station_service.ReportStatus``), from the
snapshot the store then holds, which is final and never replaced: the rows are inserted with ``ON CONFLICT DO
NOTHING``, so a repeated report (a station's retry, the same snapshot reported through another relay) adds
nothing, and a report after a relay died between the two writes fills in what is missing.

Only complete blocks reach the table (``JobStatus.comparison.blocks``: every slot once, each a real outcome):
a block with fewer than two slots, a slot twice or an empty slot name is left out, and said so in the log.

Synchronous (the store's connections): the relay calls these on its store thread pool.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

__all__ = ["StoredBlock", "ensure_tables", "complete_outcomes", "record_comparison", "keep_ended", "blocks_of",
           "suites_of", "MAX_BLOCKS_READ", "MAX_SUITES_LISTED"]

#: The most blocks one ranking reads (the newest): a bound on a leaderboard's work however long a team runs.
MAX_BLOCKS_READ = 20000
#: The most suites one team's leaderboard index lists.
MAX_SUITES_LISTED = 200

_TABLES = (
    """CREATE TABLE IF NOT EXISTS comparison_blocks (
        job_id TEXT NOT NULL,
        block_id TEXT NOT NULL,
        client_id TEXT NOT NULL,
        suite TEXT NOT NULL,
        station_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        seed BIGINT NOT NULL,
        outcomes TEXT NOT NULL,
        position BIGINT NOT NULL,
        ended_unix_ms BIGINT NOT NULL,
        PRIMARY KEY (job_id, block_id)
    )""",
    "CREATE INDEX IF NOT EXISTS comparison_blocks_by_team ON comparison_blocks (client_id, suite)",
    # every team that took part in a kept comparison (its submitter and the teams it invited), with the team
    # serving each slot (JSON {slot: team}; "" or a slot missing: the submitter's): whose rankings read its blocks
    """CREATE TABLE IF NOT EXISTS comparison_participants (
        job_id TEXT NOT NULL,
        team TEXT NOT NULL,
        suite TEXT NOT NULL,
        slot_teams TEXT NOT NULL,
        PRIMARY KEY (job_id, team)
    )""",
    "CREATE INDEX IF NOT EXISTS comparison_participants_by_team ON comparison_participants (team, suite)",
    # blocks kept before participants were: their submitter took part
    "INSERT INTO comparison_participants (job_id, team, suite, slot_teams) SELECT DISTINCT job_id, client_id, suite, "
    "'' FROM comparison_blocks WHERE true ON CONFLICT (job_id, team) DO NOTHING",
)

_PARTICIPANT = ("INSERT INTO comparison_participants (job_id, team, suite, slot_teams) VALUES ({p}, {p}, {p}, {p}) "
                "ON CONFLICT (job_id, team) DO NOTHING")

_INSERT = ("INSERT INTO comparison_blocks (job_id, block_id, client_id, suite, station_id, task_id, seed, outcomes, "
           "position, ended_unix_ms) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}) "
           "ON CONFLICT (job_id, block_id) DO NOTHING")


@dataclass(frozen=True)
class StoredBlock:
    """One complete block as the relay keeps it."""

    job_id: str
    block_id: str
    client_id: str
    suite: str
    station_id: str
    task_id: str
    seed: int
    outcomes: Mapping[str, bool]
    teams: Mapping[str, str] = dataclasses.field(default_factory=dict)  # slot -> its team (absent: client_id's)

    def team_of(self, slot: str) -> str:
        return self.teams.get(slot) or self.client_id


def ensure_tables(store: Any) -> None:
    """Create the table if missing (every relay opening the store does; idempotent)."""
    for statement in _TABLES:
        try:
            store.run_sql(statement)
        except Exception:  # noqa: BLE001 - another relay created it at the same instant (PostgreSQL): once more
            store.run_sql(statement)


def complete_outcomes(block: Any) -> Tuple[Tuple[str, bool], ...]:
    """Return a ``pb.ComparisonBlock``'s ``(slot, success)`` pairs; empty when it is not a complete block."""
    slots = [o.slot for o in block.outcomes]
    if len(slots) < 2 or len(set(slots)) != len(slots) or not all(slots):
        return ()
    return tuple((o.slot, bool(o.success)) for o in block.outcomes)


def record_comparison(store: Any, job_id: str, client_id: str, station_id: str, status: Any,
                      ended_unix_ms: int, slot_teams: Optional[Mapping[str, str]] = None) -> Tuple[int, int]:
    """Keep the complete blocks of an ended comparison job (``status``: its terminal ``pb.JobStatus``).

    :param slot_teams: the team serving each slot (``relay.job_teams``); a slot missing is ``client_id``'s.
    :returns: ``(blocks offered, blocks left out as incomplete)``; a job without a comparison offers none.
    """
    if not status.HasField("comparison") or not status.comparison.suite:
        return 0, 0
    comparison = status.comparison
    others = {slot: team for slot, team in (slot_teams or {}).items() if team and team != client_id}
    for team in dict.fromkeys([client_id, *others.values()]):  # every team that took part ranks these blocks
        store.run_sql(_PARTICIPANT, (job_id, team, comparison.suite, json.dumps(others, sort_keys=True)))
    left_out = 0
    for position, block in enumerate(comparison.blocks):
        outcomes = complete_outcomes(block)
        if not outcomes or not block.block_id:
            left_out += 1
            continue
        store.run_sql(_INSERT, (job_id, block.block_id, client_id, comparison.suite, station_id, block.task_id,
                                int(block.seed), json.dumps(dict(outcomes), sort_keys=True), position,
                                int(ended_unix_ms)))
    return len(comparison.blocks), left_out


def keep_ended(store: Any, job: Any) -> Tuple[int, int]:
    """Keep the blocks of ``job`` (a ``store.JobRecord``) from the terminal snapshot the store holds for it.

    Read from the store, not from the report at hand: the stored terminal snapshot is final, so every report of
    the job's end (a retry, through any relay) keeps the same blocks. A job not ended keeps nothing.

    :returns: as :func:`record_comparison`.
    """
    from strands_robots.relay.store import TERMINAL_STATES
    from strands_robots.wire.proto import evaluation_pb2 as ev

    snapshot = store.get_snapshot(job.job_id)
    if snapshot is None or snapshot.state not in TERMINAL_STATES:
        return 0, 0
    from strands_robots.relay.job_teams import slot_teams

    status = ev.JobStatus.FromString(snapshot.payload)
    return record_comparison(store, job.job_id, job.client_id, job.station_id, status, snapshot.updated_unix_ms,
                             dict(slot_teams(job).slots))


def blocks_of(store: Any, team: str, suite: str, limit: int = MAX_BLOCKS_READ) -> List[StoredBlock]:
    """Return the kept blocks on ``suite`` of the comparisons ``team`` took part in (each with every slot's team).

    The newest ``limit`` of them, oldest first.
    """
    rows = store.read_sql(
        "SELECT b.job_id, b.block_id, b.client_id, b.suite, b.station_id, b.task_id, b.seed, b.outcomes, p.slot_teams "
        "FROM comparison_blocks b JOIN comparison_participants p ON p.job_id = b.job_id AND p.team = {p} "
        "WHERE b.suite = {p} ORDER BY b.ended_unix_ms DESC, b.job_id DESC, b.position DESC LIMIT {p}",
        (team, suite, int(limit)))
    out = []
    for r in reversed(rows):
        outcomes = {str(k): bool(v) for k, v in json.loads(r[7]).items()}
        teams = {str(k): str(v) for k, v in json.loads(r[8]).items()} if r[8] else {}
        out.append(StoredBlock(job_id=r[0], block_id=r[1], client_id=r[2], suite=r[3], station_id=r[4],
                               task_id=r[5], seed=int(r[6]), outcomes=outcomes, teams=teams))
    return out


def suites_of(store: Any, team: str, limit: int = MAX_SUITES_LISTED) -> List[Tuple[str, int]]:
    """Return the suites ``team`` has kept comparisons on, each with its block count, by suite id."""
    rows = store.read_sql("SELECT b.suite, count(*) FROM comparison_blocks b JOIN comparison_participants p ON "
                          "p.job_id = b.job_id AND p.team = {p} GROUP BY b.suite ORDER BY b.suite LIMIT {p}",
                          (team, int(limit)))
    return [(str(r[0]), int(r[1])) for r in rows]
