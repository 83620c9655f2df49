"""The station link on its own: backlog rules, model snapshots on the wire, TLS, and the relay command."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading

from test_snapshot_fit import largest_summary
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    running_relay,
    self_signed_cert,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
    yes_no_task,
)

from strands_robots.wire import pb_model
from strands_robots.client import EvaluationClient, pb
from strands_robots.relay.server import TlsConfig
from strands_robots.station_link.link import StationLink
from strands_robots.station.limits import END_DETAIL_MAX, INSTRUCTION_MAX, JOB_MESSAGE_MAX
from strands_robots.station.model import EpisodeResult, JobState, JobStatus, ScoredItem, Task
from strands_robots.station.model import AnswerType, ScoringItemDefinition, ScoringSheet
from strands_robots.validation import JOB_LIMITS


def _s(job_id, t, state="RUNNING"):
    return pb.JobStatus(job_id=job_id, station_id="sim_station", state=state, episodes_total=9,
                        updated_unix_ms=t)


def test_full_backlog_coalesces_to_each_jobs_newest_snapshot_and_keeps_every_terminal_one():
    link = StationLink(f"127.0.0.1:{free_port()}", "sim_station", STATION_TOKENS["sim_station"], max_backlog=3)
    try:  # never started: nothing is sent, the backlog only grows
        for snap in (_s("A", 1), _s("A", 2), _s("A", 3), _s("B", 1)):
            link.report(snap)
        assert [(m.job_id, m.updated_unix_ms) for m in link.pending()] == [("A", 3), ("B", 1)]
        link.report(_s("A", 4))
        link.report(_s("A", 5))
        assert [(m.job_id, m.updated_unix_ms) for m in link.pending()] == [("B", 1), ("A", 5)]
        for t in (1, 2, 3):
            link.report(_s(f"J{t}", t))  # every entry is its job's newest: all kept, over the limit
        assert [(m.job_id, m.updated_unix_ms) for m in link.pending()] == [
            ("B", 1), ("A", 5), ("J1", 1), ("J2", 2), ("J3", 3)]
        # A terminal snapshot outlives a later one of its job (a station never reports after the end).
        link.report(_s("B", 2, "SUCCEEDED"))
        link.report(_s("B", 3, "RUNNING"))
        assert [(m.job_id, m.state) for m in link.pending()] == [
            ("A", "RUNNING"), ("J1", "RUNNING"), ("J2", "RUNNING"), ("J3", "RUNNING"), ("B", "SUCCEEDED")]
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
        assert pb_model.job_status_from_pb(status) == model


def test_station_link_reports_over_tls(tmp_path):
    cert, key = self_signed_cert(tmp_path)
    with running_relay(tmp_path, tls=TlsConfig.from_files(cert, key)) as relay:
        target = f"localhost:{relay.port}"
        with EvaluationClient(target, token=CLIENT_TOKENS["team_a"], root_certificates=cert) as client:
            job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            jobs = []
            delivered = threading.Event()

            def on_job(j):
                jobs.append(j)
                delivered.set()

            link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], root_certificates=cert,
                               on_job=on_job, heartbeat_s=0.1).start()
            try:
                link.report(_s(job, 77))
                assert link.flush(10)
                # the job comes on the link's own jobs stream, not with the report's answer: wait for it
                assert delivered.wait(20), "the relay's job never reached on_job over TLS"
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


# -- against a relay process ---------------------------------------------------------------------------------
LINK_LOG = "strands_robots.station_link.link"
MIB = 1024 * 1024


@contextlib.contextmanager
def relay_process(tmp_path, jobs=1):
    """Yield ``(proc, target, client, [job ids])``: a relay process and a client's jobs for sim_station."""
    port = free_port()
    proc = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", write_tokens(tmp_path))
    client = None
    try:
        target = f"127.0.0.1:{port}"
        client = EvaluationClient(target, token=CLIENT_TOKENS["team_a"])
        ids = [client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1) for _ in range(jobs)]
        yield proc, target, client, ids
    finally:
        if client is not None:
            client.close()
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)  # a test may have stopped it
        stop_process(proc, sig=signal.SIGKILL)


def _snap(job_id, state, message="", episodes=0, end_detail=""):
    status = pb.JobStatus(job_id=job_id, station_id="sim_station", state=state, episodes_total=max(1, episodes),
                          updated_unix_ms=1000, message=message)
    for i in range(episodes):
        status.episodes.add(episode_id=f"ep_{i:04d}", end_condition="timeout", end_detail=end_detail)
    return status


