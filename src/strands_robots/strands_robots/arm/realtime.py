"""Runs a driver core in real time: one adapter timestep per deadline, on its own thread.

This is the simulator's physics thread (and what a hardware adapter whose ``step`` reads the arms uses as its
control loop). It belongs to the hardware binding (:mod:`strands_robots.arm.hardware`), not to the node: the
node only starts and stops it and hears every tick.

Deadlines advance by a fixed period on the monotonic clock (no drift from sleep jitter); a late tick steps at
once to catch up, and a backlog over ``max_lag_s`` is dropped and counted as an overrun (robot time then lags
the wall clock rather than jumping). Counters read by other threads are guarded by a lock.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional, Protocol

# Physics that falls this far behind the wall clock drops the backlog instead of running a catch-up burst.
MAX_LAG_S = 0.1


class Steppable(Protocol):
    """What a runner drives: the driver core (its ``step`` evaluates the safety envelope)."""

    def step(self, dt: float) -> None: ...


class Runner(Protocol):
    """The thread that lets adapter time pass while the driver is active."""

    @property
    def rate_hz(self) -> float: ...

    @property
    def running(self) -> bool: ...

    @property
    def fault(self) -> str: ...

    @property
    def overruns(self) -> int: ...

    def start(self) -> None: ...

    def stop(self, timeout_s: float = 2.0) -> None: ...

    def wait_time(self, target_s: float, wall_timeout_s: float) -> bool: ...


class RealTimeStepper:
    """Steps ``core`` by ``period_s`` once per deadline until stopped.

    :param core: what to step (the driver core).
    :param period_s: adapter timestep.
    :param time_s: the adapter's clock (``wait_time`` waits on it).
    :param on_tick: called on the runner thread after every step (the node publishes joint states there).
    :param on_fault: called once if a step raises; the runner then stops.
    :param max_lag_s: backlog that is dropped instead of caught up.
    """

    def __init__(self, core: Steppable, period_s: float, time_s: Callable[[], float],
                 on_tick: Callable[[], None], on_fault: Callable[[BaseException], None],
                 max_lag_s: float = MAX_LAG_S, name: str = "arm_driver_physics") -> None:
        if not period_s > 0:
            raise ValueError(f"period_s must be > 0, got {period_s!r}")
        self._core = core
        self._period = float(period_s)
        self._time_s = time_s
        self._on_tick = on_tick
        self._on_fault = on_fault
        self._max_lag = float(max_lag_s)
        self._name = name
        self._stop = threading.Event()
        self._ticked = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._counters = threading.Lock()
        self._overruns = 0
        self._steps = 0
        self._fault = ""

    @property
    def rate_hz(self) -> float:
        return 1.0 / self._period

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    @property
    def fault(self) -> str:
        with self._counters:
            return self._fault

    @property
    def overruns(self) -> int:
        with self._counters:
            return self._overruns

    @property
    def steps(self) -> int:
        with self._counters:
            return self._steps

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        with self._ticked:
            self._ticked.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def wait_time(self, target_s: float, wall_timeout_s: float) -> bool:
        """Block until adapter time reaches ``target_s``; False if the runner stopped or the wall timeout passed."""
        deadline = time.monotonic() + wall_timeout_s
        with self._ticked:
            while self._time_s() < target_s - 1e-9:
                if self._stop.is_set():
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._ticked.wait(min(left, 0.05))
        return True

    def _run(self) -> None:
        period = self._period
        core = self._core
        deadline = time.monotonic()
        try:
            while not self._stop.is_set():
                deadline += period
                delay = deadline - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif delay < -self._max_lag:
                    with self._counters:
                        self._overruns += 1
                    deadline = time.monotonic()
                core.step(period)
                with self._counters:
                    self._steps += 1
                with self._ticked:
                    self._ticked.notify_all()
                self._on_tick()
        except BaseException as exc:  # the runner must never die silently: report, then stop
            with self._counters:
                self._fault = f"{type(exc).__name__}: {exc}"
            self._stop.set()
            with self._ticked:
                self._ticked.notify_all()
            self._on_fault(exc)
