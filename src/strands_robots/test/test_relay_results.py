"""Results are ordered and final; job ids do not leak across teams.

The station's sequence orders snapshots, a terminal state stays, finished episodes are never removed. The relay
runs as its own process (a real store on disk); the station's reports go over gRPC.
"""

from __future__ import annotations

import grpc
import pytest
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    running_relay,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
    yes_no_task,
)

from strands_robots.client import EvaluationClient, NotFound, pb
from strands_robots.wire.proto import station_service_pb2 as ss
from strands_robots.wire.proto import station_service_pb2_grpc as ss_grpc
from strands_robots.station_link.link import StationLink

HOUR_MS = 3_600_000
STATION_MD = (("authorization", f"Bearer {STATION_TOKENS['sim_station']}"),)


def _snapshot(job_id, seq, t, state="RUNNING", episodes=0, total=3):
    status = pb.JobStatus(job_id=job_id, station_id="sim_station", state=state, episodes_total=total,
                          updated_unix_ms=t, message=f"{state} #{seq}", sequence=seq)
    for i in range(episodes):
        status.episodes.add(episode_id=f"ep_{i:04d}", end_condition=pb.END_TIMEOUT, scored=False)
    return status


@pytest.fixture
def relay_process(tmp_path):
    tokens = write_tokens(tmp_path)
    port = free_port()
    proc = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", tokens, "--poll-s", "0.1")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield f"127.0.0.1:{port}", ss_grpc.StationStub(channel)
    finally:
        channel.close()
        stop_process(proc)


def _report(stub, *snapshots):
    return stub.ReportStatus(ss.ReportStatusRequest(station_id="sim_station", snapshots=list(snapshots)),
                             metadata=STATION_MD, timeout=10)


def test_a_station_clock_an_hour_ahead_once_never_freezes_the_job_and_it_reaches_succeeded(relay_process):
    target, stub = relay_process
    with EvaluationClient(target, token=CLIENT_TOKENS["team_a"]) as client:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
        t = 1_800_000_000_000
        assert _report(stub, _snapshot(job, 1, t)).stored == 1
        assert _report(stub, _snapshot(job, 2, t + HOUR_MS, episodes=1)).stored == 1  # the clock jumped ahead
        back = _report(stub, _snapshot(job, 3, t + 1000, episodes=1))  # and back: a later snapshot still wins
        assert (back.stored, back.stale) == (1, 0)
        status = client.get_status(job)
        assert (status.sequence, status.updated_unix_ms, status.message) == (3, t + 1000, "RUNNING #3")
        final = _report(stub, _snapshot(job, 4, t + 2000, state="SUCCEEDED", episodes=2))
        assert final.stored == 1
        status = client.get_status(job)
        assert (status.state, status.sequence, len(status.episodes)) == ("SUCCEEDED", 4, 2)


def test_a_terminal_snapshot_followed_by_a_running_one_stays_terminal(relay_process):
    target, stub = relay_process
    with EvaluationClient(target, token=CLIENT_TOKENS["team_a"]) as client:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        assert _report(stub, _snapshot(job, 5, 100, state="CANCELLED", total=1)).stored == 1
        late = _report(stub, _snapshot(job, 6, 200, state="RUNNING", total=1),
                       _snapshot(job, 7, 300, state="SUCCEEDED", episodes=1, total=1))
        assert (late.stored, late.stale, list(late.refused)) == (0, 2, [])
        status = client.get_status(job)
        assert (status.state, status.sequence, status.message) == ("CANCELLED", 5, "CANCELLED #5")
        assert client.cancel(job) is False  # nothing to cancel: the job ended


def test_a_snapshot_with_fewer_finished_episodes_is_refused_with_the_reason(relay_process):
    target, stub = relay_process
    with EvaluationClient(target, token=CLIENT_TOKENS["team_a"]) as client:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=3)
        assert _report(stub, _snapshot(job, 1, 100, episodes=2)).stored == 1
        restarted = _report(stub, _snapshot(job, 2, 200, episodes=0))  # a station that started the job over
        assert restarted.stored == 0
        assert len(restarted.refused) == 1
        assert restarted.refused[0].startswith(f"{job}: snapshot (sequence 2) has 0 finished episode(s), fewer than "
                                               f"the stored one")
        assert "never accepts a snapshot that removes finished episodes" in restarted.refused[0]
        assert len(client.get_status(job).episodes) == 2


def test_another_teams_job_is_not_found_for_status_cancel_and_serve(tmp_path):
    with running_relay(tmp_path) as relay, \
            EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as a, \
            EvaluationClient(relay.target, token=CLIENT_TOKENS["team_b"]) as b:
        job = a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1, job_id="team-a-private")
        for call in (b.get_status, b.cancel):
            with pytest.raises(NotFound, match="no job 'team-a-private' for this client"):
                call(job)

        class Nothing:
            def act(self, observation):
                return []

        with pytest.raises(NotFound, match="for this client"):
            b.serve_policy(job, Nothing(), reconnect_s=0)
        assert a.get_status(job).state == "CREATED"


def test_choosing_an_id_another_team_holds_never_says_taken_and_each_team_keeps_its_own_job(tmp_path):
    with running_relay(tmp_path) as relay, \
            EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as a, \
            EvaluationClient(relay.target, token=CLIENT_TOKENS["team_b"]) as b:
        jobs = []
        link = StationLink(relay.target, "sim_station", STATION_TOKENS["sim_station"], on_job=jobs.append,
                           heartbeat_s=0.1).start()
        try:
            assert a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2,
                                job_id="nightly-1") == "nightly-1"
            # team_b picks the same name: accepted like any free id, nothing says it is taken
            assert b.submit_job(station_id="sim_station", tasks=[yes_no_task("b")], episodes=5,
                                job_id="nightly-1") == "nightly-1"
            assert b.submit_job(station_id="sim_station", tasks=[yes_no_task("b")], episodes=5,
                                job_id="nightly-1") == "nightly-1"  # and its own retry is idempotent
            assert (a.get_status("nightly-1").episodes_total, b.get_status("nightly-1").episodes_total) == (2, 5)
            wait_until(lambda: len(jobs) == 2, what="both jobs on the station")
            by_client = {j.client_id: j for j in jobs}
            assert by_client["team_a"].job_id == "nightly-1"
            assert by_client["team_b"].job_id != "nightly-1"  # the station side got an id of the relay's
            # the station reports on team_b's job by its station-side id; team_b reads it under its own name
            theirs = by_client["team_b"].job_id
            link.report(_snapshot(theirs, 1, 10, episodes=1, total=5))
            assert link.flush(10)
            status_b = b.get_status("nightly-1")
            assert (status_b.job_id, status_b.state, len(status_b.episodes)) == ("nightly-1", "RUNNING", 1)
            assert a.get_status("nightly-1").state == "CREATED"
            assert b.cancel("nightly-1") is True
            assert relay.store.get_job(theirs).cancel_requested
            assert not relay.store.get_job("nightly-1").cancel_requested
        finally:
            link.close()
