"""System tests: the preflight, through the real relay on the simulated station, before any lease or motion.

One set of processes for the module (relay, arm driver, camera node, rollout node, station node:
``station_demo.LocalStation``), started here and ended by PID in ``finally``; the openpi servers are
openpi-server 0.1.0 in its own venv (``openpi_harness``), each its own process on loopback, ended by PID.
Each policy below attaches to a job of its own and answers the station's preflight wrongly: the job ends FAILED
at WAITING_POLICY with every reason named and "no arm moved", no episode is charged, and the arm driver saw no
command: its own counters (``driver_status``: actions applied and refused, the lease holder; its diagnostics:
every action it received) do not move, and no ``action_commands`` message is published. A policy that answers
rightly runs.
"""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")
pytest.importorskip("msgpack", reason="the openpi bridge's optional dependency msgpack is not installed")

from openpi_harness import server_log, start_openpi_server, stop_server  # noqa: E402
from test_relay_harness import free_port  # noqa: E402

from strands_robots.cli.station_demo import LocalStation  # noqa: E402
from strands_robots.client import RelayError  # noqa: E402
from strands_robots.client.openpi import OpenPIPolicy  # noqa: E402
from strands_robots.client.policy import Policy  # noqa: E402
from strands_robots.client.policy_spec import ActionRange, PolicySpec  # noqa: E402

JOB_TIMEOUT_S = 150.0
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
SHEET = [{"name": "task_done", "question": "Did it?", "answer_type": "yes_no", "max_points": 1,
          "success_answer": "yes"}]


def task(task_id: str, **parameters) -> dict:
    return {"task_id": task_id, "instruction": f"instruction of {task_id}", "layout": "",
            "parameters": {"duration_s": "1", "control_frequency": "50", **parameters}, "scoring": SHEET}


class DriverWatch:
    """The arm driver seen from this process: its latched driver_status and every action_commands message."""

    def __init__(self, namespace: str) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from diagnostic_msgs.msg import DiagnosticArray
        from strands_robots_msgs.msg import ActionCommand, DriverStatus

        from strands_robots.ros.qos import COMMAND_QOS, DIAGNOSTICS_QOS, LATCHED_QOS

        self._context = rclpy.Context()
        rclpy.init(context=self._context)
        self.node = rclpy.create_node("preflight_driver_watch", namespace=f"/{namespace}", context=self._context)
        self.latest = None
        self.holders: set = set()
        self.commands = 0
        self.received = None  # the driver's own count of actions received (its diagnostics)
        self._lock = threading.Lock()
        self._got = threading.Event()
        self._diagnosed = threading.Event()
        self.node.create_subscription(DriverStatus, "driver_status", self._on_status, LATCHED_QOS)
        self.node.create_subscription(ActionCommand, "action_commands", self._on_command, COMMAND_QOS)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, DIAGNOSTICS_QOS)
        self._executor = SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def _on_status(self, msg) -> None:
        with self._lock:
            self.latest = msg
            if msg.lease_holder:
                self.holders.add(msg.lease_holder)
        self._got.set()

    def _on_diagnostics(self, msg) -> None:
        for status in msg.status:
            if status.name == "arm_driver: arms":
                values = {kv.key: kv.value for kv in status.values}
                with self._lock:
                    self.received = int(values["actions_received"])
                self._diagnosed.set()

    def _on_command(self, msg) -> None:
        with self._lock:
            self.commands += 1

    def fresh(self, timeout_s: float = 20.0):
        """Return a status received after this call (the driver publishes one at least every 0.5 s), with the
        count of action_commands seen so far as ``commands_seen``."""
        self._got.clear()
        self._diagnosed.clear()
        assert self._got.wait(timeout_s), "no driver_status from the arm driver"
        self._got.clear()
        assert self._got.wait(timeout_s), "no second driver_status from the arm driver"
        assert self._diagnosed.wait(timeout_s), "no diagnostics from the arm driver"
        with self._lock:
            status = self.latest
            return _Seen(status.actions_applied, status.actions_refused, self.commands, self.received)

    def close(self) -> None:
        self._executor.shutdown()
        self.node.destroy_node()
        self._context.try_shutdown()
        self._thread.join(5.0)


class _Seen:
    def __init__(self, applied: int, refused: int, commands: int, received: int) -> None:
        self.actions_applied, self.actions_refused, self.commands_seen = applied, refused, commands
        self.actions_received = received


@pytest.fixture(scope="module")
def station(tmp_path_factory):
    lines: list = []
    workdir = tmp_path_factory.mktemp("preflight_station")
    stack = LocalStation(str(workdir), namespace=f"preflight_station_{int(time.time())}",
                         out=lambda name, line: lines.append(f"[{name}] {line}"), cameras="scene,wrist")
    stack.lines = lines
    watch = None
    try:
        stack.start_relay()
        stack.start_nodes()
        watch = DriverWatch(stack.namespace)
        stack.watch = watch
        yield stack
    finally:
        if watch is not None:
            watch.close()
        stack.stop()  # every child by its PID (process group)


