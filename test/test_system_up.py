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
from watched_process import Command, cmdline, kill_all, wait_gone

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

TIMEOUT_S = 120.0
PACKAGE_SRC = Path(__file__).resolve().parent.parent / "src" / "strands_robots"


class Up(Command):
    """``python -m strands_robots.cli up --rollout ...`` in a namespace of its own, its output collected."""

    def __init__(self, *args: str, env: "dict | None" = None, namespace: str = "") -> None:
        self.namespace = namespace or f"system_up_{uuid.uuid4().hex[:8]}"
        super().__init__([sys.executable, "-m", "strands_robots.cli", "up", "--rollout", "--namespace",
                          self.namespace, *args], env=dict(os.environ, **(env or {})))


def rollout_config(directory: Path, **values: str) -> str:
    """Write the package's ``config/rollout.yaml`` into ``directory`` with the rollout's ``values`` changed."""
    text = (PACKAGE_SRC / "config" / "rollout.yaml").read_text()
    rollout = text.index("/**/rollout:")
    head, section = text[:rollout], text[rollout:]
    for key, value in values.items():
        section, found = re.subn(rf"^([ \t]+{key}:) [^#\n]*?([ \t]*(#.*)?)$", rf"\g<1> {value}\g<2>", section,
                                 count=1, flags=re.M)
        assert found == 1, f"rollout.yaml has no rollout parameter {key}"
    path = directory / "rollout.yaml"
    path.write_text(head + section)
    return str(path)


@pytest.fixture(scope="module")
def no_start_pose(tmp_path_factory) -> str:
    """Write the package's parameters with ``start_pose_before_episode: false``; the file's path.

    For the tests whose episode is not about where the arms start: the start pose is 1.2 s of arm motion before
    each episode, and the tests that stop an episode signal only once it runs. The default run, start pose
    included, is test_up_runs_one_episode_and_exits_zero_with_no_events_lost.
    """
    return rollout_config(tmp_path_factory.mktemp("no_start_pose"), start_pose_before_episode="false")


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
    # Both nodes on each executor STRANDS_ROBOTS_EXECUTOR can pick (ros/executor_choice.py), each saying which.
    # The package's own parameters, start pose included: this is the run a user gets.
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


def test_up_with_a_realtime_priority_runs_both_nodes_on_sched_fifo(no_start_pose):
    # STRANDS_ROBOTS_RT_PRIORITY=3 (ros/realtime_priority.py): both node processes say so, and are so while running.
    fifo = "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(3))"
    probe = subprocess.run([sys.executable, "-c", fifo], capture_output=True, text=True, timeout=30)
    if probe.returncode:
        pytest.skip(f"this account may not use SCHED_FIFO: {probe.stderr.strip().splitlines()[-1:]}")
    up = Up("--duration", "2", "--config-file", no_start_pose, env={"STRANDS_ROBOTS_RT_PRIORITY": "3"})
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        out = up.output
        policies = {pid: (os.sched_getscheduler(pid), os.sched_getparam(pid).sched_priority)
                    for pid in up.children()}
        assert len(policies) == 2 and set(policies.values()) == {(os.SCHED_FIFO, 3)}, (policies, out)
        assert os.sched_getscheduler(up.proc.pid) != os.SCHED_FIFO  # the supervisor itself stays time-shared
        rc = up.wait(TIMEOUT_S)
        out = up.output
        assert rc == 0, out
        for node in ("rollout", "arm_driver"):
            assert re.search(rf"\.{node}\]: real-time scheduling: SCHED_FIFO 3 \(every thread; ", out, re.M), out
        done = up.wait_line(r"^\[up\] done:", 1.0)
        assert "1/1 episode(s) ended ok" in done and " 0 lost" in done, done
    finally:
        up.kill()


