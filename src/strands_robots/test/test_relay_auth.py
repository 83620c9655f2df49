"""Who may call the relay.

Token files, constant-time lookup, every call authenticated, own jobs only, TLS, message size limits.
"""

from __future__ import annotations

import time

import grpc
import pytest
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    running_relay,
    self_signed_cert,
    wait_until,
    yes_no_task,
)

from strands_robots.client import EvaluationClient, MessageTooLarge, NotFound, Unauthenticated, Unavailable, pb
from strands_robots.relay import auth
from strands_robots.relay.auth import KIND_CLIENT, KIND_STATION, TokenBook, TokenFileError
from strands_robots.wire.proto import evaluation_service_pb2, station_service_pb2
from strands_robots.relay.server import TlsConfig
from strands_robots.station_link.link import StationLink
from strands_robots.station_link.session import PolicyDisconnected, PolicySessionError


# -- the token file -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, reason", [
    ("clients: [unclosed", "not valid YAML"),
    ("- a\n- b\n", "expected a mapping with 'clients' and 'stations', got list"),
    ("clients:\n  a: tok-aaaaaaaaaaaaaaaa\nadmins:\n  x: y\n", "unknown section(s) admins"),
    ("clients:\n  team_a: short\n", "clients.team_a: the token is 5 characters; at least 16"),
    ("clients:\n  team_a: 12345678901234567890\n", "clients.team_a: the token must be a string, got int"),
    ("clients:\n  a: tok-same-0123456789\nstations:\n  s: tok-same-0123456789\n",
     "stations.s has the same token as clients.a"),
    ("clients:\n  a: 'tok with spaces 0123'\n", "clients.a: the token contains whitespace"),
    ("clients: {}\nstations: {}\n", "names no clients and no stations"),
    ("clients: [a, b]\n", "'clients' must be a mapping of name: token, got list"),
])
def test_malformed_token_file_is_refused_with_the_reason(tmp_path, text, reason):
    path = tmp_path / "tokens.yaml"
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(TokenFileError) as err:
        TokenBook.from_file(path)
    assert reason in str(err.value)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_tokens_file_group_or_others_may_read_is_refused_naming_the_file_and_its_mode(tmp_path, mode):
    path = tmp_path / "tokens.yaml"
    path.write_text("clients:\n  team_a: tok-team-a-0123456789\n")
    path.chmod(mode)
    with pytest.raises(TokenFileError) as err:
        TokenBook.from_file(path)
    assert str(err.value) == (f"tokens file '{path}' has mode {mode:04o}: group or others may access it; "
                              f"make it 0600 (chmod 600)")
    path.chmod(0o600)
    assert TokenBook.from_file(path).clients == {"team_a"}


def test_the_relay_command_refuses_a_readable_tokens_file_in_one_line(tmp_path):
    import subprocess
    import sys

    from test_relay_harness import relay_env, write_tokens

    tokens = write_tokens(tmp_path)
    tokens.chmod(0o644)
    proc = subprocess.run([sys.executable, "-m", "strands_robots.relay", "--store", f"sqlite:{tmp_path / 'r.db'}",
                           "--tokens", str(tokens)], env=relay_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"relay: tokens file '{tokens}' has mode 0644: group or others may "
                                                f"access it; make it 0600 (chmod 600)"]
    assert not (tmp_path / "r.db").exists()  # refused before anything was opened