@pytest.fixture
def openpi(tmp_path):
    """Start openpi servers with ``start(**kwargs)`` -> (port, url); every one is ended by PID afterwards."""
    procs = []

    def start(**kwargs):
        port = free_port()
        procs.append(start_openpi_server(tmp_path, port, **kwargs))
        return port, f"ws://127.0.0.1:{port}"

    try:
        yield start
    finally:
        for proc in procs:
            stop_server(proc)


def run_job(station, tasks, policy, episodes=1):
    """Submit a job, serve ``policy`` for it, wait for its end; return (final status, states seen)."""
    client = station.client()
    job_id = client.submit_job(station.station_id, tasks, episodes)
    served: dict = {}

    def serve():
        try:
            served["final"] = client.serve_policy(job_id, policy)
        except RelayError as exc:
            served["error"] = exc

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    seen = []
    deadline = time.monotonic() + JOB_TIMEOUT_S
    status = None
    while time.monotonic() < deadline:
        try:
            status = client.get_status(job_id)
        except RelayError:
            status = None
        if status is not None:
            if not seen or seen[-1] != status.state:
                seen.append(status.state)
            if status.state in TERMINAL:
                thread.join(30.0)
                return status, seen, served
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not end; last {status}\n" + "\n".join(station.lines[-60:]))


def assert_failed_before_any_motion(station, final, seen, before):
    assert final.state == "FAILED", final.message
    assert "no arm moved" in final.message, final.message
    assert len(final.episodes) == 0, final.episodes
    # Never RUNNING; WAITING_POLICY may come and go between two polls of the relay, so the proof that it failed
    # before the lease is the driver's: no station ever held a lease, no command reached it.
    assert "RUNNING" not in seen and seen[-1] == "FAILED", seen
    after = station.watch.fresh()
    assert (after.actions_applied, after.actions_refused) == (before.actions_applied, before.actions_refused)
    assert not any(h.startswith("station:") for h in station.watch.holders), station.watch.holders
    assert station.watch.commands == before.commands_seen
    assert after.actions_received == before.actions_received  # the driver's own count, commands refused too


def reasons(message: str) -> list:
    """The numbered reasons of a failed gate, in order."""
    body = message.split("no arm moved): ", 1)[1]
    out = []
    for part in body.split("; "):
        head, _, rest = part.partition(". ")
        if head.isdigit() and int(head) == len(out) + 1:
            out.append(rest)
        elif out:
            out[-1] += "; " + part
    return out


def test_an_openpi_server_behind_another_robots_mapping_fails_at_waiting_policy_with_its_error(station, openpi,
                                                                                                 tmp_path):
    port, url = openpi(mode="droid")  # a DROID server, served with the ALOHA mapping
    before = station.watch.fresh()
    final, seen, served = run_job(station, [task("aloha_on_droid")], OpenPIPolicy(url, obs_map="aloha"))
    assert_failed_before_any_motion(station, final, seen, before)
    assert f"the policy (openpi server {url}, obs map aloha) does not fit this station (1 mismatch; no arm " \
           "moved)" in final.message, final.message
    assert reasons(final.message) == [
        f"preflight: the policy could not answer the station's first observation: it raised OpenPIServerError: "
        f"KeyError: 'observation/joint_position' (openpi server {url}, during infer)"]
    # the server saw one observation: the station's, mapped for ALOHA (a 14-vector state, two CHW cameras)
    calls = [e for e in server_log(tmp_path, port) if "obs" in e]
    assert len(calls) == 1
    assert calls[0]["obs"]["state"]["shape"] == [14]
    assert calls[0]["obs"]["images.cam_high"]["shape"] == [3, 224, 224]
    assert "error" not in served and served["final"].state == "FAILED"


def test_a_velocity_space_preset_is_refused_on_this_position_controlled_station(station, openpi, tmp_path):
    port, url = openpi(mode="droid", scale=-0.01)  # its answers stay inside the command ranges: one reason
    before = station.watch.fresh()
    final, seen, _ = run_job(station, [task("droid_velocities")], OpenPIPolicy(url, obs_map="droid"))
    assert_failed_before_any_motion(station, final, seen, before)
    assert reasons(final.message) == [
        "action space: the policy's actions are joint velocities (joint_velocity); this station applies every action "
        "as absolute joint positions (joint_position), so they would be sent as targets they are not"]
    calls = [e for e in server_log(tmp_path, port) if "obs" in e]
    assert len(calls) == 1  # the preflight's observation, and nothing after it
    obs = calls[0]["obs"]
    assert obs["observation/joint_position"]["shape"] == [7]
    assert obs["observation/exterior_image_1_left"]["shape"] == [224, 224, 3]
    assert obs["observation/exterior_image_1_left"]["sum"] > 0  # a real rendered frame of the scene camera
    assert obs["observation/wrist_image_left"]["shape"] == [224, 224, 3]
    assert obs["prompt"] == "instruction of droid_velocities"


class AnsweringPolicy(Policy):
    """Answers every observation with ``answer(observation)``; declares ``declared``."""

    def __init__(self, answer, declared=None):
        self.answer = answer
        self.declared = declared
        self.episodes = []

    def spec(self):
        return self.declared

    def reset(self, task):
        self.episodes.append((self.episode.episode_id, self.episode.preflight))

    def act(self, observation):
        return self.answer(observation)


