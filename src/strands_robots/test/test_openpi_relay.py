"""``strands-robots job serve JOB --openpi ws://...``: a real openpi server served through a real relay process.

The relay, the openpi server (openpi-server 0.1.0 in its own venv) and the CLI are processes of their own; the
station's side is played in this process by its link (``station_link/link.py``), as the station node does.
Every process is ended by PID in ``finally``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("grpc", reason="grpcio is not installed")
pytest.importorskip("msgpack", reason="the bridge's optional dependency msgpack is not installed")

from openpi_harness import server_log, start_openpi_server, stop_server  # noqa: E402
from test_openpi_bridge import ALL_KEYS, INSTRUCTION, assert_chunk, droid_expected, observation  # noqa: E402
from test_relay_harness import (  # noqa: E402
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
    yes_no_task,
)

from strands_robots.client import EvaluationClient, pb  # noqa: E402
from strands_robots.station_link.link import StationLink  # noqa: E402
from strands_robots.station_link.session import PolicySessionError, RemotePolicyError  # noqa: E402


@pytest.fixture(scope="module")
def venv_python():
    from openpi_harness import openpi_venv

    try:
        return openpi_venv()
    except RuntimeError as exc:
        pytest.fail(str(exc))


def attached_session(link, job_id, timeout_s=60.0):
    """Open the job's policy session and wait for the client (the previous session may still be closing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        session = link.open_session(job_id, reply_timeout_s=30.0)
        try:
            session.wait_attached(timeout_s=max(0.1, deadline - time.monotonic()))
            return session
        except PolicySessionError as exc:
            session.close()
            if "already has a policy session open" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_job_serve_openpi_applies_the_servers_chunks_and_survives_a_raising_and_a_killed_server(tmp_path,
                                                                                                  venv_python):
    tokens = write_tokens(tmp_path)
    port = free_port()
    target = f"127.0.0.1:{port}"
    relay = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", tokens, "--poll-s", "0.1")
    jobs = []
    link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], on_job=jobs.append, heartbeat_s=0.2)
    server_port = free_port()
    url = f"ws://127.0.0.1:{server_port}"
    servers = [start_openpi_server(tmp_path, server_port, raise_on=2)]
    cli = None
    try:
        link.start()
        client = EvaluationClient(target, token=CLIENT_TOKENS["team_a"])
        job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task("pick", INSTRUCTION)], episodes=3)
        wait_until(lambda: jobs, timeout_s=30, what="the job at the station")
        job = jobs[0]
        cli = subprocess.Popen(
            [sys.executable, "-m", "strands_robots.client.cli.job", "serve", job_id, "--relay", target, "--openpi", url,
             "--obs-map", "droid"],
            env={**os.environ, "STRANDS_ROBOTS_TOKEN": CLIENT_TOKENS["team_a"]}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)

        def episode(episode_id):
            session = attached_session(link, job_id)
            session.start_episode(episode_id, job.tasks[0], action_keys=ALL_KEYS, control_frequency=50.0,
                                  action_horizon=10)
            return session

        # ep_0000: the server's first chunk arrives exactly; on its second call it raises -> the episode's error.
        session = episode("ep_0000")
        obs = observation(0)
        assert_chunk(session.act(obs), droid_expected(obs, 1))
        with pytest.raises(RemotePolicyError, match=r"OpenPIServerError: ValueError: policy exploded at call 2 "
                                                    rf"\(openpi server {url}, during infer\)"):
            session.act(observation(1))
        session.end_episode("ep_0000", "policy_error", "the openpi server raised")
        session.close()

        # ep_0001: the client attached again; one chunk, then the server is SIGKILLed mid-episode.
        session = episode("ep_0001")
        obs = observation(2)
        assert_chunk(session.act(obs), droid_expected(obs, 3))
        os.kill(servers[0].pid, signal.SIGKILL)
        servers[0].wait(10)
        with pytest.raises(RemotePolicyError, match=rf"OpenPIConnectionLost: openpi server {url} closed the "
                                                    r"connection during infer"):
            session.act(observation(3))
        session.end_episode("ep_0001", "policy_error", "the openpi server died")
        session.close()

        # ep_0002: a new server process on the same port; the bridge reconnects and the episode runs through.
        servers.append(start_openpi_server(tmp_path, server_port))
        session = episode("ep_0002")
        for call in (1, 2, 3):
            obs = observation(10 + call)
            assert_chunk(session.act(obs), droid_expected(obs, call))
        session.end_episode("ep_0002", pb.END_TIMEOUT)
        session.close()
        assert [e["pid"] for e in server_log(tmp_path, server_port)] == [servers[0].pid] * 3 + [servers[1].pid] * 3

        status = pb.JobStatus(job_id=job_id, station_id="sim_station", state=pb.JOB_SUCCEEDED, episodes_total=3,
                              updated_unix_ms=int(time.time() * 1000))
        for episode_id, end in (("ep_0000", "policy_error"), ("ep_0001", "policy_error"),
                                ("ep_0002", pb.END_TIMEOUT)):
            status.episodes.add(episode_id=episode_id, end_condition=end, task=job.tasks[0])
        link.report(status)
        out, _ = cli.communicate(timeout=90)
        assert cli.returncode == 0, out
        lines = out.splitlines()
        assert f"openpi server {url}: openpi, obs map droid, metadata {{}}" in lines
        assert [ln for ln in lines if ln.startswith("episode ") and ln.endswith(INSTRUCTION)] == [
            f"episode ep_000{i}: {INSTRUCTION}" for i in range(3)]
        assert f"job {job_id} SUCCEEDED: " in lines
    finally:
        if cli is not None and cli.poll() is None:
            cli.kill()
            cli.wait(10)
        for proc in servers:
            stop_server(proc)
        link.close()
        stop_process(relay)


