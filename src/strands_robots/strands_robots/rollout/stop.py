"""The cooperative stop of a rollout: goal cancel, takeover abort, ``Simulation.stop()``.

A :class:`StopToken` is set from any thread; the control loop sees it within one control period, also while
it waits on a deadline (the pacer waits on the token's event rather than sleeping blindly).
"""

from __future__ import annotations

import threading

from strands_robots.simulation.observers import CooperativeStop

__all__ = ["CooperativeStop", "StopToken"]


class StopToken:
    """A one-shot, thread-safe stop request with a reason.

    The first reason wins; later requests keep the token set. :meth:`clear` re-arms it (between calls).
    """

    __slots__ = ("_event", "_reason", "_lock", "_wakers")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason = ""
        self._lock = threading.Lock()
        self._wakers: list = []

    def request(self, reason: str = "cancelled") -> None:
        """Ask the rollout to stop (safe from any thread, also before the first step)."""
        with self._lock:
            if not self._event.is_set():
                self._reason = str(reason) or "cancelled"
                self._event.set()
            wakers = list(self._wakers)
        for waker in wakers:
            waker.set()

    def add_waker(self, event: threading.Event) -> None:
        """Also set ``event`` when a stop is requested.

        A thread waiting on something else (an inference in flight) then waits on one event that either its
        work or a stop sets. Check :attr:`requested` after adding.
        """
        with self._lock:
            self._wakers.append(event)

    def remove_waker(self, event: threading.Event) -> None:
        with self._lock:
            try:
                self._wakers.remove(event)
            except ValueError:
                pass

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str:
        return self._reason

    @property
    def event(self) -> threading.Event:
        """The underlying event; waiting on it is how a sleep becomes interruptible."""
        return self._event

    def wait(self, timeout: "float | None" = None) -> bool:
        """Block up to ``timeout`` seconds; True once a stop was requested."""
        return self._event.wait(timeout)

    def check(self) -> None:
        """Raise :class:`CooperativeStop` when a stop was requested."""
        if self._event.is_set():
            raise CooperativeStop(self._reason)

    def clear(self) -> None:
        with self._lock:
            self._event.clear()
            self._reason = ""
