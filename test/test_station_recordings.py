"""System test: a station started as the README says records the episodes of a job that asks, and they come home.

As a station operator and a team would, with nothing started in this process: a relay serving its web page
(``python -m strands_robots.relay --web``), a station taking jobs from it (``strands-robots up --relay``, the token
in the environment, its state under ``XDG_STATE_HOME``), and the team's commands: ``job submit FILE --serve`` of a
job file saying ``record: true``, then ``job recordings``. Every process is started here and ended by PID in
``finally``.

Checked: each downloaded file is the rollout node's MCAP byte for byte (under the station's state directory) with
the SHA-256 of the episode's result; it holds the live topic names (``<ns>/action_commands``, ``joint_states``,
``observer_events``) and the cameras as the camera node published them (``<ns>/<camera>/image_raw/compressed``,
``format`` image_transport's ``"rgb8; jpeg compressed bgr8"``); ``report`` names its files by episode id and draws
the cameras; the LeRobot export carries the episode ids and the camera images; the web page's thumbnail of the
episode is that recording's first camera frame (over HTTP, and shown by headless Chromium where it is installed;
its screenshot ``web_status_page_station_recording.png`` goes to ``$STRANDS_SCREENSHOT_DIR`` when set). A job that
does not ask is not recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")
pytest.importorskip("aiohttp", reason="the web status page needs aiohttp (requirements/python.txt)")

from recording_jobs import wait_for  # noqa: E402
from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, free_port, write_tokens  # noqa: E402
from web_helpers import CHROMEDRIVER, CHROMIUM, Http, headless_chromium  # noqa: E402

from strands_robots.client import EvaluationClient  # noqa: E402
from strands_robots.conversions.camera import COMPRESSED_FORMAT  # noqa: E402

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]


def _job_file(path: Path, *, record: bool, trials: int) -> Path:
    """A team's job file: its own one-second task (the demo station allows them), the mock policy, ``record``."""
    import yaml

    job = {"station_id": "sim_station", "policy": {"provider": "mock"},
           "free_form": [{"task_id": "wave", "instruction": "wave both arms", "trials": trials, "budget_s": 1,
                          "scoring": SHEET}]}
    if record:
        job["record"] = True
    path.write_text(yaml.safe_dump(job))
    return path


class _Process:
    """A command run as its own process group, its output in a file (read on failure); ended by PID."""

    def __init__(self, argv: list, log: Path, env: dict) -> None:
        self.log = log
        self.handle = open(log, "w")
        self.proc = subprocess.Popen(argv, stdout=self.handle, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)  # up stops its nodes on Ctrl-C
            try:
                self.proc.wait(30.0)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10.0)
        self.handle.close()


