"""The ``strands-robots`` command line: each command is reachable and refuses a bad command line in one line.

Runs ``python -m strands_robots.cli`` (what the console script calls) as a subprocess and checks its exit code
and output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE_SRC = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> subprocess.CompletedProcess:
    path = os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(PACKAGE_SRC), path) if p))
    return subprocess.run([sys.executable, "-m", "strands_robots.cli", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, timeout=120)


def test_help_lists_every_command():
    proc = _cli("--help")
    assert proc.returncode == 0, proc.stdout
    for command in ("up", "echo", "demo", "station", "relay", "job", "record", "report", "monitor", "foxglove"):
        assert command in proc.stdout.split("positional arguments:")[1], proc.stdout


@pytest.mark.parametrize("args, line", [
    (("up", "--rollout", "--episodes", "0"),
     "strands-robots up: --episodes 0: nothing to run (ask for at least 1 episode)"),
    (("up", "--rollout", "--duration", "0"), "strands-robots up: --duration 0: must be greater than 0"),
    (("up", "--rollout", "--control-frequency", "-5"),
     "strands-robots up: --control-frequency -5: must be greater than 0"),
    (("up", "--policy", "scripted"),
     "strands-robots up: --policy: only with --rollout (the station runs the job's own settings)"),
    (("up", "--rollout", "--relay", "127.0.0.1:1"), "strands-robots up: --relay: not with --rollout"),
    (("up", "--rollout", "--record", "run.mcap"), "strands-robots up: --record: not with --rollout"),
    (("up", "--relay-credentials", "creds.yaml", "--record", "run.mcap"),
     "strands-robots up: --record: only for the demo job (beside a station taking jobs, run strands-robots record)"),
    (("up", "--relay", "127.0.0.1:1"),
     "strands-robots up: --relay needs the station's token in STRANDS_ROBOTS_STATION_TOKEN (or use "
     "--relay-credentials FILE)"),
])
def test_up_refuses_a_run_with_nothing_to_do_in_one_line_and_exit_2(args, line):
    proc = _cli(*args)
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout.strip().splitlines() == [line]


def test_relay_command_is_the_relay_main_and_refuses_a_missing_tokens_file(tmp_path):
    pytest.importorskip("grpc", reason="grpcio is not installed")
    proc = _cli("relay", "--store", f"sqlite:{tmp_path / 'r.db'}", "--tokens", str(tmp_path / "missing.yaml"))
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout.strip().startswith("relay: "), proc.stdout
    assert "Traceback" not in proc.stdout


def test_job_and_station_commands_parse_their_own_arguments():
    job = _cli("job", "--help")
    assert job.returncode == 0 and all(c in job.stdout for c in ("submit", "status", "watch", "cancel")), job.stdout
    station = _cli("station", "--help")
    assert station.returncode == 0 and "--job-file" in station.stdout, station.stdout
