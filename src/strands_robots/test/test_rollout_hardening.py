"""The rollout under faults (a dead driver, bad arguments, a failing recording, ...), in process, deterministic."""

from __future__ import annotations

import errno
import io
import threading
import time

import pytest

from strands_robots.arm.verdict import ActionVerdict
from strands_robots.rollout.chunks import ChunkPipeline
from strands_robots.rollout.runner import PolicyRunner
from strands_robots.simulation.observers import CooperativeStop, RunPolicyEnded, RunPolicyStep

from rollout_fakes import Collect, FakeBackend, ScriptedPolicy

pytest.importorskip("mcap_ros2.decoder")


# -- item 1: a dead or silent driver ends the episode -----------------------------------------------------------
class FaultingBackend(FakeBackend):
    """The driver goes silent after ``after`` actions: ``fault_detail`` says so, ``observe`` raises."""

    def __init__(self, after: int, observe_raises: bool = False) -> None:
        super().__init__()
        self.after = after
        self.observe_raises = observe_raises

    def fault_detail(self):
        if not self.observe_raises and len(self.sent) >= self.after:
            return "arm driver /strands/arm_driver silent for 0.31 s (joint_states, DriverStatus)"
        return ""

    def observe(self):
        if self.observe_raises and len(self.sent) >= self.after:
            raise TimeoutError("joint_states are 0.4 s old")
        return super().observe()


def test_driver_fault_ends_the_episode_as_an_error_naming_the_driver():
    backend = FaultingBackend(after=3)
    seen = Collect()
    out = PolicyRunner(backend).run(ScriptedPolicy(), n_steps=50, fast_mode=True, observer=seen)
    (ep,) = out["episodes"]
    assert out["status"] == "error"
    assert (ep["outcome"], ep["stopped_reason"], ep["error_type"]) == ("error", "error", "DriverFault")
    assert "arm_driver" in ep["end_detail"] and "silent" in ep["error_message"]
    assert ep["applied_actions"] == 3 and len(backend.sent) == 3  # nothing sent into the silence
    assert len(seen.of(RunPolicyEnded)) == 1


def test_failed_observation_ends_the_episode_and_is_never_fed_to_the_policy():
    backend = FaultingBackend(after=4, observe_raises=True)
    policy = ScriptedPolicy(horizon=1)
    seen_obs = []
    policy.on_act = lambda n: None
    original_act = policy.act

    def act(observation):
        seen_obs.append(observation)
        return original_act(observation)

    policy.act = act
    out = PolicyRunner(backend).run(policy, n_steps=50, fast_mode=True)
    (ep,) = out["episodes"]
    assert (ep["outcome"], ep["stopped_reason"], ep["error_type"]) == ("error", "error", "TimeoutError")
    assert "0.4 s old" in ep["end_detail"]
    assert ep["applied_actions"] == 4 and len(seen_obs) == 4


# -- item 4: a cancel during a blocking act -----------------------------------------------------------------------
def test_cancel_during_a_blocking_sync_act_ends_the_episode_without_waiting_for_it():
    entered, release = threading.Event(), threading.Event()

    def on_act(n):
        if n == 1:  # the second chunk's inference blocks until the test releases it
            entered.set()
            release.wait(60.0)

    policy = ScriptedPolicy(horizon=2, on_act=on_act)
    runner = PolicyRunner(FakeBackend())
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(runner.run(policy, n_steps=100, fast_mode=True)))
    thread.start()
    try:
        assert entered.wait(30.0)
        runner.request_stop("operator cancel")
        thread.join(30.0)
        assert not thread.is_alive()
        assert not release.is_set()  # the run ended while act was still blocked
        (ep,) = out["episodes"]
        assert (ep["outcome"], ep["stopped_reason"], ep["end_detail"]) == ("cancelled", "cancelled",
                                                                             "operator cancel")
        assert ep["applied_actions"] == 2  # the first chunk; the abandoned chunk's late result is discarded
    finally:
        release.set()
        thread.join(30.0)


