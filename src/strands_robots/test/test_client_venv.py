"""The Evaluation Client installs with pip into a fresh venv and runs a whole job there.

The venv has no system site packages, no ROS and no MuJoCo; the relay is started by the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
)

import numpy as np

from strands_robots.client import pb
from strands_robots.client.images import encode_image
from strands_robots.policies.base import EndEpisode
from strands_robots.station_link.link import StationLink

REPO = Path(__file__).resolve().parents[3]
CLIENT_DIST = REPO / "clients" / "python"

_TEAM_SCRIPT = textwrap.dedent("""
    import importlib.util, sys
    from strands_robots.client import EvaluationClient, Policy, EndEpisode, pb, NotFound

    for absent in ("rclpy", "mujoco"):
        assert importlib.util.find_spec(absent) is None, absent + " is importable in the client venv"

    class Reach(Policy):
        def reset(self, task):
            print("RESET", task.instruction, self.episode.episode_id, flush=True)
        def act(self, observation):
            if observation["step"] >= 2:
                raise EndEpisode("reached")
            frame = observation["scene.image"]
            print("IMAGE", frame.shape, frame.dtype, int(frame[..., 0].max()), flush=True)
            return [{"left/joint_1": observation["left/joint_1"] + sum(sum(r) for r in observation["image"])}]

    client = EvaluationClient(sys.argv[1], token=sys.argv[2])
    try:
        client.get_status("job-missing")
    except NotFound as exc:
        print("NOTFOUND", exc.reason, flush=True)
    task = {"task_id": "reach", "instruction": "reach the cube", "scoring": {"items": [
        {"name": "reached", "question": "Reached?", "answer_type": "yes_no", "max_points": 1,
         "success_answer": "yes"}]}}
    job_id = client.submit_job(station_id="sim_station", tasks=[task], episodes=1)
    print("JOB", job_id, flush=True)
    final = client.serve_policy(job_id, Reach())
    item = final.episodes[0].items[0]
    print("FINAL", final.state, len(final.episodes), final.episodes[0].end_condition,
          item.WhichOneof("answer"), item.yes_no, item.answer_type == pb.ANSWER_TYPE_YES_NO, flush=True)
    done = client.download_recording(job_id, "ep_0000", "home")  # the episode's recording, checked
    print("RECORDING", done.path, done.size_bytes, done.sha256, flush=True)
    print("JOBS", [(j.job_id, j.state) for j in client.list_jobs().jobs], flush=True)
""")

#: the station's recording of the episode (any bytes: the client checks size and SHA-256)
_RECORDING = bytes(range(256)) * 5000


# A camera frame as the station sends it: PNG (lossless), 40 x 30, its red channel reaching 200.
_FRAME = encode_image(np.full((30, 40, 3), (200, 10, 10), dtype=np.uint8), "png")


def _station(link, jobs, workdir):
    """Play the station's side in this process: one remote-policy episode, its recording, then SUCCEEDED."""
    job = jobs[0]
    link_session = link.open_session(job.job_id)
    try:
        link_session.wait_attached(60)
        link_session.start_episode("ep_0000", job.tasks[0], action_keys=["left/joint_1"])
        chunks = []
        for step in range(5):
            try:
                chunks.append(link_session.act({"step": step, "left/joint_1": 0.5, "image": [[1, 2], [3, 4]],
                                                "scene.image": _FRAME}))
            except EndEpisode:
                break
        link_session.end_episode("ep_0000", pb.END_POLICY_COMPLETED)
    finally:
        link_session.close()
    recording = Path(workdir) / "episode_0000.mcap"
    recording.write_bytes(_RECORDING)
    link.upload_recording(job.job_id, "ep_0000", recording)  # before the job ends, as the station does
    assert link.uploader.wait_idle(60) and link.uploader.results[-1].ok, link.uploader.results
    status = pb.JobStatus(job_id=job.job_id, station_id="sim_station", state=pb.JOB_SUCCEEDED, episodes_total=1,
                          updated_unix_ms=42)
    ep = status.episodes.add(episode_id="ep_0000", end_condition=pb.END_POLICY_COMPLETED, scored=True,
                             success=False, score=0.0, task=job.tasks[0])
    ep.items.add(name="reached", answer_type=pb.ANSWER_TYPE_YES_NO, yes_no=False, max_points=1.0,
                 is_success_item=True)
    link.report(status)
    return chunks



def test_client_installs_into_a_fresh_venv_without_ros_and_runs_a_job(tmp_path):
    if not (CLIENT_DIST / "pyproject.toml").exists():
        pytest.fail(f"client distribution missing at {CLIENT_DIST}")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    constraints = REPO / "requirements" / "constraints.txt"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--disable-pip-version-check", "-q",
         "--no-compile", "-c", str(constraints),
         str(CLIENT_DIST)],
        capture_output=True, text=True, timeout=600,
        env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")},
    )
    shutil.rmtree(CLIENT_DIST / "build", ignore_errors=True)
    for egg in CLIENT_DIST.glob("*.egg-info"):
        shutil.rmtree(egg, ignore_errors=True)
    assert install.returncode == 0, install.stdout + install.stderr
    typed = subprocess.run([str(py), "-c", "import pathlib, strands_robots.client as c; "
                            "print((pathlib.Path(c.__file__).parent / 'py.typed').is_file())"],
                           capture_output=True, text=True, timeout=60, env={"PATH": os.environ.get("PATH", "")})
    assert typed.stdout.strip() == "True", "the installed client has no py.typed marker: " + typed.stdout + typed.stderr

    tokens = write_tokens(tmp_path)
    port = free_port()
    target = f"127.0.0.1:{port}"
    relay = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", tokens, "--poll-s", "0.1")
    jobs, chunks = [], {}
    link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], on_job=jobs.append, heartbeat_s=0.2)
    (tmp_path / "home").mkdir()
    script = tmp_path / "team.py"
    script.write_text(_TEAM_SCRIPT)
    team = None
    try:
        link.start()
        team = subprocess.Popen([str(py), str(script), target, CLIENT_TOKENS["team_a"]], cwd=str(tmp_path),
                                env={"PATH": os.environ.get("PATH", "")}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        wait_until(lambda: jobs or team.poll() is not None, timeout_s=60, what="the team's job")
        assert jobs, team.stdout.read()
        station = threading.Thread(target=lambda: chunks.setdefault("got", _station(link, jobs, tmp_path)),
                                   daemon=True)
        station.start()
        out, _ = team.communicate(timeout=90)
        station.join(30)
        assert team.returncode == 0, out
        lines = out.splitlines()
        assert "NOTFOUND no job 'job-missing' for this client" in lines
        assert "RESET reach the cube ep_0000" in lines
        assert lines.count("IMAGE (30, 40, 3) uint8 200") == 2, out
        assert "FINAL SUCCEEDED 1 policy_completed yes_no False True" in lines
        assert chunks["got"] == [[{"left/joint_1": 10.5}], [{"left/joint_1": 10.5}]]
        import hashlib

        assert f"RECORDING home/ep_0000.mcap {len(_RECORDING)} {hashlib.sha256(_RECORDING).hexdigest()}" in lines
        assert (tmp_path / "home" / "ep_0000.mcap").read_bytes() == _RECORDING
        assert "JOBS [('" + jobs[0].job_id + "', 'SUCCEEDED')]" in lines, out
    finally:
        if team is not None and team.poll() is None:
            team.kill()
            team.wait(10)
        link.close()
        stop_process(relay)
