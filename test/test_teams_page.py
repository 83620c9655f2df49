"""System test: docs/teams.md's commands, as written, take a team from its token to scores, recordings and the web page.

Where each step runs:

- the station owner's side (a local relay with its web page, the arm driver, camera, rollout and station nodes,
  recording every episode) runs with the main package, started here (``station_demo.LocalStation``) and ended by
  PID in ``finally``;
- the team's side runs in a bare venv (``python -m venv``: no system site packages, no ROS, no PYTHONPATH): the
  page's shell blocks in order, in one ``bash -e`` (the install from the page's ``pip install
  "./clients/python[openpi]"``, its ``job.yaml`` and ``my_policy.py`` saved from the page's blocks); the one
  placeholder replaced is the relay address the station owner gives (``relay.example.org:50051``). pip reuses its
  own wheel cache (``~/.cache/pip``) and installs within ``requirements/constraints.txt`` (``PIP_CONSTRAINT``);
  the install's time is printed;
- then the same venv serves a second job from a real openpi server (openpi-server in its own cached venv, a
  process of its own, ended by PID): ``strands-eval serve --openpi ... --obs-map droid_jointpos``;
- the export of the downloaded recordings to a LeRobot dataset runs with the main package
  (``strands-robots export lerobot``: it is not part of the client).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

from openpi_harness import start_openpi_server, stop_server  # noqa: E402
from test_relay_harness import free_port  # noqa: E402
from web_helpers import Http  # noqa: E402

from strands_robots.cli.station_demo import LocalStation  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "teams.md"
PLACEHOLDER_RELAY = "relay.example.org:50051"
ISO_UTC = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b")
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)


def page_blocks(text: str) -> "tuple[list, dict]":
    """Return the team's path of the page: its bash blocks in order and its files ({name: text}), up to openpi."""
    team_path = text.split("## Serving an openpi policy server")[0]
    commands, files = [], {}
    for info, body in _FENCE.findall(team_path):
        words = info.split()
        if words[:1] == ["bash"]:
            commands.append(body)
        elif len(words) == 2:
            files[words[1]] = body
    return commands, files


