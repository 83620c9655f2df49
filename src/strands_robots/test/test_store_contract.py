"""The relay store's rules, one suite run against SQLite and against a real PostgreSQL server."""

from __future__ import annotations

import threading

import pytest
from test_relay_harness import postgres_server, reset_postgres

from strands_robots.relay.postgres_store import PostgresStore
from strands_robots.relay.sqlite_store import SqliteStore
from strands_robots.relay.store import JobExists, JobRecord, Snapshot, StoreError, Verdict
from strands_robots.relay.store_url import open_store


@pytest.fixture(scope="module")
def postgres_url():
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_factory(request, tmp_path):
    """``make()`` opens a store on the same database each time (a relay restart); all closed after the test."""
    opened = []
    if request.param == "sqlite":
        path = str(tmp_path / "relay.db")

        def make():
            opened.append(SqliteStore(path))
            return opened[-1]
    else:
        url = request.getfixturevalue("postgres_url")
        reset_postgres(url)

        def make():
            opened.append(PostgresStore(url))
            return opened[-1]
    try:
        yield make
    finally:
        for store in opened:
            store.close()


def _job(job_id="job-1", client="team_a", station="sim_station", t=1000):
    return JobRecord(job_id=job_id, client_id=client, station_id=station, request=b"\x0a\x03abc\x00\xff",
                     submitted_unix_ms=t)


def _snap(job_id="job-1", t=5000, state="RUNNING", payload=None, seq=0, done=0):
    return Snapshot(job_id=job_id, updated_unix_ms=t, state=state, payload=payload or f"{state}@{t}#{seq}".encode(),
                    sequence=seq, episodes_done=done)


def test_created_job_reads_back_with_owner_station_and_request_bytes(store_factory):
    store = store_factory()
    store.create_job(_job())
    got = store.get_job("job-1")
    assert got == _job()
    assert store.get_job("nope") is None


def test_second_job_with_the_same_id_is_refused(store_factory):
    store = store_factory()
    store.create_job(_job())
    with pytest.raises(JobExists, match="job-1"):
        store.create_job(_job(client="team_b"))
    assert store.get_job("job-1").client_id == "team_a"


def test_older_unnumbered_snapshot_never_overwrites_a_newer_one(store_factory):
    store = store_factory()
    store.create_job(_job())
    assert store.put_snapshot(_snap(t=5000, state="RUNNING")) is Verdict.STORED
    assert store.put_snapshot(_snap(t=4999, state="WAITING_POLICY")) is Verdict.STALE
    got = store.get_snapshot("job-1")
    assert (got.updated_unix_ms, got.state, got.payload) == (5000, "RUNNING", b"RUNNING@5000#0")
    assert store.put_snapshot(_snap(t=6000, state="SUCCEEDED")) is Verdict.STORED
    assert store.get_snapshot("job-1").state == "SUCCEEDED"


def test_unnumbered_snapshot_of_the_same_millisecond_replaces(store_factory):
    store = store_factory()
    store.put_snapshot(_snap(t=7000, payload=b"first"))
    assert store.put_snapshot(_snap(t=7000, payload=b"second")) is Verdict.STORED
    assert store.get_snapshot("job-1").payload == b"second"


def test_snapshots_are_ordered_by_sequence_not_by_a_station_clock_an_hour_ahead(store_factory):
    store = store_factory()
    store.create_job(_job())
    hour = 3_600_000
    assert store.put_snapshot(_snap(t=10_000, seq=1)) is Verdict.STORED
    assert store.put_snapshot(_snap(t=10_000 + hour, seq=2, done=1)) is Verdict.STORED  # the clock jumped ahead
    assert store.put_snapshot(_snap(t=10_500, seq=3, done=1)) is Verdict.STORED  # and back: still newer
    assert store.put_snapshot(_snap(t=10_000 + 2 * hour, seq=2, done=1)) is Verdict.STALE  # a late resend
    assert store.put_snapshot(_snap(t=11_000, state="SUCCEEDED", seq=4, done=2)) is Verdict.STORED
    got = store.get_snapshot("job-1")
    assert (got.state, got.sequence, got.updated_unix_ms, got.episodes_done) == ("SUCCEEDED", 4, 11_000, 2)


def test_a_stored_terminal_snapshot_is_never_replaced(store_factory):
    store = store_factory()
    store.create_job(_job())
    assert store.put_snapshot(_snap(t=1, state="CANCELLED", seq=5, done=1)) is Verdict.STORED
    assert store.put_snapshot(_snap(t=2, state="RUNNING", seq=6, done=1)) is Verdict.FINAL
    assert store.put_snapshot(_snap(t=3, state="SUCCEEDED", seq=7, done=3)) is Verdict.FINAL
    got = store.get_snapshot("job-1")
    assert (got.state, got.sequence) == ("CANCELLED", 5)
    assert store.open_jobs_for_station("sim_station") == []


