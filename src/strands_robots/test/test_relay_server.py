"""The relay's job service.

Submit checks, cached snapshots with the station's time and when it was heard, cancels, job streams, several
relays on one PostgreSQL store, and the command line.
"""

from __future__ import annotations

import pytest
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    postgres_server,
    running_relay,
    wait_until,
    write_tokens,
    yes_no_task,
)

from strands_robots.client import AlreadyExists, EvaluationClient, InvalidTask, pb
from strands_robots.relay import server as relay_server
from strands_robots.wire.proto import station_service_pb2 as ss
from strands_robots.wire.proto import station_service_pb2_grpc as ss_grpc
from strands_robots.station_link.link import StationLink
from strands_robots.relay.postgres_store import PostgresStore


class Clock:
    def __init__(self, t: int) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def _client(relay, who="team_a"):
    return EvaluationClient(relay.target, token=CLIENT_TOKENS[who])


def _station(relay, **kw):
    kw.setdefault("heartbeat_s", 0.1)
    return StationLink(relay.target, "sim_station", STATION_TOKENS["sim_station"], **kw)


def _snapshot(job_id, t, state="RUNNING", episodes=0, total=3):
    status = pb.JobStatus(job_id=job_id, station_id="sim_station", state=state, episodes_total=total,
                          updated_unix_ms=t, message=f"{state} at {t}")
    for i in range(episodes):
        status.episodes.add(episode_id=f"ep_{i:04d}", end_condition=pb.END_TIMEOUT, scored=False)
    return status


def test_status_before_the_station_reports_is_created_with_no_station_time_and_no_heard(tmp_path):
    with running_relay(tmp_path) as relay, _client(relay) as client:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=3)
        status = client.get_status(job)
        assert (status.job_id, status.station_id, status.state, status.episodes_total) == (
            job, "sim_station", "CREATED", 3)
        assert status.updated_unix_ms == 0
        assert len(status.episodes) == 0
        assert not status.HasField("station_last_heard_unix_ms")
        assert "has not reported" in status.message


def test_status_carries_the_stations_update_time_and_the_relays_last_heard_time(tmp_path):
    clock = Clock(1_800_000_000_000)
    with running_relay(tmp_path, clock_ms=clock) as relay, _client(relay) as client:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=3)
        link = _station(relay).start()
        try:
            link.report(_snapshot(job, t=1234, episodes=2))
            assert link.flush(10)
            clock.t += 5000  # the poll comes later: neither time may be the poll's
            status = client.get_status(job)
            assert status.updated_unix_ms == 1234
            assert status.HasField("station_last_heard_unix_ms")
            assert status.station_last_heard_unix_ms == 1_800_000_000_000
            assert len(status.episodes) == 2 and status.state == "RUNNING"
        finally:
            link.close()
        # the station is gone; the cached snapshot stays, and last-heard says how old it is
        clock.t += 60_000
        again = client.get_status(job)
        assert again.updated_unix_ms == 1234
        assert again.station_last_heard_unix_ms == 1_800_000_000_000


def test_heartbeat_alone_moves_last_heard(tmp_path):
    clock = Clock(10_000)
    with running_relay(tmp_path, clock_ms=clock) as relay, _client(relay) as client:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        link = _station(relay).start()
        try:
            wait_until(lambda: relay.store.station_last_heard("sim_station") == 10_000, what="first heartbeat")
            clock.t = 20_000
            wait_until(lambda: client.get_status(job).station_last_heard_unix_ms == 20_000, what="a later heartbeat")
        finally:
            link.close()


def test_an_older_snapshot_reported_late_does_not_replace_the_newer(tmp_path):
    with running_relay(tmp_path) as relay, _client(relay) as client:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=3)
        with ss_grpc_channel(relay) as stub:
            md = (("authorization", f"Bearer {STATION_TOKENS['sim_station']}"),)
            r1 = stub.ReportStatus(ss.ReportStatusRequest(station_id="sim_station",
                                                          snapshots=[_snapshot(job, 2000, episodes=2)]), metadata=md)
            r2 = stub.ReportStatus(ss.ReportStatusRequest(station_id="sim_station",
                                                          snapshots=[_snapshot(job, 1000, episodes=1)]), metadata=md)
        assert (r1.stored, r1.stale, r2.stored, r2.stale) == (1, 0, 0, 1)
        status = client.get_status(job)
        assert (status.updated_unix_ms, len(status.episodes)) == (2000, 2)


class ss_grpc_channel:
    def __init__(self, relay):
        import grpc

        self._channel = grpc.insecure_channel(relay.target)

    def __enter__(self):
        return ss_grpc.StationStub(self._channel)

    def __exit__(self, *exc):
        self._channel.close()


def test_snapshot_claiming_another_station_or_an_unknown_state_is_refused_with_the_reason(tmp_path):
    with running_relay(tmp_path) as relay, _client(relay) as client, ss_grpc_channel(relay) as stub:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        md = (("authorization", f"Bearer {STATION_TOKENS['sim_station']}"),)
        bad_station = _snapshot(job, 10)
        bad_station.station_id = "other_station"
        r = stub.ReportStatus(ss.ReportStatusRequest(snapshots=[bad_station, _snapshot(job, 11, state="DANCING"),
                                                                _snapshot("job-nope", 12)]), metadata=md)
        assert r.stored == 0
        assert [x.split(": ", 1)[1] for x in r.refused] == [
            "station_id 'other_station' is not this token's station", "unknown state 'DANCING'",
            "no such job for station 'sim_station'"]
        assert client.get_status(job).state == "CREATED"