def _refusals(caplog, job_id):
    return [r.getMessage() for r in caplog.records if r.name == LINK_LOG and f"job {job_id!r}'s" in r.getMessage()]


def test_a_16_mib_message_is_cut_before_it_is_sent_and_the_station_keeps_reporting_its_other_job_and_heartbeating(
        tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=LINK_LOG)
    with relay_process(tmp_path, jobs=2) as (_proc, target, client, (job_a, job_b)):
        link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.1)
        try:
            # The team's 16 MiB cancel reason, embedded in job A's final snapshot, goes first.
            link.report(_snap(job_a, "CANCELLED", "cancelled by the team: " + "x" * (16 * MIB)))
            link.report(_snap(job_b, "RUNNING", "ep_0000 running"))
            link.report(_snap(job_b, "SUCCEEDED", "1 episode(s)"))
            link.start()
            assert link.flush(60), link.pending()
            heard = {client.get_status(job_b).station_last_heard_unix_ms}
            wait_until(lambda: heard.add(client.get_status(job_b).station_last_heard_unix_ms) or len(heard) >= 3,
                       timeout_s=30, what="three heartbeats after the reports")
        finally:
            link.close()
        a, b = client.get_status(job_a), client.get_status(job_b)
    assert (b.state, b.message) == ("SUCCEEDED", "1 episode(s)")
    assert a.state == "CANCELLED" and len(a.message) <= JOB_MESSAGE_MAX
    assert a.message.startswith("cancelled by the team: xxx") and a.message.endswith("characters cut]")
    lines = _refusals(caplog, job_a)
    assert len(lines) == 1 and "trimmed to" in lines[0], lines  # made to fit before it was sent: never refused
    assert link.dropped == 0 and link.heartbeats_sent >= 3


def _over_the_relays_text_limit(job_id, state="RUNNING"):
    """Return a snapshot the relay refuses for a text no cut shortens (a task instruction past its limit)."""
    status = _snap(job_id, state, "ep_0000 finished", episodes=1)
    status.episodes[0].task.instruction = "i" * (INSTRUCTION_MAX + 1)
    return status


def test_a_refused_snapshot_is_replaced_by_its_jobs_newer_one_or_dropped_once_when_cutting_is_not_enough(
        tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=LINK_LOG)
    with relay_process(tmp_path, jobs=2) as (_proc, target, client, (job_a, job_b)):
        link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.1)
        try:
            link.report(_over_the_relays_text_limit(job_a))
            link.report(_snap(job_a, "RUNNING", "episode 1 of 1"))
            link.report(_over_the_relays_text_limit(job_b))
            link.start()
            assert link.flush(120), [m.job_id for m in link.pending()]
            link.report(_snap(job_b, "SUCCEEDED", "done"))
            assert link.flush(30)
        finally:
            link.close()
        a, b = client.get_status(job_a), client.get_status(job_b)
    assert a.message == "episode 1 of 1"
    assert (b.state, b.message) == ("SUCCEEDED", "done")
    replaced, dropped = _refusals(caplog, job_a), _refusals(caplog, job_b)
    assert len(replaced) == 1 and "its newer snapshot replaces it" in replaced[0], replaced
    assert len(dropped) == 1 and dropped[0].endswith("; dropped") and "instruction" in dropped[0], dropped
    assert link.dropped == 1


def test_a_terminal_snapshot_a_smaller_relay_refuses_for_its_size_is_trimmed_until_it_is_accepted(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=LINK_LOG)
    port = free_port()
    proc = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", write_tokens(tmp_path),
                               "--max-message-bytes", str(MIB))
    client = link = None
    try:
        target = f"127.0.0.1:{port}"
        client = EvaluationClient(target, token=CLIENT_TOKENS["team_a"])
        job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=300)
        final = _snap(job_id, "SUCCEEDED", "completed: 300 episodes", episodes=300, end_detail="d" * END_DETAIL_MAX)
        for episode in final.episodes:
            episode.task.task_id, episode.task.instruction = "pick", "pick up the cube " * 200
        assert MIB < final.ByteSize() < 16 * MIB  # fits the link's 16 MiB, not this relay's 1 MiB
        link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.5)
        link.report(final)
        link.start()
        assert link.flush(60), link.pending()
        got = client.get_status(job_id)
    finally:
        if link is not None:
            link.close()
        if client is not None:
            client.close()
        stop_process(proc, sig=signal.SIGKILL)
    assert got.state == "SUCCEEDED" and len(got.episodes) == 300 and link.dropped == 0
    assert got.message.startswith("completed: 300 episodes [this snapshot was trimmed to fit one relay message")
    assert [(e.episode_id, e.end_condition) for e in got.episodes] == [(e.episode_id, "timeout")
                                                                       for e in final.episodes]
    assert got.episodes[-1].task.instruction == final.episodes[-1].task.instruction  # the newest in full
    trims = [line for line in _refusals(caplog, job_id) if "sending it again trimmed to" in line]
    assert trims and all("RESOURCE_EXHAUSTED" in line for line in trims), _refusals(caplog, job_id)