def test_the_page_keeps_to_six_commands_from_the_token_to_the_results():
    commands, files = page_blocks(PAGE.read_text())
    lines = [ln for block in commands for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(lines) <= 7, lines  # six commands, and the optional --dry-run before the submit
    assert set(files) == {"job.yaml", "my_policy.py"}


def _run(script: str, cwd: Path, env: dict, timeout_s: float) -> "tuple[int, str]":
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=str(cwd), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(10)


def test_a_team_follows_the_page_from_its_token_to_scores_recordings_and_the_web_page(tmp_path):
    commands, files = page_blocks(PAGE.read_text())
    lines: list = []
    web_port = free_port()
    stack = LocalStation(str(tmp_path / "station"), namespace=f"teams_page_{int(time.time())}",
                         station_params={"record": True},
                         rollout_params={"recording_dir": str(tmp_path / "station_recordings")},
                         cameras="scene,wrist", relay_args=("--web", f"127.0.0.1:{web_port}"),
                         out=lambda name, line: lines.append(f"[{name}] {line}"))
    team = tmp_path / "team"
    team.mkdir()
    (team / "clients").symlink_to(REPO / "clients")  # the page's install runs from the repository's root
    openpi_server = None
    try:
        target = stack.start_relay()
        stack.start_nodes()
        token_file = team / "team.token"
        token_file.write_text(stack.client_token + "\n")
        token_file.chmod(0o600)
        for name, text in files.items():
            (team / name).write_text(text)

        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        env = {"PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}", "HOME": os.environ.get("HOME", "/root"),
               "PIP_CONSTRAINT": str(REPO / "requirements" / "constraints.txt"),
               "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_COMPILE": "1", "PYTHONUNBUFFERED": "1"}
        install, *rest = [block.replace(PLACEHOLDER_RELAY, target) for block in commands]
        script = (f'echo "@@ start $(date +%s.%N)"\n{install}\necho "@@ installed $(date +%s.%N)"\n'
                  'python -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in '
                  '(\'rclpy\', \'mujoco\')))"\n' + "\n".join(rest) + '\necho "@@ JOB=$JOB"\n')
        rc, out = _run(script, team, env, 900)
        shutil.rmtree(REPO / "clients" / "python" / "build", ignore_errors=True)
        for egg in (REPO / "clients" / "python").glob("*.egg-info"):
            shutil.rmtree(egg, ignore_errors=True)
        assert rc == 0, out[-6000:] + "\n".join(lines[-60:])
        marks = dict(re.findall(r"^@@ (\w+) ([\d.]+)$", out, re.M))
        print(f"\nclient install (pip, bare venv, pip's own wheel cache): "
              f"{float(marks['installed']) - float(marks['start']):.1f} s")
        job_id = re.search(r"^@@ JOB=(\S+)$", out, re.M).group(1)

        # the team's scores, as the page says: serve printed the table and the job's figures, status its provenance
        assert f"job {job_id} SUCCEEDED" in out, out[-4000:]
        assert "episode  end condition" in out and re.search(r"^job: success \d+/\d+", out, re.M), out[-4000:]
        assert re.search(r"^state\s+SUCCEEDED$", out, re.M) and re.search(r"^updated\s+" + ISO_UTC.pattern, out,
                                                                           re.M), out[-4000:]
        assert re.search(r"^station software\s+strands_robots ", out, re.M), out[-4000:]
        assert "the file is a valid job of 3 episode(s)" in out

        # the recordings came home, each the station's bytes (its SHA-256 in the job's status)
        final = stack.client().get_status(job_id)
        recorded = {e.episode_id: e.recording_sha256 for e in final.episodes if e.recording_sha256}
        assert len(recorded) >= 3, [(e.episode_id, e.end_condition) for e in final.episodes]
        home = {p.stem: hashlib.sha256(p.read_bytes()).hexdigest() for p in (team / "results").glob("*.mcap")}
        assert home == recorded

        # the web page: signed in with the team's token, the job is there
        web = Http(web_port)
        status, _, _ = web.sign_in(stack.client_token)
        assert status in (302, 303), status
        status, _, page = web.get(f"/jobs/{job_id}")
        assert status == 200 and job_id in page and "SUCCEEDED" in page

        # the export runs with the main package (the client does not ship it)
        dataset = tmp_path / "dataset"
        export = subprocess.run([sys.executable, "-m", "strands_robots.cli", "export", "lerobot",
                                 *sorted(str(p) for p in (team / "results").glob("*.mcap")), "-o", str(dataset)],
                                capture_output=True, text=True, timeout=300)
        assert export.returncode == 0, export.stdout + export.stderr
        assert (dataset / "meta" / "info.json").exists(), export.stdout

        # the same venv serves an openpi server (a position checkpoint with its mapping) for a second job
        from openpi_harness import openpi_venv

        openpi_venv()
        server_port = free_port()
        openpi_server = start_openpi_server(tmp_path, server_port, mode="droid", scale=-0.01)
        (team / "job_openpi.yaml").write_text("station_id: sim_station\nsuite: demo\ntasks: [{task: hold_pose, "
                                              "trials: 1}]\n")
        rc, out = _run(f"export STRANDS_ROBOTS_RELAY={target} STRANDS_ROBOTS_TOKEN_FILE={token_file}\n"
                       "JOB=$(strands-eval submit job_openpi.yaml)\n"
                       f'strands-eval serve "$JOB" --openpi ws://127.0.0.1:{server_port} --obs-map droid_jointpos '
                       "--inference-timeout 20\n"
                       'strands-eval recordings "$JOB" -o openpi_results/\n', team, env, 600)
        assert rc == 0, out[-6000:] + "\n".join(lines[-60:])
        assert re.search(r"^job \S+ SUCCEEDED", out, re.M) and "droid_jointpos" in out, out[-4000:]
        assert list((team / "openpi_results").glob("ep_*.mcap")), out[-2000:]
    finally:
        if openpi_server is not None:
            stop_server(openpi_server)
        stack.stop()  # every child by its PID (process group)
