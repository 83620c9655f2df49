"""The relay server: the Evaluation (client) and Station services over gRPC, on a store, with bearer tokens.

    python -m strands_robots.relay --listen 127.0.0.1:50051 --store sqlite:relay.db --tokens tokens.yaml
    strands-robots relay ...   (the same main; --config config/relay.yaml for the limits)

What it does, and nothing more (it holds no job rules: the station does):

- every call is authenticated (``authorization: Bearer``); a client token may call only Evaluation, a
  station token only Station; every station call records when that station was last heard;
- a client sees only its own jobs: another client's job answers NOT_FOUND, exactly like a missing one, so
  job ids do not leak; a client's job ids are its own (two teams may both name a job ``nightly-1``: the relay
  gives the station-side job an id of its own when the name is taken, and never tells the client); a station
  sees only the jobs addressed to it;
- ``SubmitJob`` checks the job with the station core's rules and the team's quotas and stores it; ``TakeJobs``
  streams the station its open jobs, new ones and cancels (it re-reads the store every ``poll_s``, so a job
  submitted to another relay on the same PostgreSQL store reaches it too);
- ``ReportStatus`` stores each snapshot by the store's order (the station's per-job ``sequence``; a terminal
  state is final; a snapshot removing finished episodes is refused); ``GetStatus`` returns the latest with
  the station's ``updated_unix_ms`` untouched and ``station_last_heard_unix_ms`` set when the station has
  been heard;
- policy sessions are brokered by :class:`~strands_robots.relay.sessions.Broker`;
- episode recordings go from a station to its job's team through the store (:mod:`~strands_robots.relay.recordings`:
  size-bounded, SHA-256 checked); ``ListJobs`` pages a client's own jobs (:mod:`~strands_robots.relay.listing`);
- operable (:mod:`~strands_robots.relay.operations`): ``grpc.health.v1``, Prometheus metrics on ``--metrics``, the
  tokens file re-read on change and on SIGHUP;
- protobuf only (no pickle), bounded message sizes, TLS when a certificate is given.

Where each part lives: :mod:`~strands_robots.relay.core` (what the services share),
:mod:`~strands_robots.relay.evaluation_service` and :mod:`~strands_robots.relay.station_service` (the two
services), :mod:`~strands_robots.relay.handlers` (the method table, parsing, refusals); this module runs them.

No peer can freeze it: the server is asyncio (``grpc.aio``), so an open stream holds no thread, only a coroutine;
store calls (synchronous SQLite / psycopg) run on a small thread pool (``workers``), never on the event loop;
``GetStatus``, the poll every client repeats, runs whole on that pool (one thread hop, not two).
A policy stream must send its first message within ``first_message_deadline_s``; one token holds at most
``max_streams_per_token`` streams; keepalive pings drop peers that vanished. Every refused or malformed request
is logged as one line (never a traceback), at a bounded rate (:class:`~strands_robots.relay.rate_limit.RateLimitedLog`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import threading
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import grpc

from strands_robots.client.credential_files import CredentialFileError, read_private_file, read_trusted_file
from strands_robots.client.relay_targets import is_loopback
from strands_robots.relay.auth import ReloadingTokenBook, TokenBook, TokenFileError
from strands_robots.relay.cluster import DEFAULT_STALE_S, Cluster
from strands_robots.relay.config import RelayConfigError, RelaySettings, flag_of, load_relay_settings
from strands_robots.relay.core import (  # noqa: F401 - re-exported
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_WORKERS,
    MAX_CONCURRENT_RPCS,
    Refused,
    RelayCore,
    _log,
    now_ms,
)
from strands_robots.relay.handlers import generic_handlers, server_options  # noqa: F401 - re-exported
from strands_robots.relay.operations import Operations, wait_for_stop
from strands_robots.relay.store import Store, StoreError
from strands_robots.relay.store_url import open_store


@dataclass(frozen=True)
class TlsConfig:
    """PEM certificate chain and private key of the relay."""

    cert_chain: bytes
    private_key: bytes

    @classmethod
    def from_files(cls, cert: "str | Path", key: "str | Path") -> "TlsConfig":
        """Read the chain (others may read it, not write it) and the key (private: 0600, yours), both bounded.

        :raises CredentialFileError: one line naming the file and the rule it breaks.
        """
        return cls(read_trusted_file(cert, "TLS certificate chain"), read_private_file(key, "TLS private key"))



class RelayServer:
    """The relay in this process, on an asyncio event loop of its own thread: ``start()`` returns the port.

    :param listen: ``host:port`` (port 0 picks a free one).
    :param tls: serve TLS with this certificate and key; plain when None.
    :param settings: limits, deadlines and keepalive (:class:`~strands_robots.relay.config.RelaySettings`);
        ``max_message_bytes``, ``workers`` and ``poll_s`` given as keywords override it.
    :param advertise: ``host:port`` other relays on the same store reach this one on: it joins their cluster
        (:mod:`~strands_robots.relay.cluster`; port 0: the port it listens on); None: it brokers alone.
    :param cluster_stale_s: a relay not heard for this long loses the policy sessions it was home of.
    """

    def __init__(self, store: Store, tokens: TokenBook, listen: str = "127.0.0.1:0", *,
                 tls: Optional[TlsConfig] = None, settings: Optional[RelaySettings] = None,
                 max_message_bytes: Optional[int] = None, workers: Optional[int] = None,
                 poll_s: Optional[float] = None, clock_ms: Callable[[], int] = now_ms,
                 advertise: Optional[str] = None, cluster_stale_s: float = DEFAULT_STALE_S) -> None:
        import dataclasses

        settings = settings or RelaySettings()
        overrides = {k: v for k, v in (("max_message_bytes", max_message_bytes), ("workers", workers),
                                        ("poll_s", poll_s)) if v is not None}
        self.settings = dataclasses.replace(settings, **overrides)
        self.listen = listen
        self._advertise = advertise
        self._cluster_stale_s = cluster_stale_s
        self._tls = tls
        self._executor = futures.ThreadPoolExecutor(max_workers=self.settings.workers,
                                                    thread_name_prefix="relay-store")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="relay-loop", daemon=True)
        self._thread.start()
        self.operations = Operations(self.settings)  # metrics, health (relay/operations.py)
        try:
            self.core, self._server, self.port = self._call(self._build(store, tokens, tls, clock_ms))
        except BaseException:
            self._close_loop()
            raise

    def _call(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _build(self, store: Store, tokens: TokenBook, tls: Optional[TlsConfig], clock_ms: Callable) -> Any:
        core = RelayCore(self.operations.wrap_store(store), tokens, clock_ms, self.settings, self._loop,
                         self._executor)
        self.operations.attach_core(core)
        server = grpc.aio.server(migration_thread_pool=self._executor, handlers=generic_handlers(core),
                                 options=server_options(self.settings), maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS)
        if tls is not None:
            creds = grpc.ssl_server_credentials([(tls.private_key, tls.cert_chain)])
            port = server.add_secure_port(self.listen, creds)
        else:
            port = server.add_insecure_port(self.listen)
        if port == 0:
            raise OSError(f"cannot listen on {self.listen}")
        self.operations.attach_server(server)
        return core, server, port

    def start(self) -> int:
        self._call(self._server.start())
        if self._advertise:
            self._call(self._join_cluster())
        self._call(self.operations.start())
        return self.port

    def stop(self, grace_s: float = 1.0) -> None:
        if not self._loop.is_closed():
            try:
                with contextlib.suppress(Exception):
                    self._call(self.operations.stop())
                if self.core.cluster is not None:
                    with contextlib.suppress(Exception):
                        self._call(self.core.cluster.stop())
                self._call(self._server.stop(grace_s), timeout=grace_s + 30.0)
            finally:
                self._close_loop()

    async def _join_cluster(self) -> None:
        host, _, port = self._advertise.rpartition(":")
        address = f"{host}:{self.port}" if port == "0" else self._advertise
        cluster = Cluster(self.core.store, address, self.core.run, stale_s=self._cluster_stale_s,
                          root_certificates=self._tls.cert_chain if self._tls else None,
                          max_message_bytes=self.settings.max_message_bytes)
        await cluster.start()
        self.core.cluster = cluster

    @property
    def relay_id(self) -> str:
        """This relay's id in its cluster ("" when it is not in one)."""
        return self.core.cluster.relay_id if self.core.cluster is not None else ""

    def _close_loop(self) -> None:
        core = getattr(self, "core", None)  # absent when the constructor failed
        if core is not None:
            core.refusals.flush()
        async def cancel_the_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self._call(cancel_the_rest(), timeout=10.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        if not self._loop.is_running():
            self._loop.close()
        self._executor.shutdown(wait=True)

    def wait(self) -> None:
        self._thread.join()


def plaintext_warning(listen: str, tls: Optional[TlsConfig]) -> str:
    """Return the warning for a plaintext relay on a non-loopback address; "" when there is nothing to say."""
    if tls is not None or is_loopback(listen):
        return ""
    return (f"WARNING: the relay serves PLAINTEXT on {listen}, a non-loopback address: every token, job and result "
            f"crosses the network unencrypted and readable by anyone on the path; give --tls-cert and --tls-key "
            f"(or listen on 127.0.0.1 behind a TLS proxy)")


def cluster_address(advertise: Optional[str], listen: str, store_url: str) -> Optional[str]:
    """Return the address this relay advertises to the others on its store (None: it brokers alone)."""
    if advertise:
        return None if advertise.lower() == "none" else advertise
    host = listen.rsplit(":", 1)[0].strip("[]")
    if not store_url.startswith(("postgresql://", "postgres://")) or host in ("", "0.0.0.0", "::"):
        return None
    return listen


def build_parser(defaults: Optional[RelaySettings] = None) -> argparse.ArgumentParser:
    """Return the relay's parser, its defaults ``defaults``'s (a ``--config`` file's) or the built-in ones."""
    defaults = RelaySettings() if defaults is None else defaults
    p = argparse.ArgumentParser(prog="strands-robots relay",
                                description="The relay between stations and Evaluation Clients (gRPC).",
                                epilog="strands-robots relay tokens add NAME --client|--station --tokens FILE: a "
                                       "team's or a station's new token in the tokens file and its 0600 token or "
                                       "credentials file (strands-robots relay tokens --help)")
    p.add_argument("--config", help="relay settings file (config/relay.yaml); flags given beside it win")
    p.add_argument("--listen", default=None, help="host:port to listen on (default: the config's host and port, "
                                                  "else 127.0.0.1:50051)")
    p.add_argument("--store", default=None,
                   help="the job store: sqlite:PATH or postgresql://USER@HOST:PORT/DB (required unless the --config "
                        "file names one)")
    p.add_argument("--tokens", required=True,
                   help="the tokens file, YAML: clients: {name: token}, stations: {id: token} (relay tokens add "
                        "writes it)")
    p.add_argument("--tls-cert", help="PEM certificate chain: serve TLS (with --tls-key)")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    p.add_argument("--advertise", default=None,
                   help="host:port the other relays on this store reach this one on (a relay cluster: policy "
                        "sessions meet across relays); default: the listen address when the store is PostgreSQL "
                        "and the host is not a wildcard; 'none': broker alone")
    p.add_argument("--cluster-stale-s", type=float, default=DEFAULT_STALE_S,
                   help="a relay not heard for this many seconds loses the policy sessions it was home of "
                        "(default %(default)s)")
    helps = {
        "poll_s": "job streams re-read the store this often, in seconds",
        "workers": "threads running store calls off the event loop (streams hold none)",
        "max_message_bytes": "largest message either way, in bytes",
        "first_message_deadline_s": "a policy stream's attach/open must come within this many seconds",
        "max_streams_per_token": "streams one token may hold open at once",
        "max_open_jobs_per_token": "jobs not ended per client token",
        "max_queued_episodes_per_token": "episodes a client's open jobs may still have to run",
        "keepalive_time_s": "ping every connection this often, in seconds",
        "keepalive_timeout_s": "drop a connection whose ping is unanswered this long, in seconds",
        "max_connection_idle_s": "close a connection with no call for this long, in seconds",
        "max_recording_bytes": "largest episode recording a station may upload, in bytes",
        "metrics": "host:port to serve the Prometheus /metrics page on (default: none)",
        "web": "host:port to serve the web status page on (default: none)",
    }
    for key, text in helps.items():
        default = getattr(defaults, key)
        p.add_argument(flag_of(key), dest=key, type=type(default), default=default,
                       help=f"{text} (default %(default)s)" if default != "" else text)
    return p


def _settings_from_args(args: argparse.Namespace, base: RelaySettings) -> "tuple[RelaySettings, str]":
    import dataclasses

    from strands_robots.relay.config import settings_refusal

    values = {}
    for field in dataclasses.fields(RelaySettings):
        if field.name not in ("host", "port", "store") and hasattr(args, field.name):
            value = getattr(args, field.name)
            reason = settings_refusal(field.name, value)
            if reason:
                return base, f"{flag_of(field.name)}: {reason.split(': ', 1)[1]}"
            values[field.name] = value
    return dataclasses.replace(base, **values), ""


def _start_web(server: RelayServer, store: Any, settings: RelaySettings, args: argparse.Namespace) -> Any:
    """Start the web status page beside the relay (relay/web), on the relay's store and its current tokens."""
    from strands_robots.relay.web.server import WebStatusServer

    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    web = WebStatusServer(store, lambda: server.core.tokens, settings.web, tls=tls,
                          invitation_timeout_s=server.settings.invitation_timeout_s, clock_ms=server.core.clock_ms)
    web.start()
    if tls is None and not is_loopback(settings.web):
        _log.warning("WARNING: the web status page serves PLAINTEXT on %s, a non-loopback address: tokens typed "
                     "into it cross the network unencrypted; give --tls-cert and --tls-key", settings.web)
    print(f"relay web status page on {web.url}", flush=True)
    return web


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the relay until SIGINT/SIGTERM. Exit 0 on a stop signal, 2 on a bad argument or file."""
    entry_argv = argv
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    base = RelaySettings()
    if known.config:
        try:
            base = load_relay_settings(known.config)
        except RelayConfigError as exc:
            print(f"relay: {exc}", file=sys.stderr)
            return 2
    args = build_parser(base).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[relay] %(asctime)s %(message)s")
    if bool(args.tls_cert) != bool(args.tls_key):
        print("relay: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    settings, reason = _settings_from_args(args, base)
    if reason:
        print(f"relay: {reason}", file=sys.stderr)
        return 2
    listen = args.listen or f"{settings.host}:{settings.port or 50051}"
    store_url = args.store or settings.store
    if not store_url:
        print("relay: --store is required (sqlite:PATH or postgresql://...), or a config file's store", file=sys.stderr)
        return 2
    try:
        tokens = ReloadingTokenBook(args.tokens)  # re-read on change and on SIGHUP
        tls = TlsConfig.from_files(args.tls_cert, args.tls_key) if args.tls_cert else None
        store = open_store(store_url)
    except (TokenFileError, CredentialFileError, StoreError, OSError) as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return 2
    warning = plaintext_warning(listen, tls)
    if warning:
        _log.warning("%s", warning)
    from strands_robots.client.malloc_tuning import keep_freed_buffers

    keep_freed_buffers()  # a policy session's large messages reuse the heap instead of faulting in new pages
    try:
        server = RelayServer(store, tokens, listen, tls=tls, settings=settings,
                             advertise=cluster_address(args.advertise, listen, store_url),
                             cluster_stale_s=args.cluster_stale_s)
    except (OSError, RuntimeError) as exc:
        print(f"relay: cannot listen on {listen}: {exc}", file=sys.stderr)
        store.close()
        return 2
    from strands_robots.stop_signals import StopSignals

    # Stop signals set an event from a thread of their own (setting it inside the handler could deadlock the
    # wait below). In the relay's own process (argv None: the console script, python -m) they are taken until it
    # exits, so a launcher's second SIGINT during the stop is no traceback; called with argv (a test), for the call.
    process_wide = entry_argv is None
    signals = StopSignals.install() if process_wide else StopSignals().__enter__()
    try:
        server.start()
        print(f"relay listening on {listen} ({'TLS' if tls else 'plain'}; store {store_url.split(':')[0]}; "
              f"{len(tokens.clients)} client(s), {len(tokens.stations)} station(s))", flush=True)
        web = None
        try:
            if settings.web:
                try:
                    web = _start_web(server, store, settings, args)
                except (OSError, ValueError) as exc:
                    print(f"relay: cannot serve the web status page on {settings.web}: {exc}", file=sys.stderr)
                    return 2
            if server.operations.metrics_port is not None:
                print(f"relay metrics on http://{settings.metrics.rpartition(':')[0]}:"
                      f"{server.operations.metrics_port}/metrics", flush=True)
            wait_for_stop(signals, tokens)  # a SIGHUP re-reads the tokens file
        finally:
            if web is not None:
                web.stop()
            server.stop()
            store.close()
            tokens.close()
    finally:
        if process_wide:
            signals.restore()
        else:
            signals.uninstall()
    return 0
