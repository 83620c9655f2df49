"""A comparison between teams in both stores: invitations, answers, listings and rankings, SQLite and PostgreSQL.

The relay's rules (``relay.job_teams``, ``relay.listing``, ``relay.comparison_blocks``) run here on a real SQLite
file and a real PostgreSQL server alike; ``test_relay_job_teams.py`` runs them through the relay's RPCs.
"""

from __future__ import annotations

import pytest
from comparison_message import comparison_message, seeded_outcomes
from test_relay_harness import postgres_server, reset_postgres

from strands_robots.job_model.team_job import team_job_from_mapping
from strands_robots.relay import comparison_blocks, job_teams, listing
from strands_robots.relay.leaderboard import leaderboard_of
from strands_robots.relay.postgres_store import PostgresStore
from strands_robots.relay.sqlite_store import SqliteStore
from strands_robots.relay.store import JobRecord, Snapshot
from strands_robots.wire.pb_model import suite_job_to_pb
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.wire.proto import evaluation_service_pb2 as es

T0 = 1_800_000_000_000


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
        yield opened
    finally:
        opened.close()


def _job(store, job_id, owner, slots, t=T0):
    team_job = team_job_from_mapping({"station_id": "sim_station", "suite": "demo",
                                      "tasks": [{"task": "reach_cube", "trials": 4}], "compare": {"slots": slots}})
    request = es.SubmitJobRequest(station_id="sim_station", episodes=team_job.episodes, job_id=job_id,
                                  suite_job=suite_job_to_pb(team_job))
    job = JobRecord(job_id=job_id, client_id=owner, station_id="sim_station",
                    request=request.SerializeToString(deterministic=True), submitted_unix_ms=t,
                    episodes_total=team_job.episodes)
    store.create_job(job)
    job_teams.invite(store, job)
    return job


def test_a_job_is_held_until_every_invited_team_accepted_and_the_first_answer_stands(store):
    job = _job(store, "ab", "team_a", ["vision", {"name": "theirs", "team": "team_b"},
                                       {"name": "third", "team": "team_c"}])
    assert job_teams.waiting_for(store, job) == ("team_b", "team_c")
    assert "still waits for team(s) team_c" in job_teams.respond(store, job, "team_b", True, "", T0 + 5, 60)
    assert job_teams.waiting_for(store, job) == ("team_c",)
    with pytest.raises(job_teams.AnswerRefused, match="already accepted"):
        job_teams.respond(store, job, "team_b", False, "", T0 + 6, 60)
    assert job_teams.respond(store, job, "team_c", True, "", T0 + 7, 60).startswith("accepted: every team")
    assert job_teams.waiting_for(store, job) == ()
    assert job_teams.settle(store, job, T0 + 10 ** 9, 60) is False  # accepted: a bound passing ends nothing


def test_an_unanswered_invitation_ends_its_job_once_at_its_bound_and_never_before(store):
    job = _job(store, "ab", "team_a", ["vision", {"name": "theirs", "team": "team_b"}])
    other = _job(store, "cd", "team_a", ["vision", {"name": "theirs", "team": "team_b"}], t=T0 + 30_000)
    assert job_teams.settle_due(store, T0 + 59_999, 60) == 0
    assert job_teams.settle_due(store, T0 + 60_000, 60) == 1
    assert job_teams.settle_due(store, T0 + 60_001, 60) == 0  # ended once
    ended = store.get_snapshot(job.job_id)
    assert ended.state == "CANCELLED" and "team(s) team_b expired unaccepted after 60 s" in \
        ev.JobStatus.FromString(ended.payload).message
    assert store.get_snapshot(other.job_id) is None


def test_the_invited_team_lists_the_job_by_the_relays_id_with_its_owner_answer_and_slots(store):
    _job(store, "ab", "team_a", ["vision", {"name": "theirs", "team": "team_b"}])
    _job(store, "own", "team_b", ["x", "y"], t=T0 + 1)
    _job(store, "not_b", "team_a", ["vision", "blind"], t=T0 + 2)
    listed, token = listing.page(store, "team_b", 10, None, ())
    assert [(j.job_id, j.owner, j.invitation, list(j.slots)) for j in listed] == [
        ("own", "", "", []), ("ab", "team_a", "pending", ["theirs"])]
    first, token = listing.page(store, "team_b", 1, None, ())
    second, last = listing.page(store, "team_b", 1, listing.decode_token(token), ())
    assert [j.job_id for j in first + second] == ["own", "ab"] and last == ""
    assert [j.job_id for j in listing.page(store, "team_c", 10, None, ())[0]] == []


def test_each_team_ranks_the_comparisons_it_took_part_in_with_the_others_policy_named_by_team(store):
    job = _job(store, "ab", "team_a", ["vision", {"name": "theirs", "team": "team_b"}])
    own = _job(store, "aa", "team_a", ["vision", "blind"], t=T0 + 1)
    for record, slots, seed in ((job, ("vision", "theirs"), 1), (own, ("vision", "blind"), 2)):
        status = ev.JobStatus(job_id=record.job_id, station_id="sim_station", state="SUCCEEDED",
                              updated_unix_ms=T0 + seed, sequence=1)
        status.comparison.CopyFrom(comparison_message(seeded_outcomes(0.8, 0.4, 20, seed=seed), slots=slots))
        store.put_snapshot(Snapshot(job_id=record.job_id, updated_unix_ms=T0 + seed, state="SUCCEEDED",
                                    payload=status.SerializeToString(), sequence=1))
        comparison_blocks.keep_ended(store, record)
    a = comparison_blocks.blocks_of(store, "team_a", "demo")
    b = comparison_blocks.blocks_of(store, "team_b", "demo")
    assert len(a) == 40 and len(b) == 20 and {x.job_id for x in b} == {"ab"}  # team_b took no part in "aa"
    assert comparison_blocks.blocks_of(store, "team_c", "demo") == []
    assert comparison_blocks.suites_of(store, "team_b") == [("demo", 20)]
    board_a = {e.policy: e for e in leaderboard_of("demo", a, "team_a").entries}
    board_b = {e.policy: e for e in leaderboard_of("demo", b, "team_b").entries}
    assert set(board_a) == {"vision", "blind", "team_b/theirs"} and set(board_b) == {"team_a/vision", "theirs"}
    assert [(e.team, e.others) for e in (board_a["team_b/theirs"], board_b["team_a/vision"], board_b["theirs"])] == [
        ("team_b", True), ("team_a", True), ("team_b", False)]
    assert board_a["vision"].jobs == 2 and board_b["team_a/vision"].jobs == 1
