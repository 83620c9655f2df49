"""An exported dataset loads with LeRobot's own ``LeRobotDataset`` (in a venv of its own: lerobot brings torch).

The venv is cached under ``~/.cache/strands_robots/lerobot-venv`` (``$STRANDS_ROBOTS_CACHE``). It is several GB
(torch with its CUDA libraries) and takes about 9 minutes to install here, so a test run builds it only when asked
(``STRANDS_ROBOTS_BUILD_LEROBOT=1``: once, under a file lock, with a bounded ``pip install lerobot``); without a
cached venv and without that variable the test is skipped with the reason, as it is when the install fails.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="the simulated arms need mujoco")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (requirements/python.txt)")

from test_export_lerobot import record  # noqa: E402

from strands_robots.export import lerobot  # noqa: E402

INSTALL_TIMEOUT_S = 1500
BASE_PYTHONS = ("/root/.pyenv/versions/3.11.7/bin/python3.11", "python3.11", "python3.12")

_LOAD = textwrap.dedent("""
    import json, sys
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    # pyav: torchcodec, LeRobot's default decoder, needs the system's FFmpeg 4-7 shared libraries
    ds = LeRobotDataset("local/strands_export", root=sys.argv[1], video_backend="pyav")
    out = {"num_episodes": ds.num_episodes, "num_frames": ds.num_frames, "fps": ds.fps,
           "features": sorted(ds.features), "frames": [],
           "states": [ds[i]["observation.state"].tolist() for i in range(ds.num_frames)],
           "lengths": [int(ds.meta.episodes[e]["length"]) for e in range(ds.num_episodes)],
           "tasks": {str(t): int(ds.meta.tasks.loc[t, "task_index"]) for t in ds.meta.tasks.index},
           "state_mean": ds.meta.stats["observation.state"]["mean"].tolist()}
    for i in (0, ds.num_frames - 1):
        item = ds[i]
        out["frames"].append({"state": item["observation.state"].tolist(), "action": item["action"].tolist(),
                              "episode_index": int(item["episode_index"]), "index": int(item["index"]),
                              "control_source": int(item["control_source"]), "task": item["task"],
                              "image_shape": list(item["observation.images.scene"].shape),
                              "image_mean": float(item["observation.images.scene"].float().mean())})
    print("LOADED " + json.dumps(out), flush=True)
""")


def lerobot_venv() -> Path:
    """Return the python of the cached lerobot venv, building it if needed; skip when it cannot be built."""
    root = Path(os.environ.get("STRANDS_ROBOTS_CACHE", os.path.expanduser("~/.cache/strands_robots")))
    venv = root / "lerobot-venv"
    py = venv / "bin" / "python"
    done = venv / ".complete"
    if done.exists():
        return py
    if os.environ.get("STRANDS_ROBOTS_BUILD_LEROBOT") != "1":
        pytest.skip(f"no cached lerobot venv at {venv}; STRANDS_ROBOTS_BUILD_LEROBOT=1 builds it (several GB, ~9 min)")
    base = next((p for p in BASE_PYTHONS if shutil.which(p)), None)
    if base is None:
        pytest.skip("no Python 3.11/3.12 to build the lerobot venv with")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "lerobot-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return py
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=180)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")}
        try:
            out = subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", "lerobot"],
                                 capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            pytest.skip(f"pip install lerobot (torch included) did not finish in {INSTALL_TIMEOUT_S} s")
        if out.returncode != 0:
            pytest.skip(f"pip install lerobot failed: {(out.stderr or out.stdout).strip().splitlines()[-1:]}")
        version = subprocess.run([str(py), "-c", "import lerobot, importlib.metadata as m; "
                                  "print(m.version('lerobot'))"], capture_output=True, text=True, timeout=300)
        if version.returncode != 0:
            pytest.skip(f"lerobot installed but does not import: {version.stderr.strip().splitlines()[-1:]}")
        done.write_text(f"lerobot=={version.stdout.strip()}\n")
    return py


def export_and_load(tmp_path, *extra):
    """Export two station-shaped episodes (camera ``scene``) and load them in the lerobot venv."""
    py = lerobot_venv()
    from test_export_lerobot import station_recording

    a = record(tmp_path / "a", n_steps=20, hz=50.0, instruction="pick the cube")
    b = record(tmp_path / "b", n_steps=15, hz=50.0, instruction="stack the blocks")
    cams = []
    for n, src in enumerate((a, b)):
        cams.append(tmp_path / f"station_{n}.mcap")
        station_recording(src, cams[-1], cameras={"scene": 5}, result=None)
    out = tmp_path / "dataset"
    assert lerobot.main([str(p) for p in cams] + ["-o", str(out), *extra]) == 0
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    script = tmp_path / "load.py"
    script.write_text(_LOAD)
    done = subprocess.run([str(py), str(script), str(out)], capture_output=True, text=True, timeout=600, env=env)
    return out, done


def test_lerobot_dataset_loads_the_video_export_and_decodes_each_frame(tmp_path):
    pytest.importorskip("av", reason="PyAV is not installed (requirements/python.txt)")
    out, done = export_and_load(tmp_path, "--video")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    got = json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("LOADED "))[len("LOADED "):])
    assert (got["num_episodes"], got["num_frames"], got["fps"]) == (2, 35, 50)
    first, last = got["frames"]
    assert first["image_shape"] == [3, 48, 64] and last["image_shape"] == [3, 48, 64]
    # the last frame is step 14 of episode 1: gray 70/255, decoded by LeRobot from the MP4 at its timestamp
    assert last["image_mean"] == pytest.approx(70 / 255, abs=3 / 255)
    assert first["image_mean"] == pytest.approx(0.0, abs=3 / 255)


def test_lerobot_dataset_loads_the_export_with_its_frames(tmp_path):
    out, done = export_and_load(tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    got = json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("LOADED "))[len("LOADED "):])
    info = json.loads((out / "meta/info.json").read_text())
    assert info["total_frames"] == 35
    assert (got["num_episodes"], got["num_frames"], got["fps"]) == (2, 35, 50)
    assert set(info["features"]) <= set(got["features"])
    table = pq.read_table(out / "data/chunk-000/file-000.parquet").to_pydict()
    first, last = got["frames"]
    assert first["state"] == pytest.approx(table["observation.state"][0], abs=1e-6)
    assert last["action"] == pytest.approx(table["action"][-1], abs=1e-6)
    assert (first["episode_index"], last["episode_index"], last["index"]) == (0, 1, 34)
    assert (first["task"], last["task"]) == ("pick the cube", "stack the blocks")
    assert first["image_shape"] == [3, 48, 64]  # LeRobot hands images as CHW float tensors
    np.testing.assert_allclose(got["states"], table["observation.state"], atol=1e-6)  # every frame, in order
    assert got["lengths"] == [20, 15]
    assert got["tasks"] == {"pick the cube": 0, "stack the blocks": 1}
    stats = json.loads((out / "meta/stats.json").read_text())
    assert got["state_mean"] == pytest.approx(stats["observation.state"]["mean"], abs=1e-9)
