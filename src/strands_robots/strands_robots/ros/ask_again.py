"""An idempotent ROS request asked again until one answer comes, within a bound.

A service (or a parameter service) seen in the graph is not yet matched both ways: the first request to a node
just started can be lost, or its answer can ("failed to send response (timeout): client will not receive
response"). A request whose effect is the same however often it arrives (reading a parameter, setting the same
values) is therefore sent again every ``retry_s`` until the first answer, at most ``timeout_s``; the requests
still unanswered then are cancelled, so a late answer is dropped. Non-idempotent requests never come here.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

__all__ = ["ask_until_answered"]


def ask_until_answered(send: Callable[[], Any], timeout_s: float, retry_s: float = 1.0) -> Optional[Any]:
    """Return the first answer to ``send()`` (which sends the request and returns its future); None at ``timeout_s``.

    Call it from a thread other than the one spinning the client's node: it waits for an executor to answer.
    A future that completed with an exception counts as no answer.
    """
    answered = threading.Event()
    deadline = time.monotonic() + timeout_s
    futures: list = []
    try:
        while not answered.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            future = send()
            future.add_done_callback(lambda _f: answered.set())
            futures.append(future)
            answered.wait(min(retry_s, left))
            for future in futures:
                if future.done() and not future.cancelled() and future.exception() is None \
                        and future.result() is not None:
                    return future.result()
            answered.clear()
        return None
    finally:
        for future in futures:
            if not future.done():
                future.cancel()
