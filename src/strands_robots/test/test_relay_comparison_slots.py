"""A comparison job's slots over a real relay: each slot its own policy session, its own client, its own answers.

The team serves each slot with ``EvaluationClient.serve_policy(..., slot=NAME)``; the station opens each slot's
session (``StationLink.open_session(job, slot=NAME)``, and the ``relay`` provider with its ``slot`` option, as the
rollout node does for each episode). What the station sends on a slot's session reaches only that slot's policy,
and the job's end reaches every slot's client. Serving a comparison without a slot, a slot the job does not have,
or a slot of a job of one policy is refused at the attach, naming the job's slots.
"""

from __future__ import annotations


import pytest

pytest.importorskip("grpc", reason="grpcio is not installed")

from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, serve_slot, running_relay, yes_no_task  # noqa: E402
from test_relay_job_settings import _offered  # noqa: E402
from test_relay_policy import remote_relay_policy  # noqa: E402

from strands_robots.client import AlreadyExists, EvaluationClient, InvalidTask  # noqa: E402
from strands_robots.client.policy import Policy  # noqa: E402
from strands_robots.policies import relay as relay_policy  # noqa: E402
from strands_robots.station_link.link import StationLink  # noqa: E402
from strands_robots.station_link.session import PolicySessionError  # noqa: E402
from strands_robots.wire.proto import evaluation_pb2 as pb  # noqa: E402

SLOTS = ("vision", "blind")


class Offset(Policy):
    """x -> [x + offset]: which slot's policy answered is read off the action."""

    def __init__(self, offset: float) -> None:
        self.offset = offset
        self.episodes: list = []

    def reset(self, task):
        self.episodes.append(self.episode.episode_id)

    def act(self, observation):
        return [{"right.joint_1": observation["right.joint_1.pos"] + self.offset}]


def _comparison(relay, client) -> str:
    _offered(relay)  # the station's suites reach the relay first: a comparison names suite tasks
    return client.submit_suite_job("sim_station", "demo", [("reach_cube", 2)], compare={"slots": list(SLOTS)})


def _link(relay) -> StationLink:
    return StationLink(relay.target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.2).start()


def _served_finals(served, timeout_s=15.0):
    for out in served.values():
        out["thread"].join(timeout_s)
        assert not out["thread"].is_alive()
        assert "error" not in out, out.get("error")
    return {slot: out["final"].state for slot, out in served.items()}


def test_each_slot_of_a_comparison_reaches_only_the_policy_served_for_it_and_every_client_sees_the_end(tmp_path):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job_id = _comparison(relay, client)
        policies = {"vision": Offset(1.0), "blind": Offset(100.0)}
        served = {slot: serve_slot(client, job_id, policies[slot], slot) for slot in SLOTS}
        link = _link(relay)
        try:
            answers = {}
            for n, slot in enumerate(("blind", "vision", "blind")):  # a block's order, then the next block's first
                session = link.open_session(job_id, slot=slot, reply_timeout_s=5.0)
                try:
                    assert session.wait_attached(10.0) == "team_a"
                    episode = f"ep_{n:04d}"
                    session.start_episode(episode, pb.Task(task_id="reach_cube", instruction="reach"),
                                          action_keys=["right.joint_1"])
                    answers[episode] = session.act({"right.joint_1.pos": 0.5})
                    session.end_episode(episode, "timeout")
                finally:
                    session.close()
            assert answers == {"ep_0000": [{"right.joint_1": 100.5}], "ep_0001": [{"right.joint_1": 1.5}],
                               "ep_0002": [{"right.joint_1": 100.5}]}
            assert policies["vision"].episodes == ["ep_0001"]
            assert policies["blind"].episodes == ["ep_0000", "ep_0002"]
            link.report(pb.JobStatus(job_id=job_id, station_id="sim_station", state="SUCCEEDED", episodes_total=4,
                                     sequence=5, updated_unix_ms=1))
            assert link.flush(10)
            assert _served_finals(served) == {"vision": "SUCCEEDED", "blind": "SUCCEEDED"}
        finally:
            link.close()
            for out in served.values():
                out["thread"].join(1.0)


def test_the_relay_provider_with_a_slot_reaches_that_slots_policy(tmp_path):
    """The rollout node's provider: the episode's goal names the slot, its session reaches that slot's client."""
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job_id = _comparison(relay, client)
        served = {slot: serve_slot(client, job_id, Offset(offset), slot)
                  for slot, offset in (("vision", 1.0), ("blind", 100.0))}
        task = {"instruction": "reach", "action_keys": ("right.joint_1",)}
        try:
            for slot, expected in (("vision", 1.25), ("blind", 100.25)):
                policy = remote_relay_policy(relay.target, job_id, episode_id=f"ep_{slot}", slot=slot)
                try:
                    policy.reset(task)
                    assert policy.act({"right.joint_1.pos": 0.25}) == [{"right.joint_1": expected}]
                finally:
                    policy.close()
            with pytest.raises(ValueError, match="slot must be a slot name"):
                remote_relay_policy(relay.target, job_id, slot="no spaces")
        finally:
            client.cancel(job_id)
            client.close()
            for out in served.values():
                out["thread"].join(10.0)
    assert relay_policy.close_sessions() == 0


