"""Deadline pacing of the control loop.

Step ``k`` is due at ``d_k = d_0 + k * period``: the next deadline is the previous deadline plus one period,
never "now plus one period", so the rate does not drift by the loop's own cost. When a step overruns (a slow
policy, a blocking observer) and the loop comes back after one or more deadlines have passed, those deadlines
are dropped and counted, and the loop waits for the next one on the grid: it never fires catch-up actions, so
the arm sees a gap rather than a burst.

Waiting sleeps on the stop token's event for the bulk (interruptible: a cooperative stop ends the wait at
once) and spin-waits on ``time.perf_counter_ns`` for the last ``spin_ns`` (``Event.wait`` wakes up to a few
hundred microseconds late on a loaded machine; the spin makes the step start sub-millisecond accurate).

While paused (operator takeover, or the loop's hold on a driver that does not answer) the rollout clock stands
still: :attr:`elapsed_s` excludes paused time, and on resume the grid restarts, so paused time is neither dropped
nor caught up. A wait that sees the pause holds until the resume, and its step runs at once, but never sooner
than one period after the step before it: a loop that held until each verdict came and resumed would otherwise
send at the driver's pace, faster than the control rate. A pause that began and ended while a step ran (the loop
never waited inside it: a stalled step, a short takeover, a hold) restarts the grid at the next wait just the
same, and only whole periods of rollout time that passed outside the pause count as dropped deadlines: the time
the operator held is never a missed deadline.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from strands_robots.rollout.stop import StopToken

__all__ = ["DeadlinePacer", "DEFAULT_SPIN_NS"]

# Spin for the last 200 µs: Event.wait(0.8 ms) oversleeps p50 ~75 µs, p90 ~100 µs, p99 ~260 µs (measured on a
# 2-core machine with another process at 100 % CPU), so 200 µs covers ~97 % of wake-ups at modest CPU cost.
DEFAULT_SPIN_NS = 200_000
# While paused, re-check for stop/resume at least this often.
_PAUSE_POLL_S = 0.005


class DeadlinePacer:
    """Paces a loop on a fixed deadline grid.

    :param period_s: control period (1 / control_frequency), > 0.
    :param fast_mode: no pacing at all: :meth:`wait` returns at once (still honouring a stop).
    :param stop: the token whose request interrupts a wait (a private one when None).
    :param spin_ns: length of the final spin-wait.
    :param clock_ns: monotonic ns clock (tests and simulated time inject one).
    :param waiter: ``waiter(event, timeout_s) -> bool``, how a wait sleeps (default ``event.wait``); injected
        with ``clock_ns`` so a test's time passes in its own clock, deterministically.
    """

    def __init__(
        self,
        period_s: float,
        *,
        fast_mode: bool = False,
        stop: "StopToken | None" = None,
        spin_ns: int = DEFAULT_SPIN_NS,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
        waiter: "Callable[[threading.Event, float], bool] | None" = None,
    ) -> None:
        if not (isinstance(period_s, (int, float)) and period_s > 0):
            raise ValueError(f"period_s must be > 0, got {period_s!r}")
        self.period_s = float(period_s)
        self._period_ns = max(1, int(round(period_s * 1e9)))
        self.fast_mode = bool(fast_mode)
        self.stop = stop if stop is not None else StopToken()
        # An injected waiter owns the passing of time: no spin on a clock that only it advances.
        self._spin_ns = max(0, int(spin_ns)) if waiter is None else 0
        self._clock = clock_ns
        self._waiter = waiter
        self._next_ns = 0
        self._start_ns = 0
        self._paused_ns = 0
        self._paused_seen_ns = 0  # the paused time the loop has already accounted for at a wait
        self._pause_started_ns = 0
        self._pause_lock = threading.Lock()
        self._paused = threading.Event()
        self._resumed_flag = False
        self._anchor_pending = True
        self.missed_deadlines = 0
        self.last_dropped = 0
        self.started = False

    # -- the budget clock ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the rollout clock. The grid anchors at the first :meth:`wait` (that step runs at once)."""
        now = self._clock()
        self._start_ns = now
        self._next_ns = now
        self._anchor_pending = True
        self._paused_ns = 0
        self._paused_seen_ns = 0
        self.missed_deadlines = 0
        self.last_dropped = 0
        self.started = True

    @property
    def elapsed_s(self) -> float:
        """Rollout time since :meth:`start`, excluding time spent paused."""
        now = self._clock()
        paused = self._paused_ns
        if self._paused.is_set():
            paused += now - self._pause_started_ns
        return max(0, now - self._start_ns - paused) / 1e9

    @property
    def paused_s(self) -> float:
        paused = self._paused_ns
        if self._paused.is_set():
            paused += self._clock() - self._pause_started_ns
        return paused / 1e9

    # -- takeover -------------------------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return self._paused.is_set()

    def pause(self) -> None:
        """Stop the rollout clock (operator takeover); the next :meth:`wait` blocks until resume or stop."""
        with self._pause_lock:
            if not self._paused.is_set():
                self._pause_started_ns = self._clock()
                self._paused.set()

    def resume(self) -> None:
        """Restart the clock; the grid restarts at this instant (no catch-up, nothing counted as missed)."""
        with self._pause_lock:
            if self._paused.is_set():
                now = self._clock()
                self._paused_ns += now - self._pause_started_ns
                self._resumed_flag = True
                self._paused.clear()

    def take_resumed(self) -> bool:
        """Return True once after a resume (the loop then calls the policy's ``resume``, drops its chunk)."""
        flag = self._resumed_flag
        self._resumed_flag = False
        return flag

    # -- waiting --------------------------------------------------------------------------------------------
    def wait(self) -> bool:
        """Wait for the next deadline. False when a stop was requested (before or during the wait).

        Sets :attr:`last_dropped` to the number of deadlines dropped before this one (0 when on time) and adds
        it to :attr:`missed_deadlines`.
        """
        stop_event = self.stop.event
        if self._paused.is_set():
            if not self._wait_paused():
                return False
            self._anchor_pending = True  # the grid restarts when the loop sees the resume
        if stop_event.is_set():
            return False
        if self.fast_mode:
            self.last_dropped = 0
            return True
        clock = self._clock
        period = self._period_ns
        now = clock()
        # A takeover that began and ended since the last wait: the clock stood still for that long.
        paused_between = self._paused_ns - self._paused_seen_ns
        self._paused_seen_ns = self._paused_ns
        if self._anchor_pending:  # first step, or first after a resume: the grid starts here
            self._anchor_pending = False
            self._next_ns = max(now, self._next_ns)  # ... never sooner than a period after the previous step
            dropped = 0
        elif paused_between > 0:
            # The grid restarts here too, never sooner than a period after the previous step; a deadline counts
            # as dropped only when a whole period of rollout time (outside the pause) passed after it with no step.
            late = now - self._next_ns - paused_between
            dropped = int(late // period) if late > 0 else 0
            self._next_ns = max(now, self._next_ns)
        else:
            dropped = self._overrun(now - self._next_ns)
            self._next_ns += dropped * period
        target = self._next_ns
        self.last_dropped = dropped
        self.missed_deadlines += dropped
        # Bulk: sleep on the stop event (a stop request wakes it at once).
        remaining = target - now - self._spin_ns
        if remaining > 0:
            waited = stop_event.wait(remaining / 1e9) if self._waiter is None else self._waiter(stop_event,
                                                                                             remaining / 1e9)
            if waited:
                return False
            if self._paused.is_set():
                return self.wait()
        # Final stretch: spin on the clock.
        while clock() < target:
            pass
        if stop_event.is_set():
            return False
        if self._paused.is_set():  # taken over during the spin: this step waits for the resume too
            return self.wait()
        self._next_ns = target + period
        return True

    def _overrun(self, late_ns: int) -> int:
        """Deadlines dropped when the loop comes back ``late_ns`` after its next deadline (0 when on time).

        A deadline reached less than 5 % of a period (at most 50 µs) late still runs; anything later was overrun
        by the previous step and is dropped, with every deadline that passed after it.
        """
        if late_ns <= 0 or (late_ns < self._period_ns and late_ns <= min(self._period_ns // 20, 50_000)):
            return 0
        return int(late_ns // self._period_ns + 1)

    def _wait_paused(self) -> bool:
        stop_event = self.stop.event
        poll = min(self.period_s, _PAUSE_POLL_S)
        while self._paused.is_set():
            if (stop_event.wait(poll) if self._waiter is None else self._waiter(stop_event, poll)):
                return False
        return not stop_event.is_set()
