"""Forwarded policy streams between relay processes on one PostgreSQL: refusals, TLS, an unreachable home.

Real relay processes (``python -m strands_robots.relay``) in a cluster on the PostgreSQL server the store tests
start; the station side is a real ``StationLink``, the team a real ``EvaluationClient``, a malformed message a raw
gRPC stream. Every relay started is ended by PID.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading

import grpc
import pytest
from test_relay_cluster import Counter, finish, run_episode, serve
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    postgres_server,
    reset_postgres,
    self_signed_cert,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
    yes_no_task,
)

from strands_robots.client import EvaluationClient
from strands_robots.wire.proto import policy_session_pb2 as ps
from strands_robots.station_link.link import StationLink
from strands_robots.station_link.session import PolicyDisconnected
from strands_robots.relay.postgres_store import PostgresStore

SERVE_POLICY = "/strands_robots.relay.v1.Evaluation/ServePolicy"
POLICY_SESSION = "/strands_robots.relay.v1.Station/PolicySession"
MALFORMED = b"\x12\xff"  # field 2, 255 bytes long, then nothing: a truncated message
STALE_S = 1.0


@pytest.fixture(scope="module")
def postgres_url():
    with postgres_server() as url:
        yield url


class Relay:
    """One relay process in the cluster; its output is read on a thread (the test looks at it)."""

    def __init__(self, proc: subprocess.Popen, port: int, advertise: str) -> None:
        self.proc, self.port, self.advertise = proc, port, advertise
        self.lines: list = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def stop(self) -> None:
        stop_process(self.proc)
        self._reader.join(15)


@contextlib.contextmanager
def cluster(url, tmp_path, *configs):
    """Start one relay process per ``configs`` entry ({"advertise": ..., "tls": (cert, key)}); yield them."""
    reset_postgres(url)
    tokens = write_tokens(tmp_path)
    store = PostgresStore(url)
    relays: list = []
    try:
        for config in configs:
            port = free_port()
            advertise = config.get("advertise") or f"127.0.0.1:{port}"
            extra = ["--advertise", advertise, "--cluster-stale-s", str(STALE_S), "--poll-s", "0.05",
                     *config.get("extra", ())]
            if config.get("tls"):
                extra += ["--tls-cert", str(config["tls"][0]), "--tls-key", str(config["tls"][1])]
            relays.append(Relay(start_relay_process(port, f"{url}", tokens, *extra), port, advertise))
            wait_until(lambda a=advertise: a in [r.address for r in store.relays()], timeout_s=30,
                       what=f"the relay advertising {advertise} joining the cluster")
        yield store, relays
    finally:
        for relay in relays:
            relay.stop()
        store.close()


def relay_id_of(store, relay: Relay) -> str:
    return next(r.relay_id for r in store.relays() if r.address == relay.advertise)


def _md(token: str) -> tuple:
    return (("authorization", f"Bearer {token}"),)


def malformed_stream(port: int, side: str, job_id: str) -> grpc.RpcError:
    """Send a valid first message, then a malformed one, on a raw stream; return how the relay ended it."""
    if side == "client":
        method, token = SERVE_POLICY, CLIENT_TOKENS["team_a"]
        first = ps.PolicyReply(attach=ps.SessionAttach(job_id=job_id)).SerializeToString()
    else:
        method, token = POLICY_SESSION, STATION_TOKENS["sim_station"]
        first = ps.PolicyRequest(open=ps.SessionOpen(job_id=job_id)).SerializeToString()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stream = channel.stream_stream(method)
        with pytest.raises(grpc.RpcError) as err:
            list(stream(iter([first, MALFORMED]), metadata=_md(token), timeout=10))
    return err.value


# -- 1. a malformed message on a forwarded stream ------------------------------------------------------------------
@pytest.mark.parametrize("side", ["client", "station"])
def test_a_malformed_message_on_a_forwarded_stream_is_refused_as_on_a_direct_one(postgres_url, tmp_path, side):
    """The home is the relay the malformed side reaches directly; the same side on the other relay is forwarded.

    Both end with the same status and message; then a real session across the two relays runs (the home let
    the forwarded side go: a lingering one would make the real side's attach ALREADY_EXISTS).
    """
    with cluster(postgres_url, tmp_path, {}, {}) as (store, (a, b)):
        station_relay, team_relay = a, b
        home, other = (station_relay, team_relay) if side == "client" else (team_relay, station_relay)
        with EvaluationClient(f"127.0.0.1:{team_relay.port}", token=CLIENT_TOKENS["team_a"]) as client:
            job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            direct = malformed_stream(home.port, side, job_id)  # the first side: it claims the home there
            assert store.session_home(job_id).relay_id == relay_id_of(store, home)
            forwarded = malformed_stream(other.port, side, job_id)
            assert direct.code() == forwarded.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert direct.details() == forwarded.details()
            message = "Evaluation.ServePolicy: malformed PolicyReply" if side == "client" else \
                "Station.PolicySession: malformed PolicyRequest"
            assert direct.details().startswith(f"{message} (2 bytes)"), direct.details()

            link = StationLink(f"127.0.0.1:{station_relay.port}", "sim_station", STATION_TOKENS["sim_station"],
                               heartbeat_s=0.1).start()
            try:
                policy = Counter()
                session = link.open_session(job_id)
                served = serve(client, job_id, policy)
                assert run_episode(session, "ep_0000", 3) == [[{"right.joint_4": float(i) + 1.0}] for i in range(3)]
                finish(link, job_id, ["ep_0000"])
                served["thread"].join(15)
                assert "error" not in served, served.get("error")
                assert served["final"].state == "SUCCEEDED" and policy.resets == ["ep_0000"]
                session.close()
            finally:
                link.close()
    for relay in (a, b):
        assert "Traceback" not in relay.log
    # each relay that parsed the malformed message logged its refusal once, as for a direct stream
    assert sum(message in line for line in home.lines) == 1, home.log
    assert sum(message in line for line in other.lines) == 1, other.log


# -- 2. TLS between relays -------------------------------------------------------------------------------------
def test_a_station_and_a_team_on_two_tls_relays_run_a_session_across_them(postgres_url, tmp_path):
    cert, key = self_signed_cert(tmp_path)  # both relays serve it and trust it for each other
    with cluster(postgres_url, tmp_path, {"tls": (cert, key)}, {"tls": (cert, key)}) as (store, (a, b)):
        with EvaluationClient(f"127.0.0.1:{b.port}", token=CLIENT_TOKENS["team_a"], root_certificates=cert) as client:
            link = StationLink(f"127.0.0.1:{a.port}", "sim_station", STATION_TOKENS["sim_station"],
                               root_certificates=cert, heartbeat_s=0.1).start()
            try:
                job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
                policy = Counter()
                session = link.open_session(job_id)
                wait_until(lambda: store.session_home(job_id), what="the station's relay claiming the home")
                served = serve(client, job_id, policy)
                assert run_episode(session, "ep_0000", 4) == [[{"right.joint_4": float(i) + 1.0}] for i in range(4)]
                finish(link, job_id, ["ep_0000"])
                served["thread"].join(15)
                assert "error" not in served, served.get("error")
                assert served["final"].state == "SUCCEEDED"
                assert policy.resets == ["ep_0000"] and policy.acts == [0.0, 1.0, 2.0, 3.0]
                assert store.session_home(job_id).relay_id == relay_id_of(store, a)  # the team's stream forwarded
                session.close()
            finally:
                link.close()
    assert "Traceback" not in a.log + b.log


def test_a_relay_whose_peer_presents_an_untrusted_certificate_refuses_to_forward(postgres_url, tmp_path):
    """B serves a certificate A does not trust: the station's session on A is refused, saying why; none runs."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cert_a, key_a = self_signed_cert(tmp_path / "a")
    cert_b, key_b = self_signed_cert(tmp_path / "b")
    with cluster(postgres_url, tmp_path, {"tls": (cert_a, key_a)}, {"tls": (cert_b, key_b)}) as (store, (a, b)):
        with EvaluationClient(f"127.0.0.1:{b.port}", token=CLIENT_TOKENS["team_a"],
                              root_certificates=cert_b) as client:
            link = StationLink(f"127.0.0.1:{a.port}", "sim_station", STATION_TOKENS["sim_station"],
                               root_certificates=cert_a, heartbeat_s=0.1).start()
            try:
                job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
                policy = Counter()
                served = serve(client, job_id, policy)  # the team first: B is the home
                wait_until(lambda: store.session_home(job_id), what="the team's relay claiming the home")
                session = link.open_session(job_id)
                with pytest.raises(PolicyDisconnected) as ended:
                    session.wait_attached(15)
                reason = str(ended.value)
                assert "UNAVAILABLE" in reason and "failed the TLS handshake" in reason, reason
                assert "CERTIFICATE_VERIFY_FAILED" in reason and f"127.0.0.1:{b.port}" in reason, reason
                # no session: the team's policy never ran, and the home stayed where it was (not taken over)
                assert policy.resets == [] and "final" not in served
                assert store.session_home(job_id).relay_id == relay_id_of(store, b)
                assert client.get_status(job_id).state in ("CREATED", "QUEUED")
            finally:
                link.close()
    assert any("relay refused Station.PolicySession" in line and "failed the TLS handshake" in line
               for line in a.lines), a.log
    assert "Traceback" not in a.log + b.log


# -- 3. a home that beats on the store but that no relay can reach -------------------------------------------------
@pytest.mark.parametrize("first", ["client", "station"])
def test_a_home_nobody_can_reach_is_taken_over_and_the_job_runs_each_episode_once(postgres_url, tmp_path, first):
    """A advertises an address nobody can connect to (it still beats); the first side reaches A, the other B.

    B's forwards fail for longer than the stale bound, so B takes the home over; A's side follows (the client
    side is forwarded to B without its stream ending; the station side is ended and the station opens again).
    """
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    with cluster(postgres_url, tmp_path, {"advertise": dead}, {}) as (store, (a, b)):
        station_relay, team_relay = (b, a) if first == "client" else (a, b)
        with EvaluationClient(f"127.0.0.1:{team_relay.port}", token=CLIENT_TOKENS["team_a"]) as client:
            link = StationLink(f"127.0.0.1:{station_relay.port}", "sim_station", STATION_TOKENS["sim_station"],
                               heartbeat_s=0.1).start()
            try:
                job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
                policy = Counter()
                if first == "client":
                    served = serve(client, job_id, policy)
                    wait_until(lambda: store.session_home(job_id), what="A claiming the home")
                    assert store.session_home(job_id).relay_id == relay_id_of(store, a)
                    session = link.open_session(job_id)
                else:
                    lost = link.open_session(job_id)
                    wait_until(lambda: store.session_home(job_id), what="A claiming the home")
                    assert store.session_home(job_id).relay_id == relay_id_of(store, a)
                    served = serve(client, job_id, policy)
                    with pytest.raises(PolicyDisconnected, match="moved to another relay"):
                        lost.wait_attached(15)  # it never met the client: A's home was taken over
                    session = link.open_session(job_id)
                assert run_episode(session, "ep_0000", 3) == [[{"right.joint_4": float(i) + 1.0}] for i in range(3)]
                assert store.session_home(job_id).relay_id == relay_id_of(store, b)  # B took it over
                finish(link, job_id, ["ep_0000"])
                served["thread"].join(15)
                assert "error" not in served, served.get("error")
                assert served["final"].state == "SUCCEEDED"
                assert policy.resets == ["ep_0000"] and policy.acts == [0.0, 1.0, 2.0]  # once, nothing lost
                status = client.get_status(job_id)
                assert status.state == "SUCCEEDED" and [e.episode_id for e in status.episodes] == ["ep_0000"]
                session.close()
            finally:
                link.close()
    takeovers = [line for line in b.lines if "takes over the policy session of job" in line]
    assert len(takeovers) == 1 and dead in takeovers[0] and "could not be reached for" in takeovers[0], b.log
    assert "Traceback" not in a.log + b.log


# -- 4. max_streams_per_token: a forwarded stream counts on the relay its side reached ------------------------------
class _Held:
    """A request iterator that sends nothing until released (a stream holding its slot)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __iter__(self):
        return self

    def __next__(self):
        self.release.wait(30)
        raise StopIteration


def test_a_forwarded_stream_holds_a_stream_slot_only_on_the_relay_its_side_reached(postgres_url, tmp_path):
    """max_streams_per_token 2: the team's session forwarded A -> B holds its slot on A, and B has room for two.

    A hop set by hand (not sealed with the cluster key) is counted as any stream.
    """
    limit = {"extra": ("--max-streams-per-token", "2")}
    with cluster(postgres_url, tmp_path, limit, limit) as (store, (a, b)):
        team_a = EvaluationClient(f"127.0.0.1:{a.port}", token=CLIENT_TOKENS["team_a"])
        team_b = EvaluationClient(f"127.0.0.1:{b.port}", token=CLIENT_TOKENS["team_a"])
        station_b = StationLink(f"127.0.0.1:{b.port}", "sim_station", STATION_TOKENS["sim_station"])
        held = _Held()
        channel = grpc.insecure_channel(f"127.0.0.1:{a.port}")
        try:
            jobs = [team_b.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1) for _ in range(3)]
            policies = [Counter() for _ in jobs]
            forwarded_session = station_b.open_session(jobs[0])  # B is the home of job 0
            wait_until(lambda: store.session_home(jobs[0]), what="B claiming job 0's home")
            served = [serve(team_a, jobs[0], policies[0])]  # reaches A, forwarded to B
            forwarded_session.wait_attached(15)
            served.append(serve(team_b, jobs[1], policies[1]))  # B: the team's first slot there
            wait_until(lambda: store.session_home(jobs[1]), what="B claiming job 1's home")
            served.append(serve(team_b, jobs[2], policies[2]))  # B: its second (the forwarded one holds none)
            direct_session = station_b.open_session(jobs[2])
            direct_session.wait_attached(15)
            assert all("error" not in out for out in served), [out.get("error") for out in served]
            assert run_episode(forwarded_session, "ep_0000", 2) == [[{"right.joint_4": 1.0}], [{"right.joint_4": 2.0}]]
            assert run_episode(direct_session, "ep_0000", 1) == [[{"right.joint_4": 1.0}]]
            assert policies[0].resets == ["ep_0000"] and policies[2].resets == ["ep_0000"]

            # B is full for the team: a call with a hop set by hand is counted there like any other
            with grpc.insecure_channel(f"127.0.0.1:{b.port}") as raw_b:
                spoofed = (*_md(CLIENT_TOKENS["team_a"]), ("x-strands-relay-hop", "relay-000000000000.0123"))
                with pytest.raises(grpc.RpcError) as over:
                    list(raw_b.stream_stream(SERVE_POLICY)(iter(()), metadata=spoofed, timeout=10))
            assert over.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_streams_per_token (2) reached: client 'team_a' already holds 2" in over.value.details()
            # A counts the forwarded stream: one more stream of the team fits there, the next does not
            one_more = channel.stream_stream(SERVE_POLICY)(held, metadata=_md(CLIENT_TOKENS["team_a"]))
            one_more.initial_metadata()  # the relay took the stream (its slot held)
            with pytest.raises(grpc.RpcError) as over:
                list(channel.stream_stream(SERVE_POLICY)(iter(()), metadata=_md(CLIENT_TOKENS["team_a"]), timeout=10))
            assert over.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "already holds 2 open stream(s) on this relay" in over.value.details()
            held.release.set()
            one_more.cancel()
            forwarded_session.close()
            direct_session.close()
        finally:
            held.release.set()
            channel.close()
            station_b.close()
            team_a.close()
            team_b.close()
    assert "Traceback" not in a.log + b.log


# -- the take-over rule (both stores) ------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_unreachable_home_is_taken_over_only_while_the_relay_at_its_address_holds_it(backend, tmp_path, request):
    from strands_robots.relay.sqlite_store import SqliteStore

    if backend == "sqlite":
        store = SqliteStore(str(tmp_path / "relay.db"))
    else:
        url = request.getfixturevalue("postgres_url")
        reset_postgres(url)
        store = PostgresStore(url)
    try:
        for relay_id, address in (("r1", "10.0.0.1:1"), ("r2", "10.0.0.2:1"), ("r3", "10.0.0.3:1")):
            store.relay_heard(relay_id, address)
        assert store.claim_session_home("job-1", "r1", 30000).relay_id == "r1"
        assert not store.take_over_session_home("job-1", "10.0.0.9:1", "r2")  # nobody there holds it
        assert not store.take_over_session_home("job-1", "10.0.0.2:1", "r2")  # not from itself
        assert store.take_over_session_home("job-1", "10.0.0.1:1", "r2")
        assert store.session_home("job-1").relay_id == "r2"
        assert not store.take_over_session_home("job-1", "10.0.0.1:1", "r3")  # r2 was first: r3 looks again
        assert store.claim_session_home("job-1", "r3", 30000).relay_id == "r2"  # and forwards to r2
        assert store.claim_session_home("job-1", "r1", 30000).relay_id == "r2"  # r1 does not take it back
        assert not store.take_over_session_home("job-2", "10.0.0.1:1", "r2")  # no home yet: claim it
    finally:
        store.close()
