"""A comparison between two teams at a real relay: the invitation, each slot's token, who sees and takes what.

Every rule of ``relay.job_teams`` through the relay's own RPCs (an in-process ``RelayServer`` on loopback, its
SQLite store, a real ``StationLink`` taking jobs as a station does) with three teams: ``team_a`` submits a
comparison of its slot ``vision`` against ``theirs``, served by ``team_b``; ``team_c`` takes no part. The relay's
clock is the test's, so an invitation's bound passes when the test moves it, not after a sleep.
"""

from __future__ import annotations

import contextlib
import datetime
import time

import pytest

pytest.importorskip("grpc", reason="grpcio is not installed")

from comparison_message import comparison_message, seeded_outcomes  # noqa: E402
from test_relay_harness import STATION_TOKENS  # noqa: E402
from test_relay_job_settings import _connect, _offered  # noqa: E402

from strands_robots.client import (EvaluationClient, InvalidTask, NotAllowed, NotFound,  # noqa: E402
                                   NotNow)
from strands_robots.client.policy import Policy  # noqa: E402
from strands_robots.relay import recording_store as rs  # noqa: E402
from strands_robots.relay.auth import TokenBook  # noqa: E402
from strands_robots.relay.config import RelaySettings  # noqa: E402
from strands_robots.relay.server import RelayServer  # noqa: E402
from strands_robots.relay.sqlite_store import SqliteStore  # noqa: E402
from strands_robots.relay.store import Snapshot  # noqa: E402
from strands_robots.wire.proto import evaluation_pb2 as ev  # noqa: E402

TOKENS = {"team_a": "tok-team-a-0123456789", "team_b": "tok-team-b-0123456789", "team_c": "tok-team-c-0123456789"}
COMPARE = {"slots": ["vision", {"name": "theirs", "team": "team_b"}]}
BOUND_S = 3600.0


class Clock:
    """The relay's clock, moved by the test."""

    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def __call__(self) -> int:
        return self.ms


@contextlib.contextmanager
def relay_of_three_teams(tmp_path):
    from types import SimpleNamespace

    store = SqliteStore(str(tmp_path / "relay.db"))
    clock = Clock()
    server = RelayServer(store, TokenBook(TOKENS, STATION_TOKENS), "127.0.0.1:0", poll_s=0.05, clock_ms=clock,
                         settings=RelaySettings(invitation_timeout_s=BOUND_S))
    port = server.start()
    relay = SimpleNamespace(target=f"127.0.0.1:{port}", store=store, clock=clock, server=server)
    clients = {team: EvaluationClient(relay.target, token=token) for team, token in TOKENS.items()}
    try:
        _offered(relay)
        yield relay, clients
    finally:
        for client in clients.values():
            client.close()
        server.stop(0)
        store.close()


@contextlib.contextmanager
def station(relay):
    """Run a station's link taking jobs; yield the ids it was sent, in order."""
    taken: list = []
    link = _connect(relay, lambda job: taken.append(job.job_id))
    try:
        yield taken
    finally:
        link.close()


