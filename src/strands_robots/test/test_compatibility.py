"""The compatibility gate's rules (station/compatibility.py) against the shipped arms.yaml and cameras.yaml."""

import json

import pytest

from strands_robots.arm.config import DriverConfig
from strands_robots.cameras.config import load_camera_set
from strands_robots.client.policy_spec import ActionRange, CameraNeed, PolicySpec, PolicySpecError, spec_from_pb, \
    spec_of, spec_to_pb
from strands_robots.station.compatibility import StationSpec, check, gate_message, station_spec


@pytest.fixture(scope="module")
def station():
    return station_spec(DriverConfig.default(), load_camera_set(), None, {"wave": 50.0, "reach": 50.0})


def test_station_spec_from_the_shipped_files(station):
    assert list(station.action_limits)[:2] == ["left.joint_1", "left.joint_2"]
    assert len(station.action_limits) == 14
    assert station.action_limits["right.gripper"] == (0.0, 0.8)
    assert station.cameras == {"scene": (224, 224), "wrist": (224, 224)}
    assert "right.joint_3.vel" in station.observation_keys and "wrist.image" in station.observation_keys


def test_a_matching_spec_passes(station):
    spec = PolicySpec(action_keys=("right.joint_1", "right.gripper"), observation_keys=("right.joint_1.pos",),
                      cameras=(CameraNeed("scene", 224, 224), CameraNeed("wrist")), control_frequency_hz=50.0,
                      action_ranges=(ActionRange("right.gripper", 0.0, 0.8),))
    assert check(spec, station) == []
    assert check(PolicySpec(), station) == []


def test_unknown_action_key(station):
    out = check(PolicySpec(action_keys=("right.joint_1", "right.joint_7")), station)
    assert len(out) == 1 and "'right.joint_7'" in out[0] and "left.joint_1" in out[0]


def test_action_dimension(station):
    out = check(PolicySpec(action_dim=8), station)
    assert len(out) == 1 and "8 actions" in out[0] and "14 actuators" in out[0]
    assert check(PolicySpec(action_dim=14), station) == []
    # with keys, the dimension is the policy's own column count, not compared
    assert check(PolicySpec(action_keys=("right.joint_1",), action_dim=8), station) == []


def test_missing_observation_key(station):
    out = check(PolicySpec(observation_keys=("right.joint_1.pos", "right.joint_1.acc")), station)
    assert out == ["observation key 'right.joint_1.acc': this station does not send it"]


def test_missing_camera(station):
    out = check(PolicySpec(cameras=(CameraNeed("cam_low"),)), station)
    assert len(out) == 1 and "'cam_low'" in out[0] and "scene, wrist" in out[0]


def test_camera_size(station):
    out = check(PolicySpec(cameras=(CameraNeed("scene", 480, 640), CameraNeed("wrist", 0, 224))), station)
    assert out == ["camera 'scene': the policy needs 480x640 images, this station's are 224x224"]
    out = check(PolicySpec(cameras=(CameraNeed("wrist", 0, 256),)), station)
    assert out == ["camera 'wrist': the policy needs anyx256 images, this station's are 224x224"]


def test_control_rate_names_each_task():
    offered = StationSpec(action_limits={"a.j": (-1.0, 1.0)}, control_frequencies={"t1": 50.0, "t2": 15.0})
    out = check(PolicySpec(control_frequency_hz=15.0), offered)
    assert out == ["control rate: the policy runs at 15 Hz, the job's tasks do not ('t1' at 50 Hz)"]


def test_gripper_range_outside_and_too_narrow(station):
    out = check(PolicySpec(action_ranges=(ActionRange("right.gripper", 0.0, 1.0),)), station)
    assert len(out) == 1 and "[0, 1]" in out[0] and "[0, 0.8]" in out[0] and "refused" in out[0]
    out = check(PolicySpec(action_ranges=(ActionRange("left.gripper", 0.0, 0.2),)), station)
    assert len(out) == 1 and "under 50%" in out[0]
    out = check(PolicySpec(action_ranges=(ActionRange("left.wrist", 0.0, 0.2),)), station)
    assert out == ["action range of 'left.wrist': no actuator of this station has it"]


def test_every_mismatch_is_listed_in_the_message(station):
    spec = PolicySpec(action_keys=("right.joint_7",), observation_keys=("x.pos",), cameras=(CameraNeed("top"),),
                      control_frequency_hz=15.0, action_ranges=(ActionRange("right.gripper", -1.0, 1.0),),
                      source="openpi server ws://h:8000")
    out = check(spec, station)
    assert len(out) == 5
    message = gate_message(out, spec.source)
    assert message.startswith("the policy (openpi server ws://h:8000) does not fit this station (5 mismatches")
    for i, line in enumerate(out, 1):
        assert f"{i}. {line}" in message


