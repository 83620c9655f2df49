"""Operable relays, each against a real relay process: health, metrics over HTTP, ListJobs, token rotation.

- ``grpc.health.v1``: SERVING for the server and both services, NOT_FOUND for an unknown name, NOT_SERVING to a
  watcher as the relay stops;
- Prometheus metrics scraped over HTTP from the ``--metrics`` port: counts that moved after real calls;
- ``ListJobs`` / ``strands-robots job list``: own jobs only, newest first, paged, filtered by state;
- the tokens file rotated without a restart, by SIGHUP and by a change of the file alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from strands_robots.client import EvaluationClient, InvalidTask, NotFound, Unauthenticated
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.wire.proto import station_service_pb2 as ss
from strands_robots.wire.proto import station_service_pb2_grpc as ss_grpc
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    relay_env,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
    yes_no_task,
)

STATION_META = (("authorization", f"Bearer {STATION_TOKENS['sim_station']}"),)


@pytest.fixture
def relay(tmp_path):
    port, metrics_port = free_port(), free_port()
    tokens = write_tokens(tmp_path)
    proc = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", tokens, "--metrics",
                               f"127.0.0.1:{metrics_port}", "--poll-s", "0.1")
    try:
        wait_until(lambda: _listening(metrics_port), what="the metrics port")  # opened just after the gRPC port
        yield type("Relay", (), {"target": f"127.0.0.1:{port}", "metrics": f"http://127.0.0.1:{metrics_port}/metrics",
                                 "proc": proc, "tokens": tokens})
    finally:
        stop_process(proc)


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def scrape(url: str) -> dict:
    """Return {(name, frozenset(labels)): value} of every sample on the metrics page."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def sample(metrics: dict, name: str, **labels) -> float:
    return metrics.get((name, frozenset(labels.items())), 0.0)


