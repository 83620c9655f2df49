"""Relays sharing one PostgreSQL store: a job's policy session meets across relays, and its home moves off a dead one.

Real relays (in this process) on the real PostgreSQL server the store tests start; the station side is a real
``StationLink`` on one relay and the team's ``EvaluationClient`` on the other. The claim rules are checked on
both stores. (The SIGKILL failover with the real station node is test/test_relay_cluster_failover.py.)
"""

from __future__ import annotations

import contextlib
import threading

import pytest
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    postgres_server,
    reset_postgres,
    wait_until,
    yes_no_task,
)

from strands_robots.client import EvaluationClient, Policy, pb
from strands_robots.client.relay_targets import RelayTargetError, channel_target, split_targets
from strands_robots.relay.auth import TokenBook
from strands_robots.relay.server import RelayServer, cluster_address, now_ms
from strands_robots.station_link.link import StationLink
from strands_robots.station_link.session import PolicyDisconnected
from strands_robots.relay.postgres_store import PostgresStore
from strands_robots.relay.sqlite_store import SqliteStore


@pytest.fixture(scope="module")
def postgres_url():
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteStore(str(tmp_path / "relay.db"))
    else:
        url = request.getfixturevalue("postgres_url")
        reset_postgres(url)
        s = PostgresStore(url)
    try:
        yield s
    finally:
        s.close()


# -- the claim rules (both stores) ------------------------------------------------------------------------------
STALE_MS = 300


def beat_and_claim(store, job_id, relay_id, address):
    """One round of a live relay: a heartbeat, then a claim (what a relay does when a side of the job arrives)."""
    store.relay_heard(relay_id, address)
    return store.claim_session_home(job_id, relay_id, STALE_MS)


def test_the_first_relay_to_claim_a_home_keeps_it_until_it_falls_silent_or_stops(store):
    store.relay_heard("r1", "10.0.0.1:50051")
    store.relay_heard("r2", "10.0.0.2:50051")
    assert store.claim_session_home("job-1", "r1", STALE_MS).relay_id == "r1"
    other = store.claim_session_home("job-1", "r2", STALE_MS)
    assert (other.relay_id, other.address) == ("r1", "10.0.0.1:50051")  # r2 forwards to r1
    assert store.claim_session_home("job-2", "r2", STALE_MS).relay_id == "r2"  # homes are per job
    # r1 falls silent (r2 still beats): r2's claim takes job-1 over once r1 was not heard for the bound
    claims: list = []
    wait_until(lambda: claims.append(beat_and_claim(store, "job-1", "r2", "10.0.0.2:50051")) or
               claims[-1].relay_id == "r2", timeout_s=10, what="r2 taking over the home of the silent r1")
    r1_heard = {r.relay_id: r.heard_unix_ms for r in store.relays()}["r1"]
    assert claims[-1].heard_unix_ms - r1_heard >= STALE_MS  # taken when, by the database's clock, r1 was stale
    # r1 comes back (a new beat): it does not take the home back from a live r2
    assert beat_and_claim(store, "job-1", "r1", "10.0.0.1:50051").relay_id == "r2"
    assert store.session_home("job-1").relay_id == "r2"
    # r2 stops (its row is deleted): its homes go at once, without waiting for the bound
    store.relay_gone("r2")
    assert store.claim_session_home("job-2", "r1", STALE_MS).relay_id == "r1"
    assert [r.relay_id for r in store.relays()] == ["r1"]
    assert store.session_home("nobody's") is None


def test_a_relay_restarted_at_its_address_takes_its_earlier_run_s_homes_at_once(store):
    store.relay_heard("old", "10.0.0.1:50051")
    store.relay_heard("other", "10.0.0.2:50051")
    assert store.claim_session_home("job-1", "old", 3000).relay_id == "old"
    store.relay_heard("new", "10.0.0.1:50051")  # restarted at once: "old" is not stale yet
    assert store.relays_replaced("10.0.0.1:50051", "new") == 1
    assert store.claim_session_home("job-1", "new", 3000).relay_id == "new"
    assert [r.relay_id for r in store.relays()] == ["new", "other"]


