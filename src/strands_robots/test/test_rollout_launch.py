"""The launch files under the real ``launch``: exit codes, Ctrl-C, deactivate, output, a station job.

Each test runs a launch file the way ``ros2 launch`` does (a ``LaunchService`` in a process of its own, in a
session of its own so a signal sent to its group is what a terminal's Ctrl-C sends), and checks what a user sees:
the exit status and the output. Where ``launch``/``launch_ros`` are not importable (the PyPI wheels carry
none) the module is skipped with that reason; ``test/test_system_up.py`` pins the same behaviours through
``strands-robots up``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

# "launch.launch_service", not "launch": the package's own launch/ directory is importable as a namespace
# package named launch wherever build/strands_robots is on the path.
pytest.importorskip(
    "launch.launch_service", reason="launch is not installed (no ROS distro; the Kilted PyPI wheels lack launch)"
)
pytest.importorskip("launch_ros", reason="launch_ros is not installed (no ROS distro)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

LAUNCH_DIR = Path(__file__).resolve().parent.parent / "launch"
ROLLOUT_LAUNCH = LAUNCH_DIR / "rollout.launch.py"  # the whole station running the demo job
ROLLOUT_ONLY_LAUNCH = LAUNCH_DIR / "rollout_only.launch.py"  # the driver and the rollout's autorun episodes
DRIVER_LAUNCH = LAUNCH_DIR / "arm_driver.launch.py"
TIMEOUT_S = 120.0

# What `ros2 launch FILE name:=value ...` does, without needing the ros2 command on PATH.
RUNNER = textwrap.dedent("""
    import sys
    import launch
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import PythonLaunchDescriptionSource
    arguments = [tuple(a.split(":=", 1)) for a in sys.argv[2:]]
    service = launch.LaunchService(argv=sys.argv[2:])
    service.include_launch_description(
        IncludeLaunchDescription(PythonLaunchDescriptionSource(sys.argv[1]), launch_arguments=arguments))
    sys.exit(service.run())
""")


class Launch:
    """A launch file running in its own session, its output collected line by line."""

    def __init__(self, launch_file: Path, env: "dict | None" = None, **arguments: str) -> None:
        self.namespace = f"launch_{uuid.uuid4().hex[:8]}"
        argv = [f"{k}:={v}" for k, v in {"namespace": self.namespace, **arguments}.items()]
        self.lines: list = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(launch_file), *argv],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    @property
    def output(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def wait_line(self, pattern: str, timeout_s: float = TIMEOUT_S) -> str:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for line in self.lines:
                    if regex.search(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"no line matching {pattern!r}:\n" + "\n".join(self.lines))
                self._cond.wait(min(left, 0.5))

    def wait(self, timeout_s: float = TIMEOUT_S) -> int:
        rc = self.proc.wait(timeout=timeout_s)
        self._reader.join(10.0)
        return rc

    def ctrl_c(self) -> None:
        """Send what a terminal's Ctrl-C sends: SIGINT to the whole process group (launch and its nodes)."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                pass
        else:  # launch is gone; anything left in its group goes too
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._reader.join(5.0)


def test_launch_runs_an_episode_and_exits_zero_with_one_ended_event(tmp_path):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from strands_robots_msgs.msg import ObserverEvent

    from strands_robots.ros.qos import EVENT_QOS

    run = Launch(ROLLOUT_ONLY_LAUNCH, episode_duration="1.0", robot_name="launch_bot", recording_dir=str(tmp_path))
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("launch_test_listener", context=context)
    events: list = []
    node.create_subscription(ObserverEvent, f"/{run.namespace}/observer_events", events.append, EVENT_QOS)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while run.proc.poll() is None and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        for _ in range(10):  # the last events may still be on their way
            executor.spin_once(timeout_sec=0.05)
        rc = run.wait()
        assert rc == 0, run.output
        ended = [e for e in events if e.kind == ObserverEvent.KIND_ENDED]
        assert len(ended) == 1, run.output
        assert ended[0].ended[0].outcome == "ok" and ended[0].ended[0].stopped_reason == "budget"
        steps = [e.step[0].event_seq for e in events if e.kind == ObserverEvent.KIND_STEP]
        # This listener may join a little after the episode started (discovery): dense from its first event.
        assert steps and steps == list(range(steps[0], steps[0] + len(steps))), steps
        assert ended[0].ended[0].event_seq == steps[-1] + 1
        # The launch arguments reached the rollout: its recording is where recording_dir says.
        recordings = sorted(p.name for p in tmp_path.glob("*.mcap"))
        assert recordings and ended[0].ended[0].recording_path == str(tmp_path / recordings[0]), recordings
        started = [e for e in events if e.kind == ObserverEvent.KIND_STARTED]
        if started:  # the listener may have joined after Started went out
            assert started[0].started[0].robot_name == "launch_bot"
        assert "process has died" not in run.output and "Caught exception" not in run.output, run.output
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        run.kill()


