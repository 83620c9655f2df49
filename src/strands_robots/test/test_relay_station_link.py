"""The station link on its own: backlog rules, model snapshots on the wire, TLS, and the relay command."""

from __future__ import annotations

import signal

from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    running_relay,
    self_signed_cert,
    start_relay_process,
    stop_process,
    write_tokens,
    yes_no_task,
)

from strands_robots import convert
from strands_robots.client import EvaluationClient, pb
from strands_robots.relay.server import TlsConfig
from strands_robots.relay.station_link import StationLink
from strands_robots.station.model import EpisodeResult, JobState, JobStatus, ScoredItem, Task
from strands_robots.station.model import AnswerType, ScoringItemDefinition, ScoringSheet


def _s(job_id, t):
    return pb.JobStatus(job_id=job_id, station_id="sim_station", state="RUNNING", episodes_total=9,
                        updated_unix_ms=t)


def test_full_backlog_drops_the_oldest_stale_snapshot_and_keeps_every_jobs_latest():
    link = StationLink(f"127.0.0.1:{free_port()}", "sim_station", STATION_TOKENS["sim_station"], max_backlog=3)
    try:  # never started: nothing is sent, the backlog only grows
        for snap in (_s("A", 1), _s("A", 2), _s("A", 3), _s("B", 1), _s("A", 4), _s("A", 5)):
            link.report(snap)
        assert [(m.job_id, m.updated_unix_ms) for m in link.pending()] == [("B", 1), ("A", 4), ("A", 5)]
        for t in (1, 2, 3):
            link.report(_s(f"J{t}", t))  # A4 is the last stale one; then every entry is its job's latest
        assert [(m.job_id, m.updated_unix_ms) for m in link.pending()] == [
            ("B", 1), ("A", 5), ("J1", 1), ("J2", 2), ("J3", 3)]
    finally:
        link.close()


def _model_status(job_id):
    sheet = ScoringSheet((ScoringItemDefinition("placed", "In the bin?", AnswerType.YES_NO, 1.0,
                                                success_answer="yes"),))
    task = Task("pick", "pick up the cube", scoring=sheet)
    item = ScoredItem("placed", "In the bin?", AnswerType.YES_NO, False, 0.0, 1.0, True)
    ep = EpisodeResult("ep_0000", "safety_stop", True, False, 0.0, (item,), task, False,
                       "right: joint 4 reads +3.4 N*m")
    return JobStatus(job_id, "sim_station", JobState.RUNNING, 2, (ep,), 4321, "episode 2 of 2")


def test_a_station_model_snapshot_reaches_the_client_field_for_field(tmp_path):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
        link = StationLink(relay.target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.1).start()
        try:
            model = _model_status(job)
            link.report(model)
            assert link.flush(10)
        finally:
            link.close()
        status = client.get_status(job)
        assert (status.state, status.episodes_total, status.updated_unix_ms, status.message) == (
            "RUNNING", 2, 4321, "episode 2 of 2")
        ep = status.episodes[0]
        assert (ep.episode_id, ep.end_condition, ep.scored, ep.success, ep.end_detail) == (
            "ep_0000", "safety_stop", True, False, "right: joint 4 reads +3.4 N*m")
        assert ep.items[0].WhichOneof("answer") == "yes_no" and ep.items[0].yes_no is False
        assert ep.task.instruction == "pick up the cube"
        assert convert.job_status_from_pb(status) == model


def test_station_link_reports_over_tls(tmp_path):
    cert, key = self_signed_cert(tmp_path)
    with running_relay(tmp_path, tls=TlsConfig.from_files(cert, key)) as relay:
        target = f"localhost:{relay.port}"
        with EvaluationClient(target, token=CLIENT_TOKENS["team_a"], root_certificates=cert) as client:
            job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            jobs = []
            link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], root_certificates=cert,
                               on_job=jobs.append, heartbeat_s=0.1).start()
            try:
                link.report(_s(job, 77))
                assert link.flush(10)
            finally:
                link.close()
            assert client.get_status(job).updated_unix_ms == 77
            assert [j.job_id for j in jobs] == [job]


def test_relay_command_announces_itself_and_exits_zero_on_sigterm(tmp_path):
    port = free_port()
    proc = start_relay_process(port, f"sqlite:{tmp_path / 'r.db'}", write_tokens(tmp_path))
    try:
        line = proc.stdout.readline()
        assert f"relay listening on 127.0.0.1:{port} (plain; store sqlite; 2 client(s), 2 station(s))" in line
        stop_process(proc, sig=signal.SIGTERM)
        assert proc.returncode == 0
    finally:
        stop_process(proc, sig=signal.SIGKILL)
