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


# -- an answer racing an expiry: two relays' handles on one store ------------------------------------------------
BOUND_S = 60.0
DEADLINE = T0 + int(BOUND_S * 1000)


@pytest.fixture
def two_handles(store, request):
    """Open a second handle on the same store, as a second relay of the cluster opens it."""
    other = SqliteStore(store.path) if isinstance(store, SqliteStore) else \
        PostgresStore(request.getfixturevalue("postgres_url"))
    try:
        yield store, other
    finally:
        other.close()


class PausedAtFirstWrite:
    """A store handle that stops its caller before the first write it makes, until the test lets it go.

    Everything the caller read before (the job not ended, the invitation pending) is read; the test runs the
    other side whole in that gap, which is exactly the race of two relays.
    """

    WRITES = ("run_sql", "put_snapshot", "request_cancel")

    def __init__(self, store) -> None:
        import threading

        self._store = store
        self.reached, self.go = threading.Event(), threading.Event()

    def __getattr__(self, name):
        got = getattr(self._store, name)
        if name not in self.WRITES:
            return got

        def write(*args, **kwargs):
            if not self.reached.is_set():
                self.reached.set()
                assert self.go.wait(30.0), "the test never let the paused side go"
            return got(*args, **kwargs)

        return write


def _race(paused_store, paused_call, other_call):
    """Run ``paused_call(paused_store)`` to its first write, ``other_call()`` whole, then the paused one's rest.

    Return (the paused side's result or refusal, the other side's result or refusal).
    """
    import concurrent.futures

    def outcome(call, *args):
        try:
            return call(*args)
        except job_teams.AnswerRefused as exc:
            return exc

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        paused = pool.submit(outcome, paused_call, paused_store)
        assert paused_store.reached.wait(30.0), "the paused side never reached a write"
        other = outcome(other_call)
        paused_store.go.set()
        return paused.result(30.0), other


def _final(store, job):
    snapshot = store.get_snapshot(job.job_id)
    return (snapshot.state if snapshot else None), job_teams.answers(store, job)["team_b"][0]


def test_an_expiry_that_loses_the_race_to_the_last_accept_changes_nothing(two_handles):
    relay_a, relay_b = two_handles
    job = _job(relay_a, "ab", "team_a", ["vision", {"name": "theirs", "team": "team_b"}])
    # relay B's clock says the bound passed and it reads the invitation pending; relay A's team accepts just
    # before the bound by A's clock, in the gap before B writes
    expiry, accept = _race(PausedAtFirstWrite(relay_b),
                           lambda s: job_teams.settle(s, job, DEADLINE + 5, BOUND_S),
                           lambda: job_teams.respond(relay_a, job, "team_b", True, "", DEADLINE - 1, BOUND_S))
    assert accept == f"accepted: every team accepted job {job.job_id!r}; the station may run it"
    assert expiry is False
    assert _final(relay_a, job) == _final(relay_b, job) == (None, "accepted")
    assert job_teams.waiting_for(relay_b, job) == ()  # the station may be sent it
    assert job_teams.settle_due(relay_b, DEADLINE + 10 ** 6, BOUND_S) == 0  # and no later expiry ends it


def test_an_accept_that_loses_the_race_to_the_expiry_is_told_the_invitation_expired(two_handles):
    relay_a, relay_b = two_handles
    job = _job(relay_a, "ab", "team_a", ["vision", {"name": "theirs", "team": "team_b"}])
    # relay A read the job not ended and the invitation pending before the bound by its clock; relay B expires
    # it (its clock past the bound) in the gap before A writes the answer
    accept, expiry = _race(PausedAtFirstWrite(relay_a),
                           lambda s: job_teams.respond(s, job, "team_b", True, "", DEADLINE - 1, BOUND_S),
                           lambda: job_teams.settle(relay_b, job, DEADLINE + 5, BOUND_S))
    assert expiry is True
    assert isinstance(accept, job_teams.AnswerRefused)
    assert str(accept) == ("the invitation to job 'ab' expired unanswered at 2027-01-15T08:01:00Z (the relay's "
                           "invitation_timeout_s, 60 s); the job has ended")
    assert _final(relay_a, job) == _final(relay_b, job) == ("CANCELLED", "expired")
    ended = ev.JobStatus.FromString(relay_a.get_snapshot(job.job_id).payload)
    assert ended.message.startswith("the invitation to team(s) team_b expired unaccepted after 60 s")
    assert job_teams.waiting_for(relay_a, job) == ("team_b",)  # never sent to a station


def test_a_decline_racing_an_expiry_has_one_winner_either_way(two_handles):
    relay_a, relay_b = two_handles
    first = _job(relay_a, "ab", "team_a", ["vision", {"name": "theirs", "team": "team_b"}])
    expiry, decline = _race(PausedAtFirstWrite(relay_b),
                            lambda s: job_teams.settle(s, first, DEADLINE, BOUND_S),
                            lambda: job_teams.respond(relay_a, first, "team_b", False, "no", DEADLINE - 1, BOUND_S))
    assert (expiry, decline) == (False, "declined: job 'ab' ended") and _final(relay_b, first) == (
        "CANCELLED", "declined")
    second = _job(relay_a, "cd", "team_a", ["vision", {"name": "theirs", "team": "team_b"}])
    decline, expiry = _race(PausedAtFirstWrite(relay_a),
                            lambda s: job_teams.respond(s, second, "team_b", False, "no", DEADLINE - 1, BOUND_S),
                            lambda: job_teams.settle(relay_b, second, DEADLINE, BOUND_S))
    assert expiry is True and "expired unanswered" in str(decline) and _final(relay_a, second) == (
        "CANCELLED", "expired")


def test_an_accept_at_the_bound_by_its_own_clock_expires_the_invitation_and_is_told_so(store):
    job = _job(store, "ab", "team_a", ["vision", {"name": "theirs", "team": "team_b"}])
    with pytest.raises(job_teams.AnswerRefused, match=r"^the invitation to job 'ab' expired unanswered at "):
        job_teams.respond(store, job, "team_b", True, "", DEADLINE, BOUND_S)
    assert _final(store, job) == ("CANCELLED", "expired")


def test_an_expiry_whose_relay_stopped_before_ending_the_job_is_ended_by_the_next_one(store):
    job = _job(store, "ab", "team_a", ["vision", {"name": "theirs", "team": "team_b"}])
    store.run_sql("UPDATE job_teams SET answer = {p} WHERE job_id = {p}", (job_teams.EXPIRED, job.job_id))
    assert job_teams.waiting_for(store, job) == ("team_b",)  # held meanwhile: never sent to a station
    assert job_teams.settle_due(store, DEADLINE, BOUND_S) == 1
    assert _final(store, job) == ("CANCELLED", "expired")
