"""ChunkPipeline: sync and async prefetch chunks, observation age, prefetch telemetry, worker lifecycle."""

from __future__ import annotations

import threading
import time

import pytest

from strands_robots.policies.base import EndEpisode
from strands_robots.rollout.chunks import (
    WORKER_THREAD_NAME,
    ChunkPipeline,
    ChunkTelemetry,
    InferenceTimeout,
    PlannedAction,
)


class ScriptedChunks:
    """A real policy playing scripted chunks: chunk n holds actions {"joint": 100 * n + i}.

    ``lengths`` gives each chunk's length (the last one repeats); ``delays`` each call's inference time;
    ``raise_on`` maps a call number to the exception that call raises. Records the observations it was
    given and the thread each call ran on.
    """

    def __init__(self, lengths=(4,), delays=(0.0,), raise_on=None, gate=None):
        self.lengths = list(lengths)
        self.delays = list(delays)
        self.raise_on = dict(raise_on or {})
        self.gate = gate  # when set, calls after the first wait for it
        self.calls = 0
        self.seen = []
        self.threads = []

    def reset(self, task):
        self.calls = 0

    def act(self, observation):
        n = self.calls
        self.calls += 1
        self.seen.append(observation)
        self.threads.append(threading.get_ident())
        delay = self.delays[min(n, len(self.delays) - 1)]
        if delay:
            time.sleep(delay)
        if self.gate is not None and n > 0:
            self.gate.wait(10.0)
        if n in self.raise_on:
            raise self.raise_on[n]
        length = self.lengths[min(n, len(self.lengths) - 1)]
        return [{"joint": float(100 * n + i)} for i in range(length)]

    def resume(self, observation):
        pass


class Robot:
    """Counts applied actions; an observation says how many had been applied when it was taken."""

    def __init__(self):
        self.applied = 0
        self.observed_at = []

    def observe(self):
        self.observed_at.append(self.applied)
        return {"applied": self.applied}

    def apply(self, planned: PlannedAction):
        self.applied += 1


def drive(pipe, robot, steps):
    out = []
    for _ in range(steps):
        planned = pipe.next_action(robot.observe)
        out.append((robot.applied, planned))
        robot.apply(planned)
    return out


def latency_clock(latencies):
    """Return an injected act clock: act call i is measured as ``latencies[i]`` s (the last repeats)."""
    state = {"n": 0, "t": 0.0}

    def clock():
        n = state["n"]
        state["n"] += 1
        if n % 2:  # the end of act call n // 2
            i = n // 2
            state["t"] += latencies[min(i, len(latencies) - 1)]
        return state["t"]
    return clock


def settle(pipe):
    """Wait (bounded, never asserted on) until a prefetch in flight is done: as if each step took long enough."""
    deadline = time.monotonic() + 10.0
    while pipe.prefetch_pending and not pipe.prefetch_ready and time.monotonic() < deadline:
        time.sleep(0.0002)


def drive_settled(pipe, robot, steps):
    out = []
    for _ in range(steps):
        planned = pipe.next_action(robot.observe)
        out.append((robot.applied, planned))
        robot.apply(planned)
        settle(pipe)
    return out


class BlocksUntilWaitedFor(ScriptedChunks):
    """Every inference after the first finishes only once the loop waits for it at the boundary (a block)."""

    pipe = None

    def act(self, observation):
        n = self.calls
        if n > 0:
            deadline = time.monotonic() + 10.0
            while (self.pipe.telemetry.prefetch_blocks < n and not self.pipe.closed
                   and time.monotonic() < deadline):
                time.sleep(0.0002)
        return super().act(observation)


@pytest.fixture
def pipelines():
    made = []

    def make(policy, **kwargs):
        kwargs.setdefault("action_horizon", 8)
        kwargs.setdefault("async_prefetch", False)
        kwargs.setdefault("inference_timeout_s", 5.0)
        pipe = ChunkPipeline(policy, **kwargs)
        made.append(pipe)
        return pipe

    yield make
    for pipe in made:
        pipe.close()


def assert_age_is_actions_applied_since_snapshot(trace):
    for applied_before, planned in trace:
        assert planned.age_steps == applied_before - planned.observation["applied"]


def test_sync_chunk_age_equals_chunk_index(pipelines):
    robot = Robot()
    policy = ScriptedChunks(lengths=(4,))
    pipe = pipelines(policy, action_horizon=4)
    trace = drive(pipe, robot, 12)
    assert [p.chunk_index for _, p in trace] == [0, 1, 2, 3] * 3
    assert [p.age_steps for _, p in trace] == [0, 1, 2, 3] * 3
    assert [p.is_chunk_reused for _, p in trace] == [False, True, True, True] * 3
    assert [p.action["joint"] for _, p in trace] == [100.0 * n + i for n in range(3) for i in range(4)]
    assert robot.observed_at == [0, 4, 8]  # observed only at chunk boundaries
    assert_age_is_actions_applied_since_snapshot(trace)


