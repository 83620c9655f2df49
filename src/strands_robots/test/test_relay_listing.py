"""ListJobs' rules on a real SQLite store (no gRPC): order, ties, page tokens, state filter, own jobs only."""

from __future__ import annotations

import grpc
import pytest

from strands_robots.relay.core import Refused
from strands_robots.relay.listing import check_request, decode_token, encode_token, page
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.wire.proto import evaluation_service_pb2 as es
from strands_robots.relay.sqlite_store import SqliteStore
from strands_robots.relay.store import JobRecord, Snapshot


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(str(tmp_path / "relay.db"))
    try:
        yield s
    finally:
        s.close()


def _job(store, client, name, at_ms, episodes=2):
    store.create_job(JobRecord(job_id=f"{client}-{name}", client_id=client, station_id="st", request=b"",
                               submitted_unix_ms=at_ms, episodes_total=episodes, client_job_id=name))


def _state(store, client, name, state, done=0):
    payload = ev.JobStatus(job_id=f"{client}-{name}", state=state, message=f"now {state}",
                           episodes=[ev.EpisodeResult(episode_id=f"ep_{i:04d}") for i in range(done)])
    assert store.put_snapshot(Snapshot(job_id=f"{client}-{name}", updated_unix_ms=77, state=state,
                                       payload=payload.SerializeToString(), episodes_done=done, sequence=1))


def test_pages_are_newest_first_ties_by_id_and_never_shift_when_new_jobs_come(store):
    for name, at in (("a", 10), ("b", 20), ("c", 20), ("d", 30), ("e", 40)):
        _job(store, "team_a", name, at)
    _job(store, "team_b", "z", 50)
    first, token = page(store, "team_a", 2, None, ())
    assert [j.job_id for j in first] == ["e", "d"]
    _job(store, "team_a", "f", 60)  # newer than every page already read
    second, token = page(store, "team_a", 2, decode_token(token), ())
    assert [j.job_id for j in second] == ["c", "b"]  # same submit time: by id, descending
    third, token = page(store, "team_a", 2, decode_token(token), ())
    assert [j.job_id for j in third] == ["a"] and token == ""
    everything, token = page(store, "team_a", 100, None, ())
    assert [j.job_id for j in everything] == ["f", "e", "d", "c", "b", "a"] and token == ""


def test_the_state_filter_and_what_a_summary_holds(store):
    _job(store, "team_a", "queued", 1, episodes=3)
    _job(store, "team_a", "running", 2, episodes=3)
    _job(store, "team_a", "done", 3, episodes=3)
    _state(store, "team_a", "running", "RUNNING", done=1)
    _state(store, "team_a", "done", "SUCCEEDED", done=3)
    jobs, _ = page(store, "team_a", 10, None, ("CREATED", "RUNNING"))
    assert [(j.job_id, j.state, j.episodes_done, j.episodes_total, j.updated_unix_ms, j.message) for j in jobs] == [
        ("running", "RUNNING", 1, 3, 77, "now RUNNING"), ("queued", "CREATED", 0, 3, 0, "")]
    assert [j.job_id for j in page(store, "team_a", 10, None, ("SUCCEEDED",))[0]] == ["done"]
    assert page(store, "team_b", 10, None, ())[0] == []


def test_page_tokens_round_trip_and_foreign_ones_are_refused():
    assert decode_token(encode_token(123, "job-é/1")) == (123, "job-é/1")
    for bad in ("", "x", "bm90IGpzb24", encode_token(1, "a")[:-3] + "!!!", "WyJhIiwgImIiXQ"):
        assert decode_token(bad) is None, bad


@pytest.mark.parametrize("request_, reason", [
    (es.ListJobsRequest(page_size=101), "page_size must be 1..100 (0: 20), got 101"),
    (es.ListJobsRequest(page_token="garbage"), "page_token is not a next_page_token this relay gave"),
    (es.ListJobsRequest(states=["RUNNING", "DONE"]), "unknown state(s) 'DONE'"),
])
def test_a_bad_request_is_refused_naming_what(request_, reason):
    with pytest.raises(Refused) as err:
        check_request(request_)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and reason in err.value.reason


def test_defaults():
    assert check_request(es.ListJobsRequest()) == (20, None, ())
    assert check_request(es.ListJobsRequest(states=["FAILED", "FAILED"], page_size=5)) == (5, None, ("FAILED",))
