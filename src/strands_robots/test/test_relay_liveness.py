"""No client can freeze the relay: idle streams, stream and job quotas, malformed requests, dead peers.

The relay runs as its own process where the test crosses processes (the idle-stream flood, the dead peer); the
quota tests use a relay in this process. Every process started here is ended by PID in ``finally``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import grpc
import pytest
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    relay_env,
    running_relay,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
    yes_no_task,
)

from strands_robots.client import EvaluationClient, QuotaExceeded, RelayError, pb
from strands_robots.relay.config import RelaySettings
from strands_robots.wire.proto import policy_session_pb2 as ps
from strands_robots.station_link.link import StationLink

SERVE_POLICY = "/strands_robots.relay.v1.Evaluation/ServePolicy"
GET_STATUS = "/strands_robots.relay.v1.Evaluation/GetStatus"


def _md(who="team_a"):
    return (("authorization", f"Bearer {CLIENT_TOKENS[who]}"),)


class _Silent:
    """A request iterator that never yields until released (a client that never sends attach)."""

    def __init__(self, release: threading.Event) -> None:
        self._release = release

    def __iter__(self):
        return self

    def __next__(self):
        self._release.wait(120)
        raise StopIteration


def _serve_policy(channel):
    return channel.stream_stream(SERVE_POLICY, request_serializer=ps.PolicyReply.SerializeToString,
                                 response_deserializer=ps.PolicyRequest.FromString)


def test_200_idle_streams_never_starve_heartbeats_reports_or_get_status_and_end_at_the_attach_deadline(tmp_path):
    tokens = write_tokens(tmp_path)
    port = free_port()
    target = f"127.0.0.1:{port}"
    deadline_s = 5  # the calls below take ~0.05 s here (a loaded machine: well under a second)
    relay = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", tokens, "--poll-s", "0.2",
                                "--first-message-deadline-s", str(deadline_s), "--max-streams-per-token", "200")
    release = threading.Event()
    channels = [grpc.insecure_channel(target) for _ in range(4)]
    link = None
    try:
        with EvaluationClient(target, token=CLIENT_TOKENS["team_b"], timeout_s=1.0) as poller:
            job = poller.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=3)
            idle = [_serve_policy(channels[i % 4])(_Silent(release), metadata=_md()) for i in range(200)]
            for call in idle:
                call.initial_metadata()  # the relay holds the stream (bounded: the relay ends it at the deadline)
            assert all(call.running() for call in idle), "an idle stream ended before the attach deadline"

            # one stream more than the token's limit is refused, naming the limit and its value
            with pytest.raises(grpc.RpcError) as over:
                list(_serve_policy(channels[0])(iter([]), metadata=_md(), timeout=5))
            assert over.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_streams_per_token (200) reached" in over.value.details()

            # while the 200 are open: a station heartbeats and reports, a client polls with a 1 s deadline
            link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.1,
                               call_timeout_s=1.0).start()
            answered, failures = 0, []
            for i in range(1, 41):
                link.report(pb.JobStatus(job_id=job, station_id="sim_station", state="RUNNING", episodes_total=3,
                                         updated_unix_ms=1000 + i, message=f"report {i}"))
                try:
                    status = poller.get_status(job)
                    answered += 1
                except RelayError as exc:
                    failures.append(f"{exc.code}: {exc}")
                    continue
                assert status.job_id == job
            assert failures == []
            assert answered == 40
            assert link.flush(5), f"reports not delivered: {link.last_error}"
            assert poller.get_status(job).message == "report 40"
            assert all(call.running() for call in idle)  # still open: the calls above were served beside them

            # the idle streams end at the attach deadline, each with the reason
            ended = wait_until(lambda: all(not c.running() for c in idle), timeout_s=deadline_s + 30,
                               what="the relay to end the idle streams")
            assert ended
            codes = {call.code() for call in idle}
            assert codes == {grpc.StatusCode.DEADLINE_EXCEEDED}
            assert f"no attach within the relay's first-message deadline of {deadline_s} s" in idle[0].details()
            # the slots are free again: a real stream of the same token is taken
            again = _serve_policy(channels[0])(_Silent(release), metadata=_md())
            again.initial_metadata()
            assert again.running()
            again.cancel()
    finally:
        release.set()
        if link is not None:
            link.close()
        for channel in channels:
            channel.close()
        stop_process(relay)
    log = relay.stdout.read()
    assert "Traceback" not in log
    refused = [line for line in log.splitlines() if "relay refused Evaluation.ServePolicy" in line]
    assert 1 <= len(refused) < 100  # one line each, rate-limited: 201 refusals never become 201 lines
    assert "similar line(s) dropped by the log's rate limit" in log


def test_a_malformed_request_is_invalid_argument_and_one_log_line_never_a_traceback(tmp_path):
    tokens = write_tokens(tmp_path)
    port = free_port()
    relay = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", tokens)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            raw = channel.unary_unary(GET_STATUS)
            with pytest.raises(grpc.RpcError) as err:
                raw(b"\xff\xff\xff\xff", metadata=_md(), timeout=5)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "GetStatus: malformed GetStatusRequest (4 bytes)" in err.value.details()
            raw_stream = channel.stream_stream(SERVE_POLICY)
            with pytest.raises(grpc.RpcError) as err:
                list(raw_stream(iter([b"\x12\xff"]), metadata=_md(), timeout=5))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "malformed PolicyReply" in err.value.details()
            with EvaluationClient(f"127.0.0.1:{port}", token=CLIENT_TOKENS["team_a"]) as client:
                job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
                assert client.get_status(job).state == "CREATED"  # still serving
    finally:
        stop_process(relay)
    log = relay.stdout.read()
    assert "Traceback" not in log
    lines = [line for line in log.splitlines() if "malformed" in line]
    assert len(lines) == 2, log


def test_open_jobs_and_queued_episodes_per_team_are_limited_naming_the_limit(tmp_path):
    settings = RelaySettings(max_open_jobs_per_token=2, max_queued_episodes_per_token=10)
    with running_relay(tmp_path, settings=settings) as relay, \
            EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as a, \
            EvaluationClient(relay.target, token=CLIENT_TOKENS["team_b"]) as b:
        first = a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=6)
        with pytest.raises(QuotaExceeded) as err:  # a quota, not a message too large: its own error type
            a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=5)
        assert err.value.code == "RESOURCE_EXHAUSTED"
        assert "max_queued_episodes_per_token (10) would be passed" in str(err.value)
        assert "6 episode(s) still to run and this job adds 5" in str(err.value)
        second = a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
        with pytest.raises(QuotaExceeded) as err:
            a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        assert err.value.code == "RESOURCE_EXHAUSTED"
        assert "max_open_jobs_per_token (2) reached: client 'team_a' has 2 job(s) not ended" in str(err.value)
        assert b.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=10)  # another team's own quota

        # finished episodes and ended jobs free the quota
        link = StationLink(relay.target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.1).start()
        try:
            done = pb.JobStatus(job_id=first, station_id="sim_station", state="RUNNING", episodes_total=6,
                                updated_unix_ms=10)
            for i in range(4):
                done.episodes.add(episode_id=f"ep_{i:04d}", end_condition=pb.END_TIMEOUT)
            link.report(done)
            link.report(pb.JobStatus(job_id=second, station_id="sim_station", state="SUCCEEDED", episodes_total=2,
                                     updated_unix_ms=11))
            assert link.flush(10)
        finally:
            link.close()
        assert relay.store.client_load("team_a").queued_episodes == 2
        assert a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=8)


def test_a_retried_submit_is_answered_even_when_the_team_is_at_its_quota(tmp_path):
    with running_relay(tmp_path, settings=RelaySettings(max_open_jobs_per_token=1)) as relay, \
            EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as a:
        job = a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1, job_id="retry-1")
        assert a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1, job_id="retry-1") == job


_HOLDER = textwrap.dedent("""
    import sys, threading, grpc
    from strands_robots.wire.proto import policy_session_pb2 as ps
    channel = grpc.insecure_channel(sys.argv[1])
    call = channel.stream_stream("/strands_robots.relay.v1.Evaluation/ServePolicy",
                                 request_serializer=ps.PolicyReply.SerializeToString,
                                 response_deserializer=ps.PolicyRequest.FromString)(
        iter(threading.Event().wait, True), metadata=(("authorization", "Bearer " + sys.argv[2]),))
    call.initial_metadata()
    print("holding", flush=True)
    threading.Event().wait()
