"""One episode's command path over the command stream, as the control loop sees it (``CommandWindow``).

Made by :meth:`strands_robots.driver_link.client.RosDriverBackend.command_window`; it submits through the
backend's stream and hands the loop the verdicts as they arrive (``rollout/pipeline.py``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from strands_robots.arm.verdict import ActionVerdict
from strands_robots.conversions.actions import verdict_msg_to_verdict


class StreamWindow:
    """The control loop's command path over the stream for one episode (``rollout.pipeline.CommandWindow``).

    ``max_outstanding`` commands in flight (``command_window_s`` of them, at least 2), held while the oldest
    unanswered one is older than ``command_window_s`` (by then the driver refuses it as stale anyway), and a
    step with no verdict after the verdict bound is unknown.
    """

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.max_outstanding = backend.window_steps
        self.overdue_ns = int(backend.stale_after_s * 1e9)
        self.verdict_bound_ns = int(backend.verdict_bound_s * 1e9)

    def submit(self, action: Mapping[str, Any], lookahead: "Sequence[Mapping[str, Any]]" = ()) -> "int | ActionVerdict":
        return self._backend._publish_streamed(action, lookahead)

    def collect(self, timeout_s: float) -> "list[tuple[int, ActionVerdict]]":
        backend = self._backend
        out = []
        for msg in backend._stream.collect(timeout_s):
            backend._note_stopped(msg.stopped)
            out.append((int(msg.step_index), verdict_msg_to_verdict(msg)))
        return out

    def describe_silence(self) -> str:
        return self._backend._watch.fault() or f"the {self._backend.driver_name} did not answer"
