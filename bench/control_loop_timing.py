"""The control-loop benchmark's probes: what the loop calls, timed, and the figures from those times.

:class:`TimedBackend` (and its :class:`TimedWindow` on the command stream) records each ``send_action`` /
``submit``'s start time and round trip in preallocated lists (two ``perf_counter_ns`` reads per call);
:class:`TimedObserver` the time each observer call takes on the control thread; :class:`CountingObserver` is
the in-process "with observer" (the counter process's minimal work). :func:`loop_metrics` and
:func:`observer_metrics` turn the recorded times into the rate, the step-interval deviation and the costs a run
reports (bench/README.md, Columns).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import numpy as np


class TimedBackend:
    """A RobotBackend decorator recording each ``send_action``'s start time and round trip (ns).

    Preallocated lists and two clock reads per call: ~0.3 µs. Other attributes (``core``, ``joint_limits``,
    the ROS backend's extras) are forwarded, so the runner sees the backend it wraps.
    """

    def __init__(self, inner: Any, capacity: int) -> None:
        self._inner = inner
        self._send = inner.send_action
        self.action_keys = inner.action_keys
        self.observe = inner.observe
        self.reset = inner.reset
        self.advance = inner.advance
        self.safety_stop_detail = inner.safety_stop_detail
        self.capacity = capacity
        self.starts = [0] * capacity
        self.rtts = [0] * capacity
        self.n = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def send_action(self, action: Any) -> Any:
        return self._timed(self._send, action)

    def _timed(self, call: Callable[[Any], Any], action: Any) -> Any:
        clock = time.perf_counter_ns
        t0 = clock()
        try:
            return call(action)
        finally:
            t1 = clock()
            n = self.n
            if n < self.capacity:
                self.starts[n] = t0
                self.rtts[n] = t1 - t0
                self.n = n + 1

    def command_window(self) -> Any:
        """Return the inner backend's asynchronous command path with its ``submit`` timed (None when it has none)."""
        factory = getattr(self._inner, "command_window", None)
        window = factory() if callable(factory) else None
        return None if window is None else TimedWindow(window, self)


class TimedWindow:
    """A command window (rollout/pipeline.py) whose ``submit`` calls are timed like ``send_action``."""

    def __init__(self, inner: Any, timed: TimedBackend) -> None:
        self._inner = inner
        self._timed = timed
        self.max_outstanding = inner.max_outstanding
        self.overdue_ns = inner.overdue_ns
        self.verdict_bound_ns = inner.verdict_bound_ns
        self.collect = inner.collect
        self.describe_silence = inner.describe_silence

    def submit(self, action: Any) -> Any:
        return self._timed._timed(self._inner.submit, action)


class TimedObserver:
    """Wraps an observer and records the time each call takes on the control thread (ns)."""

    def __init__(self, inner: Callable[[Any], Any], capacity: int) -> None:
        self.inner = inner
        self.capacity = capacity
        self.costs = [0] * capacity
        self.n = 0

    def __call__(self, event: Any) -> None:
        clock = time.perf_counter_ns
        t0 = clock()
        try:
            self.inner(event)
        finally:
            dt = clock() - t0
            n = self.n
            if n < self.capacity:
                self.costs[n] = dt
                self.n = n + 1


class CountingObserver:
    """The in-process "with observer": the counter process's minimal work, on the control thread."""

    def __init__(self) -> None:
        self.runs: dict[str, list] = {}   # run_id -> [received, next_seq, missing, steps]
        self.obs_values = 0

    def __call__(self, event: Any) -> None:
        r = self.runs.get(event.run_id)
        if r is None:
            r = self.runs[event.run_id] = [0, 0, 0, 0]
        r[0] += 1
        seq = event.event_seq
        if seq != r[1]:
            r[2] += max(0, seq - r[1])
        r[1] = seq + 1
        obs = getattr(event, "observation", None)
        if obs is not None:
            r[3] += 1
            self.obs_values += len(obs)

    def summary(self) -> dict:
        return {"received": sum(r[0] for r in self.runs.values()),
                "missing": sum(r[2] for r in self.runs.values()),
                "steps": sum(r[3] for r in self.runs.values())}


# -- the figures from those times -------------------------------------------------------------------------------------
def percentiles(values_ms: np.ndarray) -> dict:
    if values_ms.size == 0:
        return {"p50": float("nan"), "p99": float("nan"), "max": float("nan"), "mean": float("nan")}
    p50, p99 = np.percentile(values_ms, [50, 99])
    return {"p50": float(p50), "p99": float(p99), "max": float(values_ms.max()), "mean": float(values_ms.mean())}


def loop_metrics(timed: TimedBackend, rate: float) -> dict:
    """Achieved rate and step-interval deviation from send_action start times; round trips."""
    n = timed.n
    starts = np.asarray(timed.starts[:n], dtype=np.int64)
    rtts = np.asarray(timed.rtts[:n], dtype=np.int64) / 1e6
    period_ns = 1e9 / rate
    out: dict = {"steps_timed": n}
    if n >= 2:
        intervals = np.diff(starts)
        span_s = (starts[-1] - starts[0]) / 1e9
        out["achieved_hz"] = (n - 1) / span_s if span_s > 0 else float("nan")
        dev = np.abs(intervals - period_ns) / 1e6
        out["interval_dev_ms"] = percentiles(dev)
        out["intervals_over_period_plus_1ms"] = int(np.count_nonzero(intervals > period_ns + 1e6))
        worst = np.argsort(intervals)[-5:][::-1]
        out["worst_intervals"] = [{"step": int(i + 1), "interval_ms": float(intervals[i] / 1e6)} for i in worst]
    else:
        out["achieved_hz"] = float("nan")
        out["interval_dev_ms"] = percentiles(np.array([]))
    out["rtt_ms"] = percentiles(rtts)
    return out


def observer_metrics(timed_obs: Optional[TimedObserver], steps: int) -> dict:
    if timed_obs is None or timed_obs.n == 0:
        return {}
    costs = np.asarray(timed_obs.costs[:timed_obs.n], dtype=np.int64) / 1e3
    return {"calls": timed_obs.n, "us_per_event": percentiles(costs),
            "us_per_step": float(costs.sum() / max(1, steps))}