def test_up_ctrl_c_stops_nodes_cleanly(no_start_pose):
    up = Up("--duration", "30", "--config-file", no_start_pose)
    children: list = []
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        children = up.children()
        assert len(children) == 2, f"expected the driver and rollout processes, found {children}\n{up.output}"
        os.kill(up.proc.pid, signal.SIGINT)  # what Ctrl-C in its terminal would send to it
        rc = up.wait(15.0)
        assert rc == 130, up.output
        assert "[up] Ctrl-C: stopping the nodes" in up.output
        # The rollout stops its episode before it goes: exactly one Ended, cancelled, reached the stream.
        ended = [line for line in up.lines if line.startswith("Ended")]
        assert len(ended) == 1 and "stopped_reason=cancelled" in ended[0], up.output
        assert not wait_gone(children, 10.0), f"node processes left running\n{up.output}"
        assert "Traceback" not in up.output, up.output
    finally:
        kill_all(children)
        up.kill()


def test_up_counts_the_episodes_it_asked_for_in_each_started_line(no_start_pose):
    up = Up("--duration", "0.5", "--episodes", "2", "--config-file", no_start_pose)
    try:
        rc = up.wait(TIMEOUT_S)
        assert rc == 0, up.output
        started = [line for line in up.lines if line.startswith("Started")]
        assert len(started) == 2, up.output
        assert started[0].endswith("episode 1/2") and started[1].endswith("episode 2/2"), started
        assert up.wait_line(r"^\[up\] done: 2/2 episode\(s\) ended ok", 1.0)
    finally:
        up.kill()


def test_up_scripted_policy_ends_in_a_safety_stop_exits_1_and_never_prints_done(no_start_pose):
    up = Up("--policy", "scripted", "--duration", "10", "--config-file", no_start_pose)
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
def test_up_takes_repeated_stop_signals_and_still_stops_the_nodes_cleanly(sig, sigints, gap_s, no_start_pose):
    up = Up("--duration", "30", "--config-file", no_start_pose)
    children: list = []
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        children = up.children()
        assert len(children) == 2, f"expected the driver and rollout processes, found {children}\n{up.output}"
        for _ in range(sigints):
            os.kill(up.proc.pid, sig)
            time.sleep(gap_s)  # the spacing of the signals is what is tested, not a wait for anything
        rc = up.wait(30.0)
        assert rc == 128 + sig, up.output
        ended = [line for line in up.lines if line.startswith("Ended")]
        assert len(ended) == 1 and "stopped_reason=cancelled" in ended[0], up.output
        assert "Traceback" not in up.output and "KeyboardInterrupt" not in up.output, up.output
        assert not wait_gone(children, 10.0), f"node processes left running\n{up.output}"
    finally:
        kill_all(children)
        up.kill()


# What a kill -9 of `up` may leave behind, and for how long: its children stop as on SIGTERM (PDEATHSIG and the
# supervisor's pipe), skipping what only the dead supervisor's readers needed (docs/ros.md, "Stopping").
KILL_9_CHILDREN_GONE_S = 3.0


def test_kill_9_of_up_mid_episode_leaves_no_node_process_running(no_start_pose):
    up = Up("--duration", "60", "--config-file", no_start_pose)
    children: list = []
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        children = up.children()
        assert len(children) == 2, f"expected the driver and rollout processes, found {children}\n{up.output}"
        os.kill(up.proc.pid, signal.SIGKILL)
        up.wait(10.0)
        left = wait_gone(children, KILL_9_CHILDREN_GONE_S)
        assert not left, f"{[cmdline(p) for p in left]} outlived strands-robots up by {KILL_9_CHILDREN_GONE_S:g} s"
    finally:
        kill_all(children)
        up.kill()


class Echo(Command):
    """``python -m strands_robots.cli echo ...`` on an existing namespace."""

    def __init__(self, namespace: str, *args: str) -> None:
        self.namespace = namespace
        super().__init__([sys.executable, "-m", "strands_robots.cli", "echo", "--namespace", namespace, *args])