def test_job_serve_without_a_reachable_openpi_server_says_so_and_exits_4(tmp_path):
    port = free_port()  # nothing listens there
    out = subprocess.run(
        [sys.executable, "-m", "strands_robots.client.cli.job", "serve", "job-0123456789abcdef", "--relay",
         "127.0.0.1:1", "--openpi", f"ws://127.0.0.1:{port}", "--connect-timeout-s", "0.3"],
        env={**os.environ, "STRANDS_ROBOTS_TOKEN": "t"}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 4, out.stdout + out.stderr
    assert out.stderr.strip() == (f"strands-robots job: openpi server ws://127.0.0.1:{port} cannot be reached within "
                                  f"0.3 s (ConnectionRefusedError: [Errno 111] Connection refused)")


def test_job_serve_of_a_plain_openpi_server_without_an_obs_map_exits_2_naming_the_presets(tmp_path, venv_python):
    port = free_port()
    server = start_openpi_server(tmp_path, port)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "strands_robots.client.cli.job", "serve", "job-0123456789abcdef", "--openpi",
             f"ws://127.0.0.1:{port}"], env={**os.environ, "STRANDS_ROBOTS_TOKEN": "t"}, capture_output=True,
            text=True, timeout=60)
    finally:
        stop_server(server)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.startswith("strands-robots job: no obs map named: name the preset that fits your server "
                                 "(droid_jointpos, droid, aloha, libero, roboarena) or a YAML mapping file"), out.stderr


def test_job_serve_with_a_bad_obs_map_exits_2_naming_it(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "strands_robots.client.cli.job", "serve", "job-0123456789abcdef", "--openpi",
         "ws://127.0.0.1:1", "--obs-map", "bridge"],
        env={**os.environ, "STRANDS_ROBOTS_TOKEN": "t"}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "obs map 'bridge' is neither a preset (droid_jointpos, droid, aloha, libero, roboarena) nor a readable " \
           "file" in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "strands_robots.client.cli.job", "serve", "job-0123456789abcdef", "--openpi",
         "ws://127.0.0.1:1"], env={k: v for k, v in os.environ.items() if k != "STRANDS_ROBOTS_TOKEN"},
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no client token" in out.stderr
