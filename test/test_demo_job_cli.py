"""System test: ``demo_job``, the job process of rollout.launch.py, against real station processes (no launch).

``python -m strands_robots.cli.demo_job`` runs as a subprocess (ended by its PID in ``finally``) against the arm
driver, rollout and station nodes of a :class:`~strands_robots.cli.station_demo.LocalStation`: through the station's
``submit_job`` service (``--ros``, rollout.launch.py's ``use_relay:=false``) and through a relay that starts
after it (``--relay``, as under ``ros2 launch`` where every process starts at once). What is asserted is what the
launch shows: the exit code, the progress lines, the summary table and the job's last line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid

import pytest
import yaml

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

TIMEOUT_S = 150.0


def small_job(tmp_path) -> str:
    """Write the demo job's first two suite tasks, one trial each (the suite's 2 s budget); return its path.

    Without the file's camera choices: these tasks need no camera and the stations here run none.
    """
    from strands_robots.cli.station_demo import default_demo_job

    data = yaml.safe_load(open(default_demo_job(), encoding="utf-8"))
    data["choose"] = {k: v for k, v in data["choose"].items() if k not in ("cameras", "image_format", "image_quality")}
    data.update(tasks=data["tasks"][:2])
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def start_demo_job(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "strands_robots.cli.demo_job", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


def finish(proc: subprocess.Popen) -> tuple:
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(10.0)
    return proc.returncode, out


def assert_the_job_succeeded_as_the_launch_shows_it(rc: int, out: str, node_lines: list) -> None:
    assert rc == 0, out + "\n".join(node_lines[-40:])
    assert re.search(r"^\[#{15}\.{15}\] 1/2 episodes  RUNNING", out, re.M), out
    rows = [line.split()[:2] for line in out.splitlines() if line.startswith("ep_")]
    # a station fault's end_detail is in the progress line of its episode (the job's message) and the node lines
    assert rows == [["ep_0000", "timeout"], ["ep_0001", "policy_completed"]], out + "\n".join(node_lines[-40:])
    assert re.search(r"^job job-\w+ SUCCEEDED: completed: 2 episodes", out, re.M), out


def test_demo_job_through_the_stations_submit_job_service_runs_the_job_to_succeeded(tmp_path):
    from strands_robots.cli.station_demo import LocalStation

    namespace = f"demo_job_{uuid.uuid4().hex[:8]}"
    lines: list = []
    station = LocalStation(str(tmp_path / "station"), namespace=namespace,
                           out=lambda name, line: lines.append(f"[{name}] {line}"))
    proc = None
    try:
        station.start_nodes()  # no relay: jobs only from submit_job
        proc = start_demo_job("--ros", "--namespace", namespace, "--job-file", small_job(tmp_path))
        rc, out = finish(proc)
        assert_the_job_succeeded_as_the_launch_shows_it(rc, out, lines)
        assert f"to /{namespace}/submit_job: 2 episodes of 2 tasks; the station runs the scripted policy" in out
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, 9)
        station.stop()


def test_demo_job_waits_for_a_relay_that_starts_after_it_and_serves_the_policy_through_it(tmp_path):
    from strands_robots.cli.station_demo import LocalStation, free_port

    namespace = f"demo_job_{uuid.uuid4().hex[:8]}"
    lines: list = []
    station = LocalStation(str(tmp_path / "station"), namespace=namespace,
                           out=lambda name, line: lines.append(f"[{name}] {line}"))
    proc = None
    try:
        port = free_port()
        station.relay_target = f"127.0.0.1:{port}"
        station.write_tokens()
        token_file = tmp_path / "client_token"
        token_file.write_text(station.client_token)
        token_file.chmod(0o600)  # a client token file is private (read_secret refuses others)
        proc = start_demo_job("--relay", station.relay_target, "--token-file", str(token_file), "--job-file",
                              small_job(tmp_path))
        station.start_nodes()
        station.start_relay(port)  # the client and the station were there first
        rc, out = finish(proc)
        assert_the_job_succeeded_as_the_launch_shows_it(rc, out, lines)
        assert "serving the scripted policy through the relay" in out
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, 9)
        station.stop()


def test_demo_job_refused_by_the_relay_exits_one_with_the_relays_reason(tmp_path):
    from strands_robots.cli.station_demo import LocalStation

    relay = LocalStation(str(tmp_path), out=lambda name, line: None)
    proc = None
    try:
        target = relay.start_relay()
        wrong = tmp_path / "wrong_token"
        wrong.write_text("not-a-token")
        wrong.chmod(0o600)
        proc = start_demo_job("--relay", target, "--token-file", str(wrong), "--job-file", small_job(tmp_path))
        rc, out = finish(proc)
        assert rc == 1, out
        assert re.search(rf"^\[demo_job\] the relay at {target} refused the job: Unauthenticated: ", out, re.M), out
        assert "SUCCEEDED" not in out
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, 9)
        relay.stop()


def test_demo_job_refuses_a_bad_job_file_before_submitting_anything(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("job_id: j\nstation_id: s\nsuite: demo\ntasks: [{task: hold_pose, success_when: x > 1}]\n")
    proc = start_demo_job("--ros", "--job-file", str(path))
    rc, out = finish(proc)
    assert rc == 2, out
    assert out.startswith(f"demo_job: job file {path}: tasks[0].success_when: 'success_when' refused: "), out
