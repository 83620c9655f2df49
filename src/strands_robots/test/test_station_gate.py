"""The compatibility gate and the provenance in the episode procedure: JobRunner over a real in-process station.

No ROS, no mocks: InProcessRobot (a Simulation with a real LeaseManager), the ScriptedOperator, and a policy
that declares its spec, read directly from the in-process policy.
"""

import json

import pytest

from strands_robots.client.policy import Policy
from strands_robots.client.policy_spec import ActionRange, CameraNeed, PolicySpec
from strands_robots.client.openpi import OpenPIPolicy
from strands_robots.policies.registry import register_provider
from strands_robots.station.compatibility import check
from strands_robots.station.episodes import JobRunner
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.inprocess import InProcessRobot
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.model import JobState
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.persistence import JobStore
from strands_robots.station.provenance import file_sha256, job_sha256, load_station_facts
from strands_robots.station.record import JobRecord
from strands_robots.station.status import snapshot_of

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]


class DeclaringPolicy(Policy):
    """Holds the right arm where it is; declares the spec its config gives (to_dict form)."""

    acts = 0

    def __init__(self, config):
        self._spec = PolicySpec.from_dict(config["spec"]) if config.get("spec") else None

    def spec(self):
        return self._spec

    def act(self, observation):
        DeclaringPolicy.acts += 1
        return [{"right.joint_1": float(observation["right.joint_1.pos"])}]


register_provider("gate-test-declaring", DeclaringPolicy, replace=True)


class CountingRobot(InProcessRobot):
    """The in-process station, counting the leases asked for and the rollouts run."""

    def __init__(self):
        super().__init__()
        self.leases = 0
        self.rollouts = 0

    def acquire_lease(self, holder, priority, duration_s):
        self.leases += 1
        return super().acquire_lease(holder, priority, duration_s)

    def run_rollout(self, plan, progress):
        self.rollouts += 1
        return super().run_rollout(plan, progress)


@pytest.fixture(scope="module")
def facts():
    return load_station_facts(cameras=["scene", "wrist"])


def job(spec=None, episodes=1, rate="50"):
    return job_spec_from_mapping({
        "job_id": "job-gate", "client_id": "team", "station_id": "sim_station", "episodes_total": episodes,
        "duration_s": 0.2, "policy": {"provider": "gate-test-declaring",
                                      "config": {"spec": spec.to_dict() if spec else None}},
        "tasks": [{"task_id": "hold", "instruction": "hold still", "parameters": {"control_frequency": rate,
                                                                                   "success_when":
                                                                                   "end_condition == timeout"},
                   "scoring": SHEET}]})


def run(spec, facts, store=None):
    robot = CountingRobot()
    operator = ScriptedOperator()
    snapshots = []
    runner = JobRunner(JobRecord(spec), robot, operator, publish=snapshots.append, store=store,
                       settings=ProcedureSettings(station_facts=facts))
    try:
        final = runner.run()
    finally:
        operator.close()
    return final, robot, snapshots


def test_a_mismatch_fails_the_job_at_waiting_policy_naming_every_one_and_no_lease_is_taken(facts):
    declared = PolicySpec(action_keys=("right.joint_9",), cameras=(CameraNeed("scene", 480, 640),),
                          control_frequency_hz=15.0, action_ranges=(ActionRange("left.gripper", 0.0, 1.0),),
                          observation_keys=("right.joint_1.torque",), source="a team's policy")
    DeclaringPolicy.acts = 0
    final, robot, snapshots = run(job(declared), facts)
    assert final.state is JobState.FAILED
    assert [s.state for s in snapshots][-2:] == [JobState.WAITING_POLICY, JobState.FAILED]
    assert JobState.RUNNING not in [s.state for s in snapshots]
    assert "a team's policy" in final.message and "(5 mismatches; no arm moved)" in final.message
    for words in ("1. action key 'right.joint_9'", "observation key 'right.joint_1.torque'",
                  "camera 'scene': the policy needs 480x640 images, this station's are 224x224",
                  "control rate: the policy runs at 15 Hz", "action range of 'left.gripper'"):
        assert words in final.message, final.message
    assert (robot.leases, robot.rollouts, DeclaringPolicy.acts) == (0, 0, 0)
    assert final.episodes == ()
    assert json.loads(final.provenance.policy_spec_json)["action_keys"] == ["right.joint_9"]


