"""The async prefetch point learns from the first chunk's latency, on simulated time.

A loop shaped like the runner's (the real :class:`DeadlinePacer` on :class:`FakeTime`, the step interval noted
as ``period * (1 + dropped)``, the pipeline given the control period) drives a real :class:`ChunkPipeline` whose
worker thread runs :class:`SimulatedInference`: an ``act`` that *takes* a chosen latency of the simulated clock.
The hand-offs between the loop and the worker are sequenced (the worker starts an ``act`` at the simulated time
its snapshot was taken, an ``act`` due before the next deadline finishes before time passes it, a boundary the
loop must wait at moves time to the ``act``'s end), so the hits, blocks and ages are the same on every run.
"""

from __future__ import annotations

import statistics
import time

import pytest
from rollout_fakes import FakeTime

from strands_robots.rollout.chunks import ChunkPipeline
from strands_robots.rollout.pacing import DeadlinePacer

PERIOD_S = 0.02  # 50 Hz
HORIZON = 8
STEPS = 200  # a 4 s episode: 25 chunks
_BOUND_S = 10.0  # real-time bound of every hand-off wait (never reached when the code is right)


def _wait_until(predicate, what):
    deadline = time.monotonic() + _BOUND_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"simulation hand-off timed out: {what}")
        time.sleep(0.0001)


class SimulatedInference:
    """A policy whose ``act`` takes ``latency_s`` of the simulated clock (``latency_s(call) -> s`` or a number).

    Call 0 is the episode's first chunk, inferred while the loop waits for it: time moves to its end at once.
    A prefetch finishes when the loop's waits bring time to its end, or, when the loop is already waiting for it
    at the boundary (a prefetch block), moves time to its end itself; one still in flight at ``close`` returns.
    """

    def __init__(self, t: FakeTime, latency_s, length: int = HORIZON) -> None:
        self.t = t
        self.latency_s = latency_s if callable(latency_s) else (lambda call: latency_s)
        self.length = length
        self.pipe: "ChunkPipeline | None" = None
        self.started = 0  # act calls begun
        self.finish_ns: "int | None" = None  # end of the act in flight
        self.samples: list[int] = []  # the simulated times the acts started at

    def reset(self, task):
        pass

    def act(self, observation):
        call = self.started
        blocks_before = self.pipe.telemetry.prefetch_blocks
        finish = self.t.now_ns + int(round(self.latency_s(call) * 1e9))
        self.samples.append(self.t.now_ns)
        self.finish_ns = finish
        self.started += 1
        if call == 0:
            self.t.now_ns = finish
        else:
            _wait_until(lambda: self.t.now_ns >= finish or self.pipe.telemetry.prefetch_blocks > blocks_before
                        or self.pipe.closed, "a prefetch act finishing")
            if self.pipe.closed:  # the episode ended with this prefetch in flight: its chunk is discarded
                return []
            self.t.now_ns = max(self.t.now_ns, finish)
        self.finish_ns = None
        return [{"joint": float(i)} for i in range(self.length)]

    def resume(self, observation):
        pass


class SimulatedLoop:
    """The runner's step loop on simulated time; records every step's age, start time and dropped deadlines."""

    def __init__(self, latency_s, *, pipeline_class=ChunkPipeline, period_s: "float | None" = PERIOD_S,
                 horizon: int = HORIZON) -> None:
        self.t = FakeTime()
        self.policy = SimulatedInference(self.t, latency_s, horizon)
        kwargs = {} if period_s is None else {"period_s": period_s}
        self.pipe = pipeline_class(self.policy, action_horizon=horizon, async_prefetch=True,
                                   inference_timeout_s=5.0, clock=self.t.seconds, **kwargs)
        self.policy.pipe = self.pipe
        self.pacer = DeadlinePacer(PERIOD_S, clock_ns=self.t.clock, waiter=self.wait)
        self.observations = 0
        self.ages: list[int] = []
        self.points: list[int] = []
        self.dropped: list[int] = []  # deadlines dropped before each step

    def observe(self):
        self.observations += 1
        return {"t_ns": self.t.now_ns}

    def wait(self, event, timeout_s):
        """Sleep as the pacer does, after the worker picked up its snapshot; an act due before the target ends first."""
        policy = self.policy
        _wait_until(lambda: policy.started == self.observations, "the worker starting the submitted act")
        target = self.t.now_ns + int(round(timeout_s * 1e9))
        finish = policy.finish_ns
        if finish is not None and finish <= target:
            self.t.now_ns = max(self.t.now_ns, finish)
            _wait_until(lambda: self.pipe.prefetch_ready, "the prefetch finishing")
        return self.t.wait(event, (target - self.t.now_ns) / 1e9)

    def run(self, steps: int = STEPS) -> "SimulatedLoop":
        pacer, pipe = self.pacer, self.pipe
        pacer.start()
        try:
            for index in range(steps):
                assert pacer.wait()
                self.dropped.append(pacer.last_dropped)
                if index > 0:
                    pipe.note_step_interval(PERIOD_S * (1 + pacer.last_dropped))
                planned = pipe.next_action(self.observe)
                if planned.chunk_index == 0:
                    self.points.append(pipe.prefetch_index)
                self.ages.append(planned.age_steps)
        finally:
            pipe.close()
        return self

    @property
    def swaps(self) -> int:
        tele = self.pipe.telemetry
        return tele.prefetch_hits + tele.prefetch_blocks

    @property
    def blocked_fraction(self) -> float:
        return self.pipe.telemetry.prefetch_blocks / self.swaps

    @property
    def mean_age(self) -> float:
        return statistics.mean(self.ages)


