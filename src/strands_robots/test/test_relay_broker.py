"""The session broker on its own (no gRPC): what is forwarded to whom, and what is dropped."""

from __future__ import annotations

from strands_robots.client import pb
from strands_robots.relay.sessions import END, Abort, Broker


def _broker():
    return Broker(
        make_attached=lambda c: pb.PolicyReply(attached=pb.PolicyAttached(client_id=c)),
        make_station_left=lambda r: pb.PolicyRequest(station_left=pb.StationLeft(reason=r)),
        make_job_ended=lambda st: pb.PolicyRequest(job_ended=pb.JobEnded(status=st)),
    )


def _drain(side):
    out = []
    while not side.outbox.empty():
        out.append(side.outbox.get_nowait())
    return out


def _act(rid, x):
    return pb.PolicyRequest(request_id=rid, act=pb.Observation(values={"x": pb.Value(number=x)}))


def _chunk(rid, v):
    return pb.PolicyReply(request_id=rid, chunk=pb.ActionChunk(actions=[pb.Action(values={"k": v})]))


def test_a_late_answer_to_a_replaced_station_side_never_reaches_the_new_one():
    broker = _broker()
    old = broker.open_station("job", "sim_station")
    client = broker.open_client("job", "team_a")
    broker.from_station(old, _act(1, 1.0))
    assert [m.WhichOneof("kind") for m in _drain(client)] == ["act"]
    new = broker.open_station("job", "sim_station")
    assert isinstance(_drain(old)[-1], Abort)
    assert [m.WhichOneof("kind") for m in _drain(new)] == ["attached"]
    broker.from_client(client, _chunk(1, 1.0))  # answers the old side's request 1
    assert _drain(new) == []
    broker.from_station(new, _act(1, 2.0))
    broker.from_client(client, _chunk(1, 2.0))
    (reply,) = _drain(new)
    assert reply.chunk.actions[0].values["k"] == 2.0
    broker.from_client(client, _chunk(1, 3.0))  # a duplicate answer is dropped too
    assert _drain(new) == []


def test_requests_before_the_client_attaches_are_delivered_in_order_on_attach():
    broker = _broker()
    station = broker.open_station("job", "sim_station")
    broker.from_station(station, pb.PolicyRequest(request_id=1, episode_start=pb.EpisodeStart(episode_id="ep_0000")))
    broker.from_station(station, _act(2, 1.0))
    client = broker.open_client("job", "team_a")
    assert [m.request_id for m in _drain(client)] == [1, 2]
    assert [m.WhichOneof("kind") for m in _drain(station)] == ["attached"]


def test_client_leaving_mid_episode_aborts_the_station_and_after_the_job_ended_closes_it_quietly():
    broker = _broker()
    station = broker.open_station("job", "sim_station")
    client = broker.open_client("job", "team_a")
    broker.from_station(station, pb.PolicyRequest(request_id=1, episode_start=pb.EpisodeStart(episode_id="ep_0002")))
    broker.close_client(client)
    abort = _drain(station)[-1]
    assert isinstance(abort, Abort) and "disconnected mid-episode ep_0002 of job 'job'" in abort.reason

    station = broker.open_station("job", "sim_station")
    client = broker.open_client("job", "team_a")
    broker.job_ended("job", pb.JobStatus(job_id="job", state="SUCCEEDED"))
    assert [getattr(m, "WhichOneof", lambda _: m)("kind") for m in _drain(client)] == ["job_ended", END]
    broker.close_client(client)
    assert _drain(station)[-1] is END


def _error(rid):
    return pb.PolicyReply(request_id=rid, error=pb.PolicyError(type="ValueError", message="policy exploded"))


def test_a_client_whose_policy_failed_leaves_at_its_error_so_the_next_episode_waits_for_it_to_attach_again():
    broker = _broker()
    first = broker.open_station("job", "sim_station")
    failed = broker.open_client("job", "team_a")
    broker.from_station(first, pb.PolicyRequest(request_id=1, episode_start=pb.EpisodeStart(episode_id="ep_0000")))
    broker.from_station(first, _act(2, 1.0))
    broker.from_client(failed, pb.PolicyReply(request_id=1, ack=pb.Ack()))
    broker.from_client(failed, _error(2))
    assert [m.WhichOneof("kind") for m in _drain(first)] == ["attached", "ack", "error"]
    assert [getattr(m, "WhichOneof", lambda _: m)("kind") for m in _drain(failed)] == ["episode_start", "act", END]
    broker.from_station(first, pb.PolicyRequest(episode_end=pb.EpisodeEnd(episode_id="ep_0000")))
    broker.close_station(first, "station closed its session")

    # The station opens the next episode's session before the failed client's stream end reached the relay.
    second = broker.open_station("job", "sim_station")
    assert _drain(second) == []  # no client serves the job until it attaches again
    broker.close_client(failed)
    assert _drain(second) == []  # its end is no disconnect: it had left at its error
    back = broker.open_client("job", "team_a")  # not refused as a second client of the job
    assert [m.WhichOneof("kind") for m in _drain(second)] == ["attached"]
    broker.from_station(second, pb.PolicyRequest(request_id=1, episode_start=pb.EpisodeStart(episode_id="ep_0001")))
    assert [m.episode_start.episode_id for m in _drain(back)] == ["ep_0001"]
    broker.from_client(back, pb.PolicyReply(request_id=1, ack=pb.Ack()))
    assert [m.WhichOneof("kind") for m in _drain(second)] == ["ack"]


def test_a_client_that_failed_the_preflight_stays_attached_for_the_jobs_end():
    broker = _broker()
    station = broker.open_station("job", "sim_station")
    client = broker.open_client("job", "team_a")
    broker.from_station(station, pb.PolicyRequest(request_id=1, preflight=pb.Preflight()))
    broker.from_client(client, _error(1))
    assert [m.WhichOneof("kind") for m in _drain(station)] == ["attached", "error"]
    assert [m.WhichOneof("kind") for m in _drain(client)] == ["preflight"]
    broker.job_ended("job", pb.JobStatus(job_id="job", state="FAILED"))
    assert [getattr(m, "WhichOneof", lambda _: m)("kind") for m in _drain(client)] == ["job_ended", END]


def test_a_late_error_to_a_replaced_station_sides_request_still_means_the_client_left():
    broker = _broker()
    old = broker.open_station("job", "sim_station")
    client = broker.open_client("job", "team_a")
    broker.from_station(old, _act(1, 1.0))
    new = broker.open_station("job", "sim_station")
    _drain(new)
    broker.from_client(client, _error(1))  # the answer to the old side's act: never forwarded to the new side
    assert _drain(new) == []
    assert _drain(client)[-1] is END
    broker.close_client(client)
    assert _drain(new) == []
