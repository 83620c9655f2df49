"""The status page's server: the aiohttp app on its own event loop and thread, beside the relay in one process.

    strands-robots relay --tokens tokens.yaml --store sqlite:relay.db --web 127.0.0.1:8080

It reads the relay's store (its own small thread pool, so a slow page never holds a gRPC call's thread) and the
relay's current token book (``tokens`` is a callable: a token file re-read by the relay is seen at once). TLS
with the relay's certificate when the relay has one (then the session cookie is ``Secure``); a plaintext page
on a non-loopback address is warned about like the relay's own port. A connection whose request line and headers
have not arrived within ``read_timeout_s`` of its opening (or of its previous answer) is closed, and so is one
idle that long between requests; a request body gets as long again (``StatusPage.read_form``).
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from concurrent import futures
from typing import Callable, Optional, Tuple

from strands_robots.relay.auth import TokenBook
from strands_robots.relay.store import Store
from strands_robots.relay.web.app import READ_TIMEOUT_S, StatusPage, make_app
from strands_robots.relay.web.source import JobSource

__all__ = ["WebStatusServer", "parse_listen"]


def parse_listen(listen: str) -> Tuple[str, int]:
    """``host:port`` (``[::1]:8080`` for IPv6) -> (host, port); ValueError naming the value otherwise."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"web address {listen!r}: expected host:port, e.g. 127.0.0.1:8080 (port 0: a free one)")
    return host, int(port)


class WebStatusServer:
    """Serve the status page of ``store`` on ``listen`` until :meth:`stop`; :meth:`start` returns the port.

    :param tokens: returns the relay's current :class:`TokenBook` (called on every request).
    :param tls: (certificate chain PEM path, key PEM path) to serve HTTPS; plain HTTP when None.
    :param poll_s: live views re-read the store this often (s).
    :param read_timeout_s: how long a request's line and headers, and then its body, may take to arrive.
    :param invitation_timeout_s: the relay's (``RelaySettings``): a held comparison's deadline, shown and kept.
    :param clock_ms: the relay's clock (Unix ms); the wall clock by default.
    """

    def __init__(self, store: Store, tokens: Callable[[], TokenBook], listen: str = "127.0.0.1:0", *,
                 tls: Optional[Tuple[str, str]] = None, poll_s: float = 0.5, workers: int = 4,
                 read_timeout_s: float = READ_TIMEOUT_S, invitation_timeout_s: Optional[float] = None,
                 clock_ms: Optional[Callable[[], int]] = None) -> None:
        if not read_timeout_s > 0:
            raise ValueError(f"read_timeout_s must be > 0, got {read_timeout_s!r}")
        self.host, self.port = parse_listen(listen)
        self.read_timeout_s = float(read_timeout_s)
        self._ssl: Optional[ssl.SSLContext] = None
        if tls is not None:
            self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._ssl.load_cert_chain(*tls)
        self._executor = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="relay-web")
        self.page = StatusPage(JobSource(store, invitation_timeout_s, clock_ms), tokens, self._executor,
                               secure_cookies=tls is not None,
                               poll_s=poll_s, read_timeout_s=self.read_timeout_s)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="relay-web", daemon=True)
        self._runner = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self._ssl else 'http'}://{host}:{self.port}"

    def start(self) -> int:
        """Listen and serve; return the port (the one picked when ``listen`` named port 0)."""
        from aiohttp import web

        async def up() -> int:
            # aiohttp closes a connection that has no request in hand when keepalive_timeout runs out, counted from
            # its opening and from each answer: so it is also the bound on a half-sent request line and headers
            runner = web.AppRunner(make_app(self.page), access_log=None, handle_signals=False,
                                   shutdown_timeout=1.0, keepalive_timeout=self.read_timeout_s)
            await runner.setup()
            site = web.TCPSite(runner, self.host, self.port, ssl_context=self._ssl, reuse_address=True)
            await site.start()
            self._runner = runner
            return int(runner.addresses[0][1])

        self._thread.start()
        try:
            self.port = asyncio.run_coroutine_threadsafe(up(), self._loop).result(30.0)
        except BaseException:
            self.stop()
            raise
        return self.port

    def stop(self) -> None:
        """Close every connection (live views end), stop the loop and the thread pool."""
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            if self._runner is not None:
                asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30.0)

            async def cancel_the_rest() -> None:  # live views still between two polls
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            asyncio.run_coroutine_threadsafe(cancel_the_rest(), self._loop).result(30.0)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30.0)
        if not self._loop.is_running():
            self._loop.close()
        self._executor.shutdown(wait=True)