def test_a_snapshot_removing_finished_episodes_is_refused(store_factory):
    store = store_factory()
    store.create_job(_job())
    assert store.put_snapshot(_snap(t=1, seq=1, done=2)) is Verdict.STORED
    assert store.put_snapshot(_snap(t=2, seq=2, done=0)) is Verdict.FEWER_EPISODES  # a station that started over
    assert store.put_snapshot(_snap(t=3, seq=1, done=0)) is Verdict.STALE  # older anyway: just stale
    assert store.get_snapshot("job-1").episodes_done == 2
    assert store.put_snapshot(_snap(t=4, seq=3, done=2)) is Verdict.STORED


def test_an_unnumbered_snapshot_never_replaces_a_numbered_one_and_a_numbered_one_replaces_it(store_factory):
    store = store_factory()
    store.create_job(_job())
    assert store.put_snapshot(_snap(t=5000, seq=0)) is Verdict.STORED
    assert store.put_snapshot(_snap(t=1000, seq=1)) is Verdict.STORED  # an upgraded station: its clock is no rule
    assert store.put_snapshot(_snap(t=9000, seq=0)) is Verdict.STALE
    assert store.get_snapshot("job-1").sequence == 1


def test_client_job_ids_are_per_client_and_a_client_cannot_hold_one_twice(store_factory):
    store = store_factory()
    store.create_job(JobRecord("job-1", "team_a", "sim_station", b"a", 1, client_job_id="nightly"))
    store.create_job(JobRecord("job-2", "team_b", "sim_station", b"b", 2, client_job_id="nightly"))
    with pytest.raises(JobExists):
        store.create_job(JobRecord("job-3", "team_a", "sim_station", b"c", 3, client_job_id="nightly"))
    assert store.view_for_client("team_a", "nightly").job.job_id == "job-1"
    assert store.view_for_client("team_b", "nightly").job.job_id == "job-2"
    assert store.view_for_client("team_c", "nightly") is None
    assert store.get_job("job-3") is None
    assert store.get_job("job-2").client_job_id == "nightly"
    assert _job().client_job_id == "job-1"  # unnamed by its client: the relay's id


def test_client_load_counts_open_jobs_and_the_episodes_they_still_have_to_run(store_factory):
    store = store_factory()
    for job_id, total in (("a", 5), ("b", 3), ("c", 4)):
        store.create_job(JobRecord(job_id, "team_a", "sim_station", b"r", 1, episodes_total=total))
    store.create_job(JobRecord("d", "team_b", "sim_station", b"r", 1, episodes_total=100))
    store.put_snapshot(_snap("a", seq=1, done=2))
    store.put_snapshot(_snap("b", state="SUCCEEDED", seq=1, done=3))
    load = store.client_load("team_a")
    assert (load.open_jobs, load.queued_episodes) == (2, 3 + 4)
    assert store.client_load("nobody").open_jobs == 0


def test_snapshots_survive_reopening_the_store(store_factory):
    first = store_factory()
    first.create_job(_job())
    first.put_snapshot(_snap(t=8000, state="FINALIZING"))
    first.station_heard("sim_station", 8100)
    first.close()
    second = store_factory()
    assert second.get_snapshot("job-1").state == "FINALIZING"
    assert second.get_job("job-1").client_id == "team_a"
    assert second.station_last_heard("sim_station") == 8100


def test_station_last_heard_only_moves_forward(store_factory):
    store = store_factory()
    assert store.station_last_heard("sim_station") is None
    store.station_heard("sim_station", 2000)
    store.station_heard("sim_station", 1500)
    assert store.station_last_heard("sim_station") == 2000
    store.station_heard("sim_station", 2500)
    assert store.station_last_heard("sim_station") == 2500
    assert store.station_last_heard("other_station") is None


def test_open_jobs_for_a_station_leave_out_ended_jobs_and_other_stations(store_factory):
    store = store_factory()
    store.create_job(_job("a", t=1))
    store.create_job(_job("b", t=2))
    store.create_job(_job("c", t=3))
    store.create_job(_job("d", station="other_station", t=4))
    store.put_snapshot(_snap("a", state="SUCCEEDED"))
    store.put_snapshot(_snap("b", state="RUNNING"))
    assert [j.job_id for j in store.open_jobs_for_station("sim_station")] == ["b", "c"]
    assert [j.job_id for j in store.open_jobs_for_station("other_station")] == ["d"]


def test_cancel_request_is_recorded_with_its_reason(store_factory):
    store = store_factory()
    store.create_job(_job())
    assert store.request_cancel("job-1", "operator went home") is True
    assert store.request_cancel("missing", "x") is False
    got = store.get_job("job-1")
    assert (got.cancel_requested, got.cancel_reason) == (True, "operator went home")


def test_concurrent_writers_keep_the_newest_snapshot(store_factory):
    store = store_factory()
    store.create_job(_job())
    times = list(range(1, 201))
    barrier = threading.Barrier(4)

    def writer(offset):
        barrier.wait()
        for t in times[offset::4]:
            store.put_snapshot(_snap(t=t, payload=str(t).encode(), seq=t))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    got = store.get_snapshot("job-1")
    assert (got.updated_unix_ms, got.payload) == (200, b"200")


def test_snapshot_with_a_negative_time_is_refused(store_factory):
    store = store_factory()
    with pytest.raises(StoreError, match="updated_unix_ms"):
        store.put_snapshot(_snap(t=-1))


