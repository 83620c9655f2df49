"""System tests: the compatibility gate and the provenance, through the real relay on the simulated station.

One set of processes for the module (relay, arm driver, rollout node recording every episode, station node:
``station_demo.LocalStation``), started here and ended by PID in ``finally``. A team's policy declares a spec
that does not fit the station: the job ends FAILED at WAITING_POLICY naming every mismatch (its policy answered only the
preflight's observation), and the driver
applies no action. A fitting one runs: each episode carries its recording's SHA-256 (equal to the file's) and
the final status the station's version, revision and the hashes of arms.yaml, cameras.yaml and the job.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

from strands_robots.client import RelayError  # noqa: E402
from strands_robots.client.policy_spec import ActionRange, CameraNeed, PolicySpec  # noqa: E402
from strands_robots.station.provenance import file_sha256, job_sha256  # noqa: E402
from strands_robots.policies.demo import DemoPolicy
from strands_robots.cli.station_demo import LocalStation  # noqa: E402

JOB_TIMEOUT_S = 150.0
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
SCRIPTED = {"mode": "torque_ramp", "joint": "right.joint_4", "target": 1.0}
SHEET = [{"name": "task_done", "question": "Did it?", "answer_type": "yes_no", "max_points": 1,
          "success_answer": "yes"}]
SOURCE = Path(__file__).resolve().parents[1] / "src" / "strands_robots"


def task(task_id: str) -> dict:
    return {"task_id": task_id, "instruction": f"instruction of {task_id}", "layout": "",
            "parameters": {"duration_s": "1", "control_frequency": "50"}, "scoring": SHEET}


class DeclaringPolicy(DemoPolicy):
    """The scripted torque policy, declaring ``declared`` as its spec."""

    def __init__(self, declared: PolicySpec) -> None:
        super().__init__("scripted", SCRIPTED)
        self.declared = declared
        self.acts = 0

    def spec(self) -> PolicySpec:
        return self.declared

    def act(self, observation):
        self.acts += 1
        return super().act(observation)


class DriverWatch:
    """The arm driver's latched driver_status, watched from this process (actions_applied, lease_holder)."""

    def __init__(self, namespace: str) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from strands_robots_msgs.msg import DriverStatus

        from strands_robots.ros.qos import LATCHED_QOS

        self._context = rclpy.Context()
        rclpy.init(context=self._context)
        self.node = rclpy.create_node("gate_driver_watch", namespace=f"/{namespace}", context=self._context)
        self.latest = None
        self.holders: set = set()
        self._lock = threading.Lock()
        self._got = threading.Event()
        self.node.create_subscription(DriverStatus, "driver_status", self._on_status, LATCHED_QOS)
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

    def fresh(self, timeout_s: float = 20.0):
        """Return a status received after this call (the driver publishes one at least every 0.5 s)."""
        self._got.clear()
        assert self._got.wait(timeout_s), "no driver_status from the arm driver"
        self._got.clear()
        assert self._got.wait(timeout_s), "no second driver_status from the arm driver"
        with self._lock:
            return self.latest

    def close(self) -> None:
        self._executor.shutdown()
        self.node.destroy_node()
        self._context.try_shutdown()
        self._thread.join(5.0)


@pytest.fixture(scope="module")
def station(tmp_path_factory):
    lines: list = []
    workdir = tmp_path_factory.mktemp("gate_station")
    recordings = workdir / "recordings"
    stack = LocalStation(str(workdir), namespace=f"gate_station_{int(time.time())}",
                         out=lambda name, line: lines.append(f"[{name}] {line}"),
                         station_params={"record": "true"}, cameras="scene,wrist",
                         rollout_params={"record": "true", "recording_dir": str(recordings)})
    stack.lines = lines
    stack.recordings = recordings
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


def serve_in_background(client, job_id, policy) -> dict:
    out: dict = {}

    def run():
        try:
            out["final"] = client.serve_policy(job_id, policy)
        except RelayError as exc:
            out["error"] = exc

    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def wait_terminal(client, job_id, station):
    deadline = time.monotonic() + JOB_TIMEOUT_S
    status = None
    while time.monotonic() < deadline:
        try:
            status = client.get_status(job_id)
        except RelayError:
            status = None
        if status is not None and status.state in TERMINAL:
            return status
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end; last {status}\n" + "\n".join(station.lines[-60:]))


