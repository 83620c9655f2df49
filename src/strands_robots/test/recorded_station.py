"""One run of the simulated station's demo job with ``strands-robots record`` beside it, for the tests that read it.

The demo job takes some 25 s of real episodes; the tests that check what its recording says (the report, the
lerobot export) read the same run instead of each running the job again (conftest's ``recorded_station_job``).

The recording is complete by construction. The station's processes come up first (a local relay, the arm driver,
camera, rollout and station nodes: :class:`~strands_robots.cli.station_demo.LocalStation`, as the demo starts
them), then the recorder; the demo job is submitted only once the recorder says it is matched with the publishers
of the reliable volatile topics (the rollout's events, results and commands, the driver's verdicts: what they
send before the match is never delivered) and of the camera frames. The job then runs as ``strands-robots station``
runs it, with the same client functions, and what they write is the station's output. A second recorder starts
once an episode has finished and the next one runs, so its file must begin with the latched state then in force.
Every process is ended by its PID, also on a failure.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from monitor_helpers import start_module

NS = "station"
RECORDING = "recording "  # the recorder's line once its subscriptions are up
MATCHED = re.compile(r"^matched (\S+): (\d+) publisher\(s\)$")
# what the demo job's episodes publish on reliable volatile topics, and the camera frames (best effort)
MATCHED_BEFORE_SUBMIT = ("observer_events", "episode_results", "action_commands", "action_verdicts")
# a progress line of the job once an episode has ended and the next one runs: the job has been RUNNING
# (its latched state published) for a whole episode
NEXT_EPISODE_RUNNING = re.compile(r"\] [1-9]\d*/\d+ episodes\s+RUNNING\s+ep_\d+ running")
NODES_UP_S = 120.0  # five processes starting on a loaded 2-core machine
JOB_S = 240.0


class LineLog:
    """Lines added by one or more threads; waits for a line are event waits. ``end()``: no more lines come."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._ended = threading.Event()

    def add(self, text: str) -> None:
        """Add ``text``, one line per line of it."""
        with self._cond:
            self.lines.extend(line + "\n" for line in text.split("\n"))
            self._cond.notify_all()

    def end(self) -> None:
        with self._cond:
            self.lines.append("")  # the end
            self._cond.notify_all()
        self._ended.set()

    def wait_for(self, matches: Callable[[str], Any], timeout_s: float, what: str) -> str:
        """Return the first line for which ``matches(line)`` holds; AssertionError at the deadline or the end."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._cond:
            while True:
                for line in self.lines[seen:]:
                    if line == "":
                        raise AssertionError(f"the output ended before {what}: {''.join(self.lines)[-2000:]}")
                    if matches(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} within {timeout_s} s: {''.join(self.lines)[-2000:]}")
                self._cond.wait(left)

    def text(self, timeout_s: float = 10.0) -> str:
        """All the lines, once ended (waited for up to ``timeout_s``)."""
        self._ended.wait(timeout_s)
        with self._cond:
            return "".join(self.lines)


class Lines(LineLog):
    """Every line of one of a process's pipes, read by a thread."""

    def __init__(self, pipe) -> None:
        super().__init__()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe) -> None:
        for line in iter(pipe.readline, ""):
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        self.end()


def wait_matched(out: LineLog, names: Iterable[str], timeout_s: float) -> dict[str, int]:
    """Wait until the recorder's ``matched`` lines say every topic in ``names`` has a publisher; their counts."""
    wanted = set(names)
    counts: dict[str, int] = {}

    def all_matched(line: str) -> bool:
        found = MATCHED.match(line.strip())
        if found:
            counts[found.group(1)] = int(found.group(2))
        return all(counts.get(name, 0) > 0 for name in wanted)

    out.wait_for(all_matched, timeout_s, f"publisher matched on each of {', '.join(sorted(wanted))}")
    return {name: counts[name] for name in sorted(wanted)}


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
    path: Path  # recorded from before the job was submitted, matched with every publisher of the episodes
    late_path: Path  # recorded from a point where the job was running
    station_returncode: int  # what strands-robots station exits with: 0 when the job SUCCEEDED
    station_out: str  # what the client side wrote (submission, progress, summary table and rates)
    station_err: str  # the station's processes' output lines (relay and nodes)
    recorder_returncode: int
    recorder_out: str  # its 'recording' line, the matched lines and the message counts
    recorder_err: str
    late_returncode: int
    late_out: str  # what it says of the latched state it found (on stdout: topics with no publisher yet)
    late_err: str


