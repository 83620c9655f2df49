"""The checks rollout.launch.py runs before any process starts, and the private run dir it makes.

No ``launch`` needed: these are the functions of ``strands_robots.cli.bringup`` and
``strands_robots.cli.parameters_file`` (and ``demo_job``'s job rewrite) the launch files call. Each refusal
names the file, the key and the reason in one line.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")

from strands_robots.cameras.config import cameras_refusal  # noqa: E402
from strands_robots.cli import bringup  # noqa: E402
from strands_robots.cli.parameters_file import parameters_file_refusal  # noqa: E402

CONFIG = Path(__file__).resolve().parent.parent / "config"


@pytest.mark.parametrize("name", ["rollout.yaml", "arm_driver.yaml", "station.yaml"])
def test_the_packages_parameters_files_pass_the_launch_check(name):
    assert parameters_file_refusal(str(CONFIG / name)) == ""


@pytest.mark.parametrize("section, key, value, reason", [
    ("rollout", "duration_s", "5", "duration_s: 5 is an integer, the parameter is a float (write 5.0)"),
    ("rollout", "control_frequency", "5000.0", "control_frequency: 5000.0 is out of range"),
    ("rollout", "command_path", "topic", "command_path must be one of"),
    ("rollout", "policy_provider", "nobody", "policy_provider 'nobody' is not a known provider"),
    ("rollout", "record", "'yes'", "record: expected a bool, got a string 'yes'"),
    ("station", "operator", "robot", "operator: must be scripted or manual, got 'robot'"),
    ("station", "station_id", "''", "station_id: must be a non-empty string"),
    ("station", "lease_duration_s", "0.0", "lease_duration_s: must be greater than 0"),
    ("station", "driver_ready_timeout_s", "0.0", "driver_ready_timeout_s: must be greater than 0"),
    ("station", "heartbeat_s", "2", "heartbeat_s: 2 is an integer, the parameter is a float (write 2.0)"),
    ("arm_driver", "control_rate_hz", "5000.0", "control_rate_hz 5000.0 is out of range [1, 2000]"),
    ("arm_driver", "require_lease", "1", "require_lease must be a bool"),
    ("arm_driver", "hardware", "''", "hardware must name an adapter"),
])
def test_a_bad_parameter_value_is_refused_with_the_file_the_section_the_key_and_the_reason(
        tmp_path, section, key, value, reason):
    path = tmp_path / "params.yaml"
    path.write_text(f"/**/{section}:\n  ros__parameters:\n    {key}: {value}\n")
    refusal = parameters_file_refusal(str(path))
    assert refusal.startswith(f"parameters file {path}: /**/{section}: "), refusal
    assert reason in refusal, refusal


def test_the_driver_rates_take_integers_like_the_driver_does(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("/**/arm_driver:\n  ros__parameters:\n    control_rate_hz: 50\n")
    assert parameters_file_refusal(str(path)) == ""


def test_the_stations_cameras_pass_the_launch_check_and_a_bad_file_or_name_is_refused_in_one_line(tmp_path):
    assert cameras_refusal("", "scene,wrist") == ""
    assert cameras_refusal(str(CONFIG / "cameras.yaml"), "scene") == ""
    assert "'top'" in cameras_refusal("", "scene,top")
    bad = tmp_path / "cameras.yaml"
    bad.write_text("adapter: mujoco\ncameras:\n  scene: {mjcf_camera: scene, width: 0, height: 224, fps: 15}\n")
    refusal = cameras_refusal(str(bad), "scene")
    assert str(bad) in refusal and "width" in refusal and "\n" not in refusal, refusal


def test_sections_of_other_nodes_are_left_alone(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("/**/camera:\n  ros__parameters:\n    fps: 30\n")
    assert parameters_file_refusal(str(path)) == ""


def test_the_packages_relay_config_loads_as_loopback_with_a_free_port_and_the_run_dirs_store():
    settings = bringup.load_relay_config(str(CONFIG / "relay.yaml"))
    assert (settings.host, settings.port, settings.store) == ("127.0.0.1", 0, "")
    assert settings.workers >= 4 and settings.poll_s > 0


@pytest.mark.parametrize("body, reason", [
    ("relay:\n  port: 70000\n", "relay: port: 70000 is out of range [0, 65535]"),
    ("relay:\n  port: '50051'\n", "relay: port: expected an integer, got a string '50051'"),
    ("relay:\n  listen: 127.0.0.1:1\n", "relay: unknown key 'listen' (known: host, port, store"),
    ("relay:\n  store: /tmp/x.db\n", "relay: store: '/tmp/x.db' is neither sqlite:PATH nor postgresql://"),
    ("relay:\n  workers: 2\n", "relay: workers: must be >= 4"),
    ("relay:\n  poll_s: 0\n", "relay: poll_s: must be greater than 0"),
    ("relay:\n  port: [1\n", "line 3 column 1: not valid YAML"),
    ("host: 127.0.0.1\n", "expected one top-level mapping 'relay:'"),
])
def test_a_bad_relay_config_is_refused_with_the_key_and_the_reason(tmp_path, body, reason):
    path = tmp_path / "relay.yaml"
    path.write_text(body)
    refusal = bringup.relay_config_refusal(str(path))
    assert refusal.startswith(f"relay config {path}:"), refusal
    assert reason in refusal, refusal


def test_the_demo_job_file_passes_and_a_bad_one_names_the_task_and_the_key(tmp_path):
    assert bringup.job_file_refusal(str(CONFIG / "demo_job.yaml")) == ""
    data = yaml.safe_load((CONFIG / "demo_job.yaml").read_text())
    data["tasks"][2]["trials"] = 0
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    refusal = bringup.job_file_refusal(str(path))
    assert refusal == f"job file {path}: tasks[2].trials: 0 refused: must be an integer in [1, 100000]", refusal
    data["tasks"][2] = {"task": "push_to_limit", "success_when": "end_condition == timeout"}
    path.write_text(yaml.safe_dump(data))
    refusal = bringup.job_file_refusal(str(path))
    assert refusal.startswith(f"job file {path}: tasks[2].success_when: 'success_when' refused: "), refusal
    assert bringup.job_file_refusal(str(tmp_path / "missing.yaml")).endswith("No such file or directory")


def test_the_run_dir_is_private_and_its_tokens_are_fresh_for_each_launch():
    first = bringup.make_run_dir("sim_station")
    second = bringup.make_run_dir("sim_station")
    try:
        assert stat.S_IMODE(os.stat(first.path).st_mode) == 0o700
        for path in (first.tokens, first.client_token_file, first.station_token_file):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
        tokens = yaml.safe_load(Path(first.tokens).read_text())
        assert tokens == {"clients": {"demo": Path(first.client_token_file).read_text()},
                          "stations": {"sim_station": Path(first.station_token_file).read_text()}}
        assert len(tokens["clients"]["demo"]) >= 32 and tokens["clients"]["demo"] != tokens["stations"]["sim_station"]
        assert Path(second.client_token_file).read_text() != Path(first.client_token_file).read_text()
        assert first.store == f"sqlite:{first.path}/relay.sqlite"
        assert first.state_dir == f"{first.path}/station_state"  # the launch's station state goes with it
    finally:
        first.close()
        second.close()
    assert not os.path.exists(first.path) and not os.path.exists(second.path)


def test_another_policy_for_the_demo_job_leaves_out_the_files_policy_options():
    from strands_robots.cli.demo_job import job_for_run
    from strands_robots.job_model.team_job import load_team_job
    from strands_robots.station.suite_file import load_suites
    from strands_robots.station.suite_job import job_spec_for

    spec = load_team_job(str(CONFIG / "demo_job.yaml"))
    same = job_for_run(spec, policy_provider=spec.policy_provider)
    assert same == spec
    mock = job_for_run(spec, policy_provider="mock", station_id="lab", control_frequency=100.0)
    assert (mock.policy_provider, dict(mock.policy_config), mock.station_id, mock.control_frequency) == (
        "mock", {}, "lab", 100.0)
    assert mock.tasks == spec.tasks
    # the station runs it with the mock: the suite's hints the mock does not take are left out, the exam is the same
    suites = load_suites(str(CONFIG / "suites"), "simulated")
    runs = job_spec_for(mock, suites, station_id="lab", profile="simulated", allow_free_form_tasks=False,
                        job_id="j", client_id="c")
    scripted = job_spec_for(spec, suites, station_id="lab", profile="simulated", allow_free_form_tasks=False,
                            job_id="j", client_id="c")
    assert [t.task_id for t in runs.tasks] == [t.task_id for t in scripted.tasks]
    for with_mock, with_scripted in zip(runs.tasks, scripted.tasks):
        kept = {k: v for k, v in with_scripted.parameters.items() if not k.startswith("policy.")}
        assert {k: v for k, v in with_mock.parameters.items() if not k.startswith("policy.")} == {
            **kept, "control_frequency": "100"}
    assert runs.tasks[1].parameters["policy.end_after_steps"] == "40"  # a hint the mock takes
    assert "policy.target" not in runs.tasks[2].parameters and "policy.target" in scripted.tasks[2].parameters


def test_a_launch_keeps_its_station_state_with_its_own_relay_unless_told_or_the_relay_outlives_it(tmp_path,
                                                                                                 monkeypatch):
    from strands_robots.station.state_dir import station_state_dir

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    own = bringup.load_relay_config(str(CONFIG / "relay.yaml"))  # no store: the launch's own, in its run dir
    assert not own.store
    first = bringup.make_run_dir("sim_station")
    second = bringup.make_run_dir("sim_station")
    try:
        # two default launches: each its own state, under its own run dir (gone with it)
        assert bringup.launch_state_dir("", first, "sim_station", own, "127.0.0.1:5001") == first.state_dir
        assert bringup.launch_state_dir("", second, "sim_station", own, "127.0.0.1:5001") == second.state_dir
        assert bringup.launch_state_dir("", first, "sim_station", None, "") == first.state_dir  # use_relay:=false
        # told: that directory
        assert bringup.launch_state_dir(str(tmp_path / "mine"), first, "sim_station", own, "x:1") == str(
            tmp_path / "mine")
        # a relay whose store outlives the launch: the state of this station for that relay, the same each launch
        kept = dataclasses.replace(own, store=f"sqlite:{tmp_path / 'relay.db'}")
        both = {bringup.launch_state_dir("", run, "sim_station", kept, "127.0.0.1:50051") for run in (first, second)}
        assert both == {station_state_dir("sim_station", "127.0.0.1:50051")}
        assert str(tmp_path / "xdg") in next(iter(both))
    finally:
        first.close()
        second.close()
