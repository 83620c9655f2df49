"""The relay keeps an ended comparison job's complete blocks, in SQLite and in a real PostgreSQL server alike."""

from __future__ import annotations

import pytest
from comparison_message import comparison_message, seeded_outcomes
from test_relay_harness import postgres_server, reset_postgres

from strands_robots.relay import comparison_blocks
from strands_robots.relay.postgres_store import PostgresStore
from strands_robots.relay.sqlite_store import SqliteStore
from strands_robots.relay.store import JobRecord, Snapshot
from strands_robots.wire.proto import evaluation_pb2 as ev


@pytest.fixture(scope="module")
def postgres_url():
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        opened = SqliteStore(str(tmp_path / "relay.db"))
    else:
        url = request.getfixturevalue("postgres_url")
        reset_postgres(url)
        opened = PostgresStore(url)
    try:
        comparison_blocks.ensure_tables(opened)
        comparison_blocks.ensure_tables(opened)  # every relay opening the store does it: idempotent
        yield opened
    finally:
        opened.close()


def _ended(store, job_id, client, comparison, state="SUCCEEDED", t=1_800_000_000_000):
    job = JobRecord(job_id=job_id, client_id=client, station_id="sim_station", request=b"r", submitted_unix_ms=t)
    store.create_job(job)
    status = ev.JobStatus(job_id=job_id, station_id="sim_station", state=state, updated_unix_ms=t, sequence=1)
    status.comparison.CopyFrom(comparison)
    store.put_snapshot(Snapshot(job_id=job_id, updated_unix_ms=t, state=state,
                                payload=status.SerializeToString(deterministic=True), sequence=1))
    return job


def test_an_ended_comparisons_blocks_read_back_with_their_outcomes_task_and_seed(store):
    msg = comparison_message(seeded_outcomes(0.7, 0.4, 25, seed=11), tasks=("hold_pose", "reach_cube"))
    job = _ended(store, "job-ab", "team_a", msg)
    assert comparison_blocks.keep_ended(store, job) == (25, 0)
    back = comparison_blocks.blocks_of(store, "team_a", "demo")
    assert [b.block_id for b in back] == [b.block_id for b in msg.blocks]
    for got, sent in zip(back, msg.blocks):
        assert dict(got.outcomes) == {o.slot: o.success for o in sent.outcomes}
        assert (got.task_id, got.seed, got.job_id, got.client_id, got.suite) == \
            (sent.task_id, sent.seed, "job-ab", "team_a", "demo")


def test_keeping_the_same_ended_job_again_adds_nothing(store):
    job = _ended(store, "job-ab", "team_a", comparison_message(seeded_outcomes(0.6, 0.5, 10, seed=12)))
    comparison_blocks.keep_ended(store, job)
    comparison_blocks.keep_ended(store, job)
    assert len(comparison_blocks.blocks_of(store, "team_a", "demo")) == 10


def test_a_job_not_ended_keeps_nothing_and_another_teams_or_suites_blocks_are_not_read(store):
    running = _ended(store, "job-run", "team_a", comparison_message(seeded_outcomes(0.6, 0.5, 8, seed=13)),
                     state="RUNNING")
    assert comparison_blocks.keep_ended(store, running) == (0, 0)
    other = _ended(store, "job-b", "team_b", comparison_message(seeded_outcomes(0.6, 0.5, 8, seed=14)))
    comparison_blocks.keep_ended(store, other)
    elsewhere = _ended(store, "job-s", "team_a",
                       comparison_message(seeded_outcomes(0.6, 0.5, 8, seed=15), suite="kitchen"))
    comparison_blocks.keep_ended(store, elsewhere)
    assert comparison_blocks.blocks_of(store, "team_a", "demo") == []
    assert {b.job_id for b in comparison_blocks.blocks_of(store, "team_a", "kitchen")} == {"job-s"}


def test_an_incomplete_block_is_left_out_and_counted(store):
    msg = comparison_message(seeded_outcomes(0.6, 0.5, 4, seed=16))
    del msg.blocks[1].outcomes[1]            # one slot only: not a complete block
    msg.blocks[2].outcomes[1].slot = msg.blocks[2].outcomes[0].slot  # a slot twice
    job = _ended(store, "job-ab", "team_a", msg)
    assert comparison_blocks.keep_ended(store, job) == (4, 2)
    assert [b.block_id for b in comparison_blocks.blocks_of(store, "team_a", "demo")] == ["b_0000", "b_0003"]


def test_only_the_newest_blocks_are_read_past_the_limit(store):
    first = _ended(store, "job-1", "team_a", comparison_message(seeded_outcomes(0.6, 0.5, 6, seed=17)),
                   t=1_800_000_000_000)
    second = _ended(store, "job-2", "team_a", comparison_message(seeded_outcomes(0.6, 0.5, 6, seed=18)),
                    t=1_800_000_100_000)
    for job in (first, second):
        comparison_blocks.keep_ended(store, job)
    newest = comparison_blocks.blocks_of(store, "team_a", "demo", limit=8)
    assert [(b.job_id, b.block_id) for b in newest] == \
        [("job-1", "b_0004"), ("job-1", "b_0005")] + [("job-2", f"b_{i:04d}") for i in range(6)]