def _watch_children(station: Any, stop: threading.Event, died: dict) -> None:
    """Stop the job's watch as soon as a station process exits: a job whose station is gone never ends."""
    while not stop.wait(0.2):
        for name, proc in list(station.sup.procs.items()):
            if proc.poll() is not None:
                died[name] = proc.returncode
                stop.set()
                return


def _run_job(client: Any, spec: Any, written: LineLog, stop: threading.Event, final: dict) -> None:
    """Submit the demo job, serve its policy and watch it to its end, as the demo does (writes to ``written``)."""
    from strands_robots.cli.client_side import serve_in_background, submit_job_file, watch_job
    from strands_robots.policies.demo import DemoPolicy

    try:
        job_id = submit_job_file(client, spec, write=written.add)
        served: dict = {}
        serve_in_background(client, job_id, DemoPolicy(spec.policy_provider, dict(spec.policy_config)), served)
        final["status"] = watch_job(client, job_id, write=written.add, stop=stop, timeout_s=JOB_S)
        if "error" in served:
            written.add(f"[demo] the policy client ended with {type(served['error']).__name__}: {served['error']}")
    except Exception as exc:  # said in the output; the caller's status check fails on it
        written.add(f"[demo] {type(exc).__name__}: {exc}")
    finally:
        written.end()


def record_station_job(directory: Path) -> RecordedStationJob:
    """Run the demo job to its end on a local station with the two recorders beside it."""
    from strands_robots.cli.client_side import report_final
    from strands_robots.cli.station_demo import DEMO_CAMERAS, LocalStation, default_demo_job
    from strands_robots.station.job_file import load_job_file

    spec = load_job_file(default_demo_job())
    cameras = DEMO_CAMERAS.split(",")
    path, late_path = directory / "station.mcap", directory / "late.mcap"
    node_lines: list[str] = []
    station = LocalStation(str(directory / "station"), namespace=NS, station_id=spec.station_id,
                           out=lambda name, line: node_lines.append(f"[{name}] {line}\n"),
                           control_frequency=spec.control_frequency, cameras=DEMO_CAMERAS)
    written = LineLog()
    stop = threading.Event()
    died: dict = {}
    final: dict = {}
    recorder = late = client = None
    try:
        station.start_relay()
        station.start_nodes()
        threading.Thread(target=_watch_children, args=(station, stop, died), daemon=True).start()
        recorder = start_module("strands_robots.monitoring.record", "-o", str(path), "--namespace", NS,
                                "--cameras", *cameras, "--latch-wait", "1")
        recorder_out, recorder_err = Lines(recorder.stdout), Lines(recorder.stderr)
        before = [f"/{NS}/{name}" for name in MATCHED_BEFORE_SUBMIT]
        before += [f"/{NS}/{camera}/image_raw/compressed" for camera in cameras]
        try:
            recorder_out.wait_for(lambda ln: ln.startswith(RECORDING), 60.0, "'recording' line from the recorder")
            wait_matched(recorder_out, before, NODES_UP_S)
            client = station.client()
            watch = threading.Thread(target=_run_job, args=(client, spec, written, stop, final), daemon=True)
            watch.start()
            written.wait_for(NEXT_EPISODE_RUNNING.search, 180.0, "second episode running")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nthe station's processes: {''.join(node_lines)[-3000:]}") from None
        # the capture window ends once every latched sample is in; its bound is for discovery on a loaded machine
        late = start_module("strands_robots.monitoring.record", "-o", str(late_path), "--namespace", NS,
                            "--cameras", *cameras, "--latch-wait", "10")
        late_out, late_err = Lines(late.stdout), Lines(late.stderr)
        watch.join(JOB_S + 30.0)
        status = final.get("status")
        if status is None or status.state not in ("SUCCEEDED", "FAILED", "CANCELLED"):
            written.add(f"[demo] the job did not end (last status {status}); processes that exited: {died}")
            returncode = 1
        else:
            returncode = report_final(status, written.add)
    finally:
        stop.set()
        if client is not None:
            client.close()
        station.stop()  # its relay and nodes, each by its PID (process group)
        if late is not None:
            end(late)
        if recorder is not None:
            end(recorder)
    return RecordedStationJob(path=path, late_path=late_path, station_returncode=returncode,
                              station_out="".join(written.lines), station_err="".join(node_lines),
                              recorder_returncode=recorder.returncode, recorder_out=recorder_out.text(),
                              recorder_err=recorder_err.text(), late_returncode=late.returncode,
                              late_out=late_out.text(), late_err=late_err.text())
