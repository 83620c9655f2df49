"""A hook abort on the command stream, over real DDS with the arm driver as its own process.

spec/observer-lane.txt: ``applied_actions`` may exceed ``legacy_steps_used`` by one (the aborting step's hook runs
after its action was sent). Over the stream several commands are in flight when a hook runs. Here episodes run on
the real stream to a driver process (``python -m strands_robots.nodes.arm_driver.node``, ended by PID) and are
aborted each way a hook can: a cancel (the stop a goal cancel or a takeover requests) at several moments, the
``on_frame`` watchdog, a hook's own CooperativeStop, and a recording whose disk fills at several points. This test's
own subscriptions to ``action_commands`` and ``action_verdicts`` witness the wire: no command of the run after the
aborting step, no verdict of the driver for a step the Ended does not count, every step reported with the driver's
own verdict, and ``applied_actions - legacy_steps_used <= 1``.
"""

from __future__ import annotations

import errno
import io
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

from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from strands_robots_msgs.msg import ActionCommand, ActionVerdict  # noqa: E402

from strands_robots.ros.qos import COMMAND_QOS, VERDICT_QOS  # noqa: E402
from strands_robots.driver_link.client import RosDriverBackend  # noqa: E402
from strands_robots.ros.process import spin_in_background  # noqa: E402
from strands_robots.nodes.rollout.observers import RunTracker  # noqa: E402
from strands_robots.rollout.runner import PolicyRunner  # noqa: E402
from strands_robots.rollout.stop import StopToken  # noqa: E402
from strands_robots.simulation.observers import (  # noqa: E402
    CooperativeStop,
    RunPolicyEnded,
    RunPolicyStarted,
    RunPolicyStep,
)

from ros_harness import wait_for  # noqa: E402

RATE_HZ = 50.0
ABORTS = ("cancelled", "recording_error")  # and "error" of the on_frame watchdog (an on_frame failure below it too)


class Wire:
    """This test's view of the command stream: every command and verdict, by run."""

    def __init__(self, node) -> None:
        self._lock = threading.Lock()
        self.commands: dict = {}
        self.verdicts: dict = {}
        node.create_subscription(ActionCommand, "action_commands", lambda m: self._keep(self.commands, m),
                                 COMMAND_QOS)
        node.create_subscription(ActionVerdict, "action_verdicts", lambda m: self._keep(self.verdicts, m),
                                 VERDICT_QOS)

    def _keep(self, into: dict, msg) -> None:
        with self._lock:
            into.setdefault(msg.run_id, {})[int(msg.step_index)] = msg

    def of(self, run_id: str) -> "tuple[dict, dict]":
        with self._lock:
            return dict(self.commands.get(run_id, {})), dict(self.verdicts.get(run_id, {}))