def test_async_age_carries_remaining_old_chunk_attempts_across_swap(pipelines):
    # L = 8, prefetch point k = 4 (half chunk until a step duration is known). The snapshot for chunk 1 is
    # taken before old action 4 is applied, so old actions 4..7 (8 - 4 = 4 attempts) follow it: new
    # action j has age 4 + j.
    robot = Robot()
    policy = ScriptedChunks(lengths=(8,))
    pipe = pipelines(policy, action_horizon=8, async_prefetch=True)
    trace = drive(pipe, robot, 24)
    ages = [p.age_steps for _, p in trace]
    assert ages[:8] == list(range(8))  # first chunk: sync, age = index
    assert ages[8:16] == [4 + j for j in range(8)]
    assert ages[16:24] == [4 + j for j in range(8)]
    assert [p.chunk_index for _, p in trace] == list(range(8)) * 3
    assert robot.observed_at == [0, 4, 12, 20]
    pipe.close()  # lets the prefetch in flight finish
    assert [o["applied"] for o in policy.seen] == [0, 4, 12, 20]
    assert_age_is_actions_applied_since_snapshot(trace)


def test_async_age_with_uneven_chunks_uses_the_old_chunk_length(pipelines):
    robot = Robot()
    policy = ScriptedChunks(lengths=(6, 3, 5))
    pipe = pipelines(policy, action_horizon=8, async_prefetch=True)
    trace = drive(pipe, robot, 6 + 3 + 5)
    # chunk 0: L=6, k=3 -> chunk 1 ages (6-3)+j; chunk 1: L=3, k=1 -> chunk 2 ages (3-1)+j
    assert [p.age_steps for _, p in trace] == [0, 1, 2, 3, 4, 5] + [3, 4, 5] + [2, 3, 4, 5, 6]
    assert_age_is_actions_applied_since_snapshot(trace)


def test_first_action_after_swap_is_not_marked_reused(pipelines):
    robot = Robot()
    pipe = pipelines(ScriptedChunks(lengths=(8,)), action_horizon=8, async_prefetch=True)
    trace = drive(pipe, robot, 16)
    first_after_swap = trace[8][1]
    assert first_after_swap.chunk_index == 0
    assert first_after_swap.age_steps == 4  # its snapshot is already old ...
    assert first_after_swap.is_chunk_reused is False  # ... but it is not a later action reusing it
    assert all(p.is_chunk_reused for _, p in trace[9:16])


def test_prefetch_hit_when_inference_fast(pipelines):
    robot = Robot()
    pipe = pipelines(ScriptedChunks(lengths=(4,)), action_horizon=4, async_prefetch=True)
    drive_settled(pipe, robot, 16)
    telemetry = pipe.telemetry
    assert telemetry.chunks_inferred == 5  # 4 drained + the one prefetched during the last chunk
    assert telemetry.prefetch_hits == 3
    assert telemetry.prefetch_blocks == 0


def test_prefetch_block_counted_when_inference_slow(pipelines):
    robot = Robot()
    policy = BlocksUntilWaitedFor(lengths=(4,))
    pipe = pipelines(policy, action_horizon=4, async_prefetch=True, clock=latency_clock([0.0, 0.1]))
    policy.pipe = pipe
    trace = drive(pipe, robot, 12)
    telemetry = pipe.telemetry
    assert telemetry.prefetch_blocks == 2
    assert telemetry.prefetch_hits == 0
    assert [p.action["joint"] for _, p in trace] == [100.0 * n + i for n in range(3) for i in range(4)]
    assert telemetry.latency_max_s >= 0.1


def test_inference_timeout_raises(pipelines):
    gate = threading.Event()
    robot = Robot()
    pipe = pipelines(ScriptedChunks(lengths=(2,), gate=gate), action_horizon=2, async_prefetch=True,
                     inference_timeout_s=0.1)
    drive(pipe, robot, 2)
    with pytest.raises(InferenceTimeout, match="0.1 s"):
        pipe.next_action(robot.observe)
    assert pipe.telemetry.prefetch_blocks == 1
    gate.set()


def test_inference_timeout_bounds_the_first_chunk_in_async_mode(pipelines):
    gate = threading.Event()

    class Hung(ScriptedChunks):
        def act(self, observation):
            gate.wait(10.0)
            return super().act(observation)

    pipe = pipelines(Hung(), async_prefetch=True, inference_timeout_s=0.1)
    with pytest.raises(InferenceTimeout):
        pipe.next_action(Robot().observe)
    gate.set()


