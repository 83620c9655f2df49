"""The async prefetch in process: blocked chunks and observation age at 50 Hz, horizon 8.

A real :class:`PolicyRunner` on the in-memory backend, real deadline pacing, a policy whose ``act`` sleeps 20 ms
or 100 ms on the pipeline's worker thread, 4 s episodes (200 steps, 25 chunks). Prints per latency the blocked
chunks (prefetch blocks / prefetches swapped in) and the mean ``observation_age_steps`` of every step (what the
observer lane reports), then the same for a fixed half-chunk point (the peer's) for comparison. Not pass/fail:
the loop's behaviour is pinned by test_chunk_prefetch_point.py on an injected clock.

Usage (about 50 s)::

    source scripts/env.sh --no-install
    PYTHONPATH=src/strands_robots python bench/prefetch_bench.py [--episodes 3] [--chunks-module PATH]

``--chunks-module`` runs the loop on another copy of ``rollout/chunks.py`` (e.g. the code before a change:
``git show HEAD~1:src/strands_robots/strands_robots/rollout/chunks.py > /tmp/old_chunks.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "strands_robots"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "strands_robots" / "test"))

from rollout_fakes import FakeBackend  # noqa: E402  (test doubles double as bench parts)

import strands_robots.rollout.runner as runner_module  # noqa: E402
from strands_robots.simulation.observers import RunPolicyStep  # noqa: E402

RATE_HZ = 50.0
HORIZON = 8
DURATION_S = 4.0


class SleepyPolicy:
    """Chunks of ``length`` actions for the fake backend's keys; each ``act`` sleeps ``latency_s``."""

    def __init__(self, length: int, latency_s: float) -> None:
        self.length, self.latency_s = length, latency_s

    def reset(self, task):
        pass

    def act(self, observation):
        time.sleep(self.latency_s)
        return [{"a": float(i), "b": 0.0} for i in range(self.length)]

    def resume(self, observation):
        pass


def fixed_half_chunk(pipeline_class):
    """Return a pipeline class sampling at half the chunk whatever the latency (the peer's point)."""

    class FixedHalfChunk(pipeline_class):
        def _choose_prefetch_index(self, length: int) -> int:
            return length // 2

    return FixedHalfChunk


def episode(latency_s: float) -> tuple[int, int, list[int]]:
    """Run one episode; return (prefetch blocks, chunks swapped in after the first, every step's age)."""
    ages: list[int] = []

    def observer(event):
        if isinstance(event, RunPolicyStep):
            ages.append(event.observation_age_steps)

    out = runner_module.PolicyRunner(FakeBackend()).run(
        SleepyPolicy(HORIZON, latency_s), duration=DURATION_S, control_frequency=RATE_HZ,
        action_horizon=HORIZON, async_rtc=True, rtc_inference_timeout_s=5.0, observer=observer)
    ep = out["episodes"][0]
    return ep["prefetch_blocks"], ep["prefetch_hits"] + ep["prefetch_blocks"], ages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--chunks-module", type=Path, default=None, help="another copy of rollout/chunks.py")
    args = parser.parse_args()
    if args.chunks_module is not None:
        spec = importlib.util.spec_from_file_location("alternative_chunks", args.chunks_module)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
        runner_module.ChunkPipeline = module.ChunkPipeline
        if "period_s" not in inspect.signature(module.ChunkPipeline).parameters:  # a copy from before period_s

            class WithoutPeriod(module.ChunkPipeline):
                def __init__(self, *a, period_s=None, **kw):
                    super().__init__(*a, **kw)

            runner_module.ChunkPipeline = WithoutPeriod
        print(f"chunks module: {args.chunks_module}")
    print(f"{RATE_HZ:g} Hz, horizon {HORIZON}, async prefetch, {DURATION_S:g} s episodes, {args.episodes} each")
    adaptive = runner_module.ChunkPipeline
    for name, pipeline_class in (("adaptive", adaptive), ("half chunk", fixed_half_chunk(adaptive))):
        runner_module.ChunkPipeline = pipeline_class
        for latency_s in (0.020, 0.100):
            rows = [episode(latency_s) for _ in range(args.episodes)]
            blocked = [100.0 * b / max(1, n) for b, n, _ in rows]
            ages = [statistics.mean(a) for _, _, a in rows]
            print(f"  {name:10s} inference {latency_s * 1e3:3.0f} ms: blocked chunks "
                  f"{', '.join(f'{p:5.1f} %' for p in blocked)}; mean observation age "
                  f"{', '.join(f'{a:5.2f}' for a in ages)} steps")
    runner_module.ChunkPipeline = adaptive


if __name__ == "__main__":
    main()
