"""A comparison between two teams across a cluster: the invited team reaches another relay than the station's.

Two in-process relays on one real PostgreSQL (the server the store tests start): the station and the submitting
team on relay A, the invited team only on relay B. From B the invited team lists the invitation, reads the held
job's status, accepts it and serves its slot, whose policy session B forwards to the job's home; each team's
slot meets the station there and the job ends SUCCEEDED for both.
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("psycopg", reason="psycopg is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

from test_relay_cluster import Counter, two_relays  # noqa: E402
from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, serve_slot, postgres_server, wait_until  # noqa: E402
from test_relay_job_settings import _offer  # noqa: E402

from strands_robots.client import EvaluationClient, NotNow, pb  # noqa: E402
from strands_robots.station_link.link import StationLink  # noqa: E402

COMPARE = {"slots": ["vision", {"name": "theirs", "team": "team_b"}]}


@pytest.fixture(scope="module")
def postgres_url():
    with postgres_server() as url:
        yield url


class Station:
    """The station's link on one relay, taking jobs as a station does (the ids it was sent, in order)."""

    def __init__(self, port: int) -> None:
        self.taken: list = []
        self.sent = threading.Event()
        self.link = StationLink(f"127.0.0.1:{port}", "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.1,
                                on_job=self._on_job, offer=_offer()).start()

    def _on_job(self, job) -> None:
        self.taken.append(job.job_id)
        self.sent.set()


def _episode(session, episode_id, x):
    session.wait_attached(15)
    session.start_episode(episode_id, pb.Task(task_id="reach_cube", instruction="reach"),
                          action_keys=["right.joint_4"])
    chunk = session.act({"x": x})
    session.end_episode(episode_id, "timeout")
    return chunk


@pytest.mark.parametrize("first", ["station", "invited team"])
def test_an_invited_team_on_another_relay_lists_accepts_and_serves_its_slot_through_the_home(postgres_url, first):
    with two_relays(postgres_url) as (a, b):
        station = Station(a.port)
        owner = EvaluationClient(f"127.0.0.1:{a.port}", token=CLIENT_TOKENS["team_a"])
        invited = EvaluationClient(f"127.0.0.1:{b.port}", token=CLIENT_TOKENS["team_b"])
        sessions: list = []
        try:
            wait_until(lambda: a.core.store.station_offers("sim_station"), what="the station's offer at the relay")
            job = owner.submit_suite_job("sim_station", "demo", [("reach_cube", 1)], compare=COMPARE)

            # from B: the invitation is listed, the job's status says whom it waits for; serving before the accept
            # is refused there as on the station's relay
            listed = [j for j in invited.list_jobs().jobs if j.owner == "team_a"]
            assert [(j.invitation, list(j.slots)) for j in listed] == [("pending", ["theirs"])], listed
            relay_id = listed[0].job_id
            held = invited.get_status(relay_id)
            assert held.state == "CREATED" and held.message.startswith("waiting for team(s) team_b to accept"), held
            with pytest.raises(NotNow, match="has not accepted the invitation"):
                invited.serve_policy(relay_id, Counter(), slot="theirs")
            assert not station.sent.wait(0.3)  # held: the station on A was not sent it

            assert invited.accept(relay_id) == (f"accepted: every team accepted job {relay_id!r}; the station may "
                                                f"run it")
            assert station.sent.wait(15), "the station on A was never sent the job B's team accepted"
            assert station.taken == [relay_id]
            assert [j.invitation for j in invited.list_jobs().jobs if j.job_id == relay_id] == ["accepted"]

            ours, theirs = Counter(), Counter()
            if first == "invited team":  # B's side first: B claims the home, A forwards the station to it
                served_theirs = serve_slot(invited, relay_id, theirs, "theirs")
                wait_until(lambda: a.core.store.session_home(relay_id), what="B claiming the session's home")
            vision = station.link.open_session(relay_id, slot="vision")
            other = station.link.open_session(relay_id, slot="theirs")
            sessions += [vision, other]
            if first == "station":  # the station's side first: A is the home, B forwards the invited team to it
                wait_until(lambda: a.core.store.session_home(relay_id), what="A claiming the session's home")
                served_theirs = serve_slot(invited, relay_id, theirs, "theirs")
            served_ours = serve_slot(owner, job, ours, "vision")
            assert _episode(vision, "ep_0000", 1.0) == [{"right.joint_4": 2.0}]
            assert _episode(other, "ep_0001", 5.0) == [{"right.joint_4": 6.0}]
            home = a.core.store.session_home(relay_id).relay_id
            assert home == (a.relay_id if first == "station" else b.relay_id)

            final = pb.JobStatus(
                job_id=relay_id, station_id="sim_station", state="SUCCEEDED", episodes_total=2, sequence=9,
                updated_unix_ms=1, episodes=[pb.EpisodeResult(episode_id="ep_0000", end_condition="timeout",
                                                              slot="vision"),
                                             pb.EpisodeResult(episode_id="ep_0001", end_condition="timeout",
                                                              slot="theirs")])
            final.provenance.policy_spec_json = '{"source": "ours"}'
            final.provenance.slot_specs.add(slot="vision", policy_spec_json='{"source": "ours"}')
            final.provenance.slot_specs.add(slot="theirs", policy_spec_json='{"source": "theirs"}')
            station.link.report(final)
            assert station.link.flush(10)
            for served in (served_ours, served_theirs):
                served["thread"].join(15)
                assert "error" not in served, served.get("error")
                assert served["final"].state == "SUCCEEDED"
            assert (ours.acts, theirs.acts) == ([1.0], [5.0])  # each team's policy served its own slot only
            assert served_theirs["final"].job_id == relay_id and served_ours["final"].job_id == job
            # each team's final status, wherever its stream came in, names only its own slot's declared spec
            assert [s.slot for s in served_theirs["final"].provenance.slot_specs] == ["theirs"]
            assert [s.slot for s in served_ours["final"].provenance.slot_specs] == ["vision"]
            assert [s.slot for s in invited.get_status(relay_id).provenance.slot_specs] == ["theirs"]
            assert invited.get_status(relay_id).state == owner.get_status(job).state == "SUCCEEDED"
        finally:
            for session in sessions:
                session.close()
            station.link.close()
            owner.close()
            invited.close()