# -- item 12: adaptive prefetch fed the step interval ---------------------------------------------------------------
class KPeriodPolicy:
    """Inference that takes ``k`` control steps.

    A chunk is ready once the loop applied ``k`` more actions after its observation was taken (or at once when
    the loop waits for it, as a blocked loop would).
    """

    def __init__(self, length: int, k: int, pipe_ref: list, world: dict, cv: threading.Condition) -> None:
        self.length, self.k, self.pipe_ref, self.world, self.cv = length, k, pipe_ref, world, cv
        self.calls = 0

    def reset(self, task):
        pass

    def act(self, observation):
        call = self.calls
        self.calls += 1
        if call > 0:  # the first chunk is inferred synchronously: the loop waits anyway
            pipe = self.pipe_ref[0]
            blocks0 = self.world["blocks_before"][observation["step"]]
            with self.cv:
                self.cv.wait_for(lambda: self.world["steps"] >= observation["step"] + self.k
                                 or pipe.telemetry.prefetch_blocks > blocks0, timeout=30.0)
        return [{"joint": float(i)} for i in range(self.length)]

    def resume(self, observation):
        pass


def drive_with_latency(length: int, k: int, period: float, feed, steps: int):
    """Step a pipeline whose inference takes k periods (measured by an injected clock as exactly k periods)."""
    cv = threading.Condition()
    world = {"steps": 0, "blocks_before": {}}
    calls = [0]

    def clock():  # act timing: start/end pairs k periods apart
        n = calls[0]
        calls[0] += 1
        return ((n + 1) // 2) * k * period

    pipe_ref: list = []
    policy = KPeriodPolicy(length, k, pipe_ref, world, cv)
    pipe = ChunkPipeline(policy, action_horizon=length, async_prefetch=True, inference_timeout_s=30.0,
                         clock=clock)
    pipe_ref.append(pipe)

    def observe():
        world["blocks_before"][world["steps"]] = pipe.telemetry.prefetch_blocks
        return {"step": world["steps"]}

    ages, points = [], []
    try:
        for _ in range(steps):
            planned = pipe.next_action(observe)
            ages.append(planned.age_steps)
            points.append(pipe.prefetch_index)
            with cv:
                world["steps"] += 1
                cv.notify_all()
            # Let an inference whose k steps have passed finish before the next step, as it would in k periods.
            sampled = [st for st in world["blocks_before"] if st > 0]
            if sampled and world["steps"] >= max(sampled) + k and not pipe.prefetch_ready:
                deadline = time.monotonic() + 30.0
                while pipe.prefetch_pending and not pipe.prefetch_ready and time.monotonic() < deadline:
                    time.sleep(0.0002)
            if feed is not None:
                pipe.note_step_interval(feed)
    finally:
        pipe.close()
    return ages, points, pipe.telemetry


@pytest.mark.parametrize("length, k", [(8, 1), (8, 2), (16, 5)])
def test_prefetch_point_settles_at_horizon_minus_latency_minus_margin(length, k):
    period = 0.02
    ages, points, tele = drive_with_latency(length, k, period, feed=period, steps=12 * length)
    expected_point = length - (k + 1)  # k periods of inference plus a margin of one period
    assert points[-1] == expected_point
    assert tele.prefetch_blocks == 0  # the latency fits: every swap is a hit
    later = ages[2 * length:]  # after the first chunks, once the point has settled
    half_ages, _, _ = drive_with_latency(length, k, period, feed=None, steps=12 * length)
    assert sum(later) / len(later) < sum(half_ages[2 * length:]) / len(half_ages[2 * length:])


def test_work_time_instead_of_interval_would_sample_at_index_zero():
    # The old feed (the step's ~0.5 ms of work) puts the point at index 0: ages of a whole chunk and more.
    ages, points, _ = drive_with_latency(8, 2, 0.02, feed=0.0005, steps=96)
    assert points[-1] == 0 and min(ages[16:]) >= 8


def test_runner_feeds_the_step_interval_not_the_work_time(monkeypatch):
    fed = []
    original = ChunkPipeline.note_step_interval

    def spy(self, seconds):
        fed.append(seconds)
        original(self, seconds)

    monkeypatch.setattr(ChunkPipeline, "note_step_interval", spy)
    period = 1 / 500.0
    PolicyRunner(FakeBackend()).run(ScriptedPolicy(), n_steps=12, control_frequency=500.0)
    assert len(fed) == 11
    assert all(abs(v / period - round(v / period)) < 1e-9 and round(v / period) >= 1 for v in fed)


# -- item 13: the seed reaches the policy and repeats an episode --------------------------------------------------
def test_seed_reaches_the_policy_task_per_episode():
    tasks = []
    policy = ScriptedPolicy()
    original = policy.reset
    policy.reset = lambda task: (tasks.append(dict(task)), original(task))
    backend = FakeBackend()
    PolicyRunner(backend).run(policy, n_steps=3, fast_mode=True, seed=40, n_episodes=3)
    assert [t["seed"] for t in tasks] == [40, 41, 42] and backend.resets == [40, 41, 42]


def test_same_seed_repeats_an_in_process_episode_exactly():
    pytest.importorskip("mujoco")
    from strands_robots.simulation import Simulation

    def episode(seed):
        sim = Simulation.with_robot("alice")
        seen = Collect()
        out = sim.run_policy(robot_name="alice", policy_provider="mock", n_steps=40, fast_mode=True, seed=seed,
                             observer=seen)
        assert out["status"] == "success"
        return [(dict(s.action), dict(s.observation)) for s in seen.of(RunPolicyStep)]

    first, again, other = episode(7), episode(7), episode(8)
    assert len(first) == 40 and first == again
    assert [a for a, _ in first] != [a for a, _ in other]


# -- the recording ------------------------------------------------------------------------------------------------
def read_events_and_frames(path):
    events, joint_states, actions, topics = [], 0, 0, set()
    from mcap.reader import NonSeekingReader
    from mcap_ros2.decoder import DecoderFactory

    read = []
    with open(path, "rb") as f:  # a streaming reader: it also reads a file cut short (no summary)
        messages = NonSeekingReader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages(
            log_time_order=False)
        while True:
            try:
                read.append(next(messages))
            except StopIteration:
                break
            except Exception:  # a file cut short: what was read is what a reader gets back
                break
    for _, channel, _, msg in read:
        topics.add(channel.topic)
        if channel.topic.endswith("/observer_events"):
            events.append((msg.event_seq, msg.kind, msg))
        elif channel.topic.endswith("/joint_states"):
            joint_states += 1
        elif channel.topic.endswith("/action_commands"):
            actions += 1
    return events, min(joint_states, actions), topics


def _recording_path(result):
    return result["episodes"][0]["recording_path"]


@pytest.mark.parametrize("abort", ["on_frame_cancel", "observer_interrupt"])
def test_aborting_steps_event_reaches_the_recording_and_event_seq_is_dense(tmp_path, abort):
    kwargs: dict = {}
    if abort == "on_frame_cancel":
        def on_frame(index, observation, action):
            if index == 5:
                raise CooperativeStop("goal cancelled")
        kwargs["on_frame"] = on_frame
    else:
        def observer(event):
            if isinstance(event, RunPolicyStep) and event.applied_action_index == 5:
                raise KeyboardInterrupt
        kwargs["observer"] = [observer]
    runner = PolicyRunner(FakeBackend())
    if abort == "observer_interrupt":
        with pytest.raises(KeyboardInterrupt):
            runner.run(ScriptedPolicy(), n_steps=50, fast_mode=True, record=True, recording_dir=str(tmp_path),
                       **kwargs)
        (path,) = tmp_path.glob("*.mcap")
    else:
        out = runner.run(ScriptedPolicy(), n_steps=50, fast_mode=True, record=True, recording_dir=str(tmp_path),
                         **kwargs)
        path = _recording_path(out)
    events, frames, _ = read_events_and_frames(path)
    seqs = [e[0] for e in events]
    assert seqs == list(range(len(seqs)))  # dense: Started, every step (the aborting one too), Ended
    kinds = [e[1] for e in events]
    assert kinds[0] == "started" and kinds[-1] == "ended" and kinds.count("step") == 6
    assert events[-2][2].step[0].applied_action_index == 5


def _full_disk_after(limit):
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


def test_disk_full_recorded_frames_is_what_a_reader_gets_back_at_every_fill_position(tmp_path, monkeypatch):
    from strands_robots.rollout import recording

    def run(directory):
        seen = Collect()
        out = PolicyRunner(FakeBackend()).run(ScriptedPolicy(), n_steps=400, fast_mode=True, record=True,
                                              recording_dir=str(directory), observer=seen)
        return out, seen

    full, _ = run(tmp_path / "full")
    size = (tmp_path / "full").joinpath(_recording_path(full).rsplit("/", 1)[1]).stat().st_size
    assert full["episodes"][0]["recorded_frames"] == 400
    mismatches = []
    failures = 0
    for i, fraction in enumerate([x / 16 for x in range(1, 16)] + [0.99]):
        limit = int(size * fraction)
        monkeypatch.setattr(recording, "_default_raw", _full_disk_after(limit))
        out, seen = run(tmp_path / f"fill{i}")
        if not out["episodes"]:  # the header itself did not fit: refused before Started
            continue
        (ep,) = out["episodes"]
        _, frames, _ = read_events_and_frames(ep["recording_path"])
        if ep["recorded_frames"] != frames:
            mismatches.append((limit, ep["recorded_frames"], frames))
        if ep["outcome"] == "ok":  # this run's file fitted after all (zstd sizes vary a little)
            assert frames == ep["recorded_frames"] == 400
            continue
        failures += 1
        steps = seen.of(RunPolicyStep)
        failed = [s for s in steps if s.legacy_hook_outcome == "recording_error"]
        # The failure shows where it happened: at the step whose write failed, else at the end of the episode.
        assert len(failed) == 1 or (not failed and "recording failed at the end" in ep["end_detail"]), ep
    assert not mismatches
    assert failures >= 14


def test_recording_uses_live_topic_names_and_writes_the_ros_distro(tmp_path, monkeypatch):
    monkeypatch.setenv("ROS_DISTRO", "kilted")
    out = PolicyRunner(FakeBackend()).run(ScriptedPolicy(), n_steps=5, fast_mode=True, record=True,
                                          recording_dir=str(tmp_path), recording_topic_prefix="/strands")
    path = _recording_path(out)
    _, frames, topics = read_events_and_frames(path)
    assert frames == 5
    assert topics == {"/strands/joint_states", "/strands/action_commands", "/strands/observer_events"}
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        metadata = {m.name: dict(m.metadata) for m in make_reader(f).iter_metadata()}
    assert metadata["rosbag2"]["ROS_DISTRO"] == "kilted"


def test_ros_distro_falls_back_to_the_rclpy_version(monkeypatch):
    from strands_robots.rollout import mcap_file, recording

    monkeypatch.delenv("ROS_DISTRO", raising=False)
    for version, distro in (("9.1.0", "kilted"), ("7.1.6", "jazzy"), ("3.3.15", "humble"), ("42.0", "unknown")):
        monkeypatch.setattr(mcap_file.importlib.metadata, "version", lambda name, v=version: v)
        assert recording.ros_distro() == distro


def test_recordings_of_one_episode_calls_are_numbered_by_the_offset(tmp_path):
    runner = PolicyRunner(FakeBackend())
    names = []
    for goal in range(3):
        out = runner.run(ScriptedPolicy(), n_steps=2, fast_mode=True, record=True, recording_dir=str(tmp_path),
                         episode_number_offset=goal)
        names.append(_recording_path(out).rsplit("/", 1)[1][:12])
    assert names == ["episode_0000", "episode_0001", "episode_0002"]


def test_backend_verdicts_unchanged_by_fault_check():
    # A backend without fault_detail (the in-process core) runs as before.
    backend = FakeBackend(verdict=lambda i, a: ActionVerdict(applied_keys=tuple(a)))
    out = PolicyRunner(backend).run(ScriptedPolicy(), n_steps=7, fast_mode=True)
    assert out["episodes"][0]["applied_actions"] == 7 and out["status"] == "success"