def test_heartbeats_are_stamped_by_the_databases_clock_and_never_move_back(store):
    before = store.relay_heard("r1", "a:1")
    again = store.relay_heard("r1", "a:1")
    (row,) = store.relays()
    assert before > 1_600_000_000_000 and again >= before and row.heard_unix_ms == again  # ms since the epoch
    # a row stamped later (as by another relay's beat) is never moved back by an earlier one
    store.run_sql("UPDATE relays SET heard_unix_ms = heard_unix_ms + 60000 WHERE relay_id = {p}", ("r1",))
    store.relay_heard("r1", "a:1")
    assert store.relays()[0].heard_unix_ms == again + 60000


# -- relay addresses for stations and clients ---------------------------------------------------------------------
def test_several_relay_addresses_make_one_failover_target():
    assert split_targets(" 127.0.0.1:1 , 127.0.0.1:2,") == ["127.0.0.1:1", "127.0.0.1:2"]
    assert channel_target("relay.example:50051") == ("relay.example:50051", [])
    target, options = channel_target(["127.0.0.1:5001", "127.0.0.2:5002"])
    assert target == "ipv4:127.0.0.1:5001,127.0.0.2:5002" and ("grpc.lb_policy_name", "pick_first") in options
    target, options = channel_target("localhost:7000,127.0.0.1:7001")
    assert target.startswith("ipv4:127.0.0.1:7000") and target.endswith("127.0.0.1:7001")
    assert ("grpc.ssl_target_name_override", "localhost") in options
    for bad in ("", "nohost", "host:port", "host:0", ":80"):
        with pytest.raises(RelayTargetError):
            channel_target(bad)


def test_a_relay_joins_a_cluster_on_postgresql_by_its_listen_address_unless_told():
    pg = "postgresql://u@h:5432/db"
    assert cluster_address(None, "10.0.0.5:50051", pg) == "10.0.0.5:50051"
    assert cluster_address(None, "0.0.0.0:50051", pg) is None  # a wildcard is no address to reach
    assert cluster_address("relay-a.internal:50051", "0.0.0.0:50051", pg) == "relay-a.internal:50051"
    assert cluster_address("none", "10.0.0.5:50051", pg) is None
    assert cluster_address(None, "10.0.0.5:50051", "sqlite:/tmp/r.db") is None


# -- sessions across two relays ---------------------------------------------------------------------------------
class Counter(Policy):
    """x -> [x + 1]; counts what it was asked."""

    def __init__(self):
        self.resets, self.acts = [], []

    def reset(self, task):
        self.resets.append(self.episode.episode_id)

    def act(self, observation):
        self.acts.append(observation["x"])
        return [{"right.joint_4": observation["x"] + 1.0}]


@contextlib.contextmanager
def two_relays(url, stale_s=1.0, clocks=(now_ms, now_ms)):
    reset_postgres(url)
    stores = [PostgresStore(url), PostgresStore(url)]
    servers = []
    try:
        for s, clock in zip(stores, clocks):
            server = RelayServer(s, TokenBook(CLIENT_TOKENS, STATION_TOKENS), "127.0.0.1:0", poll_s=0.05,
                                 advertise="127.0.0.1:0", cluster_stale_s=stale_s, clock_ms=clock)
            servers.append(server)
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop(0)
        for s in stores:
            s.close()


def serve(client, job_id, policy):
    out: dict = {}

    def run():
        try:
            out["final"] = client.serve_policy(job_id, policy)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out["error"] = exc

    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def run_episode(session, episode_id, steps):
    session.wait_attached(10)
    session.start_episode(episode_id, pb.Task(task_id="pick", instruction="pick"), action_keys=["right.joint_4"])
    chunks = [session.act({"x": float(i)}) for i in range(steps)]
    session.end_episode(episode_id, "timeout")
    return chunks


def finish(link, job_id, episodes):
    link.report(pb.JobStatus(job_id=job_id, station_id="sim_station", state="SUCCEEDED", episodes_total=len(episodes),
                             sequence=9, updated_unix_ms=1,
                             episodes=[pb.EpisodeResult(episode_id=e, end_condition="timeout") for e in episodes]))
    assert link.flush(10)


