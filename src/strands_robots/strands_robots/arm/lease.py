"""The control lease on the arms: who may command them, until when, and who may take them over.

One lease at a time. A holder gets a secret ``token`` (passed with every service call, never published; a
streamed command carries an HMAC made with it instead, :mod:`strands_robots.arm.command_auth`) and a public
``lease_id`` (published in ``LeaseState``). The lease ends when it is not renewed in time (expired),
when its holder releases it, or when a claim with a strictly higher priority **of the same station** takes
control (revoked). Equal or lower priorities are refused while a lease is held.

Holders are named by station: a station's rollouts hold ``station:<station_id>``
(:func:`station_holder`), an operator's claim at that station ``operator:<name>@<station_id>``
(:func:`operator_holder`); :func:`station_of` reads the station back (empty for any other name, e.g. a
rollout node run on its own, ``rollout``). **Preemption rule**: a higher priority revokes the current lease
only when both names belong to the same station (two names of no station count as one, unaffiliated, group).
So an operator at station A takes the arms from A's rollout, but no claim of station B, whatever its
priority, revokes A's lease mid-episode: B is refused (the message names the rule) and waits until A
releases the arms or its lease runs out. A station cannot take another's arms by raising its priority.

Expiry is evaluated lazily on every call against the injected clock, so there is no timer thread; a node
that wants to announce an expiry promptly polls :meth:`LeaseManager.state`.

No rclpy here: the arm driver node adapts the services onto this class.
"""

from __future__ import annotations

import hmac
import math
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from strands_robots.arm.command_auth import proves

STATE_FREE = "free"
STATE_HELD = "held"
STATE_EXPIRED = "expired"
STATE_REVOKED = "revoked"

# What became of a token that is no longer the current lease (for refusal messages).
_ENDED_RELEASED = "released"

# Longest lease a claim may ask for (s): a holder keeps control by heartbeat, so a lease that outlives a dead
# holder by more than this is never needed; a claim of 1e12 s would pin the arms to whoever made it.
MAX_LEASE_DURATION_S = 60.0

# How many ended tokens are remembered for precise refusal messages; older ones read as "unknown".
_HISTORY = 64

_STATION_PREFIX = "station:"
_OPERATOR_PREFIX = "operator:"


def station_holder(station_id: str) -> str:
    """Return the lease holder name of ``station_id``'s rollouts: ``station:<station_id>``."""
    return f"{_STATION_PREFIX}{station_id}"


def operator_holder(operator_name: str, station_id: str) -> str:
    """Return the lease holder name of an operator's claim at ``station_id``: ``operator:<name>@<station_id>``."""
    return f"{_OPERATOR_PREFIX}{operator_name}@{station_id}"


def station_of(holder: str) -> str:
    """Return the station a holder name belongs to (``station:<id>``, ``operator:<name>@<id>``); else ``""``."""
    if not isinstance(holder, str):
        return ""
    if holder.startswith(_STATION_PREFIX):
        return holder[len(_STATION_PREFIX):]
    if holder.startswith(_OPERATOR_PREFIX) and "@" in holder:
        return holder.rpartition("@")[2]
    return ""


def _station_words(holder: str) -> str:
    station = station_of(holder)
    return f"station {station!r}" if station else "no station"


@dataclass(frozen=True)
class LeaseGrant:
    """The answer to :meth:`LeaseManager.acquire`.

    ``granted`` with ``token``, ``lease_id`` and ``expires_at`` (on the manager's clock), or a refusal with
    the reason in ``message``. ``revoked_holder`` names the holder a granted claim took control from.
    """

    granted: bool
    token: str = ""
    lease_id: str = ""
    expires_at: float = 0.0
    message: str = ""
    revoked_holder: str = ""


@dataclass(frozen=True)
class LeaseRenewal:
    """The answer to :meth:`LeaseManager.renew`: ``ok`` with the new ``expires_at``, or why not."""

    ok: bool
    expires_at: float = 0.0
    message: str = ""


@dataclass(frozen=True)
class LeaseRelease:
    """The answer to :meth:`LeaseManager.release`."""

    ok: bool
    message: str = ""