def test_failed_episode_makes_the_launch_exit_nonzero_and_says_why():
    run = Launch(ROLLOUT_ONLY_LAUNCH, policy_provider="scripted", episode_duration="10.0")
    try:
        rc = run.wait()
        assert rc != 0, run.output  # scripted drives joint 4 into its torque limit: a safety stop
        assert "SAFETY STOP" in run.output, run.output
        assert "rollout exited with code 1 (an episode ended in an error or a safety stop)" in run.output
        assert "success" not in run.output.lower(), run.output
    finally:
        run.kill()


@pytest.mark.parametrize("sigints, gap_s", [(1, 0.0), (2, 0.013), (2, 0.060)])
def test_ctrl_c_stops_both_nodes_cleanly_and_the_launch_exits_zero(sigints, gap_s):
    run = Launch(ROLLOUT_ONLY_LAUNCH, episode_duration="30.0")
    try:
        run.wait_line(r"rollout\]: episode 0: ")
        for i in range(sigints):
            if i:
                time.sleep(gap_s)
            run.ctrl_c()
        rc = run.wait()
        out = run.output
        assert rc == 0, out
        assert "Cannot shutdown a ROS adapter" not in out and "Caught exception" not in out, out
        assert "process has died" not in out, out  # neither node was killed by the second signal
        assert re.search(r"rollout\]: episode \w+ ended: cancelled", out), out
        assert len(re.findall(r"process has finished cleanly", out)) == 2, out
    finally:
        run.kill()


