"""System test: ``strands-robots up --rollout`` brings up the arm driver and the rollout node, runs an episode, exits.

The command runs as a subprocess in a session of its own (so a stray signal from here reaches nothing else)
and is ended by its PID in ``finally`` whatever happens; its node processes are found with ``ps --ppid``.
What is asserted is what a user sees: the exit code and the observer stream it prints.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

TIMEOUT_S = 120.0
PACKAGE_SRC = Path(__file__).resolve().parent.parent / "src" / "strands_robots"


class Up:
    """``python -m strands_robots.cli up --rollout ...`` with its output collected line by line on a thread."""

    def __init__(self, *args: str, env: "dict | None" = None) -> None:
        self.namespace = f"system_up_{uuid.uuid4().hex[:8]}"
        self.lines: list = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "strands_robots.cli", "up", "--rollout", "--namespace", self.namespace, *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait_line(self, pattern: str, timeout_s: float) -> str:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for line in self.lines:
                    if regex.search(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not self._reader.is_alive():
                    raise AssertionError(f"no line matching {pattern!r} within {timeout_s} s:\n{self.output}")
                self._cond.wait(min(left, 0.5))

    def wait(self, timeout_s: float) -> int:
        rc = self.proc.wait(timeout=timeout_s)
        self._reader.join(10.0)
        return rc

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def kill(self) -> None:
        """End the command and anything it left behind, by PID (children first)."""
        for pid in children_of(self.proc.pid):
            _kill(pid)
        if self.proc.poll() is None:
            _kill(self.proc.pid)
            try:
                self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                pass
        self._reader.join(5.0)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def children_of(pid: int) -> list:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], stdout=subprocess.PIPE, text=True).stdout
    return [int(p) for p in out.split()]


def alive(pid: int) -> bool:
    """Tell whether ``pid`` runs (a zombie, exited but not reaped yet, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def test_up_with_zero_episodes_exits_at_once_with_a_message_and_starts_no_node():
    up = Up("--episodes", "0")
    try:
        rc = up.wait(60.0)
        assert rc == 2, up.output
        assert up.lines == ["strands-robots up: --episodes 0: nothing to run (ask for at least 1 episode)"], up.output
    finally:
        up.kill()


def test_up_with_a_malformed_parameters_file_is_one_line_naming_it_and_starts_no_node(tmp_path):
    config = tmp_path / "rollout.yaml"
    config.write_text("/**/rollout:\n  ros__parameters:\n    control_frequency: [50.0\n")
    up = Up("--config-file", str(config))
    try:
        rc = up.wait(60.0)
        assert rc == 2, up.output
        assert len(up.lines) == 1, up.output
        assert up.lines[0].startswith(f"strands-robots up: parameters file {config}: line 4 column 1: not valid YAML")
        assert "Traceback" not in up.output
    finally:
        up.kill()


@pytest.mark.parametrize("executor", ["single", "events"])
def test_up_runs_one_episode_and_exits_zero_with_no_events_lost(executor):
    # Both nodes on each executor STRANDS_ROBOTS_EXECUTOR can pick (nodes/executor_choice.py), each saying which.
    up = Up("--duration", "1", env={"STRANDS_ROBOTS_EXECUTOR": executor})
    try:
        rc = up.wait(TIMEOUT_S)
        out = up.output
        assert rc == 0, out
        started = up.wait_line(r"^Started\s+run_id=(\w+)", 1.0)
        run_id = re.search(r"run_id=(\w+)", started).group(1)
        ended = up.wait_line(r"^Ended\s+run_id=", 1.0)
        assert f"run_id={run_id}" in ended
        assert "stopped_reason=budget" in ended and "outcome=ok" in ended, ended
        assert "applied=50 " in ended, ended  # 1 s at 50 Hz (verdicts may be unknown on a loaded machine)
        done = up.wait_line(r"^\[up\] done:", 1.0)
        assert "1/1 episode(s) ended ok" in done and " 0 lost" in done and "rollout exit code 0" in done, done
        assert started.endswith("episode 1/1"), started
        assert "!! gap" not in out
        assert len([line for line in up.lines if line.startswith("Started")]) == 1
        assert len([line for line in up.lines if line.startswith("Ended")]) == 1
        for node in ("rollout", "arm_driver"):
            assert re.search(rf"\.{node}\]: executor: {executor}$", out, re.M), out
    finally:
        up.kill()


def test_up_with_a_realtime_priority_runs_both_nodes_on_sched_fifo():
    # STRANDS_ROBOTS_RT_PRIORITY (nodes/realtime_priority.py): both node processes say so, and are so while running.
    fifo = "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(3))"
    probe = subprocess.run([sys.executable, "-c", fifo], capture_output=True, text=True, timeout=30)
    if probe.returncode:
        pytest.skip(f"this account may not use SCHED_FIFO: {probe.stderr.strip().splitlines()[-1:]}")
    up = Up("--duration", "2", env={"STRANDS_ROBOTS_RT_PRIORITY": "3"})
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        out = up.output
        policies = {pid: (os.sched_getscheduler(pid), os.sched_getparam(pid).sched_priority)
                    for pid in children_of(up.proc.pid)}
        assert len(policies) == 2 and set(policies.values()) == {(os.SCHED_FIFO, 3)}, (policies, out)
        assert os.sched_getscheduler(up.proc.pid) != os.SCHED_FIFO  # the supervisor itself stays time-shared
        rc = up.wait(TIMEOUT_S)
        out = up.output
        assert rc == 0, out
        for node in ("rollout", "arm_driver"):
            assert re.search(rf"\.{node}\]: real-time priority: SCHED_FIFO 3$", out, re.M), out
        done = up.wait_line(r"^\[up\] done:", 1.0)
        assert "1/1 episode(s) ended ok" in done and " 0 lost" in done, done
    finally:
        up.kill()


def test_up_ctrl_c_stops_nodes_cleanly():
    up = Up("--duration", "30")
    children: list = []
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        children = children_of(up.proc.pid)
        assert len(children) == 2, f"expected the driver and rollout processes, found {children}\n{up.output}"
        os.kill(up.proc.pid, signal.SIGINT)  # what Ctrl-C in its terminal would send to it
        rc = up.wait(15.0)
        assert rc == 130, up.output
        assert "[up] Ctrl-C: stopping the nodes" in up.output
        # The rollout stops its episode before it goes: exactly one Ended, cancelled, reached the stream.
        ended = [line for line in up.lines if line.startswith("Ended")]
        assert len(ended) == 1 and "stopped_reason=cancelled" in ended[0], up.output
        deadline = time.monotonic() + 10.0
        while any(alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in children if alive(p)], f"node processes left running\n{up.output}"
        assert "Traceback" not in up.output, up.output
    finally:
        for pid in children:
            if alive(pid):
                _kill(pid)
        up.kill()


def test_up_counts_the_episodes_it_asked_for_in_each_started_line():
    up = Up("--duration", "0.5", "--episodes", "2")
    try:
        rc = up.wait(TIMEOUT_S)
        assert rc == 0, up.output
        started = [line for line in up.lines if line.startswith("Started")]
        assert len(started) == 2, up.output
        assert started[0].endswith("episode 1/2") and started[1].endswith("episode 2/2"), started
        assert up.wait_line(r"^\[up\] done: 2/2 episode\(s\) ended ok", 1.0)
    finally:
        up.kill()


def test_up_scripted_policy_ends_in_a_safety_stop_exits_1_and_never_prints_done():
    up = Up("--policy", "scripted", "--duration", "10")
    try:
        rc = up.wait(TIMEOUT_S)
        assert rc == 1, up.output
        ended = up.wait_line(r"^Ended\s+run_id=", 1.0)
        assert "outcome=error" in ended and "stopped_reason=safety_stop" in ended, ended
        failed = up.wait_line(r"^\[up\] FAILED", 1.0)
        assert "rollout exit code 1" in failed, failed
        assert not [line for line in up.lines if line.startswith("[up] done")], up.output
        assert "success" not in up.output.lower(), up.output
    finally:
        up.kill()


@pytest.mark.parametrize("sig, sigints, gap_s", [(signal.SIGINT, 2, 0.013), (signal.SIGINT, 2, 0.060),
                                                 (signal.SIGINT, 3, 0.030), (signal.SIGTERM, 2, 0.030)])
def test_up_takes_repeated_stop_signals_and_still_stops_the_nodes_cleanly(sig, sigints, gap_s):
    up = Up("--duration", "30")
    children: list = []
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        children = children_of(up.proc.pid)
        assert len(children) == 2, f"expected the driver and rollout processes, found {children}\n{up.output}"
        for _ in range(sigints):
            os.kill(up.proc.pid, sig)
            time.sleep(gap_s)
        rc = up.wait(30.0)
        assert rc == 128 + sig, up.output
        ended = [line for line in up.lines if line.startswith("Ended")]
        assert len(ended) == 1 and "stopped_reason=cancelled" in ended[0], up.output
        assert "Traceback" not in up.output and "KeyboardInterrupt" not in up.output, up.output
        deadline = time.monotonic() + 10.0
        while any(alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in children if alive(p)], f"node processes left running\n{up.output}"
    finally:
        for pid in children:
            if alive(pid):
                _kill(pid)
        up.kill()


def test_kill_9_of_up_mid_episode_leaves_no_node_process_running():
    up = Up("--duration", "60")
    children: list = []
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        children = children_of(up.proc.pid)
        assert len(children) == 2, f"expected the driver and rollout processes, found {children}\n{up.output}"
        os.kill(up.proc.pid, signal.SIGKILL)
        up.wait(10.0)
        deadline = time.monotonic() + 30.0  # a poll, not a timing figure: each child stops as on SIGTERM
        while any(alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in children if alive(p)], "node processes outlived strands-robots up"
    finally:
        for pid in children:
            if alive(pid):
                _kill(pid)
        up.kill()


class Echo(Up):
    """``python -m strands_robots.cli echo ...`` on an existing namespace."""

    def __init__(self, namespace: str, *args: str) -> None:  # noqa: D107 - same reader as Up
        self.namespace = namespace
        self.lines = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "strands_robots.cli", "echo", "--namespace", namespace, *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()


def test_echo_joining_mid_run_reports_no_gap_and_summarises_the_run(tmp_path):
    # Starting the echo process (an interpreter, rclpy and a DDS participant) can hold a 2-core machine for a
    # quarter second, the rollout's default driver-silence limit: this test is about the echo, so it allows
    # the most the rollout accepts (0.5 s).
    config = tmp_path / "rollout.yaml"
    source = (PACKAGE_SRC / "config" / "rollout.yaml").read_text()
    marker = "/**/rollout:\n  ros__parameters:\n"
    assert marker in source
    config.write_text(source.replace(marker, marker + "    driver_silence_s: 0.5\n", 1))
    up = Up("--duration", "4", "--config-file", str(config))
    echo = None
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        echo = Echo(up.namespace, "--summary", "--runs", "1")
        assert up.wait(TIMEOUT_S) == 0, up.output
        assert echo.wait(60.0) == 0, echo.output
        summary = [line for line in echo.lines if line.startswith("Summary")]
        assert len(summary) == 1, echo.output
        assert "outcome=ok stopped_reason=budget" in summary[0] and " lost=0" in summary[0], summary[0]
        joined = re.search(r"joined_at_event_seq=(\d+)", summary[0])
        assert joined and int(joined.group(1)) > 0, summary[0]  # it did join midway, and saw no gap
    finally:
        if echo is not None:
            echo.kill()
        up.kill()


def test_kill_9_of_the_arm_driver_mid_episode_fails_the_run_and_leaves_no_node_running():
    up = Up("--duration", "30")
    children: list = []
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        children = children_of(up.proc.pid)
        driver = [p for p in children if "arm_driver_node" in _cmdline(p)]
        assert len(children) == 2 and len(driver) == 1, f"{children}\n{up.output}"
        os.kill(driver[0], signal.SIGKILL)
        rc = up.wait(TIMEOUT_S)
        assert rc != 0, up.output
        failed = up.wait_line(r"^\[up\] FAILED", 1.0)
        assert "0 ok" in failed, failed
        assert not [line for line in up.lines if line.startswith("[up] done")], up.output
        deadline = time.monotonic() + 10.0
        while any(alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in children if alive(p)], f"node processes left running\n{up.output}"
    finally:
        for pid in children:
            if alive(pid):
                _kill(pid)
        up.kill()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# -- up --relay: the station's state persists, so a restarted station resumes its job ----------------------------
class StationUp:
    """``python -m strands_robots.cli up <args>`` (the station taking jobs from a relay), output collected."""

    def __init__(self, *args: str, env: dict) -> None:
        self.lines: list = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "strands_robots.cli", "up", "--namespace", f"up_relay_{uuid.uuid4().hex[:8]}",
             *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env)
        self._reader = threading.Thread(target=lambda: self.lines.extend(line.rstrip("\n") for line in
                                                                         self.proc.stdout), daemon=True)
        self._reader.start()

    def wait_line(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(text in line for line in list(self.lines)):
            assert self.proc.poll() is None and time.monotonic() < deadline, "\n".join(self.lines[-40:])
            time.sleep(0.1)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        self.proc.wait(30.0)


def test_a_restarted_up_relay_resumes_its_job_from_the_persistent_state_dir_without_rerunning_episodes(tmp_path):
    from strands_robots.client import RelayError
    from strands_robots.policies.demo import DemoPolicy
    from strands_robots.cli.station_demo import LocalStation

    relay = LocalStation(str(tmp_path / "relay"), out=lambda name, line: None)  # only its relay runs here
    ups: list = []
    try:
        relay.start_relay()
        # The token from the environment (never the command line); the state under XDG_STATE_HOME by default.
        env = dict(os.environ, PYTHONUNBUFFERED="1", XDG_STATE_HOME=str(tmp_path / "xdg_state"),
                   STRANDS_ROBOTS_STATION_TOKEN=relay.station_token)
        ups.append(StationUp("--relay", relay.relay_target, env=env))
        ups[-1].wait_line("takes jobs from", 90.0)
        client = relay.client()
        sheet = [{"name": "done", "question": "Held?", "answer_type": "yes_no", "max_points": 1,
                  "success_answer": "yes"}]
        tasks = [{"task_id": t, "instruction": t, "parameters": {"duration_s": "2"}, "scoring": sheet}
                 for t in ("a", "b")]
        job_id = client.submit_job(station_id="sim_station", tasks=tasks, episodes=3)
        served: dict = {}

        def serve() -> None:
            try:
                served["final"] = client.serve_policy(job_id, DemoPolicy("scripted", {"mode": "torque_ramp",
                                                                                      "target": 1.0}))
            except RelayError as exc:
                served["error"] = exc

        threading.Thread(target=serve, daemon=True).start()

        def wait_status(predicate, timeout_s=150.0):
            deadline = time.monotonic() + timeout_s
            status = None
            while time.monotonic() < deadline:
                status = client.get_status(job_id)
                if predicate(status):
                    return status
                time.sleep(0.2)
            raise AssertionError(f"last status {status}\n" + "\n".join(ups[-1].lines[-40:]))

        wait_status(lambda s: len(s.episodes) == 1 and "ep_0001 running" in s.message)
        ups[-1].kill(signal.SIGKILL)  # the station and its nodes die mid-episode
        saved = tmp_path / "xdg_state" / "strands_robots" / "sim_station" / f"{job_id}.job.json"
        assert saved.exists()
        ups.append(StationUp("--relay", relay.relay_target, env=env))
        final = wait_status(lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"))
        assert final.state == "SUCCEEDED", final.message
        ids = [e.episode_id for e in final.episodes]
        assert ids[0] == "ep_0000" and len(ids) == 3 and "ep_0001" not in ids  # kept, never re-run; ids not reused
        assert [e.task.task_id for e in final.episodes] == ["a", "b", "a"]
    finally:
        for up in ups:
            up.kill()
        relay.stop()


def test_up_refuses_a_station_token_on_the_command_line_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "strands_robots.cli", "up", "--relay", "127.0.0.1:1",
                           "--station-token", "secret"], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "STRANDS_ROBOTS_STATION_TOKEN"})
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "--station-token is gone" in line and "--relay-credentials" in line and "secret" not in line