@pytest.mark.parametrize("first", ["station", "client"])
def test_a_station_on_one_relay_and_its_team_on_another_run_the_job_to_succeeded(postgres_url, first):
    with two_relays(postgres_url) as (a, b):
        client = EvaluationClient(f"127.0.0.1:{b.port}", token=CLIENT_TOKENS["team_a"])
        link = StationLink(f"127.0.0.1:{a.port}", "sim_station", STATION_TOKENS["sim_station"],
                           heartbeat_s=0.1).start()
        served = None
        try:
            job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            policy = Counter()
            if first == "client":
                served = serve(client, job_id, policy)
                wait_until(lambda: a.core.store.session_home(job_id), what="the client's relay claiming the home")
            session = link.open_session(job_id)
            if served is None:
                wait_until(lambda: a.core.store.session_home(job_id), what="the station's relay claiming the home")
                served = serve(client, job_id, policy)
            chunks = run_episode(session, "ep_0000", 5)
            assert chunks == [[{"right.joint_4": float(i) + 1.0}] for i in range(5)]
            finish(link, job_id, ["ep_0000"])
            served["thread"].join(15)
            assert "error" not in served, served.get("error")
            assert served["final"].state == "SUCCEEDED" and served["final"].job_id == job_id
            assert policy.resets == ["ep_0000"] and policy.acts == [0.0, 1.0, 2.0, 3.0, 4.0]
            home = a.core.store.session_home(job_id).relay_id
            assert home == (a.relay_id if first == "station" else b.relay_id)  # the first side's relay
            assert client.get_status(job_id).state == "SUCCEEDED"
            session.close()
        finally:
            link.close()
            client.close()


@pytest.mark.parametrize("skewed, offset_ms", [("the team's relay", 3000), ("the station's relay", -3000)])
def test_a_relay_whose_clock_is_skewed_takes_no_live_relays_session_and_loses_none(postgres_url, skewed, offset_ms):
    """Relays are judged alive by the database's clock: one relay's clock 3 s off changes nothing.

    The station is on A (the home), the team on B; the skewed relay's clock is injected (its clock_ms).
    """
    clocks = [now_ms, now_ms]
    clocks[1 if skewed == "the team's relay" else 0] = lambda: now_ms() + offset_ms
    with two_relays(postgres_url, stale_s=1.0, clocks=clocks) as (a, b):
        assert abs(b.core.clock_ms() - a.core.clock_ms() - (offset_ms if skewed == "the team's relay" else
                                                           -offset_ms)) < 500  # the skew is there
        client = EvaluationClient(f"127.0.0.1:{b.port}", token=CLIENT_TOKENS["team_a"])
        link = StationLink(f"127.0.0.1:{a.port}", "sim_station", STATION_TOKENS["sim_station"],
                           heartbeat_s=0.1).start()
        try:
            job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
            policy = Counter()
            session = link.open_session(job_id)
            wait_until(lambda: a.core.store.session_home(job_id), what="the station's relay claiming the home")
            served = serve(client, job_id, policy)
            assert run_episode(session, "ep_0000", 3) == [[{"right.joint_4": float(i) + 1.0}] for i in range(3)]
            # several stale bounds pass by the database's clock, both relays beating and checking the home
            start = {r.relay_id: r.heard_unix_ms for r in a.core.store.relays()}[a.relay_id]
            wait_until(lambda: {r.relay_id: r.heard_unix_ms for r in a.core.store.relays()}[a.relay_id]
                       >= start + 3000, timeout_s=15, what="A beating for 3 s more")
            assert run_episode(session, "ep_0001", 3) == [[{"right.joint_4": float(i) + 1.0}] for i in range(3)]
            assert a.core.store.session_home(job_id).relay_id == a.relay_id  # never taken from the live home
            finish(link, job_id, ["ep_0000", "ep_0001"])
            served["thread"].join(15)
            assert "error" not in served, served.get("error")
            assert served["final"].state == "SUCCEEDED" and policy.resets == ["ep_0000", "ep_0001"]
            session.close()
        finally:
            link.close()
            client.close()


