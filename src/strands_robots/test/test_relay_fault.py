"""Fault injection: the relay process killed (SIGKILL) and restarted mid-job on the same store."""

from __future__ import annotations

import signal

import pytest
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    postgres_server,
    reset_postgres,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
    yes_no_task,
)

from strands_robots.client import EvaluationClient, pb
from strands_robots.station_link.link import StationLink
from strands_robots.relay.store_url import open_store


def _snapshot(job_id, t, n_episodes, state="RUNNING"):
    status = pb.JobStatus(job_id=job_id, station_id="sim_station", state=state, episodes_total=4,
                          updated_unix_ms=t, message=f"{n_episodes} of 4 done")
    for i in range(n_episodes):
        status.episodes.add(episode_id=f"ep_{i:04d}", end_condition=pb.END_TIMEOUT, scored=False)
    return status


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'relay.db'}"
    else:
        with postgres_server() as url:
            reset_postgres(url)
            yield url


def test_relay_killed_and_restarted_mid_job_loses_no_snapshot(tmp_path, store_url):
    tokens = write_tokens(tmp_path)
    port = free_port()
    target = f"127.0.0.1:{port}"
    relay = start_relay_process(port, store_url, tokens, "--poll-s", "0.1")
    jobs = []
    link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], on_job=jobs.append, heartbeat_s=0.1,
                       retry_s=(0.05, 0.5), call_timeout_s=2.0)
    client = EvaluationClient(target, token=CLIENT_TOKENS["team_a"], timeout_s=10)
    try:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=4)
        link.start()
        wait_until(lambda: jobs, what="the job on the station")
        link.report(_snapshot(job, 1000, 1))
        assert link.flush(10)
        assert client.get_status(job).updated_unix_ms == 1000

        stop_process(relay, sig=signal.SIGKILL)
        # what the relay had acknowledged is on disk although it died without a shutdown
        store = open_store(store_url)
        try:
            assert store.get_snapshot(job).updated_unix_ms == 1000
        finally:
            store.close()

        link.report(_snapshot(job, 2000, 2))
        link.report(_snapshot(job, 3000, 3))
        wait_until(lambda: not link.connected, what="the link to notice the relay is gone")
        assert link.backlog == 2
        assert not link.flush(0.3)  # nothing can go while the relay is down

        relay = start_relay_process(port, store_url, tokens, "--poll-s", "0.1")
        assert link.flush(30), f"backlog not re-reported: {link.backlog} left ({link.last_error})"
        status = client.get_status(job)
        assert (status.updated_unix_ms, len(status.episodes), status.message) == (3000, 3, "3 of 4 done")
        assert status.HasField("station_last_heard_unix_ms")

        # the job stream reconnected: a new job arrives, the old one is not delivered twice
        second = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        wait_until(lambda: len(jobs) == 2, what="the second job after the restart")
        assert [j.job_id for j in jobs] == [job, second]
    finally:
        link.close()
        client.close()
        stop_process(relay)


def test_policy_client_reattaches_after_a_relay_restart_and_serves_to_the_end(tmp_path):
    import threading

    from strands_robots.client import Policy
    from strands_robots.station_link.session import PolicyDisconnected, PolicySessionError

    class Echo(Policy):
        def act(self, observation):
            return [{"k": observation["x"]}]

    tokens = write_tokens(tmp_path)
    port = free_port()
    target = f"127.0.0.1:{port}"
    store_url = f"sqlite:{tmp_path / 'relay.db'}"
    relay = start_relay_process(port, store_url, tokens, "--poll-s", "0.1")
    link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.1, retry_s=(0.05, 0.5))
    client = EvaluationClient(target, token=CLIENT_TOKENS["team_a"], timeout_s=10)
    result = {}
    try:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
        link.start()
        serving = threading.Thread(target=lambda: result.setdefault(
            "final", client.serve_policy(job, Echo(), reconnect_s=30)), daemon=True)
        serving.start()
        session = link.open_session(job)
        session.wait_attached(30)
        session.start_episode("ep_0000", pb.Task(task_id="t", instruction="go"))
        assert session.act({"x": 1.0}) == [{"k": 1.0}]

        stop_process(relay, sig=signal.SIGKILL)
        with pytest.raises(PolicyDisconnected):
            session.act({"x": 2.0})
        relay = start_relay_process(port, store_url, tokens, "--poll-s", "0.1")

        def reattached():
            s = link.open_session(job)
            try:
                s.wait_attached(3)
                return s
            except PolicySessionError:
                s.close()
                return None

        again = wait_until(reattached, timeout_s=30, interval_s=0.2, what="the policy client to reattach")
        again.start_episode("ep_0001", pb.Task(task_id="t", instruction="go"))
        assert again.act({"x": 3.0}) == [{"k": 3.0}]
        again.close()
        link.report(pb.JobStatus(job_id=job, station_id="sim_station", state="SUCCEEDED", episodes_total=2,
                                 updated_unix_ms=10))
        assert link.flush(10)
        serving.join(30)
        assert result["final"].state == "SUCCEEDED"
    finally:
        link.close()
        client.close()
        stop_process(relay)