def test_the_worst_case_snapshot_the_limits_allow_is_accepted_by_the_relay_with_a_note(tmp_path):
    from strands_robots.client.policy_spec import MAX_SPEC_JSON
    from strands_robots.station.limits import EPISODES_LISTED_MAX

    with relay_process(tmp_path, jobs=1) as (_proc, target, client, (job_id,)):
        final = pb.JobStatus(job_id=job_id, station_id="sim_station", state="SUCCEEDED", episodes_total=100_000,
                             updated_unix_ms=1000, sequence=2 ** 40, message="m" * JOB_MESSAGE_MAX)
        final.provenance.policy_spec_json = "{" + " " * (MAX_SPEC_JSON - 2) + "}"
        for name in ("arms.yaml", "cameras.yaml", "job"):
            final.provenance.config_files.add(name=name, path="/" + "p" * 4095, sha256="a" * 64)
        task = pb.Task(task_id="t" * 128, instruction="i" * 1024)
        for i in range(EPISODES_LISTED_MAX):  # every episode the station may list, each with its task and details
            episode = final.episodes.add(episode_id=f"ep_{i:07d}", end_condition="infrastructure_fault", scored=True,
                                         success=True, score=0.5, taken_over=True, end_detail="d" * END_DETAIL_MAX,
                                         run_id="r" * 128, recording_sha256="f" * 64)
            episode.task.CopyFrom(task)
        final.summary.CopyFrom(largest_summary(int(JOB_LIMITS["tasks"].maximum)))  # the figures at their largest
        assert final.ByteSize() > 16 * MIB
        link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=1.0)
        try:
            link.report(final)
            link.start()
            assert link.flush(300), "the worst-case snapshot was not accepted"
        finally:
            link.close()
        got = client.get_status(job_id)
    assert got.state == "SUCCEEDED" and len(got.episodes) == EPISODES_LISTED_MAX and link.dropped == 0
    assert "[this snapshot was trimmed to fit one relay message" in got.message and len(got.message) <= JOB_MESSAGE_MAX
    assert got.episodes[0].episode_id == "ep_0000000" and got.episodes[-1].end_condition == "infrastructure_fault"
    assert got.summary == final.summary  # the summary is never trimmed: bounded by construction


def test_backlog_overflow_while_a_batch_is_in_flight_keeps_every_jobs_succeeded(tmp_path):
    with relay_process(tmp_path, jobs=5) as (proc, target, client, jobs):
        link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=60.0,
                           call_timeout_s=60.0, max_backlog=4).start()
        try:
            assert link.flush(30) and wait_until(lambda: link.connected, what="the link to connect")
            os.kill(proc.pid, signal.SIGSTOP)  # the relay hangs: the next report stays in flight
            link.report(_snap(jobs[0], "RUNNING", "ep_0000 running"))
            wait_until(lambda: link.in_flight == 1, what="the report to be in flight")
            for job_id in jobs[1:] + jobs[:1]:  # every job ends while it hangs: past max_backlog
                link.report(_snap(job_id, "SUCCEEDED", f"{job_id} done"))
            assert len(link.pending()) <= len(jobs)
            assert sorted(m.job_id for m in link.pending() if m.state == "SUCCEEDED") == sorted(jobs)
            os.kill(proc.pid, signal.SIGCONT)
            assert link.flush(60), [m.job_id for m in link.pending()]
        finally:
            link.close()
        finals = {job_id: client.get_status(job_id) for job_id in jobs}
    assert {job_id: (s.state, s.message) for job_id, s in finals.items()} == {
        job_id: ("SUCCEEDED", f"{job_id} done") for job_id in jobs}


def test_the_snapshot_sequence_reaches_the_relay_unchanged(tmp_path):
    with relay_process(tmp_path) as (_proc, target, client, (job,)):
        link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.1).start()
        try:
            model = _model_status(job)
            import dataclasses

            link.report(dataclasses.replace(model, sequence=41))
            assert link.flush(30)
        finally:
            link.close()
        assert client.get_status(job).sequence == 41