def test_a_home_relay_that_stops_hands_the_session_over_and_the_client_stays_attached(postgres_url):
    """The home (the station's relay) stops mid-job: the team's stream on the other relay is attached again.

    The station reconnects there; the broken episode ends with PolicyDisconnected, the next one runs.
    """
    with two_relays(postgres_url) as (a, b):
        client = EvaluationClient(f"127.0.0.1:{b.port}", token=CLIENT_TOKENS["team_a"])
        link = StationLink([f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"], "sim_station",
                           STATION_TOKENS["sim_station"], heartbeat_s=0.1).start()
        try:
            job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
            policy = Counter()
            session = link.open_session(job_id)
            wait_until(lambda: a.core.store.session_home(job_id), what="the station's relay claiming the home")
            served = serve(client, job_id, policy)
            assert run_episode(session, "ep_0000", 2) == [[{"right.joint_4": 1.0}], [{"right.joint_4": 2.0}]]
            a.stop(0)  # the home goes (its relay row with it)
            with pytest.raises(PolicyDisconnected):
                for _ in range(100):
                    session.act({"x": 9.0})
            again = link.open_session(job_id)  # the link is on b now
            assert run_episode(again, "ep_0001", 3) == [[{"right.joint_4": float(i) + 1.0}] for i in range(3)]
            assert a.core.store.session_home(job_id).relay_id == b.relay_id
            finish(link, job_id, ["ep_0000", "ep_0001"])
            served["thread"].join(15)
            assert "error" not in served, served.get("error")
            assert served["final"].state == "SUCCEEDED"
            assert policy.resets == ["ep_0000", "ep_0001"]
            assert policy.acts[:2] == [0.0, 1.0] and policy.acts[-3:] == [0.0, 1.0, 2.0]
            again.close()
        finally:
            link.close()
            client.close()


# -- per-team quotas across relays -------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_stores_on_one_database_admit_a_team_past_its_quota_never(backend, tmp_path, request):
    """Two store objects (two relays) on one database, 12 concurrent creates of one team with room for 3."""
    from concurrent.futures import ThreadPoolExecutor

    from strands_robots.relay.store import JobRecord

    if backend == "sqlite":
        stores = [SqliteStore(str(tmp_path / "relay.db")) for _ in range(2)]
    else:
        url = request.getfixturevalue("postgres_url")
        reset_postgres(url)
        stores = [PostgresStore(url), PostgresStore(url)]
    refused = []

    def admit(load):
        if load.open_jobs + 1 > 3:
            refused.append(load.open_jobs)
            raise RuntimeError(f"quota: {load.open_jobs} open")

    def create(i):
        record = JobRecord(job_id=f"job-{i}", client_id="team_a", station_id="sim_station", request=b"x",
                           submitted_unix_ms=i, episodes_total=1)
        try:
            stores[i % 2].create_job(record, admit)
            return True
        except RuntimeError:
            return False

    try:
        with ThreadPoolExecutor(12) as pool:
            admitted = list(pool.map(create, range(12)))
        assert admitted.count(True) == 3 and len(refused) == 9
        assert all(seen == 3 for seen in refused)  # each refusal saw the three admitted ones, never fewer
        assert stores[0].client_load("team_a").open_jobs == 3
    finally:
        for s in stores:
            s.close()


def test_a_team_submitting_to_two_relays_at_once_gets_exactly_its_quota(postgres_url):
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor

    from strands_robots.client import QuotaExceeded
    from strands_robots.relay.config import RelaySettings

    reset_postgres(postgres_url)
    stores = [PostgresStore(postgres_url), PostgresStore(postgres_url)]
    settings = dataclasses.replace(RelaySettings(), max_open_jobs_per_token=2)
    servers = [RelayServer(s, TokenBook(CLIENT_TOKENS, STATION_TOKENS), "127.0.0.1:0", settings=settings,
                           poll_s=0.05) for s in stores]
    clients = []
    try:
        for server in servers:
            server.start()
        clients = [EvaluationClient(f"127.0.0.1:{s.port}", token=CLIENT_TOKENS["team_a"]) for s in servers]

        def submit(i):
            try:
                return clients[i % 2].submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1,
                                                 attempts=1)
            except QuotaExceeded:
                return None

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(submit, range(8)))
        accepted = [r for r in results if r is not None]
        assert len(accepted) == 2, results
        assert stores[0].client_load("team_a").open_jobs == 2
    finally:
        for c in clients:
            c.close()
        for server in servers:
            server.stop(0)
        for s in stores:
            s.close()
