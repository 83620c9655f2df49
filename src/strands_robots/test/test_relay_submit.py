"""A retried ``submit_job`` never makes a second job.

The same id and content is the same job, other content with the same id is ALREADY_EXISTS; concurrent retries, a
retry after DEADLINE_EXCEEDED, and two relays on one PostgreSQL store all end with one job.
"""

from __future__ import annotations

import sqlite3
import threading

import pytest
from test_relay_harness import CLIENT_TOKENS, postgres_server, reset_postgres, running_relay, wait_until, yes_no_task

from strands_robots.client import AlreadyExists, DeadlineExceeded, EvaluationClient
from strands_robots.relay.postgres_store import PostgresStore
from strands_robots.relay.sqlite_store import SqliteStore


def _submit(client, job_id="retry-7", episodes=3):
    return client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=episodes, job_id=job_id)


def test_the_same_id_and_content_is_the_same_job_and_other_content_is_already_exists(tmp_path):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as a:
        assert _submit(a) == _submit(a) == "retry-7"
        with pytest.raises(AlreadyExists) as err:
            _submit(a, episodes=4)
        assert "job id 'retry-7' is taken by another of your jobs" in err.value.reason
        assert [j.client_job_id for j in relay.store.open_jobs_for_station("sim_station")] == ["retry-7"]
        assert a.get_status("retry-7").episodes_total == 3


def test_concurrent_retries_of_one_submit_make_one_job(tmp_path):
    with running_relay(tmp_path) as relay:
        clients = [EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) for _ in range(8)]
        results, barrier = [], threading.Barrier(len(clients))

        def run(client):
            barrier.wait()
            results.append(_submit(client))

        threads = [threading.Thread(target=run, args=(c,)) for c in clients]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
        finally:
            for c in clients:
                c.close()
        assert results == ["retry-7"] * 8
        assert len(relay.store.open_jobs_for_station("sim_station")) == 1


def test_a_retry_after_deadline_exceeded_returns_the_job_the_first_try_made(tmp_path):
    path = tmp_path / "relay.db"
    store = SqliteStore(str(path))
    with running_relay(tmp_path, store=store) as relay:
        blocker = sqlite3.connect(str(path), timeout=1)
        blocker.execute("BEGIN EXCLUSIVE")  # the first try's write waits on this lock past the client's deadline
        try:
            with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"], timeout_s=0.5) as impatient:
                with pytest.raises(DeadlineExceeded):
                    _submit(impatient)
        finally:
            blocker.rollback()
            blocker.close()
        wait_until(lambda: store.view_for_client("team_a", "retry-7") is not None, what="the first try stored")
        with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as a:
            assert _submit(a) == "retry-7"
        assert len(store.open_jobs_for_station("sim_station")) == 1
    store.close()


def test_retries_to_two_relays_on_one_postgresql_store_make_one_job(tmp_path):
    with postgres_server() as url:
        reset_postgres(url)
        store_a, store_b = PostgresStore(url), PostgresStore(url)
        try:
            with running_relay(tmp_path, store=store_a) as a, running_relay(tmp_path, store=store_b) as b:
                clients = [EvaluationClient(r.target, token=CLIENT_TOKENS["team_a"]) for r in (a, b) * 3]
                results, barrier = [], threading.Barrier(len(clients))

                def run(client):
                    barrier.wait()
                    results.append(_submit(client))

                threads = [threading.Thread(target=run, args=(c,)) for c in clients]
                try:
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join(30)
                finally:
                    for c in clients:
                        c.close()
                assert results == ["retry-7"] * 6
                assert [j.client_job_id for j in store_a.open_jobs_for_station("sim_station")] == ["retry-7"]
        finally:
            store_a.close()
            store_b.close()
