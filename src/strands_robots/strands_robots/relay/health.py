"""The relay's standard gRPC health service (``grpc.health.v1.Health``), for load balancers and probes.

``Check`` / ``Watch`` answer for the whole server (``""``) and for each of the relay's services by name
(``strands_robots.relay.v1.Evaluation``, ``strands_robots.relay.v1.Station``). The relay is SERVING while its
store answers: a probe of the store runs every ``probe_s`` (one cheap query on the store's pool) and a store
that fails turns every name NOT_SERVING until it answers again; a stopping relay turns NOT_SERVING before its
listeners close. Health calls carry no token (probes have none) and tell nothing but that status.

Uses gRPC's own ``grpcio-health-checking`` (the same release line as grpcio).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Callable, Sequence

from grpc_health.v1 import health, health_pb2, health_pb2_grpc

_log = logging.getLogger("strands_robots.relay")

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICES = ("strands_robots.relay.v1.Evaluation", "strands_robots.relay.v1.Station")


class RelayHealth:
    """The health servicer of one relay, and the store probe that keeps it true.

    :param probe: a synchronous call that raises when the store cannot answer (run on the store's pool).
    :param run: the relay core's ``run`` (awaits a call on the store's thread pool).
    """

    def __init__(self, probe: Callable[[], Any], run: Callable[..., Any], probe_s: float = 5.0,
                 names: Sequence[str] = SERVICES) -> None:
        self.servicer = health.aio.HealthServicer()
        self._probe = probe
        self._run = run
        self._probe_s = probe_s
        self._names = ("", *names)
        self._task: "asyncio.Task[None] | None" = None
        self.status = NOT_SERVING

    def add_to(self, server: Any) -> None:
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)

    async def _set(self, status: int) -> None:
        if status != self.status:
            if status != SERVING:
                _log.warning("relay health: NOT_SERVING (the store does not answer)")
            elif self._task is not None:
                _log.info("relay health: SERVING again")
        self.status = status
        for name in self._names:
            await self.servicer.set(name, status)

    async def check_once(self) -> int:
        try:
            await self._run(self._probe)
        except Exception:  # noqa: BLE001 - any store failure is NOT_SERVING; the relay logs store errors itself
            await self._set(NOT_SERVING)
        else:
            await self._set(SERVING)
        return self.status

    async def start(self) -> None:
        """Probe once (so the first answer is true), then every ``probe_s`` on the relay's loop."""
        await self.check_once()
        self._task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._probe_s)
            await self.check_once()

    async def stop(self) -> None:
        """NOT_SERVING for every name (probes see the relay leave before its port closes), probe stopped."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self.servicer.enter_graceful_shutdown()
        self.status = NOT_SERVING
