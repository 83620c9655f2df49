"""One run of the simulated station's demo job with ``strands-robots record`` beside it, for the tests that read it.

The demo job takes some 25 s of real episodes; the tests that check what its recording says (the report, the
lerobot export) read the same run instead of each running the job again (conftest's ``recorded_station_job``).
Two recorders: one started (and recording) before the station, one started while the job is running, so its
file must begin with the latched state then in force. Every process is ended by its PID, also on a failure.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from monitor_helpers import start_module, subprocess_env

RECORDING = "recording "  # the recorder's line once its subscriptions are up
# a progress line of the station once an episode has ended and the next one runs: the job has been RUNNING
# (its latched state published) for a whole episode
NEXT_EPISODE_RUNNING = re.compile(r"\] [1-9]\d*/\d+ episodes\s+RUNNING\s+ep_\d+ running")


class Lines:
    """Every line of one of a process's pipes, read by a thread; waits for a line are event waits."""

    def __init__(self, pipe) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe) -> None:
        for line in iter(pipe.readline, ""):
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self.lines.append("")  # end of the pipe
            self._cond.notify_all()

    def wait_for(self, matches, timeout_s: float, what: str) -> str:
        """Return the first line for which ``matches(line)`` holds; AssertionError at the deadline or the pipe's end."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._cond:
            while True:
                for line in self.lines[seen:]:
                    if line == "":
                        raise AssertionError(f"the pipe ended before {what}: {''.join(self.lines)[-2000:]}")
                    if matches(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} within {timeout_s} s: {''.join(self.lines)[-2000:]}")
                self._cond.wait(left)

    def text(self, timeout_s: float = 10.0) -> str:
        """All the lines, once the pipe has ended (the process exited)."""
        self._thread.join(timeout_s)
        with self._cond:
            return "".join(self.lines)


def end(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """SIGINT, then SIGKILL after ``timeout_s``; its pipes are read by :class:`Lines`."""
    if proc.poll() is None:
        proc.send_signal(2)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout_s)


@dataclass(frozen=True)
class RecordedStationJob:
    path: Path  # recorded from before the station started
    late_path: Path  # recorded from a point where the job was running
    station_returncode: int
    station_out: str
    station_err: str
    recorder_returncode: int
    recorder_err: str
    late_returncode: int
    late_err: str


def record_station_job(directory: Path) -> RecordedStationJob:
    """Run ``strands-robots station`` (the demo job) to its end with the two recorders beside it."""
    path, late_path = directory / "station.mcap", directory / "late.mcap"
    recorder = start_module("strands_robots.monitoring.record", "-o", str(path), "--namespace", "station",
                            "--latch-wait", "1")
    station = late = None
    try:
        recorder_out, recorder_err = Lines(recorder.stdout), Lines(recorder.stderr)
        recorder_out.wait_for(lambda ln: ln.startswith(RECORDING), 60.0, "'recording' line from the recorder")
        station = subprocess.Popen([sys.executable, "-m", "strands_robots.cli", "station"], env=subprocess_env(),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        station_out, station_err = Lines(station.stdout), Lines(station.stderr)
        station_out.wait_for(NEXT_EPISODE_RUNNING.search, 180.0, "second episode running")
        late = start_module("strands_robots.monitoring.record", "-o", str(late_path), "--namespace", "station",
                            "--latch-wait", "3")
        Lines(late.stdout)  # drained while it runs
        late_err = Lines(late.stderr)
        station.wait(timeout=240)
        out, err = station_out.text(), station_err.text()
    finally:
        if station is not None and station.poll() is None:
            end(station)
        if late is not None:
            end(late)
        end(recorder)
    return RecordedStationJob(path=path, late_path=late_path, station_returncode=station.returncode,
                              station_out=out, station_err=err, recorder_returncode=recorder.returncode,
                              recorder_err=recorder_err.text(),
                              late_returncode=late.returncode, late_err=late_err.text())