class RolloutOperator:
    """This process's own node: the rollout's ``pause_rollout`` / ``resume_rollout``, and who reads its events."""

    def __init__(self, namespace: str) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from strands_robots_msgs.srv import Resume, Takeover

        self._rclpy = rclpy
        self.namespace = namespace
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("echo_test_operator", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._pause = self.node.create_client(Takeover, f"/{namespace}/pause_rollout")
        self._resume = self.node.create_client(Resume, f"/{namespace}/resume_rollout")

    def _call(self, client, timeout_s: float, **fields):
        assert client.wait_for_service(timeout_sec=timeout_s), f"{client.srv_name} is not served"
        future = client.call_async(client.srv_type.Request(**fields))
        self.executor.spin_until_future_complete(future, timeout_sec=timeout_s)
        assert future.done(), f"{client.srv_name} did not answer within {timeout_s:g} s"
        return future.result()

    def pause(self, timeout_s: float):
        return self._call(self._pause, timeout_s, operator_name="test", reason="an echo joins")

    def resume(self, timeout_s: float):
        return self._call(self._resume, timeout_s, operator_name="test")

    def reads_events(self, node_name: str) -> bool:
        """Tell whether a node of that name subscribes to the rollout's observer_events (the graph says)."""
        infos = self.node.get_subscriptions_info_by_topic(f"/{self.namespace}/observer_events")
        return any(info.node_name == node_name for info in infos)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self._rclpy.try_shutdown(context=self.context)


def test_echo_joining_mid_run_reports_no_gap_and_summarises_the_run(tmp_path):
    # The echo joins a run that is still going, whatever its process takes to start (an interpreter, rclpy and a
    # DDS participant: seconds beside a busy machine): once the run has stepped, this test takes the arms over
    # (the loop holds, its budget clock stands still), starts the echo, waits until the echo reads the events,
    # and hands back; the run then goes on to its budget with the echo reading it from a later event on.
    # The rollout allows the most driver silence it accepts (0.5 s): the echo's start can hold a 2-core machine
    # for a quarter second. The start pose is left out: the echo joins after the first step either way.
    config = rollout_config(tmp_path, driver_silence_s="0.5", start_pose_before_episode="false")
    up = Up("--duration", "8", "--config-file", config)
    echo = None
    operator = RolloutOperator(up.namespace)
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        paused = operator.pause(30.0)
        assert paused.ok, paused.message
        echo = Echo(up.namespace, "--summary", "--runs", "1")
        assert wait_for_event(lambda: operator.reads_events("strands_robots_echo") or echo.proc.poll() is not None,
                              TIMEOUT_S), "the echo never subscribed to the events"
        resumed = operator.resume(30.0)
        assert resumed.ok, resumed.message
        assert up.wait(TIMEOUT_S) == 0, up.output
        assert echo.wait(60.0) == 0, echo.output
        summary = [line for line in echo.lines if line.startswith("Summary")]
        assert len(summary) == 1, echo.output
        assert "outcome=ok stopped_reason=budget" in summary[0] and " lost=0" in summary[0], summary[0]
        joined = re.search(r"joined_at_event_seq=(\d+)", summary[0])
        assert joined and int(joined.group(1)) > 0, summary[0]  # it did join midway, and saw no gap
    finally:
        operator.close()
        if echo is not None:
            echo.kill()
        up.kill()


def wait_for_event(predicate, timeout_s: float) -> bool:
    """Wait until ``predicate()`` holds (True) or ``timeout_s`` passed (False), looking every 50 ms."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_rollout_node_stays_until_its_readers_acknowledged_the_last_ended(tmp_path):
    # A reliable writer repairs a lost sample only while it exists: up can print no Ended after a stop signal
    # (the rollout node logged it published) when its reader missed a sample the rollout's exit left unrepaired. So at exit the rollout node waits for every matched reader's acknowledgement, at most
    # exit_delivery_wait_s after its last send (1 s by default; 8 s here, so what ends the wait below is the
    # acknowledgement, not the bound): with a reader whose process does not run (SIGSTOP), it is still there
    # after its episode ended, and goes once that reader ran again and acknowledged (the tests' writers ask
    # for acknowledgements every 0.1 s: fastdds_tests.xml).
    # The echo starts first: a process starting on a loaded 2-core machine can hold the driver past the
    # dead-driver bound mid-episode (the episode would end on its own, not on the stop).
    config = rollout_config(tmp_path, start_pose_before_episode="false", exit_delivery_wait_s="8.0")
    namespace = f"system_up_{uuid.uuid4().hex[:8]}"
    echo = Echo(namespace, "--steps", "--runs", "1")
    up = None
    children: list = []
    try:
        up = Up("--duration", "30", "--config-file", config, namespace=namespace)
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        children = up.children()
        (rollout,) = [p for p in children if "strands_robots.nodes.rollout.node" in cmdline(p)]
        echo.wait_line(r"^Step\s+#", 60.0)  # it hears the run
        os.kill(echo.proc.pid, signal.SIGSTOP)
        try:
            os.kill(up.proc.pid, signal.SIGINT)
            up.wait_line(r"ended: cancelled", TIMEOUT_S)  # the rollout node ended the episode: its Ended is out
            # a stop of the reader far longer than a rollout process takes to exit (tens of ms)
            assert wait_gone([rollout], 1.0) == [rollout], "the rollout node exited with an acknowledgement due"
        finally:
            os.kill(echo.proc.pid, signal.SIGCONT)
        resumed = time.monotonic()
        assert not wait_gone([rollout], 10.0), "the rollout node did not exit once its reader acknowledged"
        # once acknowledged, not at its bound (8 s after the last send: some 7 s after the resume)
        assert time.monotonic() - resumed < 4.0, f"the rollout node went {time.monotonic() - resumed:.1f} s after"
        ended = echo.wait_line(r"^Ended\s+run_id=", 30.0)
        assert "stopped_reason=cancelled" in ended, ended
        assert echo.wait(30.0) == 0, echo.output
        assert up.wait(30.0) == 130, up.output
        assert len([line for line in up.lines if line.startswith("Ended")]) == 1, up.output
    finally:
        if echo.proc.poll() is None:
            os.kill(echo.proc.pid, signal.SIGCONT)
        echo.kill()
        kill_all(children)
        if up is not None:
            up.kill()


def test_kill_9_of_the_arm_driver_mid_episode_fails_the_run_and_leaves_no_node_running(no_start_pose):
    up = Up("--duration", "30", "--config-file", no_start_pose)
    children: list = []
    try:
        up.wait_line(r"^Step\s+#", TIMEOUT_S)
        children = up.children()
        driver = [p for p in children if "strands_robots.nodes.arm_driver.node" in cmdline(p)]
        assert len(children) == 2 and len(driver) == 1, f"{children}\n{up.output}"
        os.kill(driver[0], signal.SIGKILL)
        rc = up.wait(TIMEOUT_S)
        assert rc != 0, up.output
        failed = up.wait_line(r"^\[up\] FAILED", 1.0)
        assert "0 ok" in failed, failed
        assert not [line for line in up.lines if line.startswith("[up] done")], up.output
        assert not wait_gone(children, 10.0), f"node processes left running\n{up.output}"
    finally:
        kill_all(children)
        up.kill()


# -- up --relay: the station's state persists, so a restarted station resumes its job ----------------------------
class StationUp(Command):
    """``python -m strands_robots.cli up <args>`` (the station taking jobs from a relay), output collected."""

    def __init__(self, *args: str, env: dict) -> None:
        super().__init__([sys.executable, "-m", "strands_robots.cli", "up", "--namespace",
                          f"up_relay_{uuid.uuid4().hex[:8]}", *args], env=env)

    def kill_alone(self) -> None:
        """SIGKILL the command only: its nodes die as its children do when it dies (they get SIGTERM)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30.0)