@dataclass(frozen=True)
class LeaseSnapshot:
    """The lease as ``LeaseState`` publishes it (no token).

    ``holder``/``priority``/``lease_id``/``expires_at`` describe the current lease, or the last one when the
    state is free, expired or revoked (empty/zero before the first grant). ``previous_holder`` is the holder
    that lost control by the last revocation or expiry.
    """

    state: str
    holder: str = ""
    priority: int = 0
    lease_id: str = ""
    expires_at: float = 0.0
    previous_holder: str = ""


class LeaseManager:
    """Grants, renews, releases, revokes and validates the one control lease. Thread-safe.

    :param clock: seconds, monotonic (injectable for tests). Expiry times are on this clock.
    :param max_duration_s: longest lease an ``acquire`` or ``renew`` may ask for; longer ones are refused.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 max_duration_s: float = MAX_LEASE_DURATION_S) -> None:
        if not _positive_finite(max_duration_s):
            raise ValueError(f"max_duration_s must be a finite number > 0, got {max_duration_s!r}")
        self._clock = clock
        self._max_duration_s = float(max_duration_s)
        self._lock = threading.Lock()
        self._state = STATE_FREE
        self._token = ""
        self._holder = ""
        self._priority = 0
        self._lease_id = ""
        self._duration_s = 0.0
        self._expires_at = 0.0
        self._previous_holder = ""
        self._serial = 0
        # token -> how it ended ("expired", "released", "revoked by X (priority p)")
        self._ended: "OrderedDict[str, str]" = OrderedDict()

    @property
    def max_duration_s(self) -> float:
        """Longest lease a claim or renewal may ask for (s)."""
        return self._max_duration_s

    def _too_long(self, duration_s: float) -> str:
        return (f"duration_s {duration_s:g} exceeds the longest lease, {self._max_duration_s:g} s "
                "(keep control by renewing)")

    def now(self) -> float:
        """Return the manager's clock (to convert ``expires_at`` to another time base)."""
        return self._clock()

    # -- the four operations ---------------------------------------------------------------------------------
    def acquire(self, holder: str, priority: int, duration_s: float) -> LeaseGrant:
        """Claim control for ``duration_s`` seconds (renewable).

        Granted when the arms are free (never held, released, expired or revoked), or when ``priority`` is
        strictly higher than the current holder's and both holders belong to the same station
        (:func:`station_of`): that lease is then revoked. Refused otherwise (a claim from another station never
        preempts, see the module docstring), and for an empty holder or a duration that is not in
        (0, ``max_duration_s``].
        """
        if not isinstance(holder, str) or not holder:
            return LeaseGrant(False, message="holder must be a non-empty name")
        if isinstance(priority, bool) or not isinstance(priority, int):
            return LeaseGrant(False, message=f"priority must be an integer, got {priority!r}")
        if not _positive_finite(duration_s):
            return LeaseGrant(False, message=f"duration_s must be a finite number > 0, got {duration_s!r}")
        if duration_s > self._max_duration_s:
            return LeaseGrant(False, message=self._too_long(duration_s))
        with self._lock:
            now = self._clock()
            self._expire(now)
            revoked = ""
            if self._state == STATE_HELD:
                if priority <= self._priority:
                    return LeaseGrant(
                        False,
                        message=(f"held by {self._holder!r} (priority {self._priority}) for another "
                                 f"{self._expires_at - now:.2f} s; a claim needs priority > {self._priority}"),
                    )
                if station_of(holder) != station_of(self._holder):
                    return LeaseGrant(
                        False,
                        message=(f"held by {self._holder!r} ({_station_words(self._holder)}) for another "
                                 f"{self._expires_at - now:.2f} s; a claim of {_station_words(holder)} never "
                                 "preempts another station's lease, whatever its priority: wait until it is "
                                 "released"),
                    )
                revoked = self._holder
                self._end(f"revoked by {holder!r} (priority {priority})")
                self._previous_holder = revoked
            self._serial += 1
            self._token = secrets.token_hex(16)
            self._lease_id = f"lease-{self._serial}-{secrets.token_hex(4)}"
            self._holder = holder
            self._priority = priority
            self._duration_s = float(duration_s)
            self._expires_at = now + self._duration_s
            self._state = STATE_HELD
            message = f"revoked {revoked!r}" if revoked else "granted"
            return LeaseGrant(True, self._token, self._lease_id, self._expires_at, message, revoked)

    def renew(self, token: str, duration_s: float = 0.0) -> LeaseRenewal:
        """Heartbeat: the lease now expires ``duration_s`` from now (0 keeps the granted length)."""
        if isinstance(duration_s, bool) or not isinstance(duration_s, (int, float)) \
                or not math.isfinite(duration_s) or duration_s < 0:
            return LeaseRenewal(False, message=f"duration_s must be a finite number >= 0, got {duration_s!r}")
        if duration_s > self._max_duration_s:
            return LeaseRenewal(False, message=self._too_long(duration_s))
        with self._lock:
            now = self._clock()
            self._expire(now)
            refusal = self._refusal(token)
            if refusal:
                return LeaseRenewal(False, message=refusal)
            if duration_s > 0:
                self._duration_s = float(duration_s)
            self._expires_at = now + self._duration_s
            return LeaseRenewal(True, self._expires_at, "renewed")

    def release(self, token: str) -> LeaseRelease:
        """Give up control; the arms are free for any claim."""
        with self._lock:
            self._expire(self._clock())
            refusal = self._refusal(token)
            if refusal:
                return LeaseRelease(False, refusal)
            self._end(_ENDED_RELEASED)
            self._state = STATE_FREE
            return LeaseRelease(True, f"released by {self._holder!r}")

    def revoke(self, reason: str = "revoked") -> bool:
        """Take control from the current holder without granting it to anyone (state ``revoked``).

        For the driver itself (cleanup, shutdown). Returns whether a lease was held.
        """
        with self._lock:
            self._expire(self._clock())
            if self._state != STATE_HELD:
                return False
            self._end(reason or "revoked")
            self._previous_holder = self._holder
            self._state = STATE_REVOKED
            return True

    # -- queries ---------------------------------------------------------------------------------------------
    def validate(self, token: str) -> bool:
        """Whether ``token`` is the current, unexpired lease's (False for empty, stale, foreign tokens)."""
        if not isinstance(token, str) or not token:
            return False
        with self._lock:
            self._expire(self._clock())
            return self._state == STATE_HELD and hmac.compare_digest(token, self._token)

    def verify(self, message: bytes, proof: str) -> bool:
        """Whether ``proof`` is the current, unexpired lease's proof of ``message`` (:mod:`.command_auth`).

        The stream's check: the token never leaves this class, the command carries only its HMAC.
        """
        with self._lock:
            self._expire(self._clock())
            return self._state == STATE_HELD and proves(self._token, message, proof)

    def refusal(self, token: str) -> str:
        """Why ``token`` may not command (empty when it may): expired, revoked by whom, released, unknown."""
        with self._lock:
            self._expire(self._clock())
            return self._refusal(token)

    def state(self) -> LeaseSnapshot:
        """Return the lease now (expiry evaluated first)."""
        with self._lock:
            self._expire(self._clock())
            return LeaseSnapshot(self._state, self._holder, self._priority, self._lease_id, self._expires_at,
                                 self._previous_holder)

    # -- internals (caller holds the lock) ---------------------------------------------------------------------
    def _expire(self, now: float) -> None:
        if self._state == STATE_HELD and now >= self._expires_at:
            self._end(STATE_EXPIRED)
            self._previous_holder = self._holder
            self._state = STATE_EXPIRED

    def _end(self, how: str) -> None:
        """Retire the current token, remembering how it ended."""
        if self._token:
            self._ended[self._token] = how
            while len(self._ended) > _HISTORY:
                self._ended.popitem(last=False)
        self._token = ""

    def _refusal(self, token: str) -> str:
        if not isinstance(token, str) or not token:
            return "no lease token given"
        if self._state == STATE_HELD and hmac.compare_digest(token, self._token):
            return ""
        ended = self._ended.get(token)
        if ended == STATE_EXPIRED:
            return "lease expired without renewal"
        if ended == _ENDED_RELEASED:
            return "lease was released"
        if ended:
            return f"lease was {ended}"
        return "unknown lease token"


def _positive_finite(value: object) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
            and value > 0)