def test_store_url_names_the_backend_or_is_refused_with_the_forms(tmp_path):
    store = open_store(f"sqlite:{tmp_path / 'x.db'}")
    try:
        assert isinstance(store, SqliteStore)
    finally:
        store.close()
    with pytest.raises(StoreError, match="sqlite:PATH or postgresql://"):
        open_store("mysql://x")
    with pytest.raises(StoreError, match="needs a path"):
        open_store("sqlite:")


def test_view_reads_the_job_its_latest_snapshot_and_its_stations_last_heard_together(store_factory):
    store = store_factory()
    assert store.view("job-1") is None
    store.create_job(_job())
    first = store.view("job-1")
    assert (first.job, first.snapshot, first.station_last_heard) == (_job(), None, None)
    store.put_snapshot(_snap(t=9000, state="RUNNING"))
    store.station_heard("sim_station", 9100)
    store.station_heard("other_station", 9999)
    got = store.view("job-1")
    assert (got.snapshot.updated_unix_ms, got.snapshot.state, got.station_last_heard) == (9000, "RUNNING", 9100)
    store.put_snapshot(_snap(t=9500, state="SUCCEEDED"))
    assert store.view("job-1").snapshot.state == "SUCCEEDED"  # a reader sees what the writer committed


def test_postgres_store_replaces_a_broken_connection_and_keeps_serving(postgres_url):
    import psycopg

    reset_postgres(postgres_url)
    store = PostgresStore(postgres_url, pool_size=2)
    try:
        store.create_job(_job())
        store.put_snapshot(_snap(t=100))
        # the server ends every session of the store (as a restart would)
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            killed = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                   "WHERE pid <> pg_backend_pid() AND datname = current_database()").fetchone()[0]
        assert killed >= 2
        for _ in range(3):  # every pooled connection is found broken and replaced
            assert store.get_snapshot("job-1").updated_unix_ms == 100
        assert store.put_snapshot(_snap(t=200)) is Verdict.STORED
        assert store.get_snapshot("job-1").updated_unix_ms == 200
    finally:
        store.close()


_OLD_SCHEMA = (
    "CREATE TABLE jobs (job_id TEXT PRIMARY KEY, client_id TEXT NOT NULL, station_id TEXT NOT NULL, "
    "request {blob} NOT NULL, submitted_unix_ms BIGINT NOT NULL, cancel_requested BOOLEAN NOT NULL DEFAULT FALSE, "
    "cancel_reason TEXT NOT NULL DEFAULT '')",
    "CREATE TABLE snapshots (job_id TEXT PRIMARY KEY, updated_unix_ms BIGINT NOT NULL, state TEXT NOT NULL, "
    "payload {blob} NOT NULL)",
    "CREATE TABLE stations (station_id TEXT PRIMARY KEY, last_heard_unix_ms BIGINT NOT NULL)",
    "INSERT INTO jobs (job_id, client_id, station_id, request, submitted_unix_ms) "
    "VALUES ('job-old', 'team_a', 'sim_station', {x}, 1)",
    "INSERT INTO snapshots (job_id, updated_unix_ms, state, payload) VALUES ('job-old', 50, 'RUNNING', {x})",
)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_store_made_by_an_older_relay_gains_the_new_columns_and_keeps_its_jobs(backend, tmp_path, request):
    if backend == "sqlite":
        import sqlite3

        path = str(tmp_path / "old.db")
        with sqlite3.connect(path) as conn:
            for stmt in _OLD_SCHEMA:
                conn.execute(stmt.format(blob="BLOB", x="X'78'"))
        store = SqliteStore(path)
    else:
        import psycopg

        url = request.getfixturevalue("postgres_url")
        reset_postgres(url)
        with psycopg.connect(url, autocommit=True) as conn:
            for stmt in _OLD_SCHEMA:
                conn.execute(stmt.format(blob="BYTEA", x="'x'::bytea"))
        store = PostgresStore(url)
    try:
        view = store.view_for_client("team_a", "job-old")
        assert view is not None and view.job.client_job_id == "job-old"
        assert (view.snapshot.state, view.snapshot.sequence) == ("RUNNING", 0)
        assert store.put_snapshot(_snap("job-old", t=10, seq=1)) is Verdict.STORED  # numbered beats unnumbered
    finally:
        store.close()


def test_a_stations_latest_offer_replaces_the_one_before_and_is_listed_per_station(store_factory):
    store = store_factory()
    assert store.station_offers() == []
    store.put_station_offer("st_b", b"\x01b", 10)
    store.put_station_offer("st_a", b"\x00first", 20)
    store.put_station_offer("st_a", b"\x00second", 30)
    assert [(r.station_id, r.offer, r.offered_unix_ms) for r in store.station_offers()] == [
        ("st_a", b"\x00second", 30), ("st_b", b"\x01b", 10)]
    assert [r.offer for r in store.station_offers("st_b")] == [b"\x01b"]
    assert store.station_offers("nobody") == []
    reopened = store_factory()  # committed: another store on the same database reads it
    assert [r.offer for r in reopened.station_offers("st_a")] == [b"\x00second"]