class Arms:
    """A driver process and, in this process, a node with the rollout's driver client on the stream."""

    def __init__(self) -> None:
        self.namespace = f"/stream_aborts_{uuid.uuid4().hex[:8]}"
        self.driver = subprocess.Popen(
            [sys.executable, "-m", "strands_robots.nodes.arm_driver.node", "--ros-args", "-r",
             f"__ns:={self.namespace}", "-p", "autostart:=true", "-p", f"control_rate_hz:={RATE_HZ}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("stream_aborts", namespace=self.namespace, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spinner = spin_in_background(self.executor, "stream-aborts")
        self.wire = Wire(self.node)
        self.backend = RosDriverBackend(self.node, wait_timeout_s=60.0, control_frequency=RATE_HZ,
                                        reset_moves_to_start_pose=False)

    def ready(self) -> None:
        assert self.backend.wait_until_ready(timeout_s=60.0), "the driver did not come up"
        assert self.backend.acquire("stream_aborts", priority=10, duration_s=30.0, timeout_s=10.0).granted
        assert wait_for(lambda: self.backend.stream.driver_listening(), 30.0)

    def close(self) -> str:
        try:
            self.backend.close()
        finally:
            if self.driver.poll() is None:
                os.killpg(self.driver.pid, signal.SIGINT)
            try:
                out, _ = self.driver.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.driver.pid, signal.SIGKILL)
                out, _ = self.driver.communicate(timeout=10)
            self.spinner.stop(5.0)
            self.node.destroy_node()
            rclpy.try_shutdown(context=self.context)
        return out or ""


@pytest.fixture(scope="module")
def arms():
    a = Arms()
    try:
        a.ready()
        yield a
    finally:
        a.close()


class HoldStill:
    """Commands the right arm's first joint where it is: every command applies in full.

    :param on_act: called with the number of the chunk being inferred (from 0), before it is returned.
    """

    never_blocks = True

    def __init__(self, on_act=None) -> None:
        self._on_act = on_act
        self._chunks = 0

    def reset(self, task):
        pass

    def act(self, observation):
        if self._on_act is not None:
            self._on_act(self._chunks)
        self._chunks += 1
        return [{"right.joint_1": float(observation["right.joint_1.pos"])}] * 4

    def resume(self, observation):
        pass


def episode(arms: Arms, *, stop: "StopToken | None" = None, on_step=None, on_act=None, **kwargs):
    """Run one episode on the stream; return its step events and its Ended (dispatch order checked)."""
    events: list = []

    def observe(event):
        events.append(event)
        if on_step is not None and isinstance(event, RunPolicyStep):
            on_step(event)

    runner = PolicyRunner(arms.backend, robot_name="arms", stop=stop)
    runner.run(HoldStill(on_act), observer=[RunTracker(arms.backend), observe], control_frequency=RATE_HZ,
               action_horizon=4, **kwargs)
    assert isinstance(events[0], RunPolicyStarted) and isinstance(events[-1], RunPolicyEnded)
    assert [e.event_seq for e in events] == list(range(len(events)))
    steps = [e for e in events if isinstance(e, RunPolicyStep)]
    return steps, events[-1]


def check_the_rule(arms: Arms, steps: list, ended) -> None:
    """Check what the wire and the Ended say after an episode (module docstring)."""
    applied, used = ended.applied_actions, ended.legacy_steps_used
    assert 0 <= applied - used <= 1, (applied, used, ended.stopped_reason, ended.end_detail)
    assert [s.applied_action_index for s in steps] == list(range(applied))  # every step sent is reported
    outcomes = [s.legacy_hook_outcome for s in steps]
    aborted = [i for i, o in enumerate(outcomes) if o in ABORTS]
    assert aborted in ([], [applied - 1]), outcomes  # only ever the last step sent: nothing went out after it
    if aborted:
        assert used == applied - 1
    # On the wire: the run's commands are exactly the steps counted, and the driver answered no other.
    assert wait_for(lambda: len(arms.wire.of(ended.run_id)[1]) >= applied, 10.0), "verdicts missing on the wire"
    commands, verdicts = arms.wire.of(ended.run_id)
    assert sorted(commands) == list(range(applied)), (sorted(commands), applied)
    assert sorted(verdicts) == list(range(applied)), (sorted(verdicts), applied)
    for s in steps:  # each step carries the driver's own verdict, the ones in flight at the abort too
        verdict = verdicts[s.applied_action_index]
        assert s.action_resolution != "unknown", (s.applied_action_index, s.action_error)
        assert list(s.applied_action_keys) == list(verdict.applied_keys)
        assert list(s.unresolved_action_reasons) == list(verdict.unresolved_reasons)  # e.g. stale on a busy machine


@pytest.mark.parametrize("chunk", [1, 3])
def test_a_cancel_during_inference_on_the_stream_sends_nothing_after_the_aborting_step(arms, chunk):
    # The stop comes while the policy infers the next chunk, between a deadline and its send, with the
    # commands before it still in flight: the step about to be sent is the last.
    stop = StopToken()

    def on_act(n):
        if n == chunk:
            stop.request("goal cancelled")

    steps, ended = episode(arms, stop=stop, on_act=on_act, n_steps=500)
    assert ended.stopped_reason == "cancelled" and ended.end_detail == "goal cancelled"
    assert ended.applied_actions == 4 * chunk + 1 and steps[-1].legacy_hook_outcome == "cancelled"
    check_the_rule(arms, steps, ended)


@pytest.mark.parametrize("after_steps", [1, 8, 17])
def test_a_cancel_at_any_moment_on_the_stream_sends_nothing_after_the_aborting_step(arms, after_steps):
    stop = StopToken()

    def on_step(event):  # on the control thread, while later commands are in flight
        if event.applied_action_index == after_steps - 1:
            threading.Thread(target=stop.request, args=("goal cancelled",), daemon=True).start()

    steps, ended = episode(arms, stop=stop, on_step=on_step, n_steps=500)
    assert ended.stopped_reason == "cancelled" and ended.end_detail == "goal cancelled"
    assert after_steps <= ended.applied_actions < 500
    check_the_rule(arms, steps, ended)


@pytest.mark.parametrize("abort", ["watchdog", "cooperative_stop"])
def test_a_hook_abort_on_the_stream_sends_nothing_after_the_aborting_step(arms, abort):
    def on_frame(index, observation, action):
        if abort == "watchdog":
            raise RuntimeError(f"frame {index} not drawn")
        if index == 6:
            raise CooperativeStop("the operator's hook stopped it")

    steps, ended = episode(arms, on_frame=on_frame, max_onframe_failures=6, n_steps=200)
    assert ended.applied_actions == 7 and ended.legacy_steps_used == 6
    assert steps[-1].legacy_hook_outcome == ("error" if abort == "watchdog" else "cancelled")
    check_the_rule(arms, steps, ended)


def full_disk_after(limit: int):
    """Return a raw file class whose writes fail with ENOSPC past ``limit`` bytes (a disk that fills)."""

    class FullDisk(io.FileIO):
        def __init__(self, path):
            super().__init__(path, "xb")
            self.written = 0

        def write(self, data):
            room = limit - self.written
            if room <= 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            n = super().write(memoryview(data)[:room])
            self.written += n
            return n

    return FullDisk


def test_a_recording_that_fails_on_the_stream_sends_nothing_after_the_aborting_step(arms, tmp_path, monkeypatch):
    from pathlib import Path

    from strands_robots.rollout import recording

    steps, ended = episode(arms, n_steps=100, record=True, recording_dir=str(tmp_path / "whole"))
    assert ended.outcome == "ok"
    size = Path(ended.recording_path).stat().st_size
    failed = 0
    for i, fraction in enumerate((0.2, 0.45, 0.7, 0.9)):
        monkeypatch.setattr(recording, "_default_raw", full_disk_after(int(size * fraction)))
        steps, ended = episode(arms, n_steps=100, record=True, recording_dir=str(tmp_path / f"fill{i}"))
        if ended.outcome == "error":
            failed += 1
            assert "No space left on device" in ended.error_message, ended.error_message
        check_the_rule(arms, steps, ended)
    assert failed >= 3