def _wait(predicate, what, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _submit(clients, compare=COMPARE, job_id=None):
    return clients["team_a"].submit_suite_job("sim_station", "demo", [("reach_cube", 2)], compare=compare,
                                              job_id=job_id)


def _taken_after_a_plain_job(clients, taken):
    """Submit an ordinary job after the others and wait until the station has it: what it was sent by then."""
    plain = clients["team_a"].submit_suite_job("sim_station", "demo", [("reach_cube", 1)])
    _wait(lambda: plain in taken, "the station to take a later, ordinary job")
    return taken[:taken.index(plain)]


def _invitation(client, job_id):
    return next(j for j in client.list_jobs().jobs if j.job_id == job_id)


def test_a_job_naming_another_team_is_held_until_it_accepts_and_the_owner_sees_whom_it_waits_for(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients), station(relay) as taken:
        job = _submit(clients)
        assert job not in _taken_after_a_plain_job(clients, taken)  # held: the station was never sent it
        status = clients["team_a"].get_status(job)
        until = datetime.datetime.fromtimestamp(relay.clock.ms / 1000 + BOUND_S, datetime.timezone.utc)
        assert status.state == "CREATED" and status.message.startswith(
            f"waiting for team(s) team_b to accept the invitation (until {until:%Y-%m-%dT%H:%M:%SZ}); the station "
            f"is not sent the job"), status.message
        invited = _invitation(clients["team_b"], job)
        assert (invited.owner, invited.invitation, list(invited.slots)) == ("team_a", "pending", ["theirs"])
        assert not _invitation(clients["team_a"], job).owner  # the owner's own job
        assert clients["team_b"].get_status(job).state == "CREATED"  # the invited team sees it too
        with pytest.raises(NotNow, match="has not accepted the invitation"):
            clients["team_b"].serve_policy(job, _Hold(), slot="theirs")
        assert "every team accepted" in clients["team_b"].accept(job)
        _wait(lambda: job in taken, "the station to be sent the accepted job")
        assert _invitation(clients["team_b"], job).invitation == "accepted"
        with pytest.raises(NotNow, match="already accepted"):
            clients["team_b"].decline(job)


def test_a_decline_ends_the_job_naming_the_team_and_its_reason_and_it_never_runs(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients), station(relay) as taken:
        job = _submit(clients)
        assert clients["team_b"].decline(job, "our policy is not ready").startswith("declined")
        final = clients["team_a"].get_status(job)
        assert final.state == "CANCELLED"
        assert final.message == ("team 'team_b' declined the invitation to serve slot(s) theirs: our policy is not "
                                 "ready; the job never ran, no arm moved")
        assert job not in _taken_after_a_plain_job(clients, taken)
        with pytest.raises(NotNow, match="has ended"):
            clients["team_b"].accept(job)


def test_an_invitation_unanswered_past_its_bound_ends_the_job_naming_whom_it_waited_for(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients), station(relay) as taken:
        job = _submit(clients)
        relay.clock.ms += int(BOUND_S * 1000) - 1
        assert clients["team_a"].get_status(job).state == "CREATED"  # not yet
        relay.clock.ms += 1
        final = clients["team_a"].get_status(job)
        assert final.state == "CANCELLED" and final.message.startswith(
            "the invitation to team(s) team_b expired unaccepted after 3600 s (the relay's invitation_timeout_s)")
        with pytest.raises(NotNow, match="has ended"):
            clients["team_b"].accept(job)
        assert job not in _taken_after_a_plain_job(clients, taken)


def test_an_expired_invitation_ends_the_job_without_anyone_asking(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients), station(relay):
        job = _submit(clients)
        relay.clock.ms += int(BOUND_S * 1000)
        _wait(lambda: relay.store.get_snapshot(job) is not None, "the station's job stream to end the job")
        assert relay.store.get_snapshot(job).state == "CANCELLED"


class _Hold(Policy):
    def act(self, observation):
        return [{"right.joint_1": observation["right.joint_1.pos"]}]


def _serve_error(client, job, slot):
    with pytest.raises(Exception) as err:
        client.serve_policy(job, _Hold(), slot=slot)
    return err.value


def test_each_slot_is_served_only_with_its_own_teams_token(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients):
        job = _submit(clients)
        clients["team_b"].accept(job)
        err = _serve_error(clients["team_b"], job, "vision")
        assert isinstance(err, NotAllowed) and str(err) == (
            f"attach.slot: slot 'vision' of job {job!r} is served by team 'team_a''s token, not 'team_b''s")
        err = _serve_error(clients["team_a"], job, "theirs")
        assert isinstance(err, NotAllowed) and "slot 'theirs'" in str(err) and "team 'team_b''s token" in str(err)
        assert isinstance(_serve_error(clients["team_c"], job, "theirs"), NotFound)


def test_a_team_not_invited_can_neither_see_accept_serve_nor_cancel_the_job(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients):
        job = _submit(clients)
        outsider = clients["team_c"]
        for call in (lambda: outsider.get_status(job), lambda: outsider.accept(job),
                     lambda: outsider.decline(job), lambda: outsider.cancel(job),
                     lambda: outsider.list_recordings(job), lambda: outsider.leaderboard("demo").entries[0]):
            with pytest.raises((NotFound, IndexError)):
                call()
        assert job not in [j.job_id for j in outsider.list_jobs().jobs]
        assert clients["team_a"].get_status(job).state == "CREATED"  # nothing the outsider did reached it


def test_an_unknown_team_is_refused_at_submit_naming_the_slots_key(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients):
        with pytest.raises(InvalidTask, match=r"^compare\.slots\[1\]\.team: 'lab_x' is not a team of this relay"):
            _submit(clients, {"slots": ["vision", {"name": "theirs", "team": "lab_x"}]})


def test_the_owner_cancels_a_held_job_at_once_and_an_invited_team_withdraws_its_slot(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients), station(relay) as taken:
        held = _submit(clients)
        assert clients["team_a"].cancel(held, "changed our mind")
        final = clients["team_b"].get_status(held)
        assert final.state == "CANCELLED" and final.message == "changed our mind; the job never ran, no arm moved"
        running = _submit(clients)
        clients["team_b"].accept(running)
        _wait(lambda: running in taken, "the station to be sent the accepted job")
        assert clients["team_b"].cancel(running, "found a bug")
        job = relay.store.get_job(running)
        assert job.cancel_requested and job.cancel_reason == (
            "team 'team_b' withdrew slot(s) theirs from the comparison: found a bug")
        assert held not in taken


def _ended_with_recordings(relay, job_id, slot_of):
    """End ``job_id`` as its station would: a terminal snapshot listing each episode's slot, and its recordings."""
    status = ev.JobStatus(job_id=job_id, station_id="sim_station", state="SUCCEEDED", updated_unix_ms=1, sequence=5)
    for episode, slot in slot_of.items():
        status.episodes.add(episode_id=episode, slot=slot)
        data = f"mcap of {episode}".encode()
        import hashlib

        meta = (len(data), hashlib.sha256(data).hexdigest(), f"{episode}.mcap")
        rs.begin(relay.store, job_id, episode, *meta)
        rs.put_chunk(relay.store, job_id, episode, 0, data)
        rs.finish(relay.store, job_id, episode, 1)
    relay.store.put_snapshot(Snapshot(job_id=job_id, updated_unix_ms=1, state="SUCCEEDED",
                                      payload=status.SerializeToString(), episodes_done=len(slot_of), sequence=5))


def test_each_team_lists_and_downloads_only_its_own_slots_episodes(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients):
        job = _submit(clients)
        clients["team_b"].accept(job)
        _ended_with_recordings(relay, job, {"ep_0000": "vision", "ep_0001": "theirs", "ep_0002": "theirs",
                                            "ep_0003": "vision"})
        mine = {team: sorted(r.episode_id for r in clients[team].list_recordings(job)) for team in ("team_a", "team_b")}
        assert mine == {"team_a": ["ep_0000", "ep_0003"], "team_b": ["ep_0001", "ep_0002"]}
        clients["team_b"].download_recording(job, "ep_0001", tmp_path / "ok.mcap")
        assert (tmp_path / "ok.mcap").read_bytes() == b"mcap of ep_0001"
        with pytest.raises(NotFound, match="has no recording of episode 'ep_0000'"):
            clients["team_b"].download_recording(job, "ep_0000", tmp_path / "theirs.mcap")
        assert not (tmp_path / "theirs.mcap").exists()


def test_each_team_ranks_the_comparisons_it_took_part_in_and_names_the_other_teams_policy(tmp_path):
    from strands_robots.relay import comparison_blocks

    with relay_of_three_teams(tmp_path) as (relay, clients):
        job = _submit(clients)
        clients["team_b"].accept(job)
        comparison = comparison_message(seeded_outcomes(0.9, 0.3, 30, seed=4), slots=("vision", "theirs"))
        status = ev.JobStatus(job_id=job, station_id="sim_station", state="SUCCEEDED", updated_unix_ms=2, sequence=9)
        status.comparison.CopyFrom(comparison)
        relay.store.put_snapshot(Snapshot(job_id=job, updated_unix_ms=2, state="SUCCEEDED",
                                          payload=status.SerializeToString(), sequence=9))
        assert comparison_blocks.keep_ended(relay.store, relay.store.get_job(job)) == (30, 0)
        boards = {team: clients[team].leaderboard("demo") for team in TOKENS}
        seen = {team: {e.policy: (e.team, e.others, e.wins, e.losses) for e in b.entries}
                for team, b in boards.items()}
        a, b = seen["team_a"], seen["team_b"]
        assert set(a) == {"vision", "team_b/theirs"} and set(b) == {"team_a/vision", "theirs"}
        assert a["vision"][:2] == ("team_a", False) and a["team_b/theirs"][:2] == ("team_b", True)
        assert b["theirs"][:2] == ("team_b", False) and b["team_a/vision"][:2] == ("team_a", True)
        assert a["vision"][2:] == b["team_a/vision"][2:] and a["vision"][2] > a["vision"][3]  # one fit, both views
        assert seen["team_c"] == {} and boards["team_c"].blocks == 0  # a team that took no part sees none


def test_each_team_reads_only_its_own_slots_declared_spec_in_the_provenance(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients):
        job = _submit(clients)
        clients["team_b"].accept(job)
        status = ev.JobStatus(job_id=job, station_id="sim_station", state="SUCCEEDED", updated_unix_ms=2, sequence=9)
        status.provenance.software_version = "1.2.3"
        status.provenance.policy_spec_json = '{"source": "team_a server ws://10.0.0.1:8000"}'
        status.provenance.slot_specs.add(slot="vision", policy_spec_json='{"source": "team_a server ws://10.0.0.1:8000"}')
        status.provenance.slot_specs.add(slot="theirs", policy_spec_json='{"source": "team_b server ws://10.9.9.9:8000"}')
        relay.store.put_snapshot(Snapshot(job_id=job, updated_unix_ms=2, state="SUCCEEDED",
                                          payload=status.SerializeToString(), sequence=9))
        seen = {team: clients[team].get_status(job).provenance for team in ("team_a", "team_b")}
        assert [(s.slot, s.policy_spec_json) for s in seen["team_a"].slot_specs] == [
            ("vision", '{"source": "team_a server ws://10.0.0.1:8000"}')]
        assert seen["team_a"].policy_spec_json == '{"source": "team_a server ws://10.0.0.1:8000"}'  # its first slot
        assert [(s.slot, s.policy_spec_json) for s in seen["team_b"].slot_specs] == [
            ("theirs", '{"source": "team_b server ws://10.9.9.9:8000"}')]
        assert seen["team_b"].policy_spec_json == "" and "10.0.0.1" not in str(seen["team_b"])
        assert seen["team_b"].software_version == "1.2.3"  # the station's own facts are the job's, for both