def test_a_restarted_up_relay_resumes_its_job_from_the_persistent_state_dir_without_rerunning_episodes(tmp_path):
    from strands_robots.client import RelayError
    from strands_robots.policies.demo import DemoPolicy
    from strands_robots.cli.station_demo import LocalStation

    relay = LocalStation(str(tmp_path / "relay"), out=lambda name, line: None)  # only its relay runs here
    ups: list = []
    orphans: list = []  # the nodes of the up killed mid-episode (no longer its children once it is gone)
    try:
        relay.start_relay()
        # The token from the environment (never the command line); the state under XDG_STATE_HOME by default.
        env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "xdg_state"),
                   STRANDS_ROBOTS_STATION_TOKEN=relay.station_token)
        ups.append(StationUp("--relay", relay.relay_target, env=env))
        ups[-1].wait_line("takes jobs from", 90.0)
        client = relay.client()
        sheet = [{"name": "done", "question": "Held?", "answer_type": "yes_no", "max_points": 1,
                  "success_answer": "yes"}]
        # 1 s episodes: what is tested is which episodes run after the restart, not how long each one is.
        tasks = [{"task_id": t, "instruction": t, "parameters": {"duration_s": "1"}, "scoring": sheet}
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
                time.sleep(0.05)  # the relay is asked again; it has no call that waits for a change
            raise AssertionError(f"last status {status}\n" + "\n".join(ups[-1].lines[-40:]))

        wait_status(lambda s: len(s.episodes) == 1 and "ep_0001 running" in s.message)
        orphans = ups[-1].children()
        ups[-1].kill_alone()  # the station and its nodes die mid-episode
        from strands_robots.station.state_dir import relay_key

        # the state of this station for this relay (station/state_dir.py)
        saved = tmp_path / "xdg_state" / "strands_robots" / "sim_station" / relay_key(relay.relay_target) / \
            f"{job_id}.job.json"
        assert saved.exists()
        ups.append(StationUp("--relay", relay.relay_target, env=env))
        final = wait_status(lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"))
        assert final.state == "SUCCEEDED", final.message
        ids = [e.episode_id for e in final.episodes]
        # An episode the new station's own infrastructure ended (a station fault, its reason in end_detail) is
        # kept and its task run again, out of the job's count (a loaded machine can make one); what must never
        # happen is a finished episode run again.
        kept = [e for e in final.episodes if e.end_condition != "infrastructure_fault"]
        details = [(e.episode_id, e.end_condition, e.end_detail[:200]) for e in final.episodes]
        assert ids[0] == "ep_0000" and "ep_0001" not in ids, details  # kept, never re-run; ids not reused
        assert len(kept) == 3 and len(ids) - len(kept) <= 1, details
        assert [e.task.task_id for e in kept] == ["a", "b", "a"], details
    finally:
        for up in ups:
            up.kill()
        kill_all(orphans)
        relay.stop()


def test_up_refuses_a_station_token_on_the_command_line_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "strands_robots.cli", "up", "--relay", "127.0.0.1:1",
                           "--station-token", "secret"], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "STRANDS_ROBOTS_STATION_TOKEN"})
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "--station-token is gone" in line and "--relay-credentials" in line and "secret" not in line