def hold(observation, **changes):
    """Every right-arm actuator at its current position, with ``changes``."""
    keys = [f"right.joint_{i}" for i in range(1, 7)] + ["right.gripper"]
    return {**{k: float(observation[f"{k}.pos"]) for k in keys}, **changes}


def test_an_inverted_gripper_is_refused_naming_both_closed_values(station):
    declared = PolicySpec(action_space="joint_position", source="a gripper closed at 0.8",
                          action_ranges=(ActionRange("right.gripper", 0.0, 0.8, closed=0.8),))
    policy = AnsweringPolicy(lambda obs: [hold(obs)], declared)
    before = station.watch.fresh()
    final, seen, _ = run_job(station, [task("inverted")], policy)
    assert_failed_before_any_motion(station, final, seen, before)
    assert reasons(final.message) == [
        "gripper polarity of 'right.gripper': the policy closes it at 0.8, this station's closes at 0 (its jaw "
        "opening runs [0, 0.8]): inverted"]
    assert policy.episodes == [("", True)]  # the preflight's reset, told from an episode's


def test_a_nan_answer_is_refused_with_every_other_fault_of_the_answer(station):
    nan = float("nan")
    policy = AnsweringPolicy(lambda obs: [hold(obs, **{"right.joint_2": nan, "right.joint_7": 0.0}),
                                          hold(obs, **{"right.gripper": 1.0})])
    before = station.watch.fresh()
    final, seen, _ = run_job(station, [task("nan")], policy)
    assert_failed_before_any_motion(station, final, seen, before)
    got = reasons(final.message)
    assert got[0].startswith("preflight: the policy commands 'right.joint_7': no actuator of this station has it")
    assert got[1] == ("preflight: the chunk's steps command different keys: step 0 commands 8, step 1 7 (1 of 2 "
                      "steps differ from step 0)")
    assert got[2] == "preflight: the policy answered values that are not finite numbers (1: step 0 'right.joint_2' " \
                     "is nan)"
    assert got[3].startswith("preflight: 'right.gripper': the policy commands 1, outside this station's command range "
                             "[0, 0.8]")
    assert len(got) == 4, got


def test_a_policy_that_raises_fails_the_job_with_its_words_not_a_scored_policy_error(station):
    def explode(observation):
        raise RuntimeError("the checkpoint's norm stats are missing")

    policy = AnsweringPolicy(explode)
    before = station.watch.fresh()
    final, seen, served = run_job(station, [task("raises")], policy)
    assert_failed_before_any_motion(station, final, seen, before)
    assert reasons(final.message) == [
        "preflight: the policy could not answer the station's first observation: it raised RuntimeError: the "
        "checkpoint's norm stats are missing"]
    assert served["final"].state == "FAILED"  # the client was told the job's end, not a policy fault of its own


def test_a_task_asking_for_an_unknown_camera_is_refused_before_the_policy_is_asked(station):
    policy = AnsweringPolicy(lambda obs: [hold(obs)])
    before = station.watch.fresh()
    final, seen, _ = run_job(station, [task("sees", cameras="scene"), task("blind_top", cameras="top,scene")],
                             policy)
    # The station refuses the job as it arrives (it knows the cameras its rollouts observe); the gate names every
    # such camera again when it runs (test_station_preflight_core.py), for a station that could not tell then.
    assert final.state == "FAILED" and len(final.episodes) == 0, final
    assert "RUNNING" not in seen, seen
    assert final.message == ("refused by the station: job refused: the job asks for cameras this station does not "
                             "have (1 request(s); no arm moved): 1. task 'blind_top' asks for camera 'top': this "
                             "station has no such camera (its cameras: scene, wrist)")
    after = station.watch.fresh()
    assert (after.actions_applied, after.actions_refused, after.actions_received) == (
        before.actions_applied, before.actions_refused, before.actions_received)
    assert station.watch.commands == before.commands_seen
    assert policy.episodes == []  # never asked: not even a preflight


def test_a_position_server_with_its_mapping_passes_the_preflight_and_runs(station, openpi, tmp_path):
    # small steps towards open: a closed jaw (0) stays inside its range, every target stays inside its joint's
    port, url = openpi(mode="droid", scale=-0.01)
    before = station.watch.fresh()
    final, seen, _ = run_job(station, [task("jointpos")], OpenPIPolicy(url, obs_map="droid_jointpos"))
    assert final.state == "SUCCEEDED", final.message + "\n" + "\n".join(station.lines[-40:])
    assert [e.end_condition for e in final.episodes if e.end_condition != "infrastructure_fault"] == ["timeout"]
    assert station.watch.fresh().actions_applied > before.actions_applied
    calls = [e for e in server_log(tmp_path, port) if "obs" in e]
    assert len(calls) >= 2  # the preflight's observation, then the episode's
    assert calls[0]["obs"]["observation/joint_position"]["shape"] == calls[1]["obs"]["observation/joint_position"][
        "shape"] == [7]