""")


def test_keepalive_drops_a_peer_that_stopped_answering_and_frees_its_stream(tmp_path):
    tokens = write_tokens(tmp_path)
    port = free_port()
    target = f"127.0.0.1:{port}"
    relay = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", tokens, "--max-streams-per-token", "1",
                                "--first-message-deadline-s", "600", "--keepalive-time-s", "1",
                                "--keepalive-timeout-s", "1")
    script = tmp_path / "holder.py"
    script.write_text(_HOLDER)
    holder = subprocess.Popen([sys.executable, str(script), target, CLIENT_TOKENS["team_a"]], env=relay_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with grpc.insecure_channel(target) as channel:
            with pytest.raises(grpc.RpcError) as err:
                list(_serve_policy(channel)(iter([]), metadata=_md(), timeout=5))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # the holder has the one slot
            os.kill(holder.pid, signal.SIGSTOP)  # alive but silent: it never answers a ping again

            def slot_free():
                call = _serve_policy(channel)(iter([ps.PolicyReply(attach=ps.SessionAttach(job_id="job-none"))]),
                                              metadata=_md(), timeout=5)
                try:
                    list(call)
                except grpc.RpcError as exc:
                    return exc.code() == grpc.StatusCode.NOT_FOUND  # past the slot check: the slot was free
                return False

            assert wait_until(slot_free, timeout_s=60, interval_s=0.5, what="keepalive to drop the stopped peer")
    finally:
        if holder.poll() is None:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(10)
        stop_process(relay)


def test_the_relay_process_serves_calls_while_a_store_call_is_slow(tmp_path):
    """Store calls run off the event loop: one slow store call does not hold the others (a real lock held)."""
    import sqlite3

    from strands_robots.relay.sqlite_store import SqliteStore

    store = SqliteStore(str(tmp_path / "relay.db"))
    with running_relay(tmp_path, store=store) as relay, \
            EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"], timeout_s=5) as a:
        job = a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        blocker = sqlite3.connect(str(tmp_path / "relay.db"), timeout=1)
        blocker.execute("BEGIN EXCLUSIVE")  # every write of the relay now waits for this lock
        writer_done = threading.Event()
        result = {}

        def submit():
            try:
                result["job"] = a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            except RelayError as exc:
                result["error"] = exc
            finally:
                writer_done.set()

        thread = threading.Thread(target=submit, daemon=True)
        thread.start()
        try:
            # the submit waits on the store's write lock on a pool thread; reads are still answered meanwhile
            wait_until(lambda: store._lock.locked(), what="the submit to wait on the store")
            assert a.get_status(job).state == "CREATED"
            assert not writer_done.is_set()
        finally:
            blocker.rollback()
            blocker.close()
        assert writer_done.wait(30)
        thread.join(5)
        assert "job" in result, result
