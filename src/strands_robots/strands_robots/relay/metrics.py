"""The relay's Prometheus metrics, served on a port of their own (``--metrics HOST:PORT``, config ``metrics``).

Each relay has its own registry (several relays in one test process never mix their counts):

- ``relay_calls_total{method, code}``: calls answered, by method and gRPC status (``OK``, ``NOT_FOUND``, ...);
- ``relay_call_seconds{method}``: their latency (a histogram; a stream's whole life for streaming methods);
- ``relay_open_streams{method}``: streams open now: ``ServePolicy`` (teams serving a policy) and
  ``PolicySession`` (stations' sides of policy sessions) are the open sessions, ``TakeJobs`` the stations
  listening for jobs, the recording transfers;
- ``relay_store_call_seconds{call}``: every store call's latency (SQLite / PostgreSQL), by call;
- read from the store at each scrape: ``relay_team_open_jobs{team}`` and ``relay_team_queued_episodes{team}``
  (every client in the tokens file: jobs not ended, episodes they still have to run), and
  ``relay_station_last_heard_timestamp_seconds{station}`` (every station the relay has heard; ``time() - it``
  is how long it has been silent). A store that fails at a scrape leaves those out and counts
  ``relay_scrape_store_errors_total``;
- ``relay_token_reloads_total{result}``: re-reads of the tokens file, ``loaded`` or ``refused`` (a file that
  does not load: the previous tokens stay in use).

The page is plain HTTP (``/metrics``, the exposition format); listen on loopback or a private network (it names
teams and stations, never tokens or job contents).
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, Callable, Optional, Tuple

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            300.0)


def _code_of(exc: BaseException) -> str:
    """Return the status a call ended with, from what its implementation raised."""
    code = getattr(exc, "code", None)
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
        return "CANCELLED"
    if type(exc).__name__ == "StoreError" or type(exc).__name__ == "JobExists":
        return "UNAVAILABLE"
    return "INTERNAL"


class _StoreCollector:
    """What the store knows, read at each scrape: per-team queues and when each station was last heard."""

    def __init__(self, store: Any, clients: Callable[[], Any], errors: Counter) -> None:
        self._store = store
        self._clients = clients
        self._errors = errors

    def collect(self):
        jobs = GaugeMetricFamily("relay_team_open_jobs", "jobs not ended, per team (client token)", labels=["team"])
        episodes = GaugeMetricFamily("relay_team_queued_episodes", "episodes a team's open jobs still have to run",
                                     labels=["team"])
        heard = GaugeMetricFamily("relay_station_last_heard_timestamp_seconds",
                                  "when the relay last heard each station (unix time)", labels=["station"])
        try:
            for team in sorted(self._clients()):
                load = self._store.client_load(team)
                jobs.add_metric([team], load.open_jobs)
                episodes.add_metric([team], load.queued_episodes)
            for station, unix_ms in self._store.read_sql("SELECT station_id, last_heard_unix_ms FROM stations "
                                                         "ORDER BY station_id"):
                heard.add_metric([station], int(unix_ms) / 1000.0)
        except Exception:  # noqa: BLE001 - a scrape never fails for the store; the count says it happened
            self._errors.inc()
            return
        yield jobs
        yield episodes
        yield heard


class _TokensCollector:
    """How many times the tokens file was re-read: loaded, or refused (the previous tokens kept)."""

    def __init__(self, tokens: Callable[[], Any]) -> None:
        self._tokens = tokens

    def collect(self):
        tokens = self._tokens()
        if not hasattr(tokens, "reloads"):
            return
        family = CounterMetricFamily("relay_token_reloads", "tokens file re-reads, by result (loaded, refused: "
                                     "the previous tokens kept)", labels=["result"])
        family.add_metric(["loaded"], tokens.reloads)
        family.add_metric(["refused"], tokens.refused)
        yield family


class TimedStore:
    """The store, with every call's latency observed (``relay_store_call_seconds{call}``); otherwise the same."""

    def __init__(self, store: Any, histogram: Histogram) -> None:
        self._store = store
        self._histogram = histogram

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value) or name.startswith("_"):
            return value
        observe = self._histogram.labels(name).observe
        store = self._store

        @functools.wraps(value)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return getattr(store, name)(*args, **kwargs)  # looked up each call: the store's own, as it is now
            finally:
                observe(time.perf_counter() - start)
        self.__dict__[name] = timed  # made once: later calls find it without __getattr__
        return timed


