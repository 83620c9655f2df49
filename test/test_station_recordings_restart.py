"""System test: a recording still pending when the station node is SIGKILLed reaches the team after a restart.

The station's processes (relay, arm driver, rollout node recording to MCAP, station node) are started here
(``station_demo.LocalStation``) and ended by PID in ``finally``. Before the episode runs, the test holds the
relay's one upload slot for the episode (an upload of its own with the station's token that never finishes), so
the station's upload of the recording cannot complete: the recording is pending in the station's state
directory when the station node is SIGKILLed. The relay is killed too and started again on its store, the
station node restarts, sends the pending recording again, and the team downloads it: the rollout node's MCAP
byte for byte, its SHA-256 the one in the episode's result.
"""

from __future__ import annotations

import hashlib
import threading
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

import grpc  # noqa: E402
from strands_robots.cli.station_demo import LocalStation
from strands_robots.policies.demo import DemoPolicy
from recording_jobs import TERMINAL, recording_task as _task, wait_for as _wait  # noqa: E402
from strands_robots.wire.proto import recording_pb2 as rp
from strands_robots.wire.proto import station_service_pb2_grpc as ss_grpc
from strands_robots.station.pending_uploads import PendingUploads

def test_a_recording_pending_when_the_station_is_killed_reaches_the_team_after_a_restart(tmp_path):
    lines: list = []
    recordings = tmp_path / "station_recordings"
    stack = LocalStation(str(tmp_path / "station"), namespace=f"rec_restart_{int(time.time())}",
                         station_params={"record": True}, rollout_params={"recording_dir": str(recordings)},
                         out=lambda name, line: lines.append(f"[{name}] {line}"))
    release = threading.Event()
    channel = None
    try:
        stack.start_relay()
        stack.start_nodes()
        client = stack.client()
        job_id = client.submit_job(station_id=stack.station_id, tasks=[_task("a")], episodes=1)

        # hold the relay's upload slot of ep_0000: the station's upload waits behind it and never completes
        channel = grpc.insecure_channel(stack.relay_target)

        def held():
            yield rp.RecordingChunk(header=rp.RecordingHeader(job_id=job_id, episode_id="ep_0000", size_bytes=1 << 20,
                                                              sha256="0" * 64, file_name="held.mcap"))
            release.wait(300)
        hold = ss_grpc.StationStub(channel).UploadRecording.future(
            held(), metadata=(("authorization", f"Bearer {stack.station_token}"),), timeout=300)
        _wait(lambda: any(i.episode_id == "ep_0000" and i.sha256 == "0" * 64 for i in client.list_recordings(job_id)),
              30, "the held upload on the relay", lines)

        serving = threading.Thread(target=lambda: client.serve_policy(job_id, DemoPolicy("mock")), daemon=True)
        serving.start()
        final = _wait(lambda: (lambda s: s if s.state in TERMINAL else None)(client.get_status(job_id)), 180,
                      "the job's end", lines)
        serving.join(10)
        assert final.state == "SUCCEEDED", (final.message, "\n".join(lines[-80:]))
        (episode,) = final.episodes
        assert len(episode.recording_sha256) == 64

        uploads = PendingUploads(f"{stack.state_dir}/uploads")
        (pending,), problems = uploads.load()
        assert problems == ()
        assert (pending.job_id, pending.episode_id, pending.run_id, pending.sha256) == \
            (job_id, "ep_0000", episode.run_id, episode.recording_sha256)
        assert stack.kill_station() == -9
        assert not hold.done()  # the station's upload never got past the held one
        assert uploads.load()[0] == (pending,)  # still pending on disk after SIGKILL

        stack.stop_relay()  # the relay goes too (ends the held upload); it comes back on its store
        release.set()
        stack.start_relay()
        stack.start_station()
        infos = _wait(lambda: (lambda r: r if r and r[0].sha256 == episode.recording_sha256 and not r[0].refused
                               else None)(client.list_recordings(job_id)), 90, "the recording sent again", lines)
        assert [i.episode_id for i in infos] == ["ep_0000"]
        got = client.download_recording(job_id, "ep_0000", tmp_path / "team")
        downloaded = open(got.path, "rb").read()
        station_file = recordings / infos[0].file_name
        assert str(station_file) == pending.path
        assert downloaded == station_file.read_bytes() and len(downloaded) > 1000
        assert hashlib.sha256(downloaded).hexdigest() == episode.recording_sha256 == got.sha256
        _wait(lambda: uploads.load() == ((), ()), 30, "the pending entry removed once the relay holds it", lines)
        assert any("sent again after a restart" in line for line in lines), "\n".join(lines[-60:])
    finally:
        release.set()
        if channel is not None:
            channel.close()
        stack.stop()
