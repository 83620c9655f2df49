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
5. A sign-in form is signed, not stored (:class:`SignInForms`): its CSRF token is ``issued.nonce.mac`` (an HMAC
   of the two with a key this process drew at start) and its cookie carries the nonce, so anyone may open as
   many forms as they like and no open form is pushed out by them. A form is good for ``max_age_s`` and for one
   attempt: the nonces of forms sent are remembered until they would have expired anyway (only sign-in attempts,
   which rule 4 bounds, add to that memory).

Pure: an injectable clock and random source, a lock for the web server's threads; no aiohttp here.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from strands_robots.relay.auth import Principal

__all__ = ["Session", "SessionTable", "SignInForm", "SignInForms", "SignInLimiter"]


@dataclass
class Session:
    """One signed-in browser's session."""

    session_id: str
    csrf: str
    principal: Principal
    token: str          # the token it signed in with; memory only, never sent
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

    def _new(self, principal: Principal, token: str) -> Session:
        now = self._clock()
        session = Session(session_id=self._token_hex(32), csrf=self._token_hex(32), principal=principal,
                          token=token, created_s=now, last_seen_s=now)
        with self._lock:
            self._sessions[session.session_id] = session
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return session

    def sign_in(self, principal: Principal, token: str, replacing: Optional[str] = None) -> Session:
        """Start a session for ``principal`` with a fresh id (``replacing``: the browser's earlier one ends)."""
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


@dataclass(frozen=True)
class SignInForm:
    """A sign-in form as handed out: ``csrf`` goes into the form, ``cookie`` into the sign-in cookie."""

    csrf: str
    cookie: str


class SignInForms:
    """Rule 5: sign-in forms signed with this process's key, checked on return; nothing is stored per form.

    :param max_age_s: how long a form may be filled in.
    :param max_used: most nonces of sent forms remembered at once (far above what rule 4 lets through in
        ``max_age_s``); past it the oldest is forgotten.
    """

    def __init__(self, *, max_age_s: float = 600.0, max_used: int = 65536,
                 clock: Callable[[], float] = time.monotonic, token_hex: Callable[[int], str] = secrets.token_hex,
                 key: Optional[bytes] = None) -> None:
        if max_age_s <= 0 or max_used < 1:
            raise ValueError("max_age_s must be > 0 and max_used >= 1")
        self.max_age_s = max_age_s
        self.max_used = max_used
        self._clock = clock
        self._token_hex = token_hex
        self._key = key if key is not None else secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._used: "OrderedDict[str, float]" = OrderedDict()  # nonce -> when its form would have expired

    def _mac(self, issued_ms: int, nonce: str) -> str:
        return hmac.new(self._key, f"signin\n{issued_ms}\n{nonce}".encode(), hashlib.sha256).hexdigest()

    def issue(self) -> SignInForm:
        """Return a new form's CSRF token and cookie (nothing is kept)."""
        issued_ms = int(self._clock() * 1000)
        nonce = self._token_hex(16)
        return SignInForm(csrf=f"{issued_ms}.{nonce}.{self._mac(issued_ms, nonce)}", cookie=nonce)

    def redeem(self, csrf: str, cookie: Optional[str]) -> bool:
        """Whether a returned form is one of ours, its cookie's, unexpired and not sent before; it is used up."""
        issued, _, rest = (csrf or "").partition(".")
        nonce, _, mac = rest.partition(".")
        if not (issued.isdigit() and nonce and mac and cookie):
            return False
        if not hmac.compare_digest(mac.encode("utf-8", "replace"), self._mac(int(issued), nonce).encode()):
            return False
        if not hmac.compare_digest(nonce.encode("utf-8", "replace"), cookie.encode("utf-8", "replace")):
            return False
        now = self._clock()
        expires = int(issued) / 1000.0 + self.max_age_s
        with self._lock:
            while self._used and next(iter(self._used.values())) < now:  # expired forms cannot come back anyway
                self._used.popitem(last=False)
            if now > expires or int(issued) / 1000.0 > now + 1.0 or nonce in self._used:
                return False
            self._used[nonce] = expires
            while len(self._used) > self.max_used:
                self._used.popitem(last=False)
        return True

    def __len__(self) -> int:
        """How many sent forms' nonces are remembered (never one per form handed out)."""
        with self._lock:
            return len(self._used)