@pytest.mark.parametrize("async_prefetch", [False, True])
def test_empty_chunk_requeries_once_synchronously(pipelines, async_prefetch):
    robot = Robot()
    # call 0: first chunk; call 1 (sync: boundary, async: prefetch) returns empty; call 2 is the re-query.
    policy = ScriptedChunks(lengths=(2, 0, 2))
    pipe = pipelines(policy, action_horizon=2, async_prefetch=async_prefetch)
    trace = drive(pipe, robot, 4)
    pipe.close()  # lets a prefetch in flight finish
    assert [p.action["joint"] for _, p in trace] == [0.0, 1.0, 200.0, 201.0]
    assert policy.calls == 3 + (1 if async_prefetch else 0)  # async prefetches again in the new chunk
    requery = trace[2][1]
    assert requery.observation["applied"] == 2  # a fresh observation at the boundary
    assert requery.age_steps == 0
    assert_age_is_actions_applied_since_snapshot(trace)
    assert pipe.telemetry.chunks_inferred == policy.calls - 1


@pytest.mark.parametrize("async_prefetch", [False, True])
def test_empty_chunk_twice_raises_value_error(pipelines, async_prefetch):
    policy = ScriptedChunks(lengths=(2, 0, 0, 2))
    pipe = pipelines(policy, action_horizon=2, async_prefetch=async_prefetch)
    robot = Robot()
    drive(pipe, robot, 2)
    with pytest.raises(ValueError, match="policy returned an empty action chunk twice"):
        pipe.next_action(robot.observe)


def test_chunk_longer_than_horizon_is_truncated(pipelines):
    robot = Robot()
    pipe = pipelines(ScriptedChunks(lengths=(10,)), action_horizon=3)
    trace = drive(pipe, robot, 6)
    assert [p.action["joint"] for _, p in trace] == [0.0, 1.0, 2.0, 100.0, 101.0, 102.0]
    assert [p.chunk_index for _, p in trace] == [0, 1, 2] * 2


def test_prefetch_point_adapts_to_inference_latency(pipelines):
    step_s = 0.01
    fast = pipelines(ScriptedChunks(lengths=(16,)), action_horizon=16, async_prefetch=True,
                     clock=latency_clock([0.0]))
    assert fast.prefetch_index == 0  # nothing installed yet
    robot = Robot()
    drive(fast, robot, 1)
    assert fast.prefetch_index == 8  # half the chunk until a step duration is known
    for _ in range(20):
        fast.note_step_interval(step_s)
    drive(fast, robot, 15 + 1)
    # a near-zero latency (0 steps) plus the one-step margin: sample as late as possible, before the last action
    assert fast.prefetch_index == 15
    drive(fast, robot, 15)
    assert robot.observed_at[-1] == 16 + 15  # the sample was taken at index 15 of the second chunk

    latency = 0.05
    slow = pipelines(ScriptedChunks(lengths=(16,)), action_horizon=16, async_prefetch=True,
                     clock=latency_clock([latency]))
    for _ in range(20):
        slow.note_step_interval(step_s)
    robot = Robot()
    drive(slow, robot, 1)
    # 0.05 s of inference = 5 steps, plus a margin of one step -> 6 steps before the boundary -> k = 16 - 6
    assert slow.prefetch_index == 10
    k = slow.prefetch_index
    drive(slow, robot, 15)
    assert robot.observed_at == [0, k]


def test_refresh_every_step_reports_age_zero(pipelines):
    for async_prefetch in (False, True):
        robot = Robot()
        policy = ScriptedChunks(lengths=(4,))
        pipe = pipelines(policy, action_horizon=4, async_prefetch=async_prefetch, refresh_every_step=True)
        trace = drive(pipe, robot, 12)
        assert [p.age_steps for _, p in trace] == [0] * 12
        assert not any(p.is_chunk_reused for _, p in trace)
        assert [p.observation["applied"] for _, p in trace] == list(range(12))
        assert robot.observed_at == list(range(12))  # observed every step, once
        # the actions still come from the chunks, not a chunk per step
        assert [p.action["joint"] for _, p in trace] == [100.0 * n + i for n in range(3) for i in range(4)]
        assert [p.chunk_index for _, p in trace] == [0, 1, 2, 3] * 3


@pytest.mark.parametrize("error", [EndEpisode("done"), RuntimeError("policy crashed")])
def test_end_episode_from_worker_surfaces_at_swap(pipelines, error):
    robot = Robot()
    policy = ScriptedChunks(lengths=(4,), raise_on={1: error})
    pipe = pipelines(policy, action_horizon=4, async_prefetch=True)
    trace = drive(pipe, robot, 4)  # the prefetch fails during these steps or at the swap ...
    assert [p.action["joint"] for _, p in trace] == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(type(error)) as raised:  # ... and surfaces where its chunk was due
        pipe.next_action(robot.observe)
    assert raised.value is error


