"""One run of the main job (``strands-robots up --record FILE``), for every test that checks what it did.

The main job is some 25 s of real episodes, then the comparison job (the vision policy against the blind one) some
20 s more. The test of what its user sees (test_station_demo_main.py) and the tests that read its recording (the
report, the lerobot export) read the same run instead of each running the job again (conftest's
``demo_main_job``). The recording holds the demo job only: the demo closes it before the comparison.

The run is ``python -m strands_robots.cli.station_demo --namespace NS --record FILE`` as a subprocess in a session
of its own. Beside it, this process's own node takes the station's ``job_status`` and ``observer_events`` (so the
test can hold the stream the station published against the table the demo printed), and a second recorder starts
once an episode has finished and the next one runs, so its file must begin with the latched state then in force.
The demo's recording is complete by construction: the demo submits the job only once its recorder is matched with
the episodes' publishers (``LocalStation.start_recorder``). Every process is ended by its PID, also on a failure.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from recorder_lines import Lines, end
from watched_process import Command, kill_all, wait_gone

from monitor_helpers import start_module

NS = "main_job"
CAMERAS = ("scene", "wrist")
JOB_S = 240.0
# a progress line of the job once an episode has ended and the next one runs: the job has been RUNNING
# (its latched state published) for a whole episode
NEXT_EPISODE_RUNNING = re.compile(r"\] [1-9]\d*/\d+ episodes\s+RUNNING\s+ep_\d+ running")
SUBMITTED = re.compile(r"^\[demo\] submitted job (\S+):")


class StationTopics:
    """The demo station's ``job_status`` and ``observer_events`` as this process receives them (its own node)."""

    def __init__(self, namespace: str) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from strands_robots_msgs.msg import JobStatus, ObserverEvent

        from strands_robots.ros.qos import EVENT_QOS, LATCHED_QOS

        self._rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("main_job_listener", context=self.context)
        self.statuses: list = []
        self.events: list = []
        self.node.create_subscription(JobStatus, f"/{namespace}/job_status", self.statuses.append, LATCHED_QOS)
        self.node.create_subscription(ObserverEvent, f"/{namespace}/observer_events", self.events.append, EVENT_QOS)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin_until(self, predicate, timeout_s: float) -> bool:
        """Take messages until ``predicate()`` holds (True) or ``timeout_s`` passed (False)."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.executor.spin_once(timeout_sec=min(left, 0.1))
        return True

    def take_the_rest(self) -> None:
        """Take every message that has arrived and not been taken yet (nothing more is waited for)."""
        while True:
            taken = len(self.statuses) + len(self.events)
            self.executor.spin_once(timeout_sec=0.0)
            if len(self.statuses) + len(self.events) == taken:
                return

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self._rclpy.try_shutdown(context=self.context)


@dataclass(frozen=True)
class DemoMainJob:
    returncode: int  # what the demo exited with: 0 when the job SUCCEEDED
    lines: list  # everything it printed, one line each: the progress bar, the summary table and rates
    children: list  # its child processes' PIDs, read once the job was submitted (relay, nodes, recorder)
    left_running: list  # those of them still running once it had exited
    statuses: list  # JobStatus messages the station published, as this process received them
    events: list  # ObserverEvent messages of the station's rollouts, likewise
    path: Path  # the demo's own recording (--record)
    late_path: Path  # recorded from a point where the job was running
    late_returncode: int
    late_out: str  # what it says of the latched state it found (on stdout: topics with no publisher yet)
    late_err: str

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def job_ids(self) -> list:
        """The jobs the demo submitted, in order (the demo job, then the comparison)."""
        return [m.group(1) for m in (SUBMITTED.search(line) for line in self.lines) if m]

    def statuses_of(self, job_id: str) -> list:
        """The station's JobStatus messages of one job, in the order they arrived."""
        return [s for s in self.statuses if s.job_id == job_id]

    def demo_job_events(self) -> list:
        """The ObserverEvents of the demo job's rollouts (the recorded job): every run the comparison's did not."""
        later = {e.run_id for job_id in self.job_ids()[1:] for s in self.statuses_of(job_id) for e in s.episodes}
        return [e for e in self.events if e.run_id not in later]


def run_demo_main_job(directory: Path) -> DemoMainJob:
    """Run the main job to its end with its recording, this process's listener and a late recorder beside it."""
    from strands_robots_msgs.msg import ObserverEvent

    path, late_path = directory / "main_job.mcap", directory / "late.mcap"
    topics = StationTopics(NS)
    demo = Command([sys.executable, "-m", "strands_robots.cli.station_demo", "--namespace", NS, "--record",
                    str(path)])
    children: list = []
    late = late_out = late_err = None
    try:
        deadline = time.monotonic() + JOB_S
        while demo.proc.poll() is None and time.monotonic() < deadline:
            topics.executor.spin_once(timeout_sec=0.1)
            if not children and any("submitted job" in line for line in demo.lines):
                children = demo.children()  # relay, arm driver, camera, rollout, station, recorder
            if late is None and any(NEXT_EPISODE_RUNNING.search(line) for line in demo.lines):
                # the capture window ends once every latched sample is in; its bound is for discovery under load
                late = start_module("strands_robots.monitoring.record", "-o", str(late_path), "--namespace", NS,
                                    "--cameras", *CAMERAS, "--latch-wait", "10")
                late_out, late_err = Lines(late.stdout), Lines(late.stderr)
        returncode = demo.wait(10.0)

        submitted = [m.group(1) for m in (SUBMITTED.search(line) for line in demo.lines) if m]

        def last_messages_in() -> bool:
            """Tell whether each job's final JobStatus and the Ended of every rollout it names have arrived."""
            ended = {e.run_id for e in topics.events if e.kind == ObserverEvent.KIND_ENDED}
            for job_id in submitted:
                mine = [s for s in topics.statuses if s.job_id == job_id]
                if not (mine and mine[-1].state == "SUCCEEDED"):
                    return False
                if not all(e.run_id in ended for e in mine[-1].episodes if e.run_id):
                    return False
            return bool(submitted)

        topics.spin_until(last_messages_in, 5.0)  # a bound for their delivery; the tests say what lacks
        topics.take_the_rest()  # and whatever else had arrived: a second Ended or a gap would show in the tests
        left_running = wait_gone(children, 0.0)
    finally:
        kill_all(children)
        demo.kill()
        topics.close()
        if late is not None:
            end(late)
    return DemoMainJob(returncode=returncode, lines=list(demo.lines), children=children, left_running=left_running,
                       statuses=list(topics.statuses), events=list(topics.events), path=path, late_path=late_path,
                       late_returncode=late.returncode if late is not None else -1,
                       late_out=late_out.text() if late_out is not None else "",
                       late_err=late_err.text() if late_err is not None else "")