def _files_holding(root: Path, secret: str) -> list:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and secret in path.read_text(errors="replace"):
                found.append(str(path))
        except OSError:  # removed while looked at
            pass
    return found


def test_kill_9_of_up_relay_leaves_no_child_running_and_no_file_holding_the_station_token(tmp_path):
    from strands_robots.cli.station_demo import LocalStation

    relay = LocalStation(str(tmp_path / "relay"), out=lambda name, line: None)  # only its relay runs here
    private_tmp = tmp_path / "tmp"  # up's TMPDIR: its private directory is made here
    private_tmp.mkdir()
    state = tmp_path / "xdg_state"
    up = None
    children: list = []
    try:
        relay.start_relay()
        token = relay.station_token
        env = dict(os.environ, TMPDIR=str(private_tmp), XDG_STATE_HOME=str(state),
                   STRANDS_ROBOTS_STATION_TOKEN=token)
        up = StationUp("--relay", relay.relay_target, env=env)
        up.wait_line("takes jobs from", 90.0)
        children = up.children()
        assert len(children) >= 5, f"{[cmdline(p) for p in children]}\n{up.output}"  # 4 nodes and the janitor
        holding = _files_holding(private_tmp, token)
        assert holding and all(Path(p).name == "station_token" for p in holding), holding  # the test sees it
        up.kill_alone()
        left = wait_gone(children, KILL_9_CHILDREN_GONE_S)
        assert not left, f"{[cmdline(p) for p in left]} outlived strands-robots up by {KILL_9_CHILDREN_GONE_S:g} s"
        assert _files_holding(private_tmp, token) == [] and _files_holding(state, token) == []
        assert list(private_tmp.iterdir()) == [], list(private_tmp.iterdir())
    finally:
        if up is not None:
            up.kill()
        kill_all(children)
        relay.stop()