def test_worker_thread_stops_on_close():
    def workers():
        return [t for t in threading.enumerate() if t.name == WORKER_THREAD_NAME]

    before = len(workers())
    policy = ScriptedChunks(lengths=(4,))
    pipe = ChunkPipeline(policy, action_horizon=4, async_prefetch=True, inference_timeout_s=5.0)
    drive(pipe, Robot(), 14)  # several chunks, one prefetch in flight at the end
    assert len(workers()) == before + 1
    # one persistent worker ran every act(), not a thread per chunk and never the loop's thread
    assert len(set(policy.threads)) == 1
    assert policy.threads[0] != threading.get_ident()
    pipe.close()
    assert len(workers()) == before
    pipe.close()  # idempotent
    with pytest.raises(RuntimeError):
        pipe.next_action(Robot().observe)


def test_sync_mode_runs_act_on_one_worker_that_close_ends(pipelines):
    def workers():
        return [t for t in threading.enumerate() if t.name == WORKER_THREAD_NAME]

    before = len(workers())
    policy = ScriptedChunks()
    pipe = pipelines(policy)
    drive(pipe, Robot(), 9)
    assert len(set(policy.threads)) == 1 and policy.threads[0] != threading.get_ident()
    pipe.close()
    assert len(workers()) == before


def test_telemetry_counts_chunks_and_latency(pipelines):
    policy = ScriptedChunks(lengths=(2,))
    pipe = pipelines(policy, action_horizon=2, clock=latency_clock([0.01, 0.03, 0.02]))
    assert pipe.telemetry == ChunkTelemetry(0, 0, 0, 0.0, 0.0)
    drive(pipe, Robot(), 6)
    telemetry = pipe.telemetry
    assert telemetry.chunks_inferred == 3
    assert telemetry.latency_p50_s == pytest.approx(0.02)
    assert telemetry.latency_max_s == pytest.approx(0.03)


@pytest.mark.parametrize("kwargs", [
    {"action_horizon": 0}, {"action_horizon": 2.5}, {"inference_timeout_s": 0}, {"inference_timeout_s": float("nan")},
])
def test_invalid_settings_are_refused(kwargs):
    settings = {"action_horizon": 4, "async_prefetch": False, "inference_timeout_s": 1.0, **kwargs}
    with pytest.raises(ValueError):
        ChunkPipeline(ScriptedChunks(), **settings)


@pytest.mark.parametrize("async_prefetch", [False, True])
def test_stop_while_waiting_for_an_inference_raises_cooperative_stop_and_abandons_it(pipelines, async_prefetch):
    from strands_robots.rollout.stop import StopToken
    from strands_robots.simulation.observers import CooperativeStop

    gate = threading.Event()
    token = StopToken()
    policy = ScriptedChunks(lengths=(2,), gate=gate)  # every inference after the first waits for the gate
    pipe = pipelines(policy, action_horizon=2, async_prefetch=async_prefetch, inference_timeout_s=60.0,
                     stop=token)
    robot = Robot()
    drive(pipe, robot, 2)
    # The loop waits at the boundary (sync: the act; async: the prefetch block) until the stop arrives.
    timer = threading.Timer(0.01, token.request, args=("goal cancelled",))
    timer.start()
    try:
        with pytest.raises(CooperativeStop, match="goal cancelled"):
            pipe.next_action(robot.observe)
        assert not gate.is_set()  # the act is still blocked: it was abandoned, not waited for
        pipe.close()  # does not wait for the abandoned act
        assert not gate.is_set()
    finally:
        timer.cancel()
        gate.set()


def test_a_policy_that_never_blocks_runs_sync_act_on_the_loop_thread(pipelines):
    def workers():
        return [t for t in threading.enumerate() if t.name == WORKER_THREAD_NAME]

    class Pure(ScriptedChunks):
        never_blocks = True

    # New worker threads, not a count: an earlier test's worker may still be ending meanwhile (it failed so once
    # in a two-worker run, the count one lower than before).
    before = set(workers())
    policy = Pure()
    pipe = pipelines(policy)
    drive(pipe, Robot(), 9)
    assert set(policy.threads) == {threading.get_ident()} and not set(workers()) - before
    asynchronous = pipelines(Pure(), async_prefetch=True)  # async always infers on the worker
    assert len(set(workers()) - before) == 1
    asynchronous.close()


def test_builtin_providers_declare_never_blocks_unless_told_to_sleep():
    from strands_robots.policies.registry import make_policy

    assert make_policy("mock").never_blocks is True
    assert make_policy("mock", {"inference_delay_s": 0.5}).never_blocks is False
