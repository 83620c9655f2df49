"""Taking what else has queued on a subscription from inside its callback, bounded.

The command and verdict streams arrive at the control rate. Each message the executor dispatches costs a whole
pass over the node's wait set, and on a loaded machine that is what made a backlog at 500 Hz and 1 kHz, so
their callbacks take what else has arrived themselves. The take is the one rclpy's own executor makes
(``Subscription.handle.take_message``, the same on Humble through Kilted).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator


def queued(subscription: Any, msg_type: Any, limit: int, alive: Callable[[], bool]) -> Iterator[Any]:
    """Yield up to ``limit`` messages already queued on ``subscription``; stop when none is left.

    :param alive: checked before each take; false once the owner is being destroyed (cleanup racing the
        callback), which also ends the take when the handle is gone under us.
    """
    for _ in range(limit):
        if not alive():
            return
        try:
            with subscription.handle:
                taken = subscription.handle.take_message(msg_type, False)
        except Exception:  # destroyed under us (cleanup): the executor will not call us again
            return
        if taken is None:
            return
        yield taken[0]
