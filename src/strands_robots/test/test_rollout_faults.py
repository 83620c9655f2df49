"""The rollout under a dying or starved arm driver (issues 6 and 8), over real DDS, the driver in its own process.

kill -9, SIGINT and SIGTERM of ``arm_driver_node`` mid-episode: the rollout notices the silence (no
joint_states, no verdicts) within its bound and ends the episode as an error naming the driver and the
silence, well before the budget; the observer stream is dense with exactly one Ended; the MCAP recording is
readable, dense, and holds no run of stale (repeated) joint_states frames after the kill; the driver process is
gone. SIGSTOP for 0.3 s, then SIGCONT: the loop holds (at most the command window sent), the commands that
waited past their apply_by are refused as stale, nothing trips, the episode runs to its budget. Nothing is
timed by the wall clock: the tests count steps, events and frames.
"""

from __future__ import annotations

import math
import os
import signal
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from action_msgs.msg import GoalStatus  # noqa: E402
from test_rollout_node import RATE_HZ, lifecycle  # noqa: E402
from test_rollout_node import rig as rig  # noqa: E402,F401  (the fixture, used by name)

from strands_robots.simulation.observers import RESOLUTION_UNKNOWN, RunPolicyStep  # noqa: E402

BUDGET_S = 20.0
SILENCE_S = 0.5  # the rig's bound (the ceiling, and the default: see test_command_stream_watch)