class RelayMetrics:
    """One relay's counters and histograms, and the wrappers that feed them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter("relay_calls", "calls answered, by method and gRPC status", ["method", "code"],
                             registry=self.registry)
        self.latency = Histogram("relay_call_seconds", "call latency (a stream: its whole life), by method",
                                 ["method"], buckets=_BUCKETS, registry=self.registry)
        self.open_streams = Gauge("relay_open_streams", "streams open now, by method (ServePolicy and "
                                  "PolicySession are the policy sessions' two sides)", ["method"],
                                  registry=self.registry)
        self.store_latency = Histogram("relay_store_call_seconds", "store call latency, by call", ["call"],
                                       buckets=_BUCKETS, registry=self.registry)
        self.scrape_errors = Counter("relay_scrape_store_errors", "scrapes whose store reads failed",
                                     registry=self.registry)
        self._http: Optional[Tuple[Any, Any]] = None

    def timed_store(self, store: Any) -> TimedStore:
        return TimedStore(store, self.store_latency)

    def watch_store(self, store: Any, clients: Callable[[], Any]) -> None:
        """Read per-team queues and stations' last-heard times from ``store`` at each scrape."""
        self.registry.register(_StoreCollector(store, clients, self.scrape_errors))

    def watch_tokens(self, tokens: Callable[[], Any]) -> None:
        """Count the tokens file's re-reads (a :class:`~strands_robots.relay.auth.ReloadingTokenBook`)."""
        self.registry.register(_TokensCollector(tokens))

    def instrument(self, method: str, kind: str, impl: Callable) -> Callable:
        """Wrap one method's implementation (its kind as in the method table) to count and time it."""
        ok = self.calls.labels(method, "OK").inc  # the method's children bound once, not looked up per call
        observe = self.latency.labels(method).observe
        calls = self.calls
        open_streams = self.open_streams.labels(method) if kind not in ("unary", "in_thread") else None

        def done(_method: str, start: float, code: str) -> None:
            observe(time.perf_counter() - start)
            if code == "OK":
                ok()
            else:
                calls.labels(method, code).inc()
        if kind == "in_thread":
            def in_thread(request: Any, context: Any) -> Any:
                start = time.perf_counter()
                try:
                    response = impl(request, context)
                except BaseException as exc:
                    done(method, start, _code_of(exc))
                    raise
                done(method, start, "OK")
                return response
            return in_thread
        if kind in ("unary", "client_stream"):
            async def unary(request: Any, context: Any) -> Any:
                start = time.perf_counter()
                streams = open_streams if kind == "client_stream" else None
                if streams is not None:
                    streams.inc()
                try:
                    response = await impl(request, context)
                except BaseException as exc:
                    done(method, start, _code_of(exc))
                    raise
                finally:
                    if streams is not None:
                        streams.dec()
                done(method, start, "OK")
                return response
            return unary

        async def streaming(request: Any, context: Any) -> Any:
            start = time.perf_counter()
            streams = open_streams
            streams.inc()
            code = "OK"
            try:
                async for item in impl(request, context):
                    yield item
            except BaseException as exc:
                code = _code_of(exc)
                raise
            finally:
                streams.dec()
                done(method, start, code)
        return streaming

    # -- the HTTP page ---------------------------------------------------------------------------------------
    def serve(self, listen: str) -> int:
        """Serve ``/metrics`` on ``host:port`` (port 0: a free one) from a thread of its own; return the port."""
        from prometheus_client import start_http_server

        host, _, port = listen.rpartition(":")
        server, thread = start_http_server(int(port), addr=host.strip("[]") or "127.0.0.1", registry=self.registry)
        self._http = (server, thread)
        return int(server.server_port)

    def close(self) -> None:
        if self._http is not None:
            server, thread = self._http
            self._http = None
            server.shutdown()
            server.server_close()
            thread.join(10)
