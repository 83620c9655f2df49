"""At a stop, a live sink takes what is still arriving before its subscriptions go.

``record`` and ``foxglove`` stop on Ctrl-C / SIGTERM or ``--duration``. A message a publisher sent just before
the stop can still be in the subscription's queue, waiting for the executor: shutting the executor down at once
drops it, and a recording then holds fewer messages than were published (a camera's last frame, seen missing
once in a test run). So the stop first waits until nothing has arrived for ``quiet_s`` (everything in flight
is taken), bounded by ``max_s`` for topics that keep publishing.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

__all__ = ["ArrivalClock", "wait_until_quiet"]

QUIET_S = 0.2
MAX_S = 1.0


class ArrivalClock:
    """The monotonic time of the latest message (``mark`` is called from the executor thread)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last = clock()

    def mark(self) -> None:
        with self._lock:
            self._last = self._clock()

    def last(self) -> float:
        with self._lock:
            return self._last


def wait_until_quiet(last_arrival: Callable[[], float], *, quiet_s: float = QUIET_S, max_s: float = MAX_S,
                     clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], None] = time.sleep) -> bool:
    """Wait until no message arrived for ``quiet_s``, at most ``max_s``; return whether it went quiet.

    :raises ValueError: ``quiet_s`` or ``max_s`` negative.
    """
    if quiet_s < 0 or max_s < 0:
        raise ValueError(f"quiet_s and max_s must be >= 0, got {quiet_s} and {max_s}")
    deadline = clock() + max_s
    while True:
        now = clock()
        idle = now - last_arrival()
        if idle >= quiet_s:
            return True
        if now >= deadline:
            return False
        sleep(min(quiet_s - idle, deadline - now, 0.05))
