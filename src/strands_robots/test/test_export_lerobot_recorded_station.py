"""LeRobot export of what the real recorder wrote: a file cut short, two cameras of one name, late first images.

A station in namespace A (the arm driver, the rollout node and a camera node, each its own process) beside a camera
node in namespace B; both camera nodes publish a camera named ``scene``. The project's topic recorder
(:class:`~strands_robots.monitoring.topic_recorder.TopicRecorder` driven by ``run_live``, as ``strands-robots
record`` drives it, here with both namespaces' ``scene``) records in its own process. Camera A comes up ten steps
into the first episode (its node started then), which is cancelled once its images are in; a second episode runs
whole; the recorder is SIGKILLed during a third, so the file has no summary and ends inside a record. Every
process is ended by PID.

The export of that file: the two whole runs, the cut one left out in one line; ``scene`` of A and of B two
features, named apart and said; the first episode's frames before A's first image left out (counted, said), never
given a later image; every frame's image the latest at or before its step's send. A rollout's own episode file
cut short (its process SIGKILLed mid-episode) is refused naming the run and the steps it holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (requirements/python.txt)")

from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import CompressedImage  # noqa: E402
from strands_robots_msgs.action import RunEpisode  # noqa: E402
from strands_robots_msgs.msg import ObserverEvent  # noqa: E402

from strands_robots.export import lerobot  # noqa: E402
from strands_robots.monitoring.report import CUT_SHORT, load_recording, read_messages  # noqa: E402
from strands_robots.ros.qos import EVENT_QOS  # noqa: E402
from strands_robots.ros.action_client import ActionClient  # noqa: E402
from strands_robots.ros.qos import IMAGE_QOS  # noqa: E402
from strands_robots.ros.process import spin_in_background  # noqa: E402

from goal_warmup import warm_goal_path  # noqa: E402
from ros_harness import wait_for  # noqa: E402

RATE_HZ = 50.0
CAMERA_A_AT_STEP = 10
CAMERAS = ("adapter: pattern\ncameras:\n"
           "  scene: {mjcf_camera: scene, width: 64, height: 48, fps: 15, max_age_s: 2.0}\n")

# The recorder of ``strands-robots record`` (run_live + TopicRecorder) over namespace A's topics with the ``scene``
# camera of both namespaces.
RECORDER = """
import sys
from strands_robots.monitoring.serve import run_live
from strands_robots.monitoring.topic_recorder import TopicRecorder
from strands_robots.monitoring.topics import camera_topics, topics_in

ns_a, ns_b, path = sys.argv[1:4]
topics = topics_in(ns_a, None, ["scene"]) + [(t.resolve(ns_b), t) for t in camera_topics(["scene"])]
sys.exit(run_live(topics, namespace=ns_a, recorder=TopicRecorder(path, topics), latch_wait_s=1.0))
"""

# A rollout in process recording one long episode (the rollout's own episode file), SIGKILLed during it.
ROLLOUT = """
import sys
from strands_robots.simulation import Simulation

sim = Simulation.with_robot("alice")
print("recording", flush=True)
sim.run_policy(robot_name="alice", policy_provider="mock", n_steps=100000, control_frequency=50.0, record=True,
               recording_dir=sys.argv[1], instruction="hold")