def test_operator_deactivate_of_the_driver_stays_until_activated_again():
    import rclpy
    from lifecycle_msgs.msg import State, Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    from rclpy.executors import SingleThreadedExecutor

    run = Launch(DRIVER_LAUNCH)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("launch_test_operator", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        run.wait_line(r"arm_driver\]: active: ")
        base = f"/{run.namespace}/arm_driver"
        change = node.create_client(ChangeState, f"{base}/change_state")
        get = node.create_client(GetState, f"{base}/get_state")
        assert change.wait_for_service(timeout_sec=30.0) and get.wait_for_service(timeout_sec=30.0)

        def call(client, request):
            future = client.call_async(request)
            executor.spin_until_future_complete(future, timeout_sec=30.0)
            assert future.done(), "no answer from the driver"
            return future.result()

        def state() -> int:
            return call(get, GetState.Request()).current_state.id

        assert call(change, ChangeState.Request(transition=Transition(id=Transition.TRANSITION_DEACTIVATE))).success
        for _ in range(20):  # 2 s of looking: the launch file must not have activated it again
            assert state() == State.PRIMARY_STATE_INACTIVE, run.output
            time.sleep(0.1)
        assert call(change, ChangeState.Request(transition=Transition(id=Transition.TRANSITION_ACTIVATE))).success
        assert state() == State.PRIMARY_STATE_ACTIVE
        run.ctrl_c()
        assert run.wait() == 0, run.output
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        run.kill()


def test_output_to_a_pipe_carries_no_colour_codes_and_the_driver_comes_from_its_own_launch_file():
    run = Launch(ROLLOUT_ONLY_LAUNCH, episode_duration="0.5")
    try:
        assert run.wait() == 0, run.output
        assert "\x1b[" not in run.output
        assert "arm_driver_node-1" in run.output  # the node the included arm_driver.launch.py brought up
    finally:
        run.kill()
    source = ROLLOUT_ONLY_LAUNCH.read_text()
    assert "arm_driver.launch.py" in source and "LifecycleNode(" not in source


@pytest.mark.parametrize("content, reason", [
    ("/**/rollout:\n  ros__parameters:\n    control_frequency: [50.0\n", "line 4 column 1: not valid YAML"),
    ("/**/rollout:\n  ros__parameters:\n    control_frequncy: 50.0\n",
     "/**/rollout: unknown parameter 'control_frequncy' (did you mean control_frequency?)"),
])
def test_a_bad_parameters_file_fails_the_launch_in_one_line_before_any_node_starts(tmp_path, content, reason):
    config = tmp_path / "rollout.yaml"
    config.write_text(content)
    run = Launch(ROLLOUT_ONLY_LAUNCH, config_file=str(config))
    try:
        assert run.wait() != 0, run.output
        errors = [line for line in run.lines if "ERROR" in line]
        assert len(errors) == 1, run.output
        assert f"parameters file {config}: {reason}" in errors[0], run.output
        assert "process started" not in run.output, run.output
    finally:
        run.kill()


STATION_LAUNCH = LAUNCH_DIR / "station.launch.py"


def test_station_launch_runs_a_submitted_job_to_succeeded_with_a_gapless_stream_and_clean_exits(tmp_path):
    import rclpy
    from diagnostic_msgs.msg import KeyValue
    from rclpy.executors import SingleThreadedExecutor
    from strands_robots_msgs.msg import JobStatus, ObserverEvent
    from strands_robots_msgs.srv import SubmitJob

    from strands_robots.ros.qos import EVENT_QOS, LATCHED_QOS

    run = Launch(STATION_LAUNCH, state_dir=str(tmp_path / "state"))
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("launch_test_client", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    statuses: list = []
    events: list = []
    node.create_subscription(JobStatus, f"/{run.namespace}/job_status", statuses.append, LATCHED_QOS)
    node.create_subscription(ObserverEvent, f"/{run.namespace}/observer_events", events.append, EVENT_QOS)
    try:
        submit = node.create_client(SubmitJob, f"/{run.namespace}/submit_job")
        assert submit.wait_for_service(timeout_sec=60.0), run.output
        # This listener must see the rollout's stream before the job starts (discovery can lag on a loaded
        # machine; a 2-episode job of 1 s each is over before a late subscription matches).
        deadline = time.monotonic() + 30.0
        while node.count_publishers(f"/{run.namespace}/observer_events") < 1 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        for _ in range(10):
            executor.spin_once(timeout_sec=0.05)
        # two trials of the demo suite's first task (the station fills it in from config/suites/demo.yaml)
        future = submit.call_async(SubmitJob.Request(client_id="launch_test", suite="demo", suite_tasks=["hold_pose"],
                                                     suite_trials=[2], episodes_total=2, policy_provider="mock",
                                                     choose=[KeyValue(key="control_frequency", value="50")]))
        executor.spin_until_future_complete(future, timeout_sec=30.0)
        assert future.done() and future.result().accepted, future.result()
        job_id = future.result().job_id
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and not (
                statuses and statuses[-1].job_id == job_id and statuses[-1].state in ("SUCCEEDED", "FAILED",
                                                                                      "CANCELLED")):
            executor.spin_once(timeout_sec=0.1)
        assert statuses and statuses[-1].state == "SUCCEEDED", (statuses[-1:], run.output)
        assert len(statuses[-1].episodes) == 2
        by_run: dict = {}
        for event in events:
            by_run.setdefault(event.run_id, []).append(event)
        assert len(by_run) == 2, sorted(by_run)
        for run_events in by_run.values():
            seqs = [e.event_seq for e in run_events]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs  # no gap from the first one seen
            assert [e.kind for e in run_events].count(ObserverEvent.KIND_ENDED) == 1
        run.ctrl_c()
        assert run.wait() == 0, run.output
        # the driver, the camera node, the rollout and the station
        assert len(re.findall(r"process has finished cleanly", run.output)) == 4, run.output
        assert "process has died" not in run.output and "Caught exception" not in run.output, run.output
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        run.kill()


# -- rollout.launch.py: the whole station running the demo job ---------------------------------------------------
class Listener:
    """A node of the test's own watching one namespace: every JobStatus and every observer event, in order."""

    def __init__(self, namespace: str) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from strands_robots_msgs.msg import JobStatus, ObserverEvent

        from strands_robots.ros.qos import EVENT_QOS, LATCHED_QOS

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("launch_test_listener", context=self.context)
        self.statuses: list = []
        self.events: list = []
        self.node.create_subscription(JobStatus, f"/{namespace}/job_status", self.statuses.append, LATCHED_QOS)
        self.node.create_subscription(ObserverEvent, f"/{namespace}/observer_events", self.events.append, EVENT_QOS)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin_while(self, running, timeout_s: float = TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while running() and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.1)
        for _ in range(10):  # the last events may still be on their way
            self.executor.spin_once(timeout_sec=0.05)

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def assert_every_episode_streamed_without_gaps(final, events) -> None:
    """Each episode's rollout is one run in the stream: event_seq dense from its first event, one Ended."""
    from strands_robots_msgs.msg import ObserverEvent

    by_run: dict = {}
    for event in events:
        by_run.setdefault(event.run_id, []).append(event)
    rolled = [e.run_id for e in final.episodes if e.run_id]
    assert rolled and set(rolled) <= set(by_run), (rolled, sorted(by_run))
    for run_id, run_events in by_run.items():
        seqs = [e.event_seq for e in run_events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), (run_id, seqs)  # no gap
        assert [e.kind for e in run_events].count(ObserverEvent.KIND_ENDED) == 1, run_id
        assert run_events[-1].kind == ObserverEvent.KIND_ENDED, run_id


DEMO_ROWS = [("ep_0000", "timeout"), ("ep_0001", "policy_completed"), ("ep_0002", "safety_stop"),
             ("ep_0003", "timeout"), ("ep_0005", "timeout"), ("ep_0006", "start_pose_unreached"),
             ("ep_0007", "timeout"), ("ep_0008", "timeout")]  # the vision task, then the same with its camera covered


@pytest.mark.parametrize("use_relay, processes", [("true", 6), ("false", 5)])  # the camera node among them
def test_rollout_launch_runs_the_demo_job_to_succeeded_and_exits_zero(tmp_path, use_relay, processes):
    run = Launch(ROLLOUT_LAUNCH, use_relay=use_relay, recording_dir=str(tmp_path),
                 state_dir=str(tmp_path / "state"))  # its own: runs never share a station's state
    listener = Listener(run.namespace)
    try:
        listener.spin_while(lambda: run.proc.poll() is None)
        rc = run.wait()
        out = run.output
        assert rc == 0, out
        final = listener.statuses[-1]
        assert final.state == "SUCCEEDED", out
        assert [(e.episode_id, e.end_condition) for e in final.episodes] == DEMO_ROWS, out
        assert [e.success for e in final.episodes[-2:]] == [True, False], out  # it needs its camera
        assert_every_episode_streamed_without_gaps(final, listener.events)
        # recording_dir: every rollout (the discarded ep_0004's too) recorded there, as its Ended event says.
        from strands_robots_msgs.msg import ObserverEvent

        recorded = sorted(e.ended[0].recording_path for e in listener.events if e.kind == ObserverEvent.KIND_ENDED)
        assert len(recorded) == 8 and recorded == sorted(str(p) for p in tmp_path.glob("*.mcap")), recorded
        # What the user sees: the job's progress lines and its summary, from the demo_job process.
        assert re.search(r"^\[demo_job-\d+\] \[#{3,}\.+\] 1/8 episodes", out, re.M), out
        assert re.search(rf"^\[demo_job-\d+\] job {final.job_id} SUCCEEDED: ", out, re.M), out
        assert ("relay on 127.0.0.1:" in out) == (use_relay == "true"), out
        # Every process exited 0: the job's client on its own, the rest on the launch's SIGINT.
        assert len(re.findall(r"process has finished cleanly", out)) == processes, out
        assert "process has died" not in out and "Caught exception" not in out, out
        run_dir = re.search(r"private run dir ([^;\s]+)", out).group(1)
        assert not os.path.exists(run_dir), run_dir  # the tokens went with the launch
    finally:
        listener.close()
        run.kill()


@pytest.mark.parametrize("first", ["group", "demo_job", "demo_job_only"])
def test_ctrl_c_mid_job_stops_every_process_of_the_station_cleanly(first, tmp_path):
    run = Launch(ROLLOUT_LAUNCH, state_dir=str(tmp_path / "state"))
    try:
        started = run.wait_line(r"\[demo_job-\d+\]: process started with pid \[\d+\]")
        # Mid-episode: the driver is active by then (a Ctrl-C while launch_ros still waits for the driver's
        # activate answer ends in launch_ros's "cannot use Destroyable" exception, whatever the nodes do).
        run.wait_line(r"rollout\]: episode 0: ")
        if first != "group":  # the job's client sees the terminal's SIGINT before the launch does (or alone)
            os.kill(int(re.search(r"pid \[(\d+)\]", started).group(1)), signal.SIGINT)
            time.sleep(0.5)
        if first != "demo_job_only":
            run.ctrl_c()
        rc = run.wait()
        out = run.output
        assert rc == 0, out
        assert "Caught exception" not in out and "Cannot shutdown a ROS adapter" not in out, out
        # relay, driver, camera, rollout, station and the job's client: each within launch's SIGINT grace (5 s, past
        # which it escalates to SIGTERM in an ERROR line), without a traceback
        assert len(re.findall(r"process has finished cleanly", out)) == 6, out
        assert "process has died" not in out and "escalating to" not in out and "Traceback" not in out, out
        assert re.search(r"\[demo_job\] stopped by signal 2 before job job-\w+ ended", out), out
        assert "SUCCEEDED" not in out, out
    finally:
        run.kill()


def _files_holding(root: Path, secret: str) -> list:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and secret in path.read_text(errors="replace"):
                found.append(str(path))
        except OSError:  # removed while looked at
            pass
    return found


def test_a_launch_killed_mid_job_leaves_no_token_and_the_next_default_launch_inherits_nothing(tmp_path):
    private_tmp = tmp_path / "tmp"  # the launches' TMPDIR: their run dirs are made here
    private_tmp.mkdir()
    env = {"TMPDIR": str(private_tmp), "XDG_STATE_HOME": str(tmp_path / "xdg_state")}
    first = Launch(ROLLOUT_LAUNCH, env=env)  # defaults only: its relay, its state in its run dir
    try:
        run_dir = Path(re.search(r"private run dir ([^;\s]+)", first.wait_line(r"private run dir ")).group(1))
        first.wait_line(r"rollout\]: episode 0: ")  # mid-job: a job persisted, an episode running
        tokens = [(run_dir / name).read_text() for name in ("client_token", "station_token")]
        assert all(tokens) and all(_files_holding(private_tmp, t) for t in tokens)  # the test sees them
        os.killpg(first.proc.pid, signal.SIGKILL)  # the launch and everything it started, without a word
        first.proc.wait(10.0)
        deadline = time.monotonic() + 10.0  # a bound on the janitor, not a timing figure
        while run_dir.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not run_dir.exists(), sorted(p.name for p in run_dir.iterdir())
        assert [_files_holding(tmp_path, t) for t in tokens] == [[], []]
    finally:
        first.kill()
    second = Launch(ROLLOUT_LAUNCH, env=env)
    try:
        assert second.wait() == 0, second.output
        out = second.output
        assert re.search(r"^\[demo_job-\d+\] job job-\w+ SUCCEEDED: ", out, re.M), out
        assert "queued at station sim_station behind 0 job(s)" in out, out  # nothing of the first launch's
        assert "after a restart" not in out and "behind 1 job" not in out, out
        assert not (tmp_path / "xdg_state").exists()  # a default launch keeps nothing of its own beyond its run
    finally:
        second.kill()


def test_a_station_killed_mid_job_makes_the_launch_exit_nonzero_naming_it(tmp_path):
    run = Launch(ROLLOUT_LAUNCH, state_dir=str(tmp_path / "state"))
    try:
        line = run.wait_line(r"\[station_node-\d+\]: process started with pid \[\d+\]")
        pid = int(re.search(r"pid \[(\d+)\]", line).group(1))
        run.wait_line(r"rollout\]: episode 0: ")  # mid-episode, the driver active
        os.kill(pid, signal.SIGKILL)
        rc = run.wait()
        out = run.output
        assert rc != 0, out
        assert "station exited with code -9 (the station stopped)" in out, out
        assert "SUCCEEDED" not in out, out
    finally:
        run.kill()


@pytest.mark.parametrize("argument, content, reason", [
    ("station_config_file", "/**/station:\n  ros__parameters:\n    lease_duration_s: 1\n",
     "/**/station: lease_duration_s: 1 is an integer, the parameter is a float (write 1.0)"),
    ("station_config_file", "/**/station:\n  ros__parameters:\n    operatr: manual\n",
     "/**/station: unknown parameter 'operatr' (did you mean operator?)"),
    ("config_file", "/**/rollout:\n  ros__parameters:\n    control_frequency: 5000.0\n",
     "/**/rollout: control_frequency: 5000.0 is out of range"),
    ("relay_config_file", "relay:\n  port: 70000\n", "relay: port: 70000 is out of range [0, 65535]"),
    ("relay_config_file", "relay:\n  listen: 127.0.0.1:1\n", "relay: unknown key 'listen'"),
    ("job_file", "job_id: j\nstation_id: s\nepisodes_total: 0\ntasks: []\n", "job file "),
])
def test_a_bad_config_file_fails_the_station_launch_in_one_line_before_any_process_starts(
        tmp_path, argument, content, reason):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    run = Launch(ROLLOUT_LAUNCH, state_dir=str(tmp_path / "state"), **{argument: str(path)})
    try:
        assert run.wait() != 0, run.output
        errors = [line for line in run.lines if "ERROR" in line]
        assert len(errors) == 1, run.output
        assert str(path) in errors[0] and reason in errors[0], run.output
        assert "process started" not in run.output, run.output
    finally:
        run.kill()


def test_station_and_rollout_launch_files_include_their_parts_instead_of_copying_them():
    rollout = ROLLOUT_LAUNCH.read_text()
    station = STATION_LAUNCH.read_text()
    assert '"station.launch.py"' in rollout and '"relay.launch.py"' in rollout
    assert '"arm_driver.launch.py"' in station
    for source in (rollout, station):
        assert "LifecycleNode(" not in source and 'executable="station_node"' not in rollout


RELAY_LAUNCH = LAUNCH_DIR / "relay.launch.py"


def test_relay_launch_serves_on_a_free_loopback_port_and_stops_cleanly_on_ctrl_c(tmp_path):
    from strands_robots.cli.bringup import make_run_dir
    from strands_robots.client import EvaluationClient, NotFound

    run_dir = make_run_dir("sim_station", parent=str(tmp_path))
    run = Launch(RELAY_LAUNCH, tokens=run_dir.tokens, store=run_dir.store)
    try:
        line = run.wait_line(r"relay listening on 127\.0\.0\.1:\d+ ")
        target = re.search(r"listening on (\S+)", line).group(1)
        client = EvaluationClient(target, token=Path(run_dir.client_token_file).read_text(), timeout_s=10.0)
        with pytest.raises(NotFound):
            client.get_status("job-0000")  # the relay answers, with this launch's tokens
        run.ctrl_c()
        assert run.wait() == 0, run.output
        assert len(re.findall(r"process has finished cleanly", run.output)) == 1, run.output
    finally:
        run.kill()
        run_dir.close()


def test_relay_launch_without_tokens_fails_in_one_line_before_the_relay_starts():
    run = Launch(RELAY_LAUNCH)
    try:
        assert run.wait() != 0, run.output
        errors = [line for line in run.lines if "ERROR" in line]
        assert len(errors) == 1 and "tokens: give the relay's token file" in errors[0], run.output
        assert "process started" not in run.output, run.output
    finally:
        run.kill()
