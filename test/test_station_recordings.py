"""System test: the simulated station records each episode and sends it through the relay to the job's team.

The station's processes (relay, arm driver, rollout node recording to MCAP, station node) are started here
(``station_demo.LocalStation``) and ended by PID in ``finally``. A team submits a job through the relay, serves
its policy, and downloads the recordings with ``strands-robots job recordings``: each file is the rollout node's
MCAP byte for byte, its SHA-256 is the one the station reported in the episode's result, and another team's
token gets nothing.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

from strands_robots.client import EvaluationClient, NotFound
from strands_robots.policies.demo import DemoPolicy
from recording_jobs import TERMINAL, recording_task as _task, wait_for as _wait  # noqa: E402
from strands_robots.cli.station_demo import LocalStation

def test_each_recorded_episode_reaches_the_team_byte_for_byte_and_no_one_else(tmp_path):
    lines: list = []
    recordings = tmp_path / "station_recordings"
    stack = LocalStation(str(tmp_path / "station"), namespace=f"rec_station_{int(time.time())}",
                         station_params={"record": True}, rollout_params={"recording_dir": str(recordings)},
                         out=lambda name, line: lines.append(f"[{name}] {line}"))
    try:
        stack.start_relay()
        stack.start_nodes()
        client = stack.client()
        job_id = client.submit_job(station_id=stack.station_id, tasks=[_task("a"), _task("b")], episodes=2)
        serving = threading.Thread(target=lambda: client.serve_policy(job_id, DemoPolicy("mock")), daemon=True)
        serving.start()
        final = _wait(lambda: (lambda s: s if s.state in TERMINAL else None)(client.get_status(job_id)), 180,
                      "the job's end", lines)
        serving.join(10)
        assert final.state == "SUCCEEDED", (final.message, [(e.episode_id, e.end_condition, e.end_detail)
                                                            for e in final.episodes], "\n".join(lines[-80:]))
        # every listed episode that recorded (two kept ones; under load a station fault's retry adds its own)
        recorded = [e.episode_id for e in final.episodes if e.recording_sha256]
        assert len([e for e in final.episodes if e.end_condition != "infrastructure_fault"]) == 2
        infos = _wait(lambda: (lambda r: r if len(r) == len(recorded) and not any(i.refused for i in r) else None)(
            client.list_recordings(job_id)), 60, "every recording on the relay", lines)
        assert [i.episode_id for i in infos] == recorded and len(recorded) >= 2

        token_file = tmp_path / "team.token"
        token_file.write_text(stack.client_token)
        token_file.chmod(0o600)
        out = tmp_path / "home"
        run = subprocess.run([sys.executable, "-m", "strands_robots.client.cli.job", "recordings", "--relay",
                              stack.relay_target, "--token-file", str(token_file), job_id, "-o", str(out)],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        by_episode = {e.episode_id: e for e in final.episodes}
        for info in infos:
            station_file = recordings / info.file_name  # the rollout node's MCAP, as it wrote it
            downloaded = (out / f"{info.episode_id}.mcap").read_bytes()
            assert downloaded == station_file.read_bytes() and len(downloaded) > 1000
            assert hashlib.sha256(downloaded).hexdigest() == info.sha256 == \
                by_episode[info.episode_id].recording_sha256
            assert by_episode[info.episode_id].run_id[:8] in info.file_name

        # a token the relay does not know for this job's team: nothing, as for a job that does not exist
        import yaml

        tokens = yaml.safe_load(Path(stack.tokens_path).read_text())
        tokens["clients"]["other_team"] = "tok-other-team-0123456789"
        Path(stack.tokens_path).write_text(yaml.safe_dump(tokens))  # the relay re-reads its tokens file
        with EvaluationClient(stack.relay_target, token="tok-other-team-0123456789") as other:
            def refused_as_unknown():
                try:
                    other.list_recordings(job_id)
                except NotFound as exc:
                    return str(exc)
                except Exception:  # noqa: BLE001 - the new token not loaded yet (UNAUTHENTICATED)
                    return None
            reason = _wait(refused_as_unknown, 10, "the other team's token loaded", lines)
            assert reason == f"no job {job_id!r} for this client"
    finally:
        stack.stop()
