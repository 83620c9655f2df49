"""The rollout node's built-in observer: publishes every observer event to ROS without blocking the loop.

The observer lane is synchronous on the control thread (spec/observer-lane.txt, "not isolated"); a ROS publish
is not free, so this observer only copies what the event borrows (the observation and action mappings may not
be retained past the call) into a bounded queue, and a publisher thread converts and publishes.

The control thread never waits here, for any event:

- a step event arriving at a full queue is dropped and counted; the gap shows in ``event_seq`` and in the next
  published message's ``dropped_before``;
- Started and Ended are never dropped and never wait: at a full queue the newest queued **step** event makes
  room for them (dropped and counted the same way, its ``dropped_before`` carried to the event after it), so a
  lifecycle is always opened and closed on the stream even when its subscriber stalled the publisher.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable

from strands_robots.conversions.events import event_to_msg
from strands_robots.simulation.observers import RunPolicyStep

_STOP = object()


class QueuedEventPublisher:
    """Observer callable: ``publisher(event)`` enqueues; a thread publishes with ``publish(msg)``.

    :param publish: the ROS publisher's ``publish`` (called on the publisher thread only).
    :param depth: queue bound; a step event arriving at a full queue is dropped and counted, a lifecycle event
        evicts the newest queued step event instead.
    :param on_event: called on the publisher thread after each publish with the event (e.g. action feedback).
    """

    def __init__(
        self,
        publish: Callable[[Any], None],
        depth: int = 4096,
        on_event: "Callable[[Any], None] | None" = None,
    ) -> None:
        if depth < 1:
            raise ValueError("event queue depth must be >= 1")
        self._publish = publish
        self._on_event = on_event
        self._depth = depth
        # Items: (event, observation copy, action copy, dropped_before) or a _Marker / _STOP.
        self._items: "collections.deque[Any]" = collections.deque()
        self._cond = threading.Condition()
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
        items = self._items
        if type(event) is RunPolicyStep:
            # Borrowed, not copied: take our own shallow copies now; the values are immutable floats.
            with self._cond:
                if len(items) >= self._depth:
                    self.dropped += 1
                    self._dropped_unreported += 1
                    return
                items.append((event, dict(event.observation), dict(event.action), self._dropped_unreported))
                self._dropped_unreported = 0
                self._cond.notify()
            return
        with self._cond:
            if len(items) >= self._depth:
                self._evict_newest_step()
            items.append((event, None, None, self._dropped_unreported))
            self._dropped_unreported = 0
            self._cond.notify()

    def _evict_newest_step(self) -> None:
        """Drop the newest queued step event (under the lock).

        With no step event queued, the lifecycle event goes over the bound by one instead.
        """
        items = self._items
        for i in range(len(items) - 1, -1, -1):
            item = items[i]
            if isinstance(item, tuple) and type(item[0]) is RunPolicyStep:
                del items[i]
                self.dropped += 1
                carried = item[3] + 1
                if i < len(items) and isinstance(items[i], tuple):  # the next event reports the gap
                    nxt = items[i]
                    items[i] = (nxt[0], nxt[1], nxt[2], nxt[3] + carried)
                else:  # it was the newest event: the one being enqueued reports it
                    self._dropped_unreported += carried
                return

    # -- publisher thread ----------------------------------------------------------------------------------
    def _run(self) -> None:
        items = self._items
        while True:
            with self._cond:
                while not items:
                    self._cond.wait()
                item = items.popleft()
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

    def _put_control(self, item: Any) -> None:
        with self._cond:
            self._items.append(item)  # markers are not events: they never count against the bound
            self._cond.notify()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until everything queued so far was published (True) or ``timeout_s`` passed (False)."""
        done = threading.Event()
        self._put_control(_Marker(done))
        return done.wait(timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        self.flush(timeout_s)
        self._put_control(_STOP)
        self._thread.join(timeout_s)


class _Marker:
    """A queue item that sets an event when the publisher thread reaches it."""

    def __init__(self, done: threading.Event) -> None:
        self.done = done