"""


class Process:
    """A child process in a session of its own, its output read as it comes."""

    def __init__(self, args: list) -> None:
        self.lines: list = []
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self._reader.start()

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def end(self) -> str:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(10)
        self._reader.join(5.0)
        return "".join(self.lines)


def on_disk(path) -> list:
    """Return the messages a reader finds in a file being written (none before its header reached the disk)."""
    from mcap.exceptions import InvalidMagic

    try:
        return read_messages(path)[0]
    except (InvalidMagic, FileNotFoundError):
        return []


def _node_args(module: str, namespace: str, *params: str) -> list:
    args = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={namespace}"]
    for p in params:
        args += ["-p", p]
    return args


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Record the station (module docstring); return the cut file, its runs' ids and what the episodes did."""
    tmp = tmp_path_factory.mktemp("station")
    cameras_file = tmp / "cameras.yaml"
    cameras_file.write_text(CAMERAS)
    tag = uuid.uuid4().hex[:8]
    ns_a, ns_b = f"/exp_a_{tag}", f"/exp_b_{tag}"
    path = tmp / "station.mcap"
    procs: list = []
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("export_test", namespace=ns_a, context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = spin_in_background(executor, "export-test")
    events: list = []
    node.create_subscription(ObserverEvent, "observer_events", events.append, EVENT_QOS)
    action = ActionClient(node, RunEpisode, "run_episode")
    runs: dict = {}
    recorder = None
    try:
        procs.append(Process(_node_args("strands_robots.nodes.arm_driver.node", ns_a, "autostart:=true",
                                        f"control_rate_hz:={RATE_HZ}")))
        procs.append(Process(_node_args("strands_robots.nodes.camera.node", ns_b, f"cameras_file:={cameras_file}")))
        procs.append(Process(_node_args("strands_robots.nodes.rollout.node", ns_a, "start_pose_before_episode:=false",
                                        f"control_frequency:={RATE_HZ}", "driver_timeout_s:=60.0",
                                        "driver_silence_s:=0.5")))
        assert action.wait_for_server(timeout_sec=60.0), "run_episode action server not found"
        warm_goal_path(action, RATE_HZ)
        recorder = Process([sys.executable, "-c", RECORDER, ns_a, ns_b, str(path)])
        procs.append(recorder)
        for topic in (f"{ns_a}/observer_events", f"{ns_b}/scene/image_raw/compressed"):
            assert wait_for(lambda t=topic: recorder.said(f"matched {t}: 1 publisher"), 60.0), \
                "".join(recorder.lines)[-3000:]
        a_images: list = []
        node.create_subscription(CompressedImage, "scene/image_raw/compressed", a_images.append, IMAGE_QOS)

        def run(max_steps: int, on_step=None, wait: bool = True):
            goal = RunEpisode.Goal()
            goal.seed, goal.control_frequency, goal.max_steps, goal.duration_s = -1, RATE_HZ, max_steps, 120.0
            goal.policy_provider = "mock"
            sent = action.send_goal_async(goal)
            assert wait_for(sent.done, 30.0) and sent.result().accepted
            handle = sent.result()
            if on_step is not None:
                assert wait_for(on_step, 60.0)
            if not wait:
                return handle, None
            result = handle.get_result_async()
            assert wait_for(result.done, 120.0)
            return handle, result.result().result.ended

        def started() -> list:
            return [e.run_id for e in list(events) if e.kind == "started"]

        def steps_of(run_id: str) -> int:
            return sum(1 for e in list(events) if e.kind == "step" and e.run_id == run_id)

        def new_run(before: list, steps: int):
            """Return the run started after ``before`` once it has ``steps`` step events, else None."""
            fresh = [r for r in started() if r not in before]
            return fresh[0] if fresh and steps_of(fresh[0]) >= steps else None

        # The first episode runs before camera A exists; its node comes up ten steps in.
        before = started()
        handle, _ = run(3000, on_step=lambda: new_run(before, CAMERA_A_AT_STEP), wait=False)
        first_id = new_run(before, CAMERA_A_AT_STEP)
        procs.append(Process(_node_args("strands_robots.nodes.camera.node", ns_a, f"cameras_file:={cameras_file}")))
        assert wait_for(lambda: recorder.said(f"matched {ns_a}/scene/image_raw/compressed: 1 publisher"), 60.0)
        assert wait_for(lambda: len(a_images) >= 5, 60.0), "camera A sent no image"
        at = steps_of(first_id)
        assert wait_for(lambda: steps_of(first_id) >= at + 20, 30.0)
        cancel = handle.cancel_goal_async()
        assert wait_for(cancel.done, 30.0)
        result = handle.get_result_async()
        assert wait_for(result.done, 60.0)
        first = result.result().result.ended
        _, second = run(30)
        assert first.outcome == "cancelled" and second.outcome == "ok", (first.error_message, second.error_message)
        runs["whole"] = [first.run_id, second.run_id]

        def ended(run_id: str) -> bool:
            return any(e.kind == "ended" and e.run_id == run_id for e in list(events))

        def on_disk_into(run_id: str) -> bool:  # the recorder's complete chunks, as a reader finds them
            found = on_disk(path)
            return any(kind == "ObserverEvent" and m.kind == "step" and m.run_id == run_id for _, kind, m, _ in found)

        for _ in range(3):  # a long episode to cut; one that ended early (a fault under load) is whole in the file
            before = started()
            handle, _ = run(5000, on_step=lambda: new_run(before, 5), wait=False)
            cut = new_run(before, 5)
            assert wait_for(lambda: on_disk_into(cut) or ended(cut), 90.0, period_s=0.5), "no chunk of the run"
            if not ended(cut):
                recorder.signal(signal.SIGKILL)  # cut short: no summary, no footer
                recorder.proc.wait(10)
                break
            runs["whole"].append(cut)
            early = handle.get_result_async()
            assert wait_for(early.done, 60.0)
        else:
            raise AssertionError("three long episodes in a row ended early")
        cancel = handle.cancel_goal_async()
        assert wait_for(cancel.done, 30.0)
        runs["cut"] = cut
    finally:
        outputs = {id(p): p.end() for p in reversed(procs)}
        executor.shutdown(timeout_sec=5.0)
        spinner.join(5.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    assert "wrote" not in outputs[id(recorder)]  # the recorder never finished its file
    return {"path": path, "runs": runs, "ns": (ns_a, ns_b), "tmp": tmp}


def test_a_recording_cut_short_exports_its_whole_runs_and_says_the_cut_one_is_left_out(recorded, tmp_path, capsys):
    path = recorded["path"]
    whole, cut = recorded["runs"]["whole"], recorded["runs"]["cut"]
    _, why = read_messages(path)
    assert why.startswith("cut short")  # the recorder did not finish the file
    out = tmp_path / "ds"
    assert lerobot.main([str(path), "-o", str(out)]) == 0
    rows = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [r["run_id"] for r in rows] == whole, (rows, recorded["runs"])
    assert [r["end_condition"] for r in rows[:2]] == ["cancelled", "timeout"]
    lines = [line for line in capsys.readouterr().err.splitlines() if f"run {cut[:8]}" in line]
    assert len(lines) == 1, lines
    assert f"station.mcap was {CUT_SHORT}; its Ended is not in it); left out" in lines[0] and \
        "the recording holds steps 0-" in lines[0]


def test_two_cameras_of_one_name_become_two_features_named_apart(recorded, tmp_path, capsys):
    ns_a, ns_b = (ns.strip("/") for ns in recorded["ns"])
    out = tmp_path / "ds"
    assert lerobot.main([str(recorded["path"]), "-o", str(out)]) == 0
    info = json.loads((out / "meta/info.json").read_text())
    cams = sorted(k for k in info["features"] if k.startswith("observation.images."))
    assert cams == [f"observation.images.{ns_a}.scene", f"observation.images.{ns_b}.scene"]
    err = capsys.readouterr().err
    assert f"/{ns_a}/scene/image_raw/compressed as observation.images.{ns_a}.scene" in err
    assert f"/{ns_b}/scene/image_raw/compressed as observation.images.{ns_b}.scene" in err
    # each feature holds its own camera's images: compare with the recording's own
    traces, _ = load_recording(recorded["path"])
    trace = next(t for t in traces if t.run_id == recorded["runs"]["whole"][1])
    data = pq.read_table(out / "data/chunk-000/file-000.parquet").to_pydict()
    second = [i for i, e in enumerate(data["episode_index"]) if e == 1]
    for ns in (ns_a, ns_b):
        assert all(data[f"observation.images.{ns}.scene"][i]["bytes"] in jpegs_of(trace, ns) for i in second)
    assert not jpegs_of(trace, ns_a) & jpegs_of(trace, ns_b)  # two cameras, two sets of pictures


def jpegs_of(trace, ns: str) -> set:
    """Return the JPEGs of ``/ns/scene`` the recording holds for a run (from the one in force at its start)."""
    topic = f"/{ns}/scene/image_raw/compressed"
    at_start = [trace.images_at_start[topic]] if topic in trace.images_at_start else []
    return {r[2] for r in at_start + trace.images[topic]}


def test_frames_before_a_cameras_first_image_are_left_out_never_given_a_later_image(recorded, tmp_path, capsys):
    ns_a = recorded["ns"][0].strip("/")
    out = tmp_path / "ds"
    assert lerobot.main([str(recorded["path"]), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    rows = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    data = pq.read_table(out / "data/chunk-000/file-000.parquet").to_pydict()
    traces, _ = load_recording(recorded["path"])
    for e, row in enumerate(rows):
        trace = next(t for t in traces if t.run_id == row["run_id"])
        sent = [trace.action_sent_ns[s.index] for s in trace.steps]
        images = {}  # feature: the camera's images, from the one in force when the run started
        for ns in (n.strip("/") for n in recorded["ns"]):
            topic = f"/{ns}/scene/image_raw/compressed"
            images[f"{ns}.scene"] = ([trace.images_at_start[topic]] if topic in trace.images_at_start else []) \
                + trace.images[topic]
        first_image = max(found[0][0] for found in images.values())
        # the episode resampled with no camera: which frames come before a camera's first image
        whole = lerobot.episode_frames(trace, RATE_HZ, list(trace.actuator_keys))
        early = sum(1 for j in whole.step_index if sent[j] < first_image)
        assert row["frames_before_images"] == early and row["length"] == len(whole.timestamps) - early
        frames = [i for i, x in enumerate(data["episode_index"]) if x == e]
        assert data["timestamp"][frames[0]] == 0.0 and data["frame_index"][frames[0]] == 0
        for i, k in zip(frames, range(early, len(whole.timestamps))):
            step = int(whole.step_index[k])
            assert data["observation.state"][i] == pytest.approx(list(whole.state[k]))
            for cam, found in images.items():  # the latest image at or before the step's send, never a later one
                latest = [r for r in found if r[0] <= sent[step]][-1]
                assert data[f"observation.images.{cam}"][i]["bytes"] == latest[2]
        if early:
            assert f"run {row['run_id'][:8]}: its first {early} frames come before the first image of camera" in err
    # camera A came up ten steps into the first episode: no image of it from before
    first_trace = next(t for t in traces if t.run_id == rows[0]["run_id"])
    assert f"/{ns_a}/scene/image_raw/compressed" not in first_trace.images_at_start
    assert rows[0]["frames_before_images"] >= CAMERA_A_AT_STEP
    assert f"{ns_a}.scene ({rows[0]['frames_before_images']})" in err
    # the second had camera A's last image from before it started: none of its frames is left out for A
    assert rows[1]["frames_before_images"] == 0 or f"{ns_a}.scene (" not in [
        line for line in err.splitlines() if f"run {rows[1]['run_id'][:8]}: its first" in line][0]


def test_a_rollouts_episode_file_cut_short_is_refused_naming_the_steps_it_holds(tmp_path, capsys):
    rollout = Process([sys.executable, "-c", ROLLOUT, str(tmp_path)])
    try:
        def holds_steps() -> bool:
            files = list(tmp_path.glob("*.mcap"))
            found = on_disk(files[0]) if files else []
            return sum(1 for _, kind, m, _ in found if kind == "ObserverEvent" and m.kind == "step") >= 20

        assert wait_for(holds_steps, 120.0, period_s=0.5), "".join(rollout.lines)[-3000:]
        rollout.signal(signal.SIGKILL)
        rollout.proc.wait(10)
    finally:
        rollout.end()
    (path,) = tmp_path.glob("*.mcap")
    assert lerobot.main([str(path), "-o", str(tmp_path / "ds")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert f"{path.name}: run " in lines[0] and "the recording holds steps 0-" in lines[0]
    assert f"was {CUT_SHORT}; its Ended is not in it" in lines[0]
    assert "no run is recorded from its start to its end" in lines[1]
    assert not (tmp_path / "ds").exists()
