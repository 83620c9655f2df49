"""The client with its ``[openpi]`` extra installs with pip into a fresh venv (no ROS) and drives a real openpi server.

The venv has no system site packages, no ROS and no MuJoCo; the openpi server (openpi-server 0.1.0, its own
venv) is a process of its own on loopback, ended by PID in ``finally``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from openpi_harness import server_log, start_openpi_server, stop_server
from test_relay_harness import free_port

REPO = Path(__file__).resolve().parents[3]
CLIENT_DIST = REPO / "clients" / "python"

_SCRIPT = textwrap.dedent("""
    import importlib.util, json, sys
    import numpy as np
    from strands_robots.client.openpi import OpenPIPolicy

    for absent in ("rclpy", "mujoco"):
        assert importlib.util.find_spec(absent) is None, absent + " is importable in the client venv"
    policy = OpenPIPolicy(sys.argv[1], obs_map="libero")
    policy.reset({"instruction": "open the drawer"})
    obs = {f"right.joint_{i}.pos": 0.1 * i for i in range(1, 7)}
    obs["right.gripper.pos"] = 0.4
    obs["scene.image"] = np.full((48, 64, 3), 9, dtype=np.uint8)
    obs["wrist.image"] = np.full((64, 48, 3), 3, dtype=np.uint8)
    print("CHUNK", json.dumps(policy.act(obs)), flush=True)
    policy.close()
""")


def test_the_openpi_extra_installs_without_ros_and_its_bridge_drives_a_real_server(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--disable-pip-version-check", "-q",
         "--no-compile", "-c",
         str(REPO / "requirements" / "constraints.txt"), f"{CLIENT_DIST}[openpi]"],
        capture_output=True, text=True, timeout=600,
        env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")})
    shutil.rmtree(CLIENT_DIST / "build", ignore_errors=True)
    for egg in CLIENT_DIST.glob("*.egg-info"):
        shutil.rmtree(egg, ignore_errors=True)
    assert install.returncode == 0, install.stdout + install.stderr
    try:
        from openpi_harness import openpi_venv

        openpi_venv()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    port = free_port()
    server = start_openpi_server(tmp_path, port, mode="libero", horizon=2)
    try:
        script = tmp_path / "team.py"
        script.write_text(_SCRIPT)
        out = subprocess.run([str(py), str(script), f"ws://127.0.0.1:{port}"], cwd=str(tmp_path),
                             env={"PATH": os.environ.get("PATH", "")}, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        chunk = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("CHUNK "))[len("CHUNK "):])
        # libero: state = right joints 1..6, gripper, gripper; 7 action columns = joints 1..6, gripper.
        # The gripper goes as openpi's [0, 1], 1 closed (0.4 rad open of the 0.8 rad jaw: 1 - 0.5) and comes back
        # on the jaw's opening (0.8 - 0.8 * server).
        state = [0.1 * i for i in range(1, 7)] + [1.0 - 0.4 / 0.8]
        assert len(chunk) == 2
        for h, row in enumerate(chunk):
            assert list(row) == [f"right.joint_{i}" for i in range(1, 7)] + ["right.gripper"]
            want = [s + 0.01 * (h + 1) for s in state]
            want[6] = 0.8 - 0.8 * want[6]
            assert list(row.values()) == pytest.approx(want, abs=1e-6)
        got = server_log(tmp_path, port)[0]["obs"]
        assert got["prompt"] == "open the drawer"
        assert got["observation/image"]["shape"] == [224, 224, 3] and got["observation/state"]["shape"] == [8]
        assert got["observation/wrist_image"]["shape"] == [224, 224, 3]
    finally:
        stop_server(server)
