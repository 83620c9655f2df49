"""Core timing figures on the real clock, for the behaviours the unit tests pin on injected clocks.

The tests run on injected clocks and pin behaviour; this script measures the same behaviours on the real clock
and prints figures. Not pass/fail.

Figures:

- pacer grid: step-start deviation from the deadline grid (p50 / p99 / max) at a few rates;
- stop latency: a stop requested from another thread during a long deadline wait, and during a blocking
  sync ``act`` (the call is abandoned), both measured from the request to the loop's return;
- takeover: a 100 ms pause — paused_s and the budget clock (elapsed_s) as the rollout reports them;
- prefetch: async chunks with a real inference latency of k control periods — the settled prefetch point,
  hits / blocks and mean observation age, against a fixed half-chunk point;
- observer lane: per-step cost of dispatching to one trivial observer, in process (fast mode).

Usage (about 15 s)::

    source scripts/env.sh --no-install
    PYTHONPATH=src/strands_robots python bench/core_timing.py
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "strands_robots"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "strands_robots" / "test"))

from rollout_fakes import FakeBackend, ScriptedPolicy  # noqa: E402  (test doubles double as bench parts)

from strands_robots.rollout.chunks import ChunkPipeline  # noqa: E402
from strands_robots.rollout.pacing import DeadlinePacer  # noqa: E402
from strands_robots.rollout.runner import PolicyRunner  # noqa: E402
from strands_robots.simulation.observers import RunPolicyStep  # noqa: E402


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pacer_grid(rate_hz: float, steps: int) -> None:
    pacer = DeadlinePacer(1.0 / rate_hz)
    pacer.start()
    stamps = []
    for _ in range(steps):
        pacer.wait()
        stamps.append(time.perf_counter_ns())
    period = 1e9 / rate_hz
    start = stamps[0]
    dev = [abs((s - start) - round((s - start) / period) * period) / 1e3 for s in stamps]
    print(f"  {rate_hz:6.0f} Hz  {steps} steps  deviation p50 {pct(dev, 0.5):6.1f} us  p99 {pct(dev, 0.99):6.1f} us"
          f"  max {max(dev):7.1f} us  missed {pacer.missed_deadlines}")


def stop_latency_in_wait() -> float:
    pacer = DeadlinePacer(30.0)
    pacer.start()
    pacer.wait()
    requested = []
    timer = threading.Timer(0.05, lambda: (requested.append(time.perf_counter()), pacer.stop.request("cancel")))
    timer.start()
    pacer.wait()
    return time.perf_counter() - requested[0]


def stop_latency_in_blocking_act(rate_hz: float) -> float:
    entered, release = threading.Event(), threading.Event()

    def on_act(n):
        if n == 1:
            entered.set()
            release.wait(30.0)

    runner = PolicyRunner(FakeBackend())
    done = []
    thread = threading.Thread(target=lambda: (runner.run(ScriptedPolicy(horizon=2, on_act=on_act), n_steps=1000,
                                                         control_frequency=rate_hz), done.append(
        time.perf_counter())))
    thread.start()
    entered.wait(30.0)
    time.sleep(0.05)
    t0 = time.perf_counter()
    runner.request_stop("cancel")
    thread.join(30.0)
    release.set()
    return done[0] - t0


def takeover() -> None:
    runner = PolicyRunner(FakeBackend())

    def observer(event):
        if isinstance(event, RunPolicyStep) and event.applied_action_index == 2:
            runner.pause()
            threading.Timer(0.1, runner.resume).start()

    out = runner.run(ScriptedPolicy(), n_steps=6, control_frequency=100.0, observer=observer)
    ep = out["episodes"][0]
    print(f"  100 ms takeover at 100 Hz: paused_s {ep['paused_s'] * 1e3:.1f} ms, elapsed_s "
          f"{ep['elapsed_s'] * 1e3:.1f} ms (steps at 0-20 and 120-140 ms: 40 ms of budget), "
          f"missed {ep['missed_deadlines']}")


class SleepyPolicy:
    def __init__(self, length, latency_s):
        self.length, self.latency_s = length, latency_s

    def reset(self, task):
        pass

    def act(self, observation):
        time.sleep(self.latency_s)
        return [{"joint": float(i)} for i in range(self.length)]

    def resume(self, observation):
        pass


def prefetch(length: int, k: int, period: float, adaptive: bool) -> None:
    pipe = ChunkPipeline(SleepyPolicy(length, k * period), action_horizon=length, async_prefetch=True,
                         inference_timeout_s=5.0)
    pacer = DeadlinePacer(period)
    pacer.start()
    ages, last = [], None
    try:
        for _ in range(10 * length):
            pacer.wait()
            ages.append(pipe.next_action(lambda: {}).age_steps)
            now = time.perf_counter()
            if adaptive and last is not None:
                pipe.note_step_interval(now - last)
            last = now
        tele = pipe.telemetry
        point = pipe.prefetch_index
    finally:
        pipe.close()
    later = ages[2 * length:]
    print(f"  L={length:2d} k={k} {'adaptive' if adaptive else 'half    '}: point {point:2d}, hits "
          f"{tele.prefetch_hits:2d}, blocks {tele.prefetch_blocks:2d}, mean age {statistics.mean(later):5.2f} steps")


def observer_lane_cost(steps: int = 20000) -> None:
    def run(observer):
        runner = PolicyRunner(FakeBackend())
        t0 = time.perf_counter()
        runner.run(ScriptedPolicy(horizon=8), n_steps=steps, fast_mode=True, observer=observer)
        return (time.perf_counter() - t0) / steps

    count = [0]

    def observer(event):
        count[0] += 1

    base = min(run(None) for _ in range(3))
    watched = min(run(observer) for _ in range(3))
    print(f"  per step without observer {base * 1e6:.2f} us, with one {watched * 1e6:.2f} us: lane cost "
          f"{(watched - base) * 1e6:.2f} us/step")


def main() -> None:
    print("pacer grid (real clock):")
    for rate, steps in ((200.0, 1000), (500.0, 2000), (1000.0, 2000)):
        pacer_grid(rate, steps)
    print("stop latency:")
    print(f"  during a 30 s deadline wait: {stop_latency_in_wait() * 1e3:.2f} ms")
    for rate in (50.0, 500.0):
        print(f"  during a blocking sync act at {rate:g} Hz (period {1e3 / rate:g} ms): "
              f"{stop_latency_in_blocking_act(rate) * 1e3:.2f} ms")
    print("takeover:")
    takeover()
    print("prefetch (50 Hz, inference of k periods):")
    for length, k in ((8, 1), (8, 2), (16, 5)):
        prefetch(length, k, 0.02, adaptive=False)
        prefetch(length, k, 0.02, adaptive=True)
    print("observer lane:")
    observer_lane_cost()


if __name__ == "__main__":
    main()