def test_a_fitting_spec_runs_and_every_snapshot_from_then_carries_the_provenance(facts, tmp_path):
    declared = PolicySpec(action_keys=("right.joint_1",), observation_keys=("right.joint_1.pos",),
                          cameras=(CameraNeed("wrist", 224, 224),), control_frequency_hz=50.0,
                          metadata={"policy": "hold"})
    spec = job(declared, episodes=2)
    store = JobStore(str(tmp_path))
    final, robot, snapshots = run(spec, facts, store)
    assert final.state is JobState.SUCCEEDED, final.message
    assert robot.leases == 2 and len(final.episodes) == 2
    provenance = final.provenance
    assert all(s.provenance == provenance for s in snapshots if s.state is not JobState.WAITING_POLICY
               and s.state is not JobState.CREATED)
    files = {f.name: f for f in provenance.config_files}
    assert files["arms.yaml"].sha256 == file_sha256(files["arms.yaml"].path)
    assert files["cameras.yaml"].sha256 == file_sha256(files["cameras.yaml"].path)
    assert files["job"].sha256 == job_sha256(spec) and len(files["job"].sha256) == 64
    assert job_sha256(job(declared, episodes=3)) != files["job"].sha256
    assert provenance.software_version and json.loads(provenance.policy_spec_json)["metadata"] == {"policy": "hold"}
    # persisted with the job: a restarted station's snapshots of it still carry it
    reloaded = store.load(spec.job_id)
    assert reloaded.provenance == provenance and snapshot_of(reloaded).provenance == provenance


def test_a_policy_that_declares_nothing_is_not_checked(facts):
    final, robot, _ = run(job(None, rate="20"), facts)
    assert final.state is JobState.SUCCEEDED, final.message
    assert final.provenance.policy_spec_json == ""


def test_openpi_presets_declare_their_action_space_and_gripper_polarity_and_only_position_ones_fit(facts):
    station = facts.station_spec(job(None))
    spaces = {"droid_jointpos": "joint_position", "aloha": "joint_position", "droid": "joint_velocity",
              "libero": "delta"}
    for preset, space in spaces.items():
        policy = OpenPIPolicy("ws://127.0.0.1:1", obs_map=preset, connect=False)
        spec = policy.spec()
        assert spec.action_keys == policy.obs_map.action_keys
        assert spec.action_dim == len(policy.obs_map.actions)
        assert spec.action_space == space, preset
        assert {c.name for c in spec.cameras} == {"scene", "wrist"}
        assert all((c.height, c.width) == (0, 0) for c in spec.cameras)  # the bridge resizes with pad
        refused = check(spec, station)
        if space == "joint_position":
            assert refused == [], preset
        else:  # this station applies every action as an absolute joint position
            assert len(refused) == 1 and refused[0].startswith("action space: the policy's actions are "), refused
            assert f"({space}); this station applies every action as absolute joint positions" in refused[0]
        grippers = [r for r in spec.action_ranges if r.key.endswith(".gripper")]
        # openpi's 1 (closed) lands on this station's closed jaw, 0
        assert grippers and all((r.low, pytest.approx(r.high), pytest.approx(r.closed, abs=1e-9)) == (0.0, 0.8, 0.0)
                                for r in grippers), preset
    droid = OpenPIPolicy("ws://127.0.0.1:1", obs_map="droid", connect=False).spec()
    assert [(r.key, r.low, pytest.approx(r.high)) for r in droid.action_ranges] == [("right.gripper", 0.0, 0.8)]


def test_an_openpi_mapping_with_the_gripper_inverted_is_refused_naming_both_closed_values(facts):
    mapping = {"state": {"s": ["right.joint_1.pos", {"key": "right.gripper.pos", "scale": 1.25}]},
               "actions": ["right.joint_1", {"key": "right.gripper", "scale": 0.8}]}  # openpi's 1 (closed) -> open
    spec = OpenPIPolicy("ws://127.0.0.1:1", obs_map=mapping, connect=False).spec()
    assert check(spec, facts.station_spec(job(None))) == [
        "gripper polarity of 'right.gripper': the policy closes it at 0.8, this station's closes at 0 (its jaw "
        "opening runs [0, 0.8]): inverted"]


def test_an_openpi_mapping_with_the_gripper_unscaled_or_a_missing_camera_is_named(facts):
    mapping = {"state": {"s": ["right.joint_1.pos"]},
               "images": {"cam": {"camera": "top", "size": [224, 224]}},
               "actions": ["right.joint_1", "right.gripper"]}
    spec = OpenPIPolicy("ws://127.0.0.1:1", obs_map=mapping, connect=False).spec()
    out = check(spec, facts.station_spec(job(None)))
    assert len(out) == 3, out
    assert out[0].startswith("camera 'top': this station has no such camera")
    assert out[1].startswith("gripper polarity of 'right.gripper': the policy closes it at 1, this station's closes "
                             "at 0")
    assert out[2].startswith("action range of 'right.gripper': the policy commands [0, 1]")


def test_an_openpi_servers_oversized_metadata_is_left_out_of_the_spec_saying_so():
    policy = OpenPIPolicy("ws://127.0.0.1:1", obs_map="droid", connect=False)
    policy.metadata = {"norm_stats": [0.5] * 5000, "control_frequency": 15}
    spec = policy.spec()
    assert spec.control_frequency_hz == 15.0
    assert "more than 16384" in spec.metadata["omitted"] and spec.metadata["keys"] == ["control_frequency",
                                                                                      "norm_stats"]
