"""Shared pieces of the relay-cluster system tests: relay processes in a cluster, a station reaching them all.

The simulated station reaches the relays by several addresses. Not a test; everything started is ended by PID.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from strands_robots.policies.demo import DemoPolicy
from strands_robots.cli.station_demo import LocalStation
from test_relay_harness import serve_in_background  # noqa: F401 - the cluster tests take it from here

SCRIPTED = {"mode": "torque_ramp", "joint": "right.joint_4", "target": 1.0}  # holds right.joint_4 near start
SHEET = [{"name": "task_done", "question": "Did the arm do what the instruction asked?", "answer_type": "yes_no",
          "max_points": 1, "success_answer": "yes"}]
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def task(task_id: str, **params: str) -> dict:
    parameters = {"duration_s": "1", "control_frequency": "50", **params}
    return {"task_id": task_id, "instruction": f"instruction of {task_id}", "parameters": parameters,
            "scoring": SHEET}


class TeamPolicy(DemoPolicy):
    """The remote team's policy: the scripted torque policy on the client (``episodes``: each one it started)."""

    def __init__(self) -> None:
        super().__init__("scripted", SCRIPTED)
        self.acts: dict = {}  # episode id -> act calls
        self.acting = threading.Event()
        self.watch = ""  # set acting once this episode had 5 act calls

    def act(self, observation):
        episode = self.episode.episode_id
        self.acts[episode] = self.acts.get(episode, 0) + 1
        if episode == self.watch and self.acts[episode] >= 5:
            self.acting.set()
        return super().act(observation)


def start_cluster_relay(stack: LocalStation, name: str, port: int, store_url: str, stale_s: float,
                        host: str = "127.0.0.1", argv_prefix: tuple = ()) -> "tuple[object, dict]":
    """Start a relay process in ``stack``'s supervisor (joining the cluster on a PostgreSQL ``store_url``).

    It waits until the relay listens; ``argv_prefix`` runs it elsewhere (``ip netns exec NS``).

    Returns the process and a dict that gets ``relay_id`` (from its log line) and ``lines``.
    """
    info: dict = {"lines": []}
    ready = threading.Event()

    def on_line(who: str, line: str) -> None:
        info["lines"].append(line)
        if " in the cluster on " in line:
            info["relay_id"] = line.split("relay ", 2)[-1].split(" ", 1)[0]
        if "relay listening" in line:
            ready.set()
        stack._emit(who, line)

    argv = [*argv_prefix, sys.executable, "-m", "strands_robots.relay", "--listen", f"{host}:{port}", "--store",
            store_url, "--tokens", stack.tokens_path, "--poll-s", "0.2", "--cluster-stale-s", str(stale_s)]
    proc = stack.sup.start(name, argv, on_line=on_line)
    if not ready.wait(60.0):
        raise RuntimeError(f"relay {name} did not listen on {host}:{port}: {info['lines'][-20:]}")
    deadline = time.monotonic() + (10.0 if store_url.startswith("postgres") else 0.0)  # in a cluster: its id
    while "relay_id" not in info and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc, info


def station_credentials(stack: LocalStation, targets: list) -> str:
    """Write the station's credentials file naming every relay of the cluster (and its token file)."""
    from strands_robots.cli.bringup import write_relay_credentials

    private = stack.workdir / "credentials"
    private.mkdir(mode=0o700, exist_ok=True)
    token_file = private / "station_token"
    fd = os.open(str(token_file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(stack.station_token)
    stack.relay_credentials = write_relay_credentials(str(private), targets, stack.station_id, str(token_file))
    return stack.relay_credentials


def wait_status(client, job_id, predicate, timeout_s: float, lines: list):
    from strands_robots.client import RelayError

    deadline = time.monotonic() + timeout_s
    status = None
    while time.monotonic() < deadline:
        try:
            status = client.get_status(job_id)
        except RelayError:
            status = None
        if status is not None and predicate(status):
            return status
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached the expected state; last status:\n{status}\n"
                         + "\n".join(lines[-80:]))


def sigkill(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(15.0)


def pids_alive(pids) -> list:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    return alive
