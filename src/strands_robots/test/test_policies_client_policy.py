"""One ``Policy`` and one ``EndEpisode``: a team's client policy runs in process and ends ``policy_completed``."""

from __future__ import annotations

import pytest

from strands_robots import client
from strands_robots.client import EndEpisode as ClientEndEpisode
from strands_robots.client import Policy as ClientPolicy
from strands_robots.policies import base
from strands_robots.policies.mock import MockPolicy
from strands_robots.policies.registry import make_policy


class Reach(ClientPolicy):
    """A team's policy, written against the Evaluation Client only: three chunks, then the client's EndEpisode."""

    def __init__(self) -> None:
        self.chunks = 0
        self.tasks: list = []

    def reset(self, task):
        self.tasks.append(task["instruction"])
        self.chunks = 0

    def act(self, observation):
        self.chunks += 1
        if self.chunks > 3:
            raise ClientEndEpisode("reached the cube")
        return [{"right.joint_1": observation["right.joint_1.pos"]}] * 4


def test_the_client_and_the_rollout_share_one_policy_class_and_one_end_episode():
    assert base.Policy is ClientPolicy and base.EndEpisode is ClientEndEpisode
    assert isinstance(MockPolicy(), ClientPolicy)  # the built-in providers are Policies without subclassing
    assert not isinstance(object(), ClientPolicy)
    assert make_policy(Reach()).__class__ is Reach  # a client Policy is a policy object as it is


class Duck:
    """Reset, act and resume, no base class: still a Policy."""

    def reset(self, task):
        pass

    def act(self, observation):
        raise ClientEndEpisode("done")

    def resume(self, observation):
        pass


def test_any_object_with_reset_act_and_resume_is_a_policy():
    assert isinstance(Duck(), base.Policy)
    assert not isinstance(type("HalfPolicy", (), {"act": lambda self, o: []})(), base.Policy)


def test_importing_the_policy_loads_neither_grpc_nor_the_client(tmp_path):
    import subprocess
    import sys

    code = ("import sys; import strands_robots.policies, strands_robots.client.policy; "
            "print(sorted(m for m in ('grpc', 'strands_robots.client.evaluation_client') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    assert client.EvaluationClient.__name__ == "EvaluationClient"  # the lazy name still resolves


def test_a_client_policy_raising_the_clients_end_episode_in_process_ends_policy_completed():
    pytest.importorskip("mujoco", reason="MuJoCo is not installed")
    from strands_robots.simulation import Simulation

    sim = Simulation()
    sim.add_robot("alice")
    team = Reach()
    out = sim.run_policy(robot_name="alice", policy_provider=team, instruction="reach the cube", n_steps=100,
                         action_horizon=4, fast_mode=True)
    (episode,) = out["episodes"]
    assert out["status"] == "success", out
    assert (episode["outcome"], episode["stopped_reason"]) == ("ok", "policy_completed"), episode
    assert episode["applied_actions"] == 12 and team.tasks == ["reach the cube"]
