"""The rollout's end of the command stream: ActionCommands out, ActionVerdicts back, never a wait per step.

DESIGN.md §5 "Command path". The control loop (``PolicyRunner``) sends step ``k``'s command and goes on; the
verdicts are collected as they arrive and step ``k``'s ``RunPolicyStep`` is dispatched once ``k``'s own verdict
is in, in step order (:mod:`strands_robots.rollout.pipeline`). Here:

- :meth:`CommandStream.publish` writes one ``ActionCommand`` (run id, step index, lease proof, keys, values,
  ``sent``, and ``apply_by = sent + stale_after_s``: the command window, a few periods; a command the driver
  reads later than that is refused as ``stale`` and the arms hold, so a driver starved for a while never applies
  a backlog in a burst). It is a DDS write; nothing waits.
- The verdict subscription (an executor thread) takes **every** verdict queued at each callback (not one per
  pass over the executor's wait set: at 500 Hz and 1 kHz that is what made a backlog), keeps this run's in
  arrival order and wakes the control thread; :meth:`CommandStream.collect` hands them over.
- :meth:`CommandStream.send` is the blocking single call (publish, then wait for that step's verdict), for
  single commands outside the control loop and for tests.

QoS (``ros/qos.py``): both streams reliable, volatile, keep_last 2000 (seconds of history at 1 kHz). The
rollout never has more than its window in flight, so no reader falls that far behind; one that did would lose
the oldest (their steps are unknown after the verdict bound), and the writer never blocks.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, List, Mapping, Optional, Sequence

from strands_robots_msgs.msg import ActionCommand, ActionVerdict as ActionVerdictMsg

from strands_robots.conversions.actions import stream_command_msg
from strands_robots.ros import take
from strands_robots.ros.qos import COMMAND_QOS, VERDICT_QOS

# How many command-to-verdict latencies are kept for telemetry (the bench reads them).
LATENCY_SAMPLES = 200_000
# Verdicts taken per callback beyond the one the executor hands over (a bound, so a flood cannot hold the
# executor thread forever; far above what a window of commands can produce).
DRAIN_MAX = 4096
# Sent times remembered for the latency figure (older ones are dropped: their verdicts were lost).
_SENT_REMEMBERED = 4096


class CommandStream:
    """Publisher of ``action_commands`` and subscriber of ``action_verdicts`` for one rollout.

    :param node: node to create both on (spun by an executor on another thread).
    :param commands_topic: e.g. ``action_commands`` or ``/arms/action_commands``.
    :param verdicts_topic: e.g. ``action_verdicts``.
    :param callback_group: for the verdict subscription.
    :param on_verdict: called on the executor thread once per callback that took at least one verdict (this
        run's or not); keep it short (the driver watch notes an answer).
    """

    def __init__(self, node: Any, commands_topic: str, verdicts_topic: str, callback_group: Any = None,
                 on_verdict: "Callable[[], None] | None" = None) -> None:
        self._node: Optional[Any] = node
        self._pub = node.create_publisher(ActionCommand, commands_topic, COMMAND_QOS)
        self._sub = node.create_subscription(ActionVerdictMsg, verdicts_topic, self._on_verdict, VERDICT_QOS,
                                             callback_group=callback_group)
        self._on_verdict_cb = on_verdict
        self._cond = threading.Condition()
        self._run = ""  # the run whose verdicts collect() hands over
        self._arrived: "collections.deque[Any]" = collections.deque()
        self._sent_ns: "collections.OrderedDict[tuple, int]" = collections.OrderedDict()
        self._waiting: "dict[tuple, list]" = {}  # blocking send(): key -> [event, msg]
        self.sent = 0
        self.answered = 0
        self.foreign = 0
        self.latencies_ns: "collections.deque[int]" = collections.deque(maxlen=LATENCY_SAMPLES)
        self.last_error = ""

    # -- executor thread -------------------------------------------------------------------------------------
    def _on_verdict(self, msg: Any) -> None:
        self._handle(msg)
        for queued_msg in take.queued(self._sub, ActionVerdictMsg, DRAIN_MAX, lambda: self._node is not None):
            self._handle(queued_msg)
        if self._on_verdict_cb is not None:
            self._on_verdict_cb()

    def _handle(self, msg: Any) -> None:
        now = time.perf_counter_ns()
        key = (msg.run_id, msg.step_index)
        with self._cond:
            sent = self._sent_ns.pop(key, None)
            if sent is not None:
                self.latencies_ns.append(now - sent)
            waiter = self._waiting.get(key)
            if waiter is not None:
                waiter[1] = msg
                waiter[0].set()
                self.answered += 1
                self.last_error = msg.error  # what the driver said last (a coarse error names a hardware fault)
            elif msg.run_id == self._run and self._run:
                self._arrived.append(msg)
                self.answered += 1
                self.last_error = msg.error
                self._cond.notify_all()
            else:
                self.foreign += 1  # another rollout's verdict on a shared driver, or an earlier run's

    # -- control thread --------------------------------------------------------------------------------------
    def driver_listening(self) -> bool:
        """Whether a driver subscribes to the commands and publishes verdicts (DDS discovery matched)."""
        return self._pub.get_subscription_count() > 0 and self._sub.get_publisher_count() > 0

    def begin_run(self, run_id: str) -> None:
        """Collect ``run_id``'s verdicts from now on (an earlier run's that still arrive count as foreign)."""
        with self._cond:
            self._run = str(run_id)
            self._arrived.clear()
            self._sent_ns.clear()

    def publish(self, action: Mapping[str, float], run_id: str, step_index: int, lease_token: str,
                stale_after_s: float, lookahead: "Sequence[float]" = (), lookahead_period_s: float = 0.0) -> None:
        """Publish one command (``apply_by`` = now + ``stale_after_s``); never waits.

        ``lookahead``: the chunk's next steps after this one, flattened in the action's key order
        (:func:`strands_robots.arm.lookahead.flatten`), ``lookahead_period_s`` apart.

        :raises TypeError: a value that is not a real number (the caller converts values first).
        """
        sent_ns = time.time_ns()
        msg = stream_command_msg(action, run_id, step_index, lease_token, sent_ns,
                                 sent_ns + int(stale_after_s * 1e9), lookahead,
                                 int(round(lookahead_period_s * 1e9)) if lookahead else 0)
        with self._cond:
            sent = self._sent_ns
            sent[(run_id, step_index)] = time.perf_counter_ns()
            while len(sent) > _SENT_REMEMBERED:
                sent.popitem(last=False)
        self._pub.publish(msg)
        self.sent += 1

    def collect(self, timeout_s: float) -> List[Any]:
        """Return every verdict message of the current run arrived so far, oldest first.

        Waits at most ``timeout_s`` (0: not at all) when none has arrived yet.
        """
        with self._cond:
            if not self._arrived and timeout_s > 0:
                self._cond.wait(timeout_s)
            out = list(self._arrived)
            self._arrived.clear()
        return out

    def send(self, action: Mapping[str, float], run_id: str, step_index: int, lease_token: str,
             wait_s: float, stale_after_s: float) -> Optional[Any]:
        """Publish one command and wait at most ``wait_s`` for its verdict: the verdict message, or None.

        The single call, outside the control loop (which never waits: :meth:`publish`, :meth:`collect`).
        """
        key = (run_id, step_index)
        waiter: list = [threading.Event(), None]
        with self._cond:
            self._waiting[key] = waiter
        try:
            self.publish(action, run_id, step_index, lease_token, stale_after_s)
            waiter[0].wait(wait_s)
        finally:
            with self._cond:
                self._waiting.pop(key, None)
        return waiter[1]

    def summary(self, since: "tuple[int, int, int] | None" = None) -> str:
        """Describe the stream's counters (since ``counts()`` was taken) and its command-to-verdict latency."""
        sent, answered, foreign = self.counts()
        if since is not None:
            sent, answered, foreign = sent - since[0], answered - since[1], foreign - since[2]
        lat = list(self.latencies_ns)[-answered:] if answered > 0 else []  # this episode's, in arrival order
        text = f"{sent} commands, {answered} verdicts, {foreign} foreign"
        if lat:
            lat.sort()
            p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
            text += f", command-to-verdict p50 {p50 / 1e6:.3f} ms p99 {p99 / 1e6:.3f} ms"
        return text

    def counts(self) -> "tuple[int, int, int]":
        """``(sent, answered, foreign)`` so far."""
        return self.sent, self.answered, self.foreign

    def close(self) -> None:
        node, self._node = self._node, None
        if node is None:
            return
        node.destroy_subscription(self._sub)
        node.destroy_publisher(self._pub)
