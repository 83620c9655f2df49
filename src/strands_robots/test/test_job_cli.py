"""``strands-robots job``: the client token comes from a private file or the environment, never from argv.

The relay and every ``job`` command run as processes of their own (ended by PID in ``finally``); what is
asserted is the exit code and the one line each prints.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("grpc", reason="grpcio is not installed")

from test_relay_harness import (  # noqa: E402
    CLIENT_TOKENS,
    free_port,
    relay_env,
    start_relay_process,
    stop_process,
    write_tokens,
    yes_no_task,
)

from strands_robots.client import EvaluationClient  # noqa: E402

TOKEN = CLIENT_TOKENS["team_a"]


@pytest.fixture
def relay(tmp_path):
    port = free_port()
    proc = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", write_tokens(tmp_path))
    try:
        with EvaluationClient(f"127.0.0.1:{port}", token=TOKEN) as client:
            job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        yield f"127.0.0.1:{port}", job_id
    finally:
        stop_process(proc)


def job(*args: str, env_token: "str | None" = None) -> "tuple[int, str]":
    env = relay_env()
    for name in ("STRANDS_ROBOTS_TOKEN", "STRANDS_ROBOTS_TOKEN_FILE", "STRANDS_ROBOTS_RELAY"):
        env.pop(name, None)
    if env_token is not None:
        env["STRANDS_ROBOTS_TOKEN"] = env_token
    proc = subprocess.Popen([sys.executable, "-m", "strands_robots.client.cli.job", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    try:
        out, _ = proc.communicate(timeout=60)
        return proc.returncode, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def token_file(tmp_path, mode: int, text: str = TOKEN) -> str:
    path = tmp_path / f"token_{mode:o}"
    path.write_text(text + "\n")
    path.chmod(mode)
    return str(path)


def test_a_private_token_file_or_the_environment_variable_reaches_the_relay(relay, tmp_path):
    target, job_id = relay
    rc, out = job("status", "--relay", target, "--token-file", token_file(tmp_path, 0o600), job_id)
    assert rc == 0 and f"job              {job_id}" in out, out
    rc, out = job("status", "--relay", target, job_id, env_token=TOKEN)
    assert rc == 0 and f"job              {job_id}" in out, out
    rc, out = job("status", "--relay", target, job_id, env_token="not-a-token")
    assert rc == 3 and "Unauthenticated" in out, out  # the environment's token really is the one sent


def test_a_token_on_the_command_line_is_refused_with_where_tokens_come_from(relay):
    target, job_id = relay
    rc, out = job("status", "--relay", target, "--token", TOKEN, job_id)
    assert rc == 2, out
    assert out.strip().splitlines() == [
        "strands-robots job: --token is refused: a token on the command line is readable by every user of this "
        "machine; use --token-file FILE (mode 0600) or set STRANDS_ROBOTS_TOKEN"]


def test_a_token_file_others_may_read_is_refused_in_one_line_naming_its_mode(relay, tmp_path):
    target, job_id = relay
    path = token_file(tmp_path, 0o644)
    rc, out = job("status", "--relay", target, "--token-file", path, job_id, env_token=TOKEN)
    assert rc == 2, out
    lines = out.strip().splitlines()
    assert len(lines) == 1 and path in lines[0] and "mode 0644" in lines[0], out
    assert TOKEN not in out


def test_no_token_at_all_says_both_ways_to_give_one(relay):
    target, job_id = relay
    rc, out = job("status", "--relay", target, job_id)
    assert (rc, out.strip()) == (2, "strands-robots job: no client token: give --token-file FILE (mode 0600), or "
                                    "set STRANDS_ROBOTS_TOKEN_FILE to such a file or STRANDS_ROBOTS_TOKEN to the "
                                    "token")
