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
from strands_robots.wire.credentials import RelayCredentials, load_relay_credentials  # noqa: E402
from strands_robots.station.job_file import task_to_mapping  # noqa: E402


def config(job_id, episode_id="ep_0000", **extra):
    cfg = {"job_id": job_id, "episode_id": episode_id, "attach_timeout_s": 5.0, "reply_timeout_s": 5.0}
    cfg.update(extra)
    return cfg


def credentials(target, token=STATION_TOKENS["sim_station"]):
    """Return the station's start-time credentials, as ``load_relay_credentials`` returns them."""
    return RelayCredentials(targets=(target,), station_id="sim_station", token=token)


def remote_relay_policy(target, job_id, token=STATION_TOKENS["sim_station"], **cfg):
    """Build a relay provider as in process: its options, and the credentials passed explicitly."""
    return relay_policy.relay_policy_factory(credentials(target, token))(config(job_id, **cfg))


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
    factory = relay_policy.relay_policy_factory(credentials("127.0.0.1:1"))
    with pytest.raises(ValueError, match="job_id must be a non-empty string"):
        factory({})
    with pytest.raises(ValueError, match=r"unknown options \['end_after_steps'\]"):
        factory(dict(config("j"), end_after_steps=3))
    # Nothing listens on port 1: building the policy still succeeds (it connects on reset).
    policy = factory(config("j"))
    assert isinstance(policy, relay_policy.RelayPolicy)
    assert (policy.target, policy.station_id) == ("127.0.0.1:1", "sim_station")


@pytest.mark.parametrize("key, value", [("relay_target", "127.0.0.1:9"), ("station_token", "stolen"),
                                        ("station_token_file", "/etc/hostname"), ("station_id", "other"),
                                        ("root_certificates", "/etc/ssl/certs/ca.pem")])
def test_a_config_naming_a_relay_a_token_or_a_path_is_refused_by_the_key_with_or_without_credentials(key, value):
    bad = dict(config("j"), **{key: value})
    for build in (relay_policy.relay_policy_factory(credentials("127.0.0.1:1")), lambda c: make_policy("relay", c)):
        with pytest.raises(ValueError, match=rf"unknown options \['{key}'\]") as info:
            build(bad)
        assert "start-time configuration" in str(info.value) and str(value) not in str(info.value)


def test_the_registry_relay_provider_has_no_credentials_and_says_where_they_come_from():
    with pytest.raises(ValueError, match="no relay credentials.*relay_credentials_file") as info:
        make_policy("relay", config("j"))
    assert "RelayPolicy(config, credentials=" in str(info.value)


def test_credentials_from_a_private_file_drive_the_policy_and_a_readable_file_is_refused(tmp_path):
    path = tmp_path / "relay.yaml"
    path.write_text(f"target: 127.0.0.1:1\nstation_id: sim_station\ntoken: {STATION_TOKENS['sim_station']}\n")
    path.chmod(0o644)
    with pytest.raises(ValueError, match="has mode 0644"):
        load_relay_credentials(path)
    path.chmod(0o600)
    policy = relay_policy.RelayPolicy(config("j"), credentials=load_relay_credentials(path))
    assert (policy.target, policy.station_id) == ("127.0.0.1:1", "sim_station")


def test_remote_policy_drives_chunks_resume_and_end_episode_through_the_relay(tmp_path):
    from strands_robots.wire.pb_model import task_from_pb
    from strands_robots.client.evaluation_client import task_from_dict

    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        sent = dict(yes_no_task("pick"), layout="cube left", parameters={"duration_s": "1"})
        job_id = client.submit_job(station_id="sim_station", tasks=[sent], episodes=1)
        remote = CountingPolicy(end_after=2)
        serve(client, job_id, remote)
        station_task = task_to_mapping(task_from_pb(task_from_dict(sent)))
        policy = remote_relay_policy(relay.target, job_id, task=station_task)
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
        policy = remote_relay_policy(relay.target, job_id, episode_id="ep_0003")
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
        policy = remote_relay_policy(relay.target, job_id, attach_timeout_s=0.3)
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
        policy = remote_relay_policy(relay.target, job_id, token="not-a-token")
        try:
            with pytest.raises(relay_policy.RelayPolicyLost, match="UNAUTHENTICATED"):
                policy.reset({"instruction": "pick", "action_keys": ("right.joint_1",)})
        finally:
            policy.close()
            client.cancel(job_id)
            client.close()
