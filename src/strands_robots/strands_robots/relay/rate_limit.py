"""A token bucket, and a logger that writes one line per event while the bucket allows and counts the rest.

The relay logs every malformed or refused request as one line; a peer sending thousands of them a second must
not flood the log (nor slow the relay down writing it). :class:`RateLimitedLog` writes a line while its bucket
has a token, drops the line otherwise, and says how many it dropped on the next line it writes.

Pure: an injectable clock, no threads; safe to share between threads (one lock).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

__all__ = ["RateLimitedLog", "TokenBucket"]


class TokenBucket:
    """``rate_per_s`` tokens a second, at most ``burst`` saved up; :meth:`take` spends one if there is one.

    :param rate_per_s: tokens added per second (> 0).
    :param burst: the most tokens held (>= 1); the bucket starts full.
    :param clock: seconds, monotonic (``time.monotonic`` by default).
    """

    def __init__(self, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if not rate_per_s > 0:
            raise ValueError(f"rate_per_s must be > 0, got {rate_per_s!r}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst!r}")
        self.rate_per_s = float(rate_per_s)
        self.burst = int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Spend one token and return True, or return False when the bucket is empty."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + max(0.0, now - self._last) * self.rate_per_s)
            self._last = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


class RateLimitedLog:
    """Log one line per call while the bucket allows; count the lines dropped and name the count on the next.

    :param logger: where the lines go.
    :param rate_per_s: lines per second in the long run.
    :param burst: lines written at once before the rate applies.
    """

    def __init__(self, logger: logging.Logger, rate_per_s: float = 2.0, burst: int = 20,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._bucket = TokenBucket(rate_per_s, burst, clock)
        self._lock = threading.Lock()
        self.dropped = 0      # lines dropped since the last one written
        self.dropped_total = 0

    def warning(self, message: str) -> bool:
        """Write ``message`` (one line: newlines become spaces) as a WARNING; False when it was dropped."""
        if not self._bucket.take():
            with self._lock:
                self.dropped += 1
                self.dropped_total += 1
            return False
        with self._lock:
            dropped, self.dropped = self.dropped, 0
        line = " ".join(message.split("\n"))
        if dropped:
            line += f" ({dropped} similar line(s) dropped by the log's rate limit)"
        self._logger.warning("%s", line)
        return True

    def flush(self) -> None:
        """Say how many lines were dropped since the last one written (at shutdown); nothing when none were."""
        with self._lock:
            dropped, self.dropped = self.dropped, 0
        if dropped:
            self._logger.warning("%d similar line(s) dropped by the log's rate limit", dropped)
