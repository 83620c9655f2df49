"""System test: ``strands-robots up`` brings up the arm driver and the rollout node, runs an episode, exits.

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

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

TIMEOUT_S = 120.0


class Up:
    """``python -m strands_robots.cli up ...`` with its output collected line by line on a thread."""

    def __init__(self, *args: str) -> None:
        self.namespace = f"system_up_{uuid.uuid4().hex[:8]}"
        self.lines: list = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "strands_robots.cli", "up", "--namespace", self.namespace, *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
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
    """True while ``pid`` runs (a zombie, exited but not reaped yet, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def test_up_runs_one_episode_and_exits_zero_with_no_events_lost():
    up = Up("--duration", "1")
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
        assert "1 episode(s) ended" in done and " 0 lost" in done and "rollout exit code 0" in done, done
        assert "!! gap" not in out
        assert len([line for line in up.lines if line.startswith("Started")]) == 1
        assert len([line for line in up.lines if line.startswith("Ended")]) == 1
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