@pytest.mark.parametrize("tasks, episodes, station, reason", [
    ([], 1, "sim_station", "tasks: a job needs at least one task"),
    ([yes_no_task()], 0, "sim_station", "episodes: episodes=0 refused: allowed range [1, 100000]"),
    ([yes_no_task()], 1, "moon_station", "station_id: unknown station 'moon_station'"),
    ([yes_no_task(), yes_no_task("b", instruction="")], 1, "sim_station", "tasks[1].instruction"),
    ([yes_no_task(), {"task_id": "c", "instruction": "x", "scoring": {"items": []}}], 1, "sim_station",
     "tasks[1].scoring"),
    ([{"task_id": "d", "instruction": "x", "scoring": {"items": [
        {"name": "ok", "question": "?", "answer_type": "ANSWER_TYPE_UNSPECIFIED", "max_points": 1}]}}], 1,
     "sim_station", "tasks[0].scoring.items[0] ('ok'): answer type 0 is not one of yes_no, count, choice"),
    ([{"task_id": "e", "instruction": "x", "colour": "red"}], 1, "sim_station", "tasks[0]:"),
])
def test_malformed_job_is_refused_naming_the_task_field_and_reason(tmp_path, tasks, episodes, station, reason):
    with running_relay(tmp_path) as relay, _client(relay) as client:
        with pytest.raises(InvalidTask) as err:
            client.submit_job(station_id=station, tasks=tasks, episodes=episodes)
        assert reason in err.value.reason
        assert relay.store.open_jobs_for_station("sim_station") == []


def test_resubmitting_with_the_same_job_id_is_idempotent_and_a_different_job_is_refused(tmp_path):
    with running_relay(tmp_path) as relay, _client(relay) as client:
        first = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2, job_id="nightly-1")
        again = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2, job_id="nightly-1")
        assert first == again == "nightly-1"
        with pytest.raises(AlreadyExists, match="'nightly-1' is taken"):
            client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=5, job_id="nightly-1")
        assert len(relay.store.open_jobs_for_station("sim_station")) == 1


def test_cancel_reaches_the_station_once_and_an_ended_job_has_nothing_to_cancel(tmp_path):
    with running_relay(tmp_path) as relay, _client(relay) as client:
        jobs, cancels = [], []
        link = _station(relay, on_job=jobs.append, on_cancel=lambda j, r: cancels.append((j, r))).start()
        try:
            job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            wait_until(lambda: jobs, what="the job on the station")
            assert jobs[0].client_id == "team_a" and jobs[0].episodes_total == 1
            assert jobs[0].tasks[0].scoring.items[0].answer_type == pb.ANSWER_TYPE_YES_NO
            assert client.cancel(job, reason="wrong checkpoint") is True
            wait_until(lambda: cancels, what="the cancel on the station")
            assert cancels == [(job, "wrong checkpoint")]
            link.report(_snapshot(job, 50, state="CANCELLED", total=1))
            assert link.flush(10)
            assert client.get_status(job).state == "CANCELLED"
            assert client.cancel(job) is False
        finally:
            link.close()
        assert relay.store.open_jobs_for_station("sim_station") == []


def test_two_relays_sharing_one_postgresql_store_serve_the_same_jobs(tmp_path):
    with postgres_server() as url:
        store_a, store_b = PostgresStore(url), PostgresStore(url)
        try:
            with running_relay(tmp_path, store=store_a) as a, running_relay(tmp_path, store=store_b) as b:
                jobs = []
                link = StationLink(b.target, "sim_station", STATION_TOKENS["sim_station"], on_job=jobs.append,
                                   heartbeat_s=0.1).start()
                try:
                    with _client(a) as client_a, _client(b) as client_b:
                        job = client_a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
                        wait_until(lambda: jobs, what="a job submitted to relay A on the station of relay B")
                        assert jobs[0].job_id == job
                        link.report(_snapshot(job, 777, state="SUCCEEDED", total=1))
                        assert link.flush(10)
                        status = client_a.get_status(job)
                        assert (status.state, status.updated_unix_ms) == ("SUCCEEDED", 777)
                        assert status.HasField("station_last_heard_unix_ms")
                        assert client_b.get_status(job).SerializeToString() == status.SerializeToString()
                finally:
                    link.close()
        finally:
            store_a.close()
            store_b.close()


def test_relay_command_refuses_a_bad_token_file_or_store_with_the_reason(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("clients:\n  a: short\n")
    bad.chmod(0o600)
    assert relay_server.main(["--store", f"sqlite:{tmp_path / 'r.db'}", "--tokens", str(bad)]) == 2
    assert "clients.a: the token is 5 characters" in capsys.readouterr().err
    good = write_tokens(tmp_path)
    assert relay_server.main(["--store", "mysql://x", "--tokens", str(good)]) == 2
    assert "unknown store 'mysql://x'" in capsys.readouterr().err
    assert relay_server.main(["--store", "sqlite:x.db", "--tokens", str(good), "--tls-cert", "c.pem"]) == 2
    assert "--tls-cert and --tls-key go together" in capsys.readouterr().err
    assert relay_server.main(["--store", "sqlite:x.db", "--tokens", str(good), "--workers", "1"]) == 2
    assert "--workers: must be >= 4" in capsys.readouterr().err
    assert relay_server.main(["--store", "sqlite:x.db", "--tokens", str(good), "--poll-s", "0"]) == 2
    assert "--poll-s: must be greater than 0" in capsys.readouterr().err


def test_a_failing_store_answers_unavailable_with_the_reason(tmp_path):
    from strands_robots.client import Unavailable
    from strands_robots.relay.sqlite_store import SqliteStore

    store = SqliteStore(str(tmp_path / "r.db"))
    with running_relay(tmp_path, store=store) as relay, _client(relay) as client:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        store.close()
        with pytest.raises(Unavailable, match="relay store unavailable: SQLite store .*closed"):
            client.get_status(job)
