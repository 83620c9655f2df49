"""The rollout node's built-in observer: publishes every observer event to ROS without blocking the loop.

The observer lane is synchronous on the control thread (spec/observer-lane.txt, "not isolated"); a ROS publish
is not free, so this observer only copies what the event borrows (the observation and action mappings may not
be retained past the call) into a bounded queue, and a publisher thread converts and publishes. A full queue
drops the step event and counts it; the gap shows in ``event_seq`` and in the next message's
``dropped_before``. Started and Ended wait (bounded) for room instead: they open and close a lifecycle and are
rare.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

from strands_robots.convert import event_to_msg
from strands_robots.simulation.observers import RunPolicyStep

_STOP = object()


class QueuedEventPublisher:
    """Observer callable: ``publisher(event)`` enqueues; a thread publishes with ``publish(msg)``.

    :param publish: the ROS publisher's ``publish`` (called on the publisher thread only).
    :param depth: queue bound; a step event arriving at a full queue is dropped and counted.
    :param on_event: called on the publisher thread after each publish with the event (e.g. action feedback).
    :param lifecycle_wait_s: how long Started/Ended wait for room in a full queue before being dropped.
    """

    def __init__(
        self,
        publish: Callable[[Any], None],
        depth: int = 4096,
        on_event: "Callable[[Any], None] | None" = None,
        lifecycle_wait_s: float = 2.0,
    ) -> None:
        if depth < 1:
            raise ValueError("event queue depth must be >= 1")
        self._publish = publish
        self._on_event = on_event
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=depth)
        self._lifecycle_wait_s = lifecycle_wait_s
        self._lock = threading.Lock()
        self.published = 0
        self.dropped = 0
        self.publish_errors = 0
        self._dropped_unreported = 0
        self._thread = threading.Thread(target=self._run, name="observer-event-publisher", daemon=True)
        self._thread.start()

    # -- control thread ------------------------------------------------------------------------------------
    def __call__(self, event: Any) -> None:
        # The drop count rides on the first event enqueued after the drops (taken here, on the only producer
        # thread, not when the publisher thread dequeues), so dropped_before sits right after the event_seq gap.
        if type(event) is RunPolicyStep:
            # Borrowed, not copied: take our own shallow copies now; the values are immutable floats.
            item = (event, dict(event.observation), dict(event.action), self._dropped_unreported)
            try:
                self._queue.put_nowait(item)
                self._dropped_unreported = 0
            except queue.Full:
                with self._lock:
                    self.dropped += 1
                self._dropped_unreported += 1
            return
        try:
            self._queue.put((event, None, None, self._dropped_unreported), timeout=self._lifecycle_wait_s)
            self._dropped_unreported = 0
        except queue.Full:
            with self._lock:
                self.dropped += 1
            self._dropped_unreported += 1

    # -- publisher thread ----------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if isinstance(item, _Marker):
                item.done.set()
                continue
            event, observation, action, dropped_before = item
            try:
                msg = event_to_msg(event, dropped_before, observation=observation, action=action)
                self._publish(msg)
                self.published += 1
            except Exception:  # a failed publish is counted, never raised into the loop
                self.publish_errors += 1
                continue
            if self._on_event is not None:
                try:
                    self._on_event(event)
                except Exception:
                    pass

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until everything queued so far was published (True) or ``timeout_s`` passed (False)."""
        done = threading.Event()
        try:
            self._queue.put(_Marker(done), timeout=timeout_s)
        except queue.Full:
            return False
        return done.wait(timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        self.flush(timeout_s)
        try:
            self._queue.put(_STOP, timeout=timeout_s)
        except queue.Full:
            pass
        self._thread.join(timeout_s)


class _Marker:
    """A queue item that sets an event when the publisher thread reaches it."""

    def __init__(self, done: threading.Event) -> None:
        self.done = done