@pytest.mark.parametrize("fault", ["tokens in a world-writable directory", "a TLS key others may read"])
def test_the_relay_command_refuses_a_credential_another_user_could_read_or_replace_in_one_line(tmp_path, fault):
    import subprocess
    import sys

    from test_relay_harness import relay_env, self_signed_cert, write_tokens

    shared = tmp_path / "shared"
    shared.mkdir()
    tokens = write_tokens(shared)
    extra = []
    if fault == "tokens in a world-writable directory":
        shared.chmod(0o777)
        expected = (f"relay: tokens file '{tokens}' is refused: its directory '{shared}' has mode 0777: group or "
                    f"others may write it and it has no sticky bit, so another user could replace the file; chmod "
                    f"go-w '{shared}' (or keep the file in a private directory)")
    else:
        cert, key = self_signed_cert(tmp_path)
        key.chmod(0o644)
        extra = ["--tls-cert", str(cert), "--tls-key", str(key)]
        expected = (f"relay: TLS private key '{key}' has mode 0644: group or others may access it; make it 0600 "
                    f"(chmod 600)")
    proc = subprocess.run([sys.executable, "-m", "strands_robots.relay", "--store", f"sqlite:{tmp_path / 'r.db'}",
                           "--tokens", str(tokens), *extra], env=relay_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [expected]
    assert not (tmp_path / "r.db").exists()  # refused before anything was opened


def test_missing_token_file_is_refused_naming_it(tmp_path):
    with pytest.raises(TokenFileError, match="cannot read token file .*nope.yaml"):
        TokenBook.from_file(tmp_path / "nope.yaml")


def test_token_lookup_compares_against_every_entry_even_after_a_match(monkeypatch):
    book = TokenBook(CLIENT_TOKENS, STATION_TOKENS)
    calls = []
    real = auth.hmac.compare_digest

    def counting(a, b):
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    assert book.identify(CLIENT_TOKENS["team_a"]).name == "team_a"  # the first entry
    assert len(calls) == len(CLIENT_TOKENS) + len(STATION_TOKENS)
    calls.clear()
    assert book.identify("tok-nobody-0123456789") is None
    assert len(calls) == len(CLIENT_TOKENS) + len(STATION_TOKENS)


@pytest.mark.parametrize("metadata, kind, reason", [
    ([], KIND_CLIENT, "missing 'authorization: Bearer <token>'"),
    ([("authorization", "Basic abc")], KIND_CLIENT, "must be 'Bearer <token>'"),
    ([("authorization", "Bearer tok-nobody-0123456789")], KIND_CLIENT, "unknown token"),
    ([("authorization", f"Bearer {STATION_TOKENS['sim_station']}")], KIND_CLIENT,
     "a station token cannot call the client service"),
    ([("authorization", f"Bearer {CLIENT_TOKENS['team_a']}")], KIND_STATION,
     "a client token cannot call the station service"),
])
def test_call_without_a_valid_token_of_its_kind_is_refused_with_the_reason(metadata, kind, reason):
    result = TokenBook(CLIENT_TOKENS, STATION_TOKENS).authenticate(metadata, kind)
    assert result.principal is None and reason in result.reason


# -- over gRPC ----------------------------------------------------------------------------------------------
def _all_methods():
    for module, service in ((evaluation_service_pb2, "Evaluation"), (station_service_pb2, "Station")):
        desc = module.DESCRIPTOR.services_by_name[service]
        for method in desc.methods:
            yield service, method


def _raw_call(channel, service, method, metadata):
    path = f"/strands_robots.relay.v1.{service}/{method.name}"
    ident = lambda b: b  # noqa: E731 - raw bytes both ways
    if method.client_streaming and method.server_streaming:
        call = channel.stream_stream(path, request_serializer=ident, response_deserializer=ident)
        return list(call(iter([b""]), metadata=metadata, timeout=10))
    if method.client_streaming:
        call = channel.stream_unary(path, request_serializer=ident, response_deserializer=ident)
        return call(iter([b""]), metadata=metadata, timeout=10)
    if method.server_streaming:
        call = channel.unary_stream(path, request_serializer=ident, response_deserializer=ident)
        return list(call(b"", metadata=metadata, timeout=10))
    call = channel.unary_unary(path, request_serializer=ident, response_deserializer=ident)
    return call(b"", metadata=metadata, timeout=10)


@pytest.mark.parametrize("who", ["no token", "wrong token", "other kind"])
def test_every_rpc_of_both_services_refuses_an_unauthenticated_call(tmp_path, who):
    methods = list(_all_methods())
    assert len(methods) == 15  # 8 of the job and policy, ListJobs, ListSuites, Leaderboard, RespondInvitation,
    # the recordings' 3
    with running_relay(tmp_path) as relay, grpc.insecure_channel(relay.target) as channel:
        for service, method in methods:
            if who == "no token":
                metadata = ()
            elif who == "wrong token":
                metadata = (("authorization", "Bearer tok-wrong-0123456789"),)
            else:
                token = STATION_TOKENS["sim_station"] if service == "Evaluation" else CLIENT_TOKENS["team_a"]
                metadata = (("authorization", f"Bearer {token}"),)
            with pytest.raises(grpc.RpcError) as err:
                _raw_call(channel, service, method, metadata)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, f"{service}.{method.name}"
        assert relay.store.station_last_heard("sim_station") is None  # a refused call is not "heard"


def test_client_error_is_typed_and_carries_the_relays_reason(tmp_path):
    with running_relay(tmp_path) as relay:
        with EvaluationClient(relay.target, token="tok-wrong-0123456789") as client:
            with pytest.raises(Unauthenticated, match="unknown token"):
                client.get_status("job-x")


def test_another_clients_job_reads_exactly_like_a_missing_one(tmp_path):
    with running_relay(tmp_path) as relay:
        a = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        b = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_b"])
        try:
            job = a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            assert a.get_status(job).job_id == job
            errors = []
            for call in (lambda j: b.get_status(j), lambda j: b.cancel(j)):
                for job_id in (job, "job-0000000000000000"):
                    with pytest.raises(NotFound) as err:
                        call(job_id)
                    errors.append(err.value.reason.replace(job_id, "<id>"))
            assert set(errors) == {"no job '<id>' for this client"}

            class Nothing:
                def act(self, observation):
                    return []

            with pytest.raises(NotFound, match="for this client"):
                b.serve_policy(job, Nothing())
            assert a.cancel(job) is True  # the owner still can
        finally:
            a.close()
            b.close()


def test_a_station_sees_only_the_jobs_addressed_to_it(tmp_path):
    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        got = []
        other = StationLink(relay.target, "other_station", STATION_TOKENS["other_station"], on_job=got.append,
                            heartbeat_s=0.1)
        try:
            mine = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            theirs = client.submit_job(station_id="other_station", tasks=[yes_no_task()], episodes=1)
            other.start()
            wait_until(lambda: got, what="other_station's job")
            time.sleep(0.3)  # several job-stream polls: nothing else arrives
            assert [j.job_id for j in got] == [theirs]
            # reporting on, or opening a session for, another station's job is refused
            other.report(pb.JobStatus(job_id=mine, station_id="other_station", state="RUNNING", episodes_total=1,
                                      updated_unix_ms=5))
            assert other.flush(10)
            assert relay.store.get_snapshot(mine) is None
            session = other.open_session(mine)
            with pytest.raises(PolicySessionError, match=f"no job '{mine}' for station 'other_station'"):
                session.wait_attached(10)
            assert isinstance(session.error, PolicyDisconnected)
        finally:
            other.close()
            client.close()


def test_tls_relay_serves_a_client_that_trusts_its_certificate_and_refuses_plain(tmp_path):
    cert, key = self_signed_cert(tmp_path)
    with running_relay(tmp_path, tls=TlsConfig.from_files(cert, key)) as relay:
        target = f"localhost:{relay.port}"
        with EvaluationClient(target, token=CLIENT_TOKENS["team_a"], root_certificates=cert) as client:
            job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
            assert client.get_status(job).episodes_total == 2
        with EvaluationClient(target, token=CLIENT_TOKENS["team_a"], timeout_s=3) as plain:
            with pytest.raises(Unavailable):
                plain.get_status(job)


def test_message_over_the_size_limit_is_refused(tmp_path):
    with running_relay(tmp_path, max_message_bytes=64 * 1024) as relay:
        with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
            with pytest.raises(MessageTooLarge):
                client.submit_job(station_id="sim_station", tasks=[yes_no_task(instruction="x" * 100_000)],
                                  episodes=1)
            job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            assert client.get_status(job).state == "CREATED"


LIMITED_READS = """
import json, os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # a reader of /dev/zero fails here, not the machine
from strands_robots.client import EvaluationClient
from strands_robots.relay.auth import TokenBook
from strands_robots.wire.credentials import load_relay_credentials, read_secret
target, creds = sys.argv[1], sys.argv[2]
for name, read in (("credentials", lambda: load_relay_credentials(creds)),
                   ("client", lambda: EvaluationClient("127.0.0.1:1", token="t", root_certificates=target)),
                   ("token", lambda: read_secret(target)), ("tokens", lambda: TokenBook.from_file(target))):
    try:
        read()
        print(json.dumps([name, "read"]), flush=True)
    except BaseException as exc:
        print(json.dumps([name, type(exc).__name__, str(exc)]), flush=True)
"""


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_root_certificates_of_dev_zero_or_a_fifo_are_refused_not_read(tmp_path, special):
    import json
    import os
    import subprocess
    import sys

    from test_relay_harness import relay_env

    target = special
    if special == "fifo":
        target = str(tmp_path / "ca.pem")
        os.mkfifo(target)  # no writer: a reader would wait for ever
    creds = tmp_path / "relay.yaml"
    creds.write_text(f"target: 127.0.0.1:1\nstation_id: s\ntoken: t\nroot_certificates: {target}\n")
    creds.chmod(0o600)
    out = subprocess.run([sys.executable, "-c", LIMITED_READS, target, str(creds)], env=relay_env(),
                         capture_output=True, text=True, timeout=60)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    refusal = "is refused: not a regular file (a device, FIFO or directory could never end or change under the reader)"
    assert rows == [
        ["credentials", "CredentialsError", f"credentials file '{creds}': root_certificates '{target}' {refusal}"],
        ["client", "CredentialFileError", f"root_certificates '{target}' {refusal}"],
        ["token", "CredentialsError", f"token file '{target}' {refusal}"],
        ["tokens", "TokenFileError", f"tokens file '{target}' {refusal}"],
    ], out.stderr[-3000:]
