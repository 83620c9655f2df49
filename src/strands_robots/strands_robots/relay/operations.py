"""What makes a relay operable, wired into :class:`~strands_robots.relay.server.RelayServer` in one place.

- **metrics** (:mod:`~strands_robots.relay.metrics`): every call counted and timed, every store call timed,
  per-team queues and stations' last-heard times read at each scrape; served on ``settings.metrics``
  (``--metrics HOST:PORT``) when given, else kept (and readable in process) but not served;
- **health** (:mod:`~strands_robots.relay.health`): ``grpc.health.v1.Health`` on the relay's own port;
- **token rotation**: :func:`wait_for_stop` runs the relay's main loop, and a SIGHUP re-reads the tokens file
  (:class:`~strands_robots.relay.auth.ReloadingTokenBook` also re-reads it when it changes).
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Optional

from strands_robots.relay.config import RelaySettings
from strands_robots.relay.health import RelayHealth
from strands_robots.relay.metrics import RelayMetrics


class Operations:
    """One relay's metrics and health.

    The server calls ``wrap_store``, ``attach_core``, ``attach_server``, ``start`` and ``stop`` in that order.
    """

    def __init__(self, settings: RelaySettings) -> None:
        self.settings = settings
        self.metrics = RelayMetrics()
        self.health: Optional[RelayHealth] = None
        self.metrics_port: Optional[int] = None

    def wrap_store(self, store: Any) -> Any:
        """Return the store with every call timed (``relay_store_call_seconds``)."""
        return self.metrics.timed_store(store)

    def attach_core(self, core: Any) -> None:
        """Before the method table is built: calls are counted through ``core.metrics``."""
        core.metrics = self.metrics
        self.metrics.watch_store(core.store, lambda: core.tokens.clients)
        self.metrics.watch_tokens(lambda: core.tokens)
        self.health = RelayHealth(lambda: core.store.read_sql("SELECT 1"), core.run)

    def attach_server(self, server: Any) -> None:
        assert self.health is not None
        self.health.add_to(server)

    async def start(self) -> None:
        """On the relay's loop, once the server started: health SERVING (store probed), the metrics port open."""
        assert self.health is not None
        await self.health.start()
        if self.settings.metrics:
            self.metrics_port = self.metrics.serve(self.settings.metrics)

    async def stop(self) -> None:
        if self.health is not None:
            await self.health.stop()
        self.metrics.close()


class _Hangup:
    """SIGHUP sets a flag (no lock in a handler); the main loop takes it."""

    def __init__(self) -> None:
        self.pending = False
        self._previous: Any = None

    def _handle(self, _signum: int, _frame: Any) -> None:
        self.pending = True

    def __enter__(self) -> "_Hangup":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGHUP, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGHUP, self._previous)


def wait_for_stop(signals: Any, tokens: Any, tick_s: float = 0.5) -> None:
    """Run until a stop signal; on SIGHUP re-read the tokens file (``tokens.reload()``) within ``tick_s``.

    ``signals`` is the main's :class:`~strands_robots.stop_signals.StopSignals`.

    A SIGHUP also wakes ``signals.event`` (its wake-up pipe carries every signal) but sets no ``signum``: that
    wake-up is cleared and the loop goes on; only a stop signal ends it.
    """
    with _Hangup() as hangup:
        while not signals.signum:
            signals.event.wait(tick_s)
            if not signals.signum:
                signals.event.clear()
            if hangup.pending:
                hangup.pending = False
                reload = getattr(tokens, "reload", None)
                if reload is not None:
                    reload()
