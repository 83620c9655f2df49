"""The rollout's end of the command stream: one ActionCommand out per step, its ActionVerdict back.

DESIGN.md §5 "Command path". The control loop (``PolicyRunner``) asks ``send_action(action)`` for the step's
verdict and classifies it at once (full / partial / none / unknown), so ``RunPolicyStep`` carries the driver's
own verdict. Over the stream that works like this:

- ``send`` publishes the ``ActionCommand`` (run id, step index, lease token, keys, values, ``sent``, and
  ``apply_by = sent + stale_after_s``; the rollout sets ``stale_after_s`` to its dead-driver bound: a delivery a
  loaded machine delayed still applies, in order, so the arms follow the trajectory late instead of holding and
  then jumping to a fresh target, while a command the rollout would already have given the driver up for never
  moves the arms) and waits on an event that the verdict subscription sets when **this** step's verdict
  arrives. No service, no future, no executor round trip on the control thread:
  the publish is a DDS write, and the answer is one ``threading.Event`` hand-over from the executor thread.
- The wait is bounded by ``wait_s``, a fraction of the control period (``verdict_wait_fraction``, default
  0.6), so a missing verdict costs at most that and never a deadline: the driver answers within ~0.5-1 ms on
  this machine (bench/README.md), inside the bound at 200 and 500 Hz. Past the bound the step is ``unknown``
  with a coarse error (``no verdict within ...``); the verdict, if it still comes, is counted as ``late`` and
  its step stays unknown (the loop has moved on; unknown means "not known", never a guess). A command that
  arrives at the driver after its ``apply_by`` is refused as ``stale`` and the arms hold, so a step the loop
  gave up on is unknown (it may still have applied within its ``apply_by``), and nothing older than that
  ever moves the arms.
- Steps that go unanswered count toward the dead-driver detection (:mod:`strands_robots.nodes.driver_watch`).

Why not pipeline the classification one step late (send k, read verdict k while step k+1 runs)? The runner
dispatches the step's event right after ``send_action`` returns, with that step's verdict; a one-step-late
verdict would need the runner to hold the event back a period (and would move every event a period later for
an observer). The bounded wait keeps the event order and each step's own verdict unchanged, and the loop
still never waits on a DDS round trip beyond the fraction of a period it budgets for it.

QoS (``nodes/_qos.py``): both streams reliable, volatile, keep_last 2000 (seconds of history at 1 kHz). A
reader that falls that far behind loses the oldest (their steps are unknown after the bound); the writer never
blocks.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Mapping, Optional

from strands_robots_msgs.msg import ActionCommand, ActionVerdict as ActionVerdictMsg

from strands_robots import convert
from strands_robots.nodes._qos import COMMAND_QOS, VERDICT_QOS

# How many command-to-verdict latencies are kept for telemetry (the bench reads them).
LATENCY_SAMPLES = 200_000


class CommandStream:
    """Publisher of ``action_commands`` and subscriber of ``action_verdicts`` for one rollout.

    :param node: node to create both on (spun by an executor on another thread).
    :param commands_topic: e.g. ``action_commands`` or ``/arms/action_commands``.
    :param verdicts_topic: e.g. ``action_verdicts``.
    :param callback_group: for the verdict subscription.
    :param on_verdict: called on the executor thread with every verdict message (this run's or not), after the
        waiting step was handed its own; keep it short (the driver watch notes an answer).
    """

    def __init__(self, node: Any, commands_topic: str, verdicts_topic: str, callback_group: Any = None,
                 on_verdict: "Callable[[Any], None] | None" = None) -> None:
        self._node = node
        self._pub = node.create_publisher(ActionCommand, commands_topic, COMMAND_QOS)
        self._sub = node.create_subscription(ActionVerdictMsg, verdicts_topic, self._on_verdict, VERDICT_QOS,
                                             callback_group=callback_group)
        self._on_verdict_cb = on_verdict
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._waiting: "tuple[str, int] | None" = None
        self._answer: Any = None
        self._sent_ns = 0
        self._last_run = ""
        self.sent = 0
        self.answered = 0
        self.late = 0
        self.foreign = 0
        self.latencies_ns: "collections.deque[int]" = collections.deque(maxlen=LATENCY_SAMPLES)

    # -- executor thread -------------------------------------------------------------------------------------
    def _on_verdict(self, msg: Any) -> None:
        now = time.perf_counter_ns()
        key = (msg.run_id, msg.step_index)
        with self._lock:
            if key == self._waiting:
                self._answer = msg
                self._waiting = None
                self.answered += 1
                self.latencies_ns.append(now - self._sent_ns)
                self._event.set()
            elif msg.run_id == self._last_run:
                self.late += 1  # a step the loop stopped waiting for
            else:
                self.foreign += 1  # another rollout's verdict on a shared driver
        if self._on_verdict_cb is not None:
            self._on_verdict_cb(msg)

    # -- control thread --------------------------------------------------------------------------------------
    def driver_listening(self) -> bool:
        """Whether a driver subscribes to the commands and publishes verdicts (DDS discovery matched)."""
        return self._pub.get_subscription_count() > 0 and self._sub.get_publisher_count() > 0

    def send(self, action: Mapping[str, float], run_id: str, step_index: int, lease_token: str,
             wait_s: float, stale_after_s: float) -> Optional[Any]:
        """Publish one command and wait at most ``wait_s`` for its verdict; the verdict message, or None.

        :raises TypeError: a value that is not a real number (the caller converts values first).
        """
        sent_ns = time.time_ns()
        msg = convert.stream_command_msg(action, run_id, step_index, lease_token, sent_ns,
                                         sent_ns + int(stale_after_s * 1e9))
        with self._lock:
            self._event.clear()
            self._answer = None
            self._waiting = (run_id, step_index)
            self._last_run = run_id
            self._sent_ns = time.perf_counter_ns()
        self._pub.publish(msg)
        self.sent += 1
        if not self._event.wait(wait_s):
            with self._lock:
                if self._answer is None:  # not answered in the meantime
                    self._waiting = None
                    return None
        return self._answer

    def summary(self, since: "tuple[int, int, int] | None" = None) -> str:
        """Describe the stream's counters (since ``counts()`` was taken) and its command-to-verdict latency."""
        sent, answered, late = self.counts()
        if since is not None:
            sent, answered, late = sent - since[0], answered - since[1], late - since[2]
        lat = list(self.latencies_ns)[-answered:] if answered > 0 else []  # this episode's, in arrival order
        text = f"{sent} commands, {answered} verdicts in time, {late} late"
        if lat:
            lat.sort()
            p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
            text += f", command-to-verdict p50 {p50 / 1e6:.3f} ms p99 {p99 / 1e6:.3f} ms"
        return text

    def counts(self) -> "tuple[int, int, int]":
        """``(sent, answered, late)`` so far."""
        return self.sent, self.answered, self.late

    def close(self) -> None:
        self._node.destroy_subscription(self._sub)
        self._node.destroy_publisher(self._pub)
