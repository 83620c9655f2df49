"""When a rate-paced publication is due, decided on the thread that steps the arms.

The driver publishes ``joint_states`` from its real-time runner's step hook rather than from a timer: the state
is the freshest (just stepped) and the deadlines do not drift. :class:`PublishPacer` keeps those deadlines: a
publication is due when the step reaches the next deadline, which then moves one period on; a rate above the
step rate publishes once per step (no newer state exists), and a pacer that fell behind restarts one period
from now instead of publishing a burst. The rate may change from another thread (a parameter) at any time.
"""

from __future__ import annotations

import threading

__all__ = ["PublishPacer"]


class PublishPacer:
    """The deadlines of one publication at ``rate_hz`` (see the module docstring); thread-safe."""

    def __init__(self, rate_hz: float) -> None:
        self._lock = threading.Lock()
        self._period_s = 1.0 / float(rate_hz)
        self._next = 0.0

    def set_rate(self, rate_hz: float) -> None:
        """Publish at ``rate_hz`` from the next deadline on (the value is already validated)."""
        with self._lock:
            self._period_s = 1.0 / float(rate_hz)

    def restart(self, now: float) -> None:
        """Make the publication due at once (at ``now``, a monotonic time in seconds), e.g. on activation."""
        with self._lock:
            self._next = now

    def due(self, now: float) -> bool:
        """Say whether the publication is due at ``now``; when it is, the next deadline moves one period on."""
        with self._lock:
            if now < self._next:
                return False
            self._next += self._period_s
            if self._next < now:  # fell behind (e.g. rate above the step rate): no bursts
                self._next = now + self._period_s
            return True