def test_spec_round_trips_through_the_proto_and_json():
    spec = PolicySpec(action_keys=("right.joint_1",), action_dim=8, observation_keys=("right.joint_1.pos",),
                      cameras=(CameraNeed("scene", 224, 224),), control_frequency_hz=15.0,
                      action_ranges=(ActionRange("right.gripper", 0.0, 0.8),), source="s",
                      metadata={"action_space": "joint_position", "image_resolution": [224, 224]})
    assert spec_from_pb(spec_to_pb(spec)) == spec
    assert PolicySpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_bad_specs_are_refused_by_field():
    with pytest.raises(PolicySpecError, match="action_dim"):
        PolicySpec(action_dim=-1)
    with pytest.raises(PolicySpecError, match="action range"):
        PolicySpec(action_ranges=(ActionRange("g", 1.0, 0.0),))
    with pytest.raises(PolicySpecError, match="control_frequency_hz"):
        PolicySpec(control_frequency_hz=float("nan"))

    class Bad:
        def spec(self):
            return {"action_keys": []}

    with pytest.raises(PolicySpecError, match="must return a PolicySpec"):
        spec_of(Bad())
    msg = spec_to_pb(PolicySpec())
    msg.metadata_json = "[1"
    with pytest.raises(PolicySpecError, match="not JSON"):
        spec_from_pb(msg)


def test_the_declared_spec_travels_from_the_clients_attach_to_the_stations_session(tmp_path):
    """Through a real relay: the station gets the spec whether it opened its side before or after the client."""
    pytest.importorskip("grpc", reason="grpcio is not installed")
    import threading

    from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, running_relay, yes_no_task

    from strands_robots.client import EvaluationClient, Policy
    from strands_robots.station_link.link import StationLink

    declared = PolicySpec(action_keys=("right.joint_1",), cameras=(CameraNeed("scene", 224, 224),),
                          control_frequency_hz=15.0, source="declaring", metadata={"n": 1})

    class Declaring(Policy):
        def spec(self):
            return declared

        def act(self, observation):
            return []

    class Silent(Policy):
        def act(self, observation):
            return []

    with running_relay(tmp_path) as relay:
        client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
        link = StationLink(relay.target, "sim_station", STATION_TOKENS["sim_station"])
        try:
            for policy, want, station_first in ((Declaring(), declared, True), (Declaring(), declared, False),
                                                (Silent(), None, True)):
                job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
                session = link.open_session(job_id) if station_first else None
                team = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
                serving = threading.Thread(target=lambda: _serve_quietly(team, job_id, policy), daemon=True)
                serving.start()
                if session is None:
                    session = link.open_session(job_id)
                try:
                    session.wait_attached(timeout_s=15.0)
                    got = session.policy_spec
                    assert (None if got is None else spec_from_pb(got)) == want
                finally:
                    session.close()
                    team.close()  # the team's process goes away: its serve_policy ends
                    serving.join(15.0)
                assert not serving.is_alive()
        finally:
            link.close()


def _serve_quietly(client, job_id, policy):
    from strands_robots.client import RelayError

    try:
        client.serve_policy(job_id, policy)
    except RelayError:
        pass


def test_a_camera_the_file_does_not_name_has_no_size_to_compare():
    offered = station_spec(DriverConfig.default(), load_camera_set(), ["scene", "side"], {})
    assert offered.cameras == {"scene": (224, 224), "side": (0, 0)}
    assert check(PolicySpec(cameras=(CameraNeed("side", 480, 640), CameraNeed("scene", 480, 640))), offered) == [
        "camera 'scene': the policy needs 480x640 images, this station's are 224x224"]


def test_job_status_prints_the_provenance_it_carries():
    from strands_robots.client import pb
    from strands_robots.client.cli.job import format_status

    status = pb.JobStatus(job_id="j", station_id="s", state="SUCCEEDED", episodes_total=1)
    assert "sha256" not in format_status(status)
    status.provenance.software_version = "0.1.0"
    status.provenance.git_revision = "a" * 40
    status.provenance.config_files.add(name="arms.yaml", path="/x/arms.yaml", sha256="b" * 64)
    status.provenance.policy_spec_json = '{"source": "openpi"}'
    text = format_status(status).splitlines()
    assert f"station software strands_robots 0.1.0, revision {'a' * 40}" in text
    assert f"config arms.yaml sha256 {'b' * 64}  (/x/arms.yaml)" in text
    assert text[text.index("policy spec") + 1] == '  source         "openpi"'
    assert "updated          - (the station's clock)" in text