def _read_recording(path: str, namespace: str) -> tuple[list, list]:
    """(joint_states position tuples in log order, observer event_seq in log order) of an MCAP recording."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    frames: list = []
    seqs: list = []
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for _schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=True):
            if channel.topic == f"{namespace}/joint_states":
                frames.append((message.log_time, tuple(decoded.position)))
            elif channel.topic == f"{namespace}/observer_events":
                seqs.append(decoded.event_seq)
    return frames, seqs


def _longest_repeat(frames: list) -> int:
    """Count the longest run of consecutive frames equal to the frame before (the mock always moves)."""
    longest = run = 0
    for (_, prev), (_, cur) in zip(frames, frames[1:]):
        run = run + 1 if cur == prev else 0
        longest = max(longest, run)
    return longest


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM], ids=["kill9", "sigint", "sigterm"])
def test_driver_stopped_mid_episode_ends_the_episode_as_an_error_naming_the_driver(rig, tmp_path, signum):
    r = rig(driver="process", verdict_timeout_s=0.0)  # the node's own verdict wait (a fraction of a period)
    budget = int(BUDGET_S * RATE_HZ)
    handle = r.send(policy_provider="mock", duration_s=BUDGET_S, record=True, recording_dir=str(tmp_path))
    r.wait_steps(25, timeout_s=60.0)
    kill_ns = time.monotonic_ns()
    os.kill(r.driver_proc.pid, signum)
    result, status = r.result(handle, timeout_s=60.0)
    ended = result.ended

    # No process left: the driver is gone (a stop signal lets it exit on its own).
    r.driver_proc.wait(20.0)
    assert r.driver_proc.poll() is not None
    if signum != signal.SIGKILL:
        assert r.driver_proc.returncode == 0, r.driver_proc.communicate()[0][-2000:]

    assert status == GoalStatus.STATUS_ABORTED
    assert ended.outcome == "error" and ended.stopped_reason == "error", ended.end_detail
    assert "arm driver" in ended.end_detail and r.namespace in ended.end_detail and "silent" in ended.end_detail
    assert ended.applied_actions < budget // 4  # well before the budget
    started, steps, end_event = lifecycle(r, ended)  # exactly one Started and one Ended, event_seq dense
    assert end_event.outcome == "error"
    # The silence starts at the signal for kill -9; a driver stopping on SIGINT/SIGTERM still answers while it
    # shuts down, so for those it starts after the last step the driver answered (or the signal, if later).
    answered = [s.monotonic_ns for s in steps if s.action_resolution != RESOLUTION_UNKNOWN]
    silent_from = kill_ns if signum == signal.SIGKILL else max([kill_ns, *answered])
    after_silence = [s for s in steps if s.monotonic_ns > silent_from]
    # Noticed within the silence bound: at most the bound's worth of steps (plus the one in flight) ran on.
    assert len(after_silence) <= math.ceil(SILENCE_S * RATE_HZ) + 2, (len(after_silence), silent_from - kill_ns)
    assert len(ended.action_errors) == ended.unknown_count

    # The recording: readable, one joint_states frame per step, events dense, and no stale frames.
    assert ended.recording_path and os.path.isfile(ended.recording_path)
    frames, seqs = _read_recording(ended.recording_path, r.namespace)
    assert len(frames) == ended.recorded_frames == ended.legacy_steps_used
    assert seqs == list(range(len(seqs))) and seqs[-1] == end_event.event_seq
    # The mock moves every joint every step, so a frame equal to the one before is a reused (stale) reading;
    # the old node recorded ~350 of them in a row after a kill -9.
    assert _longest_repeat(frames) <= math.ceil(SILENCE_S * RATE_HZ) + 1
    assert not [s for s in steps if s.applied_action_index >= ended.applied_actions]
    assert all(isinstance(s, RunPolicyStep) for s in steps)


def test_a_driver_starved_mid_episode_holds_the_loop_and_never_bursts_or_trips(rig):
    """SIGSTOP the driver process for 0.3 s mid-episode, then SIGCONT (the stream holds the rate).

    The loop holds instead of running ahead (at most the command window is sent while the driver is away), the
    commands that waited past their apply_by are refused as stale (not applied in a burst), no safety check
    trips, the episode runs to its budget, and every step is reported in order with one Ended.
    """
    from strands_robots.arm.config import DriverConfig
    from strands_robots.driver_link.client import DEFAULT_COMMAND_WINDOW_S

    r = rig(driver="process", command_window_s=DEFAULT_COMMAND_WINDOW_S)  # the node's default window
    budget = int(4.0 * RATE_HZ)
    handle = r.send(policy_provider="mock", duration_s=4.0)
    r.wait_steps(40, timeout_s=60.0)
    pid = r.driver_proc.pid
    stream = r.rollout.backend.stream
    sent_before = stream.sent
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(0.01)  # the stop takes effect when the kernel next schedules the driver
        surely_stopped = stream.sent  # commands from this number on reach a stopped driver
        time.sleep(0.29)  # the starvation itself (not a measurement)
        sent_while_stopped = stream.sent - sent_before
    finally:
        os.kill(pid, signal.SIGCONT)
    result, status = r.result(handle, timeout_s=60.0)
    ended = result.ended

    assert status == GoalStatus.STATUS_SUCCEEDED, (ended.end_detail, ended.action_errors)
    assert ended.outcome == "ok" and ended.stopped_reason == "budget" and ended.applied_actions == budget
    assert not [m for m in r.safety if m.stopped], [m.detail for m in r.safety]
    _, steps, end_event = lifecycle(r, ended)  # one Started, one Ended, event_seq dense
    assert [s.applied_action_index for s in steps] == list(range(budget))

    # The loop did not run ahead: while the driver was stopped at most the window (2 commands at 50 Hz, plus
    # the one in flight when the stop landed) went out; the rest of that time it held, and said so.
    window = r.rollout.backend.window_steps
    assert 1 <= sent_while_stopped <= window + 1, (sent_while_stopped, window)
    # The commands sent while the driver was stopped waited far longer than their apply_by: refused as stale
    # (or unknown), never applied late. (Step index == command number: one run, indices from 0.)
    def starved(s) -> bool:
        return s.action_resolution == "unknown" or set(s.unresolved_action_reasons) == {"stale"}

    around = steps[sent_before:sent_before + sent_while_stopped]
    assert all(starved(s) for s in steps[surely_stopped:sent_before + sent_while_stopped]) and \
        any(starved(s) for s in around), [(s.applied_action_index, s.action_resolution,
                                           s.unresolved_action_reasons[:1]) for s in around]
    assert ended.missed_deadlines >= 1 and any(s.deadline_missed for s in steps)
    assert ended.paused_s > 0.0  # the hold paused the budget clock
    # Nothing was applied in a burst: the measured joint speed stays well inside the envelope's limit. (The mock
    # moves at most ~0.8 rad/s; the jump after the hold, at most the window's worth of trajectory, adds ~0.3
    # rad/s here. The burst this replaces drove joint 3 to the 2.7 rad/s limit.)
    config = DriverConfig.default()
    for key, spec in config.joint_specs().items():
        limit = spec.max_velocity * (1 - config.margins.velocity_fraction)
        speed = max(abs(s.observation[f"{key}.vel"]) for s in steps)
        assert speed < 0.75 * limit, f"{key} reached {speed:.2f} rad/s (envelope limit {limit:.2f})"

    # Nothing left running once the rig is closed: the driver process is ended by its PID.
    r.close()
    assert r.driver_proc.poll() is not None


def test_a_driver_starved_past_the_dead_driver_bound_ends_the_episode_naming_it_after_reporting_every_step(rig):
    """SIGSTOP until the episode is over: past the 0.5 s bound the held loop ends it as an error naming the driver."""
    r = rig(driver="process")
    budget = int(BUDGET_S * RATE_HZ)
    handle = r.send(policy_provider="mock", duration_s=BUDGET_S)
    r.wait_steps(25, timeout_s=60.0)
    pid = r.driver_proc.pid
    stream = r.rollout.backend.stream
    sent_before = stream.sent
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(0.01)  # the stop takes effect when the kernel next schedules the driver
        surely_stopped = stream.sent  # commands from this number on reach a stopped driver
        result, status = r.result(handle, timeout_s=60.0)  # ends while the driver is still stopped
        sent_while_stopped = stream.sent - sent_before
    finally:
        os.kill(pid, signal.SIGCONT)
    ended = result.ended

    assert status == GoalStatus.STATUS_ABORTED
    assert ended.outcome == "error" and ended.error_type == "DriverFault", ended.end_detail
    assert "arm driver" in ended.end_detail and r.namespace in ended.end_detail and "silent" in ended.end_detail
    assert ended.applied_actions < budget // 4
    _, steps, _ = lifecycle(r, ended)  # one Started, one Ended, dense
    assert len(steps) == ended.applied_actions == sent_before + sent_while_stopped
    # The loop held: no more than the window went out to the stopped driver, and each of those is reported
    # unknown (no verdict), naming why, before the Ended.
    assert 1 <= sent_while_stopped <= r.rollout.backend.window_steps + 1
    unanswered = steps[surely_stopped:]
    assert unanswered and all(s.action_resolution == "unknown" and "no verdict for step" in s.action_error
                              for s in unanswered), [(s.applied_action_index, s.action_resolution) for s in steps[-12:]]
    assert ended.unknown_count >= len(unanswered)
    assert r.driver_proc.poll() is None  # still there after SIGCONT: the rig ends it by PID
