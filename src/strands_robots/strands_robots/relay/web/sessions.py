"""Who is signed in to the status page: server-side sessions, their CSRF tokens, and the sign-in rate limit.

Rules (``test_web_sessions.py`` pins each):

1. A session id and its CSRF token are 32 random bytes each (``secrets``), never derived from the team's token;
   the cookie carries only the session id. The team's token stays in this process's memory, so every request
   re-checks it against the relay's current token book: a token removed or rotated ends its sessions at once.
2. A session ends on sign-out, after ``idle_s`` without a request, or ``max_age_s`` after sign-in, whichever
   comes first. At most ``max_sessions`` live at once; past that the least recently used one ends.
3. A form's CSRF token is compared in constant time (``hmac.compare_digest``); so is the team's token (by
   :meth:`TokenBook.identify`, which compares with every entry).
4. Sign-in attempts are limited per remote address (a token bucket of ``burst`` attempts refilled at
   ``per_minute``) and over all addresses (``burst * 8``), so a guessing loop is slowed wherever it comes from.
   At most ``max_addresses`` addresses are remembered (the least recently seen is forgotten first).

Pure: an injectable clock and random source, a lock for the web server's threads; no aiohttp here.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from strands_robots.relay.auth import Principal

__all__ = ["Session", "SessionTable", "SignInLimiter"]


@dataclass
class Session:
    """One browser's session. ``principal`` is None for a sign-in form's pre-session (it only carries a CSRF token)."""

    session_id: str
    csrf: str
    principal: Optional[Principal]
    token: str          # the token it signed in with ("" for a pre-session); memory only, never sent
    created_s: float
    last_seen_s: float

    def csrf_matches(self, presented: str) -> bool:
        """Rule 3: compare a form's CSRF token with this session's in constant time."""
        return bool(presented) and hmac.compare_digest(self.csrf.encode(), presented.encode("utf-8", "replace"))


class SessionTable:
    """The live sessions (rule 2). Thread-safe."""

    def __init__(self, *, idle_s: float = 8 * 3600.0, max_age_s: float = 24 * 3600.0, max_sessions: int = 10000,
                 clock: Callable[[], float] = time.monotonic, token_hex: Callable[[int], str] = secrets.token_hex):
        if idle_s <= 0 or max_age_s <= 0 or max_sessions < 1:
            raise ValueError("idle_s and max_age_s must be > 0 and max_sessions >= 1")
        self.idle_s = idle_s
        self.max_age_s = max_age_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._token_hex = token_hex
        self._lock = threading.Lock()
        self._sessions: "OrderedDict[str, Session]" = OrderedDict()

    def _new(self, principal: Optional[Principal], token: str) -> Session:
        now = self._clock()
        session = Session(session_id=self._token_hex(32), csrf=self._token_hex(32), principal=principal,
                          token=token, created_s=now, last_seen_s=now)
        with self._lock:
            self._sessions[session.session_id] = session
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return session

    def pre_session(self) -> Session:
        """Start a sign-in form's session: a CSRF token for the form, nobody signed in."""
        return self._new(None, "")

    def sign_in(self, principal: Principal, token: str, replacing: Optional[str] = None) -> Session:
        """Start a session for ``principal`` (a fresh id: a pre-session's id is never promoted)."""
        if replacing:
            self.end(replacing)
        return self._new(principal, token)

    def get(self, session_id: Optional[str]) -> Optional[Session]:
        """Return the live session of ``session_id`` (touching it), or None when unknown or expired."""
        if not session_id:
            return None
        now = self._clock()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.last_seen_s > self.idle_s or now - session.created_s > self.max_age_s:
                del self._sessions[session_id]
                return None
            session.last_seen_s = now
            self._sessions.move_to_end(session_id)
            return session

    def end(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


class SignInLimiter:
    """Rule 4: a token bucket per remote address and one over all of them. Thread-safe."""

    def __init__(self, *, burst: int = 5, per_minute: float = 10.0, max_addresses: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if burst < 1 or per_minute <= 0 or max_addresses < 1:
            raise ValueError("burst >= 1, per_minute > 0 and max_addresses >= 1 are required")
        self.burst = burst
        self.rate_s = per_minute / 60.0
        self.max_addresses = max_addresses
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: "OrderedDict[str, Tuple[float, float]]" = OrderedDict()  # address -> (tokens, at)
        self._all = (float(burst * 8), clock())

    def _take(self, state: Tuple[float, float], capacity: float, rate_s: float, now: float
              ) -> Tuple[bool, Tuple[float, float], float]:
        tokens = min(capacity, state[0] + (now - state[1]) * rate_s)
        if tokens >= 1.0:
            return True, (tokens - 1.0, now), 0.0
        return False, (tokens, now), (1.0 - tokens) / rate_s

    def allow(self, address: str) -> Tuple[bool, float]:
        """Take one attempt for ``address``; return (allowed, seconds until the next one would be)."""
        now = self._clock()
        with self._lock:
            state = self._buckets.pop(address, (float(self.burst), now))
            ok, state, wait = self._take(state, float(self.burst), self.rate_s, now)
            self._buckets[address] = state
            while len(self._buckets) > self.max_addresses:
                self._buckets.popitem(last=False)
            if not ok:
                return False, wait
            ok_all, self._all, wait_all = self._take(self._all, float(self.burst * 8), self.rate_s * 8, now)
            return ok_all, wait_all