def test_serving_a_comparison_without_a_slot_is_refused_listing_its_slots(tmp_path):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job_id = _comparison(relay, client)
        with pytest.raises(InvalidTask, match=rf"job '{job_id}' is a comparison of slots vision, blind: serve each "
                                              rf"slot with its own `job serve {job_id} --slot NAME`"):
            client.serve_policy(job_id, Offset(0.0))


def test_a_slot_the_job_does_not_have_is_refused_naming_its_slots(tmp_path):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job_id = _comparison(relay, client)
        with pytest.raises(InvalidTask, match=r"attach.slot: job '.*' has no slot 'visoin'; its slots: vision, blind"):
            client.serve_policy(job_id, Offset(0.0), slot="visoin")
        link = _link(relay)
        try:  # the station's side is checked the same way
            session = link.open_session(job_id, slot="other", reply_timeout_s=1.0)
            with pytest.raises(PolicySessionError, match=r"open.slot: job '.*' has no slot 'other'; its slots"):
                session.wait_attached(10.0)
            session.close()
        finally:
            link.close()


def test_a_slot_on_a_job_of_one_policy_is_refused(tmp_path):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        with pytest.raises(InvalidTask, match=r"attach.slot: job '.*' is not a comparison \(it has one policy\)"):
            client.serve_policy(job_id, Offset(0.0), slot="vision")


def test_a_second_client_on_a_served_slot_is_refused_while_the_other_slot_stays_free(tmp_path):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job_id = _comparison(relay, client)
        first = serve_slot(client, job_id, Offset(1.0), "vision")
        link = _link(relay)
        try:
            session = link.open_session(job_id, slot="vision", reply_timeout_s=5.0)
            session.wait_attached(10.0)  # the first client holds slot vision now
            session.close()
            with pytest.raises(AlreadyExists, match=f"already serves job '{job_id}' slot 'vision'"):
                client.serve_policy(job_id, Offset(2.0), slot="vision")
            other = serve_slot(client, job_id, Offset(3.0), "blind")
            session = link.open_session(job_id, slot="blind", reply_timeout_s=5.0)
            assert session.wait_attached(10.0) == "team_a"
            session.close()
        finally:
            client.cancel(job_id)
            link.close()
            client.close()
            first["thread"].join(10.0)
            other["thread"].join(10.0)


# -- relays sharing a store: each slot's two sides meet on the job's home ----------------------------------------
@pytest.fixture(scope="module")
def postgres_url():
    from test_relay_harness import postgres_server

    with postgres_server() as url:
        yield url


def test_a_comparisons_slots_meet_across_two_relays_each_on_its_own_session(postgres_url):
    """The station on relay A, the team's two slots on relay B: B forwards each attach (with its slot) home."""
    from types import SimpleNamespace

    from test_relay_cluster import two_relays
    from test_relay_harness import wait_until

    with two_relays(postgres_url) as (a, b):
        client = EvaluationClient(f"127.0.0.1:{b.port}", token=CLIENT_TOKENS["team_a"])
        link = _link(SimpleNamespace(target=f"127.0.0.1:{a.port}"))
        served: dict = {}
        try:
            job_id = _comparison(SimpleNamespace(target=f"127.0.0.1:{a.port}", store=a.core.store), client)
            sessions = {slot: link.open_session(job_id, slot=slot, reply_timeout_s=5.0) for slot in SLOTS}
            wait_until(lambda: a.core.store.session_home(job_id), what="the station's relay claiming the home")
            policies = {"vision": Offset(1.0), "blind": Offset(100.0)}
            served = {slot: serve_slot(client, job_id, policies[slot], slot) for slot in SLOTS}
            for n, slot in enumerate(SLOTS):
                session = sessions[slot]
                session.wait_attached(10.0)
                session.start_episode(f"ep_{n:04d}", pb.Task(task_id="reach_cube"), action_keys=["right.joint_1"])
                assert session.act({"right.joint_1.pos": 0.5}) == [{"right.joint_1": 0.5 + policies[slot].offset}]
                session.end_episode(f"ep_{n:04d}", "timeout")
            assert policies["vision"].episodes == ["ep_0000"] and policies["blind"].episodes == ["ep_0001"]
            assert a.core.store.session_home(job_id).relay_id == a.relay_id  # the team's streams were forwarded
            link.report(pb.JobStatus(job_id=job_id, station_id="sim_station", state="SUCCEEDED", episodes_total=4,
                                     sequence=5, updated_unix_ms=1))
            assert link.flush(10)
            assert _served_finals(served) == {"vision": "SUCCEEDED", "blind": "SUCCEEDED"}
            for session in sessions.values():
                session.close()
        finally:
            link.close()
            client.close()
            for out in served.values():
                out["thread"].join(5.0)


def test_submit_serve_of_a_comparison_job_file_is_refused_before_anything_is_sent(tmp_path, capsys):
    """``submit --serve`` serves one policy: a comparison's slots are each served by their own ``serve --slot``."""
    from strands_robots.client.cli.job import main

    job = tmp_path / "compare.yaml"
    job.write_text("station_id: sim_station\nsuite: demo\ntasks: [{task: reach_cube, trials: 4}]\n"
                   "compare: {slots: [vision, blind]}\n")
    assert main(["job", "submit", "--relay", "127.0.0.1:1", str(job), "--serve"]) == 2
    err = capsys.readouterr().err
    assert "--serve serves one policy; this job compares slots vision, blind" in err
    assert "serve JOB_ID --slot NAME" in err
