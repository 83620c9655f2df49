"""What every strands_robots node process does around its node: init, spin, and a clean stop on signals.

rclpy's own SIGINT handler shuts the context down under whatever is running (an episode mid-step, a physics
thread), so the processes take SIGINT/SIGTERM themselves: the signal only sets an event, and the process stops
its work in order (episode ended and published, arms held) before the context goes.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# Python hands the GIL over only every sys.getswitchinterval() (5 ms by default): in a node process whose
# physics or control thread keeps running, a service answer or a response callback could wait that long for
# the interpreter, which is a whole 200 Hz control period. Node processes switch every 0.5 ms instead.
NODE_SWITCH_INTERVAL_S = 0.0005


def init_without_signal_handlers(argv: "Sequence[str] | None") -> None:
    """``rclpy.init`` leaving SIGINT/SIGTERM to us (Humble has no signal handler options: plain init there),
    with the node processes' GIL switch interval (``NODE_SWITCH_INTERVAL_S``)."""
    args = list(argv) if argv is not None else None
    sys.setswitchinterval(NODE_SWITCH_INTERVAL_S)
    try:
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except (ImportError, TypeError):
        rclpy.init(args=args)


class StopSignals:
    """SIGINT/SIGTERM set ``event`` (and ``signum``) instead of raising, from :meth:`install` (or ``with``)
    until :meth:`restore`, which puts the previous handlers back."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum = 0
        self._previous: dict = {}

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signum = self.signum or signum
        self.event.set()

    @classmethod
    def install(cls) -> "StopSignals":
        signals = cls()
        signals._previous = {sig: signal.signal(sig, signals._handle) for sig in STOP_SIGNALS}
        return signals

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def __enter__(self) -> "StopSignals":
        self._previous = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: Any) -> None:
        self.restore()


def spin_in_background(executor: Any, name: str) -> threading.Thread:
    """Spin ``executor`` on a daemon thread until it is shut down (a context shutdown ends it quietly)."""

    def spin() -> None:
        try:
            executor.spin()
        except (ExternalShutdownException, KeyboardInterrupt):
            pass

    thread = threading.Thread(target=spin, name=name, daemon=True)
    thread.start()
    return thread