def _topics_and_frames(path: Path) -> "tuple[dict, list]":
    """Return ``{topic: message count}`` and the CompressedImage messages of an MCAP, as a reader decodes them."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    counts: dict = {}
    frames: list = []
    with open(path, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        for schema, channel, _message, decoded in reader.iter_decoded_messages(log_time_order=True):
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            if schema.name.endswith("CompressedImage"):
                frames.append((channel.topic, decoded))
    return counts, frames


def test_an_up_relay_station_records_a_job_that_asks_and_the_team_takes_its_episodes_home(tmp_path):
    tokens = write_tokens(tmp_path)
    relay_port, web_port = free_port(), free_port()
    target = f"127.0.0.1:{relay_port}"
    namespace = f"rec_up_{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "xdg_state"), PYTHONUNBUFFERED="1",
               STRANDS_ROBOTS_STATION_TOKEN=STATION_TOKENS["sim_station"])
    env.pop("STRANDS_ROBOTS_TOKEN", None)
    token_file = tmp_path / "team.token"
    token_file.write_text(CLIENT_TOKENS["team_a"])
    token_file.chmod(0o600)
    team = ("--relay", target, "--token-file", str(token_file))
    relay = station = driver = None
    try:
        relay = _Process([sys.executable, "-m", "strands_robots.relay", "--listen", target, "--store",
                          f"sqlite:{tmp_path / 'relay.db'}", "--tokens", str(tokens), "--poll-s", "0.2",
                          "--web", f"127.0.0.1:{web_port}"], tmp_path / "relay.log", env)
        wait_for(lambda: "relay listening" in relay.text(), 60, "the relay", [])
        station = _Process([sys.executable, "-m", "strands_robots.cli", "up", "--relay", target, "--namespace",
                            namespace], tmp_path / "up.log", env)
        wait_for(lambda: "takes jobs from" in station.text() or station.proc.poll() is not None, 120,
                 "the station", [])
        assert station.proc.poll() is None, station.text()[-4000:]

        # the team: a job asking for its recordings, then one that does not, each served to its end
        runs = {}
        for name, record, trials in (("asks", True, 2), ("quiet", False, 1)):
            run = subprocess.run([sys.executable, "-m", "strands_robots.cli", "job", "submit",
                                  str(_job_file(tmp_path / f"{name}.yaml", record=record, trials=trials)), *team,
                                  "--serve"], capture_output=True, text=True, timeout=300, env=env)
            assert run.returncode == 0, run.stdout + run.stderr + station.text()[-6000:]
            runs[name] = run.stdout.splitlines()[0].strip()
        with EvaluationClient(target, token=CLIENT_TOKENS["team_a"]) as client:
            final = client.get_status(runs["asks"])
            quiet = client.get_status(runs["quiet"])
            listed = [e for e in final.episodes]
            assert final.state == "SUCCEEDED" and all(e.recording_sha256 for e in listed), final
            infos = wait_for(lambda: (lambda r: r if len(r) == len(listed) else None)(
                client.list_recordings(runs["asks"])), 60, "every recording on the relay", [station.text()])
            assert quiet.state == "SUCCEEDED" and not any(e.recording_sha256 for e in quiet.episodes)
            assert client.list_recordings(runs["quiet"]) == []  # not asked: not recorded, nothing sent

        home = tmp_path / "home"
        run = subprocess.run([sys.executable, "-m", "strands_robots.cli", "job", "recordings", *team, runs["asks"],
                              "-o", str(home)], capture_output=True, text=True, timeout=120, env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        from strands_robots.station.state_dir import relay_key

        station_files = tmp_path / "xdg_state" / "strands_robots" / "sim_station" / relay_key(target) / "recordings"
        by_episode = {e.episode_id: e for e in listed}
        assert sorted(p.name for p in home.iterdir()) == sorted(f"{i.episode_id}.mcap" for i in infos)
        for info in infos:
            downloaded = (home / f"{info.episode_id}.mcap").read_bytes()
            assert downloaded == (station_files / info.file_name).read_bytes()  # the rollout node's file
            assert hashlib.sha256(downloaded).hexdigest() == info.sha256 == \
                by_episode[info.episode_id].recording_sha256
            counts, frames = _topics_and_frames(home / f"{info.episode_id}.mcap")
            ns = f"/{namespace}"
            assert counts[f"{ns}/action_commands"] == counts[f"{ns}/joint_states"] > 0, counts
            assert f"{ns}/actions" not in counts and counts[f"{ns}/observer_events"] > 0, counts
            for camera in ("scene", "wrist"):
                assert counts.get(f"{ns}/{camera}/image_raw/compressed", 0) > 0, counts
                assert counts.get(f"{ns}/{camera}/camera_info", 0) > 0, counts
            assert {decoded.format for _, decoded in frames} == {COMPRESSED_FORMAT}

        # report: files named by episode id, a contact sheet of the cameras
        first = infos[0].episode_id
        run = subprocess.run([sys.executable, "-m", "strands_robots.cli", "report", str(home), "-o",
                              str(tmp_path / "report"), "--no-video"], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        written = sorted(p.name for p in (tmp_path / "report").iterdir())
        for info in infos:
            assert f"{info.episode_id}.png" in written and f"{info.episode_id}_cameras.png" in written, written

        # the LeRobot export: the episodes by their ids, the camera images in every frame
        run = subprocess.run([sys.executable, "-m", "strands_robots.cli", "export", "lerobot", str(home), "-o",
                              str(tmp_path / "dataset")], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        import pyarrow.parquet as pq

        rows = pq.read_table(tmp_path / "dataset/meta/episodes/chunk-000/file-000.parquet").to_pylist()
        assert [r["episode_id"] for r in rows] == [i.episode_id for i in infos]
        info_json = json.loads((tmp_path / "dataset/meta/info.json").read_text())
        assert {"observation.images.scene", "observation.images.wrist"} <= set(info_json["features"])

        # the web page: the episode's thumbnail is that recording's first camera frame
        _, first_frames = _topics_and_frames(home / f"{first}.mcap")
        first_jpeg = bytes(first_frames[0][1].data)
        page = Http(web_port)
        page.sign_in(CLIENT_TOKENS["team_a"])
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", web_port, timeout=30)
        conn.request("GET", f"/jobs/{runs['asks']}/recordings/{first}/thumbnail",
                     headers={"Cookie": f"sr_session={page.cookies['sr_session']}"})
        thumb = conn.getresponse()
        body = thumb.read()
        conn.close()
        assert thumb.status == 200 and thumb.headers["Content-Type"] == "image/jpeg" and body == first_jpeg
        if CHROMIUM is None or CHROMEDRIVER is None:
            return  # the browser half needs Debian's chromium and chromium-driver (scripts/system_deps.sh)
        pytest.importorskip("selenium.webdriver", reason="Selenium is not installed (requirements/python.txt)")
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        from strands_robots.cameras.jpeg import decode

        width = decode(first_jpeg).shape[1]
        driver = headless_chromium(tmp_path)
        driver.set_page_load_timeout(30)
        base = f"http://127.0.0.1:{web_port}"
        driver.get(base + "/signin")
        driver.find_element(By.ID, "token").send_keys(CLIENT_TOKENS["team_a"])
        driver.find_element(By.ID, "signin").click()
        WebDriverWait(driver, 20).until(lambda d: d.current_url.endswith("/jobs"))
        driver.get(f"{base}/jobs/{runs['asks']}")
        thumb = f"img.thumb[src$='/recordings/{first}/thumbnail']"
        WebDriverWait(driver, 30).until(lambda d: d.execute_script(
            f"var i = document.querySelector(\"{thumb}\"); return i !== null && i.complete && "
            f"i.naturalWidth === {width};"))
        shot = tmp_path / "web_status_page_station_recording.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        out = os.environ.get("STRANDS_SCREENSHOT_DIR")
        if out:
            import shutil

            shutil.copyfile(shot, Path(out) / shot.name)
    finally:
        if driver is not None:
            driver.quit()
        for process in (station, relay):
            if process is not None:
                process.stop()
