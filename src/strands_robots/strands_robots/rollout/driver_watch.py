"""DriverWatch: is the arm driver still there? The rollout's dead-driver detection, as a pure rule.

The rollout node hears the driver three ways: ``joint_states`` (at the control rate), the ``DriverStatus``
heartbeat (a few Hz, and on every change) and the answers to its commands (an ``ActionVerdict`` per streamed
command, or a ``SendAction`` response). Each is noted here with the time it arrived. The driver is **silent**
when, for longer than ``silence_s``:

1. no ``joint_states`` arrived (the observation the policy would get is that old), or
2. commands went out and none was answered (from the first unanswered one on).

Rule 1 alone covers a killed or stopped driver process (kill -9, SIGINT, SIGTERM: the joint stream ends);
rule 2 covers a driver whose joint stream goes on but whose command path is gone. The status heartbeat is too
slow for a bound of a few control periods, so it only refreshes what :meth:`DriverWatch.fault` reports.

:meth:`DriverWatch.fault` is empty while the driver is heard, else one sentence naming the driver and the
silence; the rollout ends the episode as an error with it (``RobotBackend.fault_detail``), and
:meth:`DriverWatch.stale_observation` makes ``observe()`` refuse to hand out an observation older than the
bound. No rclpy here: the clock is injected, so the rule is tested without waiting.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

# Bounds of the silence (s): never so short that one late message on a loaded 2-core machine trips it, never
# longer than half a second (a dead driver's arms must be seen stopped within it).
SILENCE_MIN_S = 0.05
SILENCE_MAX_S = 0.5
# Default: this many control periods, clipped to [DEFAULT_SILENCE_FLOOR_S, SILENCE_MAX_S]. The floor is the
# ceiling: on a loaded 2-core machine a healthy driver can be silent for 0.25-0.5 s while another process
# starts (a 0.25 s floor would end healthy episodes as "driver silent"), so the default bound is half a second
# at every rate; a quieter machine can set driver_silence_s lower.
DEFAULT_SILENCE_PERIODS = 10
DEFAULT_SILENCE_FLOOR_S = 0.5

_NS = 1_000_000_000
# How much of the driver's last error answer the silence's text quotes (it ends up in an episode's end_detail).
ANSWER_ERROR_CHARS = 300


def default_silence_s(period_s: float) -> float:
    """Return the silence bound for a control period.

    ``DEFAULT_SILENCE_PERIODS`` periods, at least ``DEFAULT_SILENCE_FLOOR_S`` and at most ``SILENCE_MAX_S``
    (0.5 s at every rate with the floor as it is).
    """
    return min(SILENCE_MAX_S, max(DEFAULT_SILENCE_FLOOR_S, DEFAULT_SILENCE_PERIODS * float(period_s)))


class DriverWatch:
    """Arrival times of what the driver sends, and the silence rule over them (module docstring).

    Thread-safe: the executor thread notes arrivals, the control thread asks.

    :param name: how the driver is named in the fault text (e.g. ``arm driver /station_1``).
    :param silence_s: the bound; see :func:`default_silence_s`.
    :param clock_ns: monotonic now in ns (injected in tests).
    """

    def __init__(self, name: str, silence_s: float, clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.name = name
        self._clock_ns = clock_ns
        self._lock = threading.Lock()
        self._silence_ns = 0
        self.set_silence(silence_s)
        self._joint_state_ns = 0
        self._status_ns = 0
        self._answer_ns = 0
        self._answer_error = ""
        self._first_unanswered_ns = 0
        self._unanswered = 0

    # -- configuration ------------------------------------------------------------------------------------
    @property
    def silence_s(self) -> float:
        return self._silence_ns / _NS

    def set_silence(self, silence_s: float) -> None:
        """Set the bound. :raises ValueError: outside [SILENCE_MIN_S, SILENCE_MAX_S]."""
        if not (SILENCE_MIN_S <= float(silence_s) <= SILENCE_MAX_S):
            raise ValueError(f"driver silence bound {silence_s!r} s outside [{SILENCE_MIN_S:g}, {SILENCE_MAX_S:g}] s")
        self._silence_ns = int(float(silence_s) * _NS)

    # -- arrivals (executor thread) ----------------------------------------------------------------------
    def joint_state(self) -> None:
        self._joint_state_ns = self._clock_ns()

    def status(self) -> None:
        self._status_ns = self._clock_ns()

    def answered(self, error: str = "") -> None:
        """Note that a verdict or a service response arrived: the command path is alive.

        :param error: the answer's coarse error, if any: a driver whose hardware is in fault names the fault there,
            and the silence's text quotes it (cut to ``ANSWER_ERROR_CHARS``).
        """
        with self._lock:
            self._answer_error = (error or "")[:ANSWER_ERROR_CHARS]
            self._answer_ns = self._clock_ns()
            self._first_unanswered_ns = 0
            self._unanswered = 0

    # -- the control thread ------------------------------------------------------------------------------
    def command_sent(self) -> None:
        with self._lock:
            if not self._unanswered:
                self._first_unanswered_ns = self._clock_ns()
            self._unanswered += 1

    def begin(self) -> None:
        """Begin a new episode: commands of the last one that were never answered do not count against it."""
        with self._lock:
            self._first_unanswered_ns = 0
            self._unanswered = 0

    def joint_state_age_s(self) -> float:
        """Seconds since the last ``joint_states`` (infinite before the first)."""
        last = self._joint_state_ns
        return float("inf") if not last else (self._clock_ns() - last) / _NS

    def stale_observation(self) -> str:
        """Why the latest joint state must not be used as an observation (rule 1), else empty."""
        last = self._joint_state_ns
        if not last:
            return ""  # before the first one, observe() waits for it
        age = self._clock_ns() - last
        if age <= self._silence_ns:
            return ""
        return (f"{self.name} silent: no joint_states for {age / _NS:.3f} s (limit {self.silence_s:g} s); "
                f"{self._heard_text()}")

    def fault(self) -> str:
        """Empty while the driver is heard; else the episode's error detail, naming the driver and the silence."""
        stale = self.stale_observation()
        if stale:
            return stale
        with self._lock:
            first, count = self._first_unanswered_ns, self._unanswered
        if count and first:
            waited = self._clock_ns() - first
            if waited > self._silence_ns:
                return (f"{self.name} silent: {count} command(s) over {waited / _NS:.3f} s got no answer "
                        f"(limit {self.silence_s:g} s); {self._heard_text()}")
        return ""

    def _heard_text(self) -> str:
        now = self._clock_ns()

        def ago(ns: int) -> str:
            return "never" if not ns else f"{(now - ns) / _NS:.3f} s ago"

        said = f" (an error: {self._answer_error})" if self._answer_error else ""
        return (f"last joint_states {ago(self._joint_state_ns)}, last answer {ago(self._answer_ns)}{said}, "
                f"last driver_status {ago(self._status_ns)}")
