"""The ``relay`` policy provider: a remote Policy, served by an Evaluation Client, driven through a real relay."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("grpc", reason="grpcio is not installed")

from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, running_relay, wait_until, yes_no_task  # noqa: E402

from strands_robots.client import EndEpisode, EvaluationClient, Policy  # noqa: E402
from strands_robots.policies import relay as relay_policy  # noqa: E402
from strands_robots.policies.base import EndEpisode as LoopEndEpisode  # noqa: E402
from strands_robots.policies.registry import known_providers, make_policy  # noqa: E402
from strands_robots.station.job_file import task_to_mapping  # noqa: E402


def config(target, job_id, episode_id="ep_0000", **extra):
    cfg = {"relay_target": target, "station_id": "sim_station", "station_token": STATION_TOKENS["sim_station"],
           "job_id": job_id, "episode_id": episode_id, "attach_timeout_s": 5.0, "reply_timeout_s": 5.0}
    cfg.update(extra)
    return cfg


class CountingPolicy(Policy):
    """Moves one key by +0.01 per action, ends after ``end_after`` chunks; records what the station sent."""

    def __init__(self, end_after=3):
        self.end_after = end_after
        self.calls = 0
        self.tasks = []
        self.resumed = []

    def reset(self, task):
        self.tasks.append((self.episode.episode_id, task.task_id, task.instruction, dict(task.parameters),
                           tuple(self.episode.action_keys)))
        self.calls = 0

    def act(self, observation):
        self.calls += 1
        if self.calls > self.end_after:
            raise EndEpisode("reached the cube")
        return [{"right.joint_1": observation["right.joint_1.pos"] + 0.01 * (i + 1)} for i in range(2)]

    def resume(self, observation):
        self.resumed.append(observation["right.joint_1.pos"])


def serve(client, job_id, policy):
    out = {}

    def run():
        try:
            out["final"] = client.serve_policy(job_id, policy)
        except Exception as exc:
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    out["thread"] = t
    return out


def test_relay_is_a_known_provider_and_its_config_is_checked_without_connecting():
    assert "relay" in known_providers()
    with pytest.raises(ValueError, match="relay_target must be a non-empty string"):
        make_policy("relay", {})
    with pytest.raises(ValueError, match="station_token or station_token_file is required"):
        make_policy("relay", {"relay_target": "127.0.0.1:1", "station_id": "s", "job_id": "j", "episode_id": "e"})
    with pytest.raises(ValueError, match=r"unknown options \['end_after_steps'\]"):
        make_policy("relay", dict(config("127.0.0.1:1", "j"), end_after_steps=3))
    # Nothing listens on port 1: building the policy still succeeds (it connects on reset).
    policy = make_policy("relay", config("127.0.0.1:1", "j"))
    assert isinstance(policy, relay_policy.RelayPolicy)


def test_remote_policy_drives_chunks_resume_and_end_episode_through_the_relay(tmp_path):
    from strands_robots.convert import task_from_pb
    from strands_robots.client.evaluation_client import task_from_dict

    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        sent = dict(yes_no_task("pick"), layout="cube left", parameters={"duration_s": "1"})
        job_id = client.submit_job(station_id="sim_station", tasks=[sent], episodes=1)
        remote = CountingPolicy(end_after=2)
        serve(client, job_id, remote)
        station_task = task_to_mapping(task_from_pb(task_from_dict(sent)))
        policy = make_policy("relay", config(relay.target, job_id, task=station_task))
        try:
            policy.reset({"instruction": "ignored: the station's task wins", "action_keys": ("right.joint_1",),
                          "control_frequency": 50.0, "action_horizon": 2})
            assert remote.tasks == [("ep_0000", "pick", "pick up the cube", {"duration_s": "1"}, ("right.joint_1",))]
            chunk = policy.act({"right.joint_1.pos": 0.5})
            assert chunk == [{"right.joint_1": pytest.approx(0.51)}, {"right.joint_1": pytest.approx(0.52)}]
            policy.resume({"right.joint_1.pos": 0.25})
            assert remote.resumed == [0.25]
            policy.act({"right.joint_1.pos": 0.5})
            with pytest.raises(LoopEndEpisode, match="reached the cube"):
                policy.act({"right.joint_1.pos": 0.5})
        finally:
            policy.close()
            client.cancel(job_id)
        assert relay_policy.close_sessions() == 0  # close() left nothing open


def test_policy_client_gone_mid_episode_raises_relay_policy_lost_naming_the_episode(tmp_path):
    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        remote = CountingPolicy(end_after=100)
        served = serve(client, job_id, remote)
        policy = make_policy("relay", config(relay.target, job_id, episode_id="ep_0003"))
        try:
            policy.reset({"instruction": "pick", "action_keys": ("right.joint_1",)})
            policy.act({"right.joint_1.pos": 0.0})
            client.close()  # the team's process goes away
            served["thread"].join(10.0)
            with pytest.raises(relay_policy.RelayPolicyLost, match=r"relay policy lost: .*ep_0003"):
                wait_until(lambda: policy.act({"right.joint_1.pos": 0.0}) and False, timeout_s=10.0,
                           what="the loss to surface")
        finally:
            policy.close()


def test_no_policy_client_within_the_attach_timeout_is_a_lost_policy(tmp_path):
    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        policy = make_policy("relay", config(relay.target, job_id, attach_timeout_s=0.3))
        try:
            with pytest.raises(relay_policy.RelayPolicyLost, match=r"no policy client attached"):
                policy.reset({"instruction": "pick", "action_keys": ("right.joint_1",)})
        finally:
            policy.close()
            client.cancel(job_id)
            client.close()


def test_a_wrong_station_token_is_refused_with_the_relays_reason(tmp_path):
    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        policy = make_policy("relay", config(relay.target, job_id, station_token="not-a-token"))
        try:
            with pytest.raises(relay_policy.RelayPolicyLost, match="UNAUTHENTICATED"):
                policy.reset({"instruction": "pick", "action_keys": ("right.joint_1",)})
        finally:
            policy.close()
            client.cancel(job_id)
            client.close()
