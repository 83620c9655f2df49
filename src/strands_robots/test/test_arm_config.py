"""Driver configuration: the shipped YAML, defaults, and refusal of bad values."""

import os

import pytest
import yaml

from strands_robots.arm.config import ConfigError, DriverConfig
from strands_robots.arm.model import MODEL_PATH, PHYSICS_TIMESTEP_S, load_model

ARMS_YAML = os.path.join(os.path.dirname(__file__), "..", "config", "arms.yaml")


def load_doc():
    with open(ARMS_YAML) as f:
        return yaml.safe_load(f)


def test_shipped_yaml_equals_default():
    assert DriverConfig.from_yaml(ARMS_YAML) == DriverConfig.default()


def test_model_timestep_and_names():
    m = load_model()
    assert os.path.isfile(MODEL_PATH)
    assert m.opt.timestep == PHYSICS_TIMESTEP_S == 0.002
    assert m.nu == 14
    names = {m.actuator(i).name for i in range(m.nu)}
    assert "right/joint_4" in names and "left/gripper" in names


def test_model_force_range_exceeds_envelope_torque_limit():
    """An over-limit torque must be physically reachable, or the torque checks could never trip."""
    m = load_model()
    cfg = DriverConfig.default()
    for key, spec in cfg.joint_specs().items():
        aid = [m.actuator(i).name for i in range(m.nu)].index(key.replace(".", "/"))
        assert m.actuator_forcerange[aid][1] > spec.max_torque


def test_per_key_override_in_start_pose_and_arm_overrides():
    doc = load_doc()
    doc["start_pose"]["pose"]["right.joint_2"] = 0.5
    doc["arm_overrides"] = {"right": {"joint_4": {"max_torque": 4.0}}}
    cfg = DriverConfig.from_dict(doc)
    assert cfg.start_pose.pose["right.joint_2"] == 0.5
    assert cfg.start_pose.pose["left.joint_2"] == 0.4
    assert cfg.joint_specs()["right.joint_4"].max_torque == 4.0
    assert cfg.joint_specs()["left.joint_4"].max_torque == 5.0


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d["margins"].update(torque_fraction=1.5), "torque_fraction"),
    (lambda d: d["physics"].update(timestep_s=0), "physics.timestep_s"),
    (lambda d: d["physics"].update(safety_check_period_s=0.001), "safety_check_period_s"),
    (lambda d: d["joints"]["joint_4"].update(lower=3.0), "joint_4"),
    (lambda d: d["joints"]["joint_4"].update(max_torque="lots"), "joints.joint_4.max_torque"),
    (lambda d: d["joints"]["joint_4"].update(max_velocity=-1), "max_velocity"),
    (lambda d: d["start_pose"].update(timeout_s=-1), "start_pose.timeout_s"),
    (lambda d: d["start_pose"]["pose"].update(gripper=5.0), "outside the joint's limits"),
    (lambda d: d["start_pose"]["pose"].update(elbow=0.1), "unknown joint or key"),
    (lambda d: d.update(stop_scope="some"), "stop_scope"),
    (lambda d: d.update(colour="red"), "unknown field"),
    (lambda d: d.update(arms="left"), "arms must be"),
])
def test_bad_values_are_refused_with_the_field_named(mutate, message):
    doc = load_doc()
    mutate(doc)
    with pytest.raises(ConfigError, match=message):
        DriverConfig.from_dict(doc)


def test_unreadable_or_invalid_yaml_names_the_file(tmp_path):
    bad = tmp_path / "arms.yaml"
    bad.write_text("joints: [unclosed")
    with pytest.raises(ConfigError, match="arms.yaml"):
        DriverConfig.from_yaml(str(bad))
    with pytest.raises(ConfigError, match="cannot read"):
        DriverConfig.from_yaml(str(tmp_path / "missing.yaml"))


def test_config_not_matching_the_adapter_is_refused():
    from strands_robots.arm.driver import DriverCore

    doc = load_doc()
    doc["arms"] = ["left"]
    with pytest.raises(ConfigError, match="does not match"):
        DriverCore.simulated(DriverConfig.from_dict(doc))


def test_arm_core_imports_without_rclpy():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import strands_robots.arm.driver, strands_robots.arm.backend, strands_robots.arm.mujoco_sim\n"
        "assert 'rclpy' not in sys.modules, 'arm core imported rclpy'\n"
    )
    root = os.path.join(os.path.dirname(__file__), "..")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root,
                   env={**os.environ, "PYTHONPATH": os.path.abspath(root)})