def test_a_mismatching_relay_policy_fails_the_job_naming_every_mismatch_and_no_arm_moves(station):
    client = station.client()
    before = station.watch.fresh()
    declared = PolicySpec(action_keys=("right.joint_1", "right.joint_7"),
                          cameras=(CameraNeed("top"), CameraNeed("scene", 480, 640)),
                          control_frequency_hz=15.0, action_ranges=(ActionRange("right.gripper", 0.0, 1.0),),
                          source="a droid-shaped policy")
    policy = DeclaringPolicy(declared)
    job_id = client.submit_job(station.station_id, [task("gate")], 1)
    served = serve_in_background(client, job_id, policy)
    final = wait_terminal(client, job_id, station)
    served["thread"].join(30.0)
    assert final.state == "FAILED", final.message
    assert len(final.episodes) == 0
    message = final.message
    assert "does not fit this station (5 mismatches; no arm moved)" in message, message
    assert "1. action key 'right.joint_7'" in message
    # the cameras the rollout node observes (its parameter), with their sizes from cameras.yaml
    assert "camera 'top': this station has no such camera (its cameras: scene, wrist)" in message, message
    assert "camera 'scene': the policy needs 480x640 images, this station's are 224x224" in message
    assert "control rate: the policy runs at 15 Hz" in message and "'gate' at 50 Hz" in message
    assert "action range of 'right.gripper': the policy commands [0, 1]" in message and "[0, 0.8]" in message
    after = station.watch.fresh()
    assert after.actions_applied == before.actions_applied
    assert after.actions_refused == before.actions_refused
    assert not any(h.startswith("station:") for h in station.watch.holders), station.watch.holders
    assert policy.acts == 1  # the preflight's one observation, its answer checked and never applied
    # the failed job's provenance still says which spec was refused
    assert json.loads(final.provenance.policy_spec_json)["action_keys"] == ["right.joint_1", "right.joint_7"]


def test_a_fitting_policy_runs_and_the_results_carry_their_provenance(station):
    from strands_robots.station.persistence import JobStore

    client = station.client()
    declared = PolicySpec(action_keys=("right.joint_4",), observation_keys=("right.joint_4.pos",),
                          control_frequency_hz=50.0, source="the scripted torque policy",
                          metadata={"trained_on": "sim"})
    before = station.watch.fresh()
    job_id = client.submit_job(station.station_id, [task("fits")], 2)
    served = serve_in_background(client, job_id, DeclaringPolicy(declared))
    final = wait_terminal(client, job_id, station)
    served["thread"].join(30.0)
    assert final.state == "SUCCEEDED", final.message + "\n" + "\n".join(station.lines[-40:])
    assert station.watch.fresh().actions_applied > before.actions_applied  # the watch sees actions when they come
    kept = [e for e in final.episodes if e.end_condition != "infrastructure_fault"]  # a loaded machine may add one
    assert len(kept) == 2, [(e.episode_id, e.end_condition, e.end_detail) for e in final.episodes]
    recordings = {file_sha256(str(p)): p for p in station.recordings.rglob("*.mcap")}
    for episode in kept:
        assert len(episode.recording_sha256) == 64
        assert episode.recording_sha256 in recordings, (episode.recording_sha256, list(recordings.values()))
    assert kept[0].recording_sha256 != kept[1].recording_sha256

    provenance = final.provenance
    from strands_robots import __version__

    assert provenance.software_version == __version__
    import subprocess

    revision = provenance.git_revision.split("-")[0]  # the commit the station started from (HEAD may move on)
    assert len(revision) == 40 and subprocess.run(
        ["git", "-C", str(SOURCE), "merge-base", "--is-ancestor", revision, "HEAD"]).returncode == 0
    files = {f.name: f for f in provenance.config_files}
    assert set(files) == {"arms.yaml", "cameras.yaml", "job"}
    assert files["arms.yaml"].sha256 == file_sha256(files["arms.yaml"].path)
    assert files["arms.yaml"].sha256 == file_sha256(str(SOURCE / "config" / "arms.yaml"))
    assert files["cameras.yaml"].sha256 == file_sha256(str(SOURCE / "config" / "cameras.yaml"))
    store = JobStore(station.state_dir)
    spec = next(store.load(j).spec for j in store.job_ids() if store.load(j).spec.tasks[0].task_id == "fits")
    assert files["job"].sha256 == job_sha256(spec)
    spec_json = json.loads(provenance.policy_spec_json)
    assert spec_json["action_keys"] == ["right.joint_4"] and spec_json["metadata"] == {"trained_on": "sim"}