# -- health ----------------------------------------------------------------------------------------------------
def test_health_is_serving_for_the_server_and_each_service_and_not_serving_as_it_stops(relay):
    with grpc.insecure_channel(relay.target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for name in ("", "strands_robots.relay.v1.Evaluation", "strands_robots.relay.v1.Station"):
            answer = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING, name
        with pytest.raises(grpc.RpcError) as err:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        os.kill(relay.proc.pid, signal.SIGTERM)
        seen = []
        try:
            for update in watch:
                seen.append(update.status)
        except grpc.RpcError:
            pass  # the relay closed the stream as it went
        assert health_pb2.HealthCheckResponse.NOT_SERVING in seen
        assert relay.proc.wait(timeout=30) == 0


# -- metrics ---------------------------------------------------------------------------------------------------
def test_metrics_over_http_show_the_counts_that_real_calls_moved(relay):
    before = scrape(relay.metrics)
    assert sample(before, "relay_calls_total", method="Evaluation.GetStatus", code="OK") == 0
    with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client, \
            grpc.insecure_channel(relay.target) as channel:
        station = ss_grpc.StationStub(channel)
        station.Heartbeat(ss.HeartbeatRequest(station_id="sim_station", unix_ms=0), metadata=STATION_META, timeout=10)
        heard_at = time.time()
        client.submit_job("sim_station", [yes_no_task()], episodes=3, job_id="m-1")
        client.submit_job("sim_station", [yes_no_task()], episodes=4, job_id="m-2")
        for _ in range(3):
            client.get_status("m-1")
        with pytest.raises(NotFound):
            client.get_status("nope")
        jobs = station.TakeJobs(ss.TakeJobsRequest(station_id="sim_station"), metadata=STATION_META, timeout=30)
        assert next(jobs).job.job_id == "m-1"
        try:
            during = scrape(relay.metrics)  # the job stream is open now
        finally:
            jobs.cancel()
        status = ev.JobStatus(job_id="m-1", station_id="sim_station", state="RUNNING", episodes_total=3,
                              updated_unix_ms=1, sequence=1, episodes=[ev.EpisodeResult(episode_id="ep_0000")])
        station.ReportStatus(ss.ReportStatusRequest(station_id="sim_station", snapshots=[status]),
                             metadata=STATION_META, timeout=10)
    after = wait_until(lambda: (lambda m: m if sample(m, "relay_open_streams", method="Station.TakeJobs") == 0
                                else None)(scrape(relay.metrics)), what="the job stream's end counted")

    assert sample(during, "relay_open_streams", method="Station.TakeJobs") == 1
    assert sample(after, "relay_calls_total", method="Evaluation.GetStatus", code="OK") == 3
    assert sample(after, "relay_calls_total", method="Evaluation.GetStatus", code="NOT_FOUND") == 1
    assert sample(after, "relay_calls_total", method="Evaluation.SubmitJob", code="OK") == 2
    assert sample(after, "relay_calls_total", method="Station.Heartbeat", code="OK") == 1
    assert sample(after, "relay_calls_total", method="Station.TakeJobs", code="CANCELLED") == 1
    assert sample(after, "relay_call_seconds_count", method="Evaluation.GetStatus") == 4
    assert sample(after, "relay_call_seconds_sum", method="Evaluation.GetStatus") > 0
    # queued per team: team_a has 2 jobs not ended with 3 + 4 - 1 (one episode done) still to run; team_b none
    assert sample(after, "relay_team_open_jobs", team="team_a") == 2
    assert sample(after, "relay_team_queued_episodes", team="team_a") == 6
    assert sample(after, "relay_team_open_jobs", team="team_b") == 0
    heard = sample(after, "relay_station_last_heard_timestamp_seconds", station="sim_station")
    assert abs(heard - heard_at) < 5
    assert ("relay_station_last_heard_timestamp_seconds", frozenset({("station", "other_station")})) not in after
    # the store's calls were timed (create_job twice, one snapshot stored, at least)
    assert sample(after, "relay_store_call_seconds_count", call="create_job") == 2
    assert sample(after, "relay_store_call_seconds_count", call="put_snapshot") == 1
    assert sample(after, "relay_store_call_seconds_count", call="view_for_client") >= 4


def test_metrics_count_the_open_policy_sessions(relay):
    import threading

    from strands_robots.client import Policy

    class Idle(Policy):
        def reset(self, task):
            pass

        def act(self, observation):
            return []

    with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        client.submit_job("sim_station", [yes_no_task()], episodes=1, job_id="s-1")
        serving = threading.Thread(target=lambda: _serve_until_cancelled(client, "s-1", Idle()), daemon=True)
        serving.start()
        try:
            wait_until(lambda: sample(scrape(relay.metrics), "relay_open_streams", method="Evaluation.ServePolicy")
                       == 1, what="the policy stream counted open")
        finally:
            client.cancel("s-1")
            with grpc.insecure_channel(relay.target) as channel:  # the station ends the job: the session closes
                ss_grpc.StationStub(channel).ReportStatus(ss.ReportStatusRequest(
                    station_id="sim_station", snapshots=[ev.JobStatus(
                        job_id="s-1", station_id="sim_station", state="CANCELLED", episodes_total=1,
                        updated_unix_ms=1, sequence=1)]), metadata=STATION_META, timeout=10)
            serving.join(30)
        assert not serving.is_alive()
        wait_until(lambda: sample(scrape(relay.metrics), "relay_open_streams", method="Evaluation.ServePolicy")
                   == 0, what="the policy stream counted closed")


def _serve_until_cancelled(client, job_id, policy):
    try:
        client.serve_policy(job_id, policy)
    except Exception:  # noqa: BLE001 - the job ended under it
        pass


# -- ListJobs --------------------------------------------------------------------------------------------------
def _set_state(target: str, job_id: str, state: str) -> None:
    with grpc.insecure_channel(target) as channel:
        ss_grpc.StationStub(channel).ReportStatus(ss.ReportStatusRequest(station_id="sim_station", snapshots=[
            ev.JobStatus(job_id=job_id, station_id="sim_station", state=state, episodes_total=1, updated_unix_ms=1,
                         sequence=1, message=f"{state.lower()} by the test")]), metadata=STATION_META, timeout=10)


def test_list_jobs_pages_through_own_jobs_only_newest_first_and_filters_by_state(relay, tmp_path):
    with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as a, \
            EvaluationClient(relay.target, token=CLIENT_TOKENS["team_b"]) as b:
        mine = []
        for i in range(7):
            mine.append(a.submit_job("sim_station", [yes_no_task()], episodes=1, job_id=f"a-{i}"))
        # newest first: by submit time, then by id (a-6 > a-5 ... when two share a millisecond)
        theirs = [b.submit_job("sim_station", [yes_no_task()], episodes=1, job_id=f"b-{i}") for i in range(3)]
        b.submit_job("sim_station", [yes_no_task()], episodes=1, job_id="a-3-b")
        _set_state(relay.target, "a-1", "SUCCEEDED")
        _set_state(relay.target, "a-4", "SUCCEEDED")
        _set_state(relay.target, "a-5", "RUNNING")

        seen, token, pages = [], "", 0
        while True:
            page = a.list_jobs(page_size=3, page_token=token)
            pages += 1
            assert len(page.jobs) <= 3
            seen += [j.job_id for j in page.jobs]
            token = page.next_page_token
            if not token:
                break
        assert pages == 3
        assert seen == list(reversed(mine))  # newest first, each once, none of team_b's
        done = a.list_jobs(states=["SUCCEEDED"])
        assert [(j.job_id, j.state, j.message) for j in done.jobs] == [
            ("a-4", "SUCCEEDED", "succeeded by the test"), ("a-1", "SUCCEEDED", "succeeded by the test")]
        assert done.next_page_token == ""
        created = a.list_jobs(states=["CREATED", "RUNNING"], page_size=100)
        assert [j.job_id for j in created.jobs] == ["a-6", "a-5", "a-3", "a-2", "a-0"]
        assert {j.state for j in created.jobs} == {"CREATED", "RUNNING"}
        assert [j.job_id for j in b.list_jobs(page_size=100).jobs] == ["a-3-b", *reversed(theirs)]
        with pytest.raises(InvalidTask, match="unknown state"):
            a.list_jobs(states=["DONE"])
        with pytest.raises(InvalidTask, match="page_size must be 1..100"):
            a.list_jobs(page_size=101)
        with pytest.raises(InvalidTask, match="page_token"):
            a.list_jobs(page_token="not-a-token")

    token_file = tmp_path / "team_a.token"
    token_file.write_text(CLIENT_TOKENS["team_a"])
    token_file.chmod(0o600)
    run = subprocess.run([sys.executable, "-m", "strands_robots.client.cli.job", "list", "--relay", relay.target,
                          "--token-file", str(token_file), "--page-size", "2", "--state", "CREATED",
                          "--state", "SUCCEEDED"], env=relay_env(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split()[:3] == ["JOB", "STATE", "EPISODES"]
    assert [line.split()[0] for line in lines[1:]] == ["a-6", "a-4", "a-3", "a-2", "a-1", "a-0"]
    assert "b-" not in run.stdout and "a-5" not in run.stdout


# -- token rotation ----------------------------------------------------------------------------------------------
def _write_tokens(path, team_a_token: str) -> None:
    """Rewrite the tokens file as an operator would: a new file renamed over the old (mode 0600)."""
    lines = ["clients:", f"  team_a: {team_a_token}", f"  team_b: {CLIENT_TOKENS['team_b']}", "stations:"]
    lines += [f"  {k}: {v}" for k, v in STATION_TOKENS.items()]
    new = path.with_name(path.name + ".new")
    new.write_text("\n".join(lines) + "\n")
    new.chmod(0o600)
    os.replace(new, path)


def _works(target: str, token: str) -> bool:
    with EvaluationClient(target, token=token, timeout_s=10) as client:
        try:
            client.list_jobs()
        except Unauthenticated:
            return False
    return True


def test_a_rotated_token_works_and_the_removed_one_is_refused_without_a_restart(relay):
    old, new, newer = CLIENT_TOKENS["team_a"], "tok-team-a-rotated-0001", "tok-team-a-rotated-0002"
    pid = relay.proc.pid
    assert _works(relay.target, old) and not _works(relay.target, new)

    # SIGHUP: re-read at once (the file's change would be seen within a second anyway; SIGHUP is within 0.5 s)
    _write_tokens(relay.tokens, new)
    os.kill(pid, signal.SIGHUP)
    wait_until(lambda: _works(relay.target, new), timeout_s=10, what="the rotated token accepted")
    with pytest.raises(Unauthenticated, match="unknown token"):
        with EvaluationClient(relay.target, token=old) as client:
            client.list_jobs()
    assert _works(relay.target, CLIENT_TOKENS["team_b"])  # the other team's token, untouched, still works

    # the file changed, no signal: the relay's watch reloads it
    _write_tokens(relay.tokens, newer)
    wait_until(lambda: _works(relay.target, newer), timeout_s=10, what="the file's change seen")
    assert not _works(relay.target, new)

    reloads = scrape(relay.metrics)
    assert sample(reloads, "relay_token_reloads_total", result="loaded") >= 2
    assert sample(reloads, "relay_token_reloads_total", result="refused") == 0

    # a broken file keeps the tokens in use (and says so in the relay's log)
    relay.tokens.write_text("clients: [not, a, mapping]\n")
    os.kill(pid, signal.SIGHUP)
    wait_until(lambda: sample(scrape(relay.metrics), "relay_token_reloads_total", result="refused") >= 1,
               timeout_s=10, what="the broken file's re-read counted")
    assert _works(relay.target, newer) and not _works(relay.target, old)
    assert relay.proc.poll() is None and relay.proc.pid == pid  # never restarted
    stop_process(relay.proc)
    log = relay.proc.stdout.read()
    assert "tokens file not reloaded, the previous tokens stay in use" in log
    assert log.count("reloaded: 2 client(s), 2 station(s)") >= 2


def test_health_turns_not_serving_while_the_store_fails_and_serving_when_it_answers(tmp_path):
    """In process, so the store can be broken under the relay: a probe that fails is NOT_SERVING for every name."""
    from test_relay_harness import running_relay

    from strands_robots.relay.store import StoreError

    with running_relay(tmp_path) as relay, grpc.insecure_channel(relay.target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        ops = relay.server.operations
        real = relay.store.read_sql
        broken = {"on": True}

        def flaky(template, params=()):
            if broken["on"]:
                raise StoreError("SQLite store: disk I/O error")
            return real(template, params)

        relay.store.read_sql = flaky
        try:
            assert relay.server._call(ops.health.check_once()) == health_pb2.HealthCheckResponse.NOT_SERVING
            for name in ("", "strands_robots.relay.v1.Evaluation", "strands_robots.relay.v1.Station"):
                assert stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=10).status == \
                    health_pb2.HealthCheckResponse.NOT_SERVING, name
            broken["on"] = False
            assert relay.server._call(ops.health.check_once()) == health_pb2.HealthCheckResponse.SERVING
            assert stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status == \
                health_pb2.HealthCheckResponse.SERVING
        finally:
            relay.store.read_sql = real
