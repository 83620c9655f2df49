"""The ``relay`` provider's sessions are their episodes' own: a late close never ends the next episode's session.

The station asks the rollout node to close the relay sessions after each episode (``close_policy_sessions``,
answered within 2 s or given up). A request that reaches the rollout node late, after the next episode's
``reset`` opened that episode's session, must not close that one: the running episode would lose its policy and
be kept as an ``infrastructure_fault`` for nothing. Driven here through a real relay with a real policy client,
in the order the late request makes.
"""

from __future__ import annotations

import pytest

pytest.importorskip("grpc", reason="grpcio is not installed")

from test_relay_harness import CLIENT_TOKENS, running_relay, yes_no_task  # noqa: E402
from test_relay_policy import CountingPolicy, remote_relay_policy, serve  # noqa: E402

from strands_robots.client import EvaluationClient  # noqa: E402
from strands_robots.policies import relay as relay_policy  # noqa: E402

TASK = {"instruction": "pick", "action_keys": ("right.joint_1",)}
OBSERVATION = {"right.joint_1.pos": 0.0}


@pytest.fixture
def served_job(tmp_path):
    """Run a relay, a job of two episodes and its policy client serving it; yield (relay, job_id, remote)."""
    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
        remote = CountingPolicy(end_after=1000)
        served = serve(client, job_id, remote)
        try:
            yield relay, job_id, remote
        finally:
            client.cancel(job_id)
            client.close()  # no station ends the job here: the client's serving ends with its channel
            served["thread"].join(10.0)
            assert not served["thread"].is_alive()


def test_a_close_that_arrives_after_the_next_episode_started_leaves_that_episodes_session_open(served_job):
    relay, job_id, remote = served_job
    first = remote_relay_policy(relay.target, job_id, episode_id="ep_0000")
    second = remote_relay_policy(relay.target, job_id, episode_id="ep_0001")
    try:
        first.reset(TASK)
        assert first.act(OBSERVATION)
        # ep_0000 ended; the station's close for it is still on its way when ep_0001's reset opens its session
        second.reset(TASK)
        assert second.act(OBSERVATION)
        closed = relay_policy.close_sessions()  # the late close
        assert second.act(OBSERVATION)  # ep_0001 still has its policy
        assert closed == 0  # nothing of an ended episode was open: ep_0001's reset had closed ep_0000's session
        assert [t[0] for t in remote.tasks] == ["ep_0000", "ep_0001"]
    finally:
        second.close()
        first.close()
    assert relay_policy.close_sessions() == 0


def test_the_close_after_an_episode_ended_closes_its_session(served_job):
    relay, job_id, _remote = served_job
    policy = remote_relay_policy(relay.target, job_id, episode_id="ep_0000")
    try:
        policy.reset(TASK)
        assert policy.act(OBSERVATION)
        assert relay_policy.episodes_over() == 1  # the rollout node: the episode ended (before its goal's answer)
        assert relay_policy.close_sessions() == 1  # the station's close, after the answer
        with pytest.raises(relay_policy.RelayPolicyLost, match="relay policy lost"):
            policy.act(OBSERVATION)
    finally:
        policy.close()
    assert relay_policy.close_sessions() == 0


def test_an_earlier_episodes_policy_closing_leaves_the_next_episodes_session_open(served_job):
    relay, job_id, _remote = served_job
    first = remote_relay_policy(relay.target, job_id, episode_id="ep_0000")
    second = remote_relay_policy(relay.target, job_id, episode_id="ep_0001")
    try:
        first.reset(TASK)
        second.reset(TASK)  # closes ep_0000's session: one per job in a process
        first.close()  # a stale close of ep_0000's policy
        assert second.act(OBSERVATION)
    finally:
        second.close()
    assert relay_policy.episodes_over() == 0 and relay_policy.close_sessions() == 0