class FixedHalfChunk(ChunkPipeline):
    """The peer's point: half the chunk, whatever the latency (the age this issue measures against)."""

    def _choose_prefetch_index(self, length: int) -> int:
        return length // 2


# 20 ms and 100 ms of inference as a sleep measures them on this machine (a few hundred microseconds over).
@pytest.mark.parametrize("latency_s", [0.020, 0.0203, 0.100, 0.1003])
def test_prefetch_blocks_at_most_a_tenth_of_chunks_and_ages_less_than_a_fixed_half_chunk(latency_s):
    loop = SimulatedLoop(latency_s).run()
    assert loop.swaps == STEPS // HORIZON - 1
    assert loop.blocked_fraction <= 0.10
    assert loop.pipe.telemetry.prefetch_blocks == 0
    assert sum(loop.dropped[2:]) == 0  # only the first chunk's synchronous inference drops deadlines
    half = SimulatedLoop(latency_s, pipeline_class=FixedHalfChunk).run()
    if latency_s < 4 * PERIOD_S:  # the half chunk's 4 periods cover it: ours must be fresher
        assert half.pipe.telemetry.prefetch_blocks == 0
        assert loop.mean_age < half.mean_age
    else:  # the half chunk waits at every boundary; no point both avoids that and is as fresh
        assert half.pipe.telemetry.prefetch_blocks == loop.swaps


@pytest.mark.parametrize("latency_s, point", [(0.020, 6), (0.0203, 5), (0.100, 2), (0.1003, 1)])
def test_first_chunk_latency_sets_the_next_prefetch_point_in_periods_plus_one(latency_s, point):
    loop = SimulatedLoop(latency_s).run(2 * HORIZON)
    # ceil(latency / period) + 1 periods before the boundary, already for the chunk after the first
    assert loop.points == [point, point]
    assert loop.pipe.telemetry.prefetch_blocks == 0
    # observer-lane age: the sample's remaining old-chunk attempts, plus the new index
    assert loop.ages[HORIZON:] == [HORIZON - point + j for j in range(HORIZON)]


def test_without_a_period_the_shortest_step_interval_counts_and_dropped_deadlines_do_not_move_the_point_later():
    loop = SimulatedLoop(0.100, period_s=None).run(2 * HORIZON)
    # the first chunk knows no interval yet (half the chunk); step 1 came 6 periods late (5 dropped deadlines
    # after the first inference), the later steps one period apart: the shortest counts, 5 + 1 periods ahead
    assert loop.dropped[1] == 5
    assert loop.points == [HORIZON // 2, HORIZON - (5 + 1)]


def test_a_slower_inference_moves_the_point_earlier_at_the_next_chunk():
    # 20 ms for the first two calls, then 60 ms: the chunk after the first slow act samples 3 + 1 periods ahead
    loop = SimulatedLoop(lambda call: 0.020 if call < 2 else 0.060).run(5 * HORIZON)
    assert loop.points[:2] == [6, 6]
    assert loop.points[2] == HORIZON - 4  # the one slow act was sampled at 6: it blocks once, then never
    assert loop.points[3:] == [HORIZON - 4] * 2
    assert loop.pipe.telemetry.prefetch_blocks == 1


def test_inference_longer_than_the_horizon_prefetches_at_the_chunk_start_and_counts_each_block():
    latency_s = 10 * PERIOD_S  # 10 periods > 8
    loop = SimulatedLoop(latency_s).run(4 * HORIZON)
    assert loop.points == [0] * 4
    assert loop.pipe.telemetry.prefetch_blocks == loop.swaps == 3
    # each chunk is sampled at its own start: the sample carries the whole old chunk across the swap
    assert loop.ages[HORIZON:2 * HORIZON] == [HORIZON + j for j in range(HORIZON)]


@pytest.mark.parametrize("fast_mode, period_s", [(False, 0.02), (True, None)])
def test_runner_gives_its_pipelines_the_control_period_when_paced(monkeypatch, fast_mode, period_s):
    from rollout_fakes import FakeBackend, ScriptedPolicy

    import strands_robots.rollout.runner as runner_module

    given = []

    class Spy(ChunkPipeline):
        def __init__(self, *args, **kwargs):
            given.append(kwargs.get("period_s"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(runner_module, "ChunkPipeline", Spy)
    t = FakeTime()
    out = runner_module.PolicyRunner(FakeBackend(), clock_ns=t.clock, waiter=t.wait).run(
        ScriptedPolicy(), n_steps=12, control_frequency=50.0, action_horizon=4, async_rtc=True, fast_mode=fast_mode)
    assert out["status"] == "success"
    assert given == [period_s]


@pytest.mark.parametrize("period_s", [0, -0.02, float("nan"), float("inf"), True, "0.02"])
def test_a_period_that_is_not_a_finite_positive_number_is_refused(period_s):
    with pytest.raises(ValueError, match="period_s must be a finite number > 0 or None"):
        ChunkPipeline(SimulatedInference(FakeTime(), 0.0), action_horizon=HORIZON, async_prefetch=True,
                      inference_timeout_s=1.0, period_s=period_s)
