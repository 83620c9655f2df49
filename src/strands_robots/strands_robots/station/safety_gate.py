"""A safety stop is cleared by a person: the next episode waits until an operator clears it.

Before an episode moves the arms, the procedure asks the robot side whether a safety stop is in force
(:func:`clear_before_episode`). If one is, the job's message says ``waiting for an operator to clear the safety
stop: <detail>`` and the job thread waits, holding no lock, on a :class:`SafetyGate`. Only an operator's
action opens it: :meth:`SafetyGate.request_clear` (the station node's ``clear_safety_stop`` service, a monitor
button, or the scripted operator of a simulated station, which clears it explicitly and under its own name).
The request only hands the operator's name to the job thread and answers at once; the job thread then relays it
to the driver (``RobotPort.clear_safety_stop``: the driver's ``reset_safety`` with the station's lease, naming
the operator) and says who cleared what in the job's message. A clear the driver refuses (the arms still outside
the envelope) leaves the job waiting for the next request. A cancelled job ends the wait at once.

The station never clears a stop by itself: no request, no clear, however long the wait (the job stays
RUNNING, waiting and cancellable).

No rclpy here.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from strands_robots.station.limits import IDENTIFIER_MAX, TextTooLong, check_text

__all__ = ["SafetyGate", "ClearRequest", "clear_before_episode", "WAITING_PREFIX"]

WAITING_PREFIX = "waiting for an operator to clear the safety stop"


class ClearRequest:
    """An operator's request to clear the stop the job waits on."""

    __slots__ = ("operator_name", "detail")

    def __init__(self, operator_name: str, detail: str) -> None:
        self.operator_name = operator_name
        self.detail = detail


class SafetyGate:
    """Where the job thread waits for an operator's clear (thread-safe).

    The job thread :meth:`open` s it with the stop's detail, :meth:`wait` s for a request, and :meth:`shut` s it
    once the stop is gone; :meth:`request_clear` is the operator's side. :meth:`cancel` (the job is cancelled)
    ends every wait for good.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._detail = ""
        self._request: Optional[ClearRequest] = None
        self._cancelled = False

    def open(self, detail: str) -> None:
        """Job thread: a stop is in force; requests are taken from now on (an older one does not count)."""
        with self._cond:
            self._detail = detail or "the driver stopped the arms without naming a check"
            self._request = None

    def shut(self) -> None:
        """Job thread: no stop is in force any more; requests are refused again."""
        with self._cond:
            self._detail = ""
            self._request = None

    def cancel(self) -> None:
        """End every wait at once (the job is cancelled or suspended)."""
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()

    def wait(self, timeout_s: Optional[float] = None) -> Optional[ClearRequest]:
        """Job thread: block (no lock held meanwhile) until an operator asks, the job is cancelled or ``timeout_s``.

        :returns: the request (taken: the next wait needs a new one), or None (cancelled or timed out).
        """
        with self._cond:
            self._cond.wait_for(lambda: self._request is not None or self._cancelled, timeout_s)
            if self._cancelled:
                return None
            request, self._request = self._request, None
            return request

    def request_clear(self, operator_name: str) -> Any:
        """Operator: ask the station to clear the stop the job waits on. Answers at once, never waits.

        :returns: an :class:`~strands_robots.station.model.OperatorReply`.
        """
        from strands_robots.station.model import OperatorReply

        if not isinstance(operator_name, str) or not operator_name.strip():
            return OperatorReply(False, "operator_name must be a non-empty string")
        name = operator_name.strip()
        try:
            check_text(name, IDENTIFIER_MAX, "operator_name")
        except TextTooLong as exc:
            return OperatorReply(False, str(exc))
        with self._cond:
            if self._cancelled:
                return OperatorReply(False, "the job is ending; no safety stop is waited on")
            if not self._detail:
                return OperatorReply(False, "no episode waits on a safety stop (the station asks for a clear when "
                                            "the next episode needs the arms)")
            if self._request is not None:
                return OperatorReply(False, f"{self._request.operator_name} already asked to clear it; the "
                                            "station is relaying that request")
            self._request = ClearRequest(name, self._detail)
            self._cond.notify_all()
            detail = self._detail
        return OperatorReply(True, f"{name} asked to clear the safety stop ({detail}); the station relays it to "
                                   "the driver")


def clear_before_episode(
    robot: Any,
    gate: SafetyGate,
    *,
    say: Callable[[str], None],
    on_waiting: Callable[[str], None] = lambda detail: None,
    log: Callable[[str], None] = lambda line: None,
) -> Optional[str]:
    """Wait until no safety stop is in force; only an operator's request clears one.

    Each request is relayed once; a clear the driver refuses is said in the job's message and the wait goes
    on for the next request (so nothing loops without an operator asking again).

    :param robot: has ``safety_stop_detail() -> str`` (empty: no stop) and ``clear_safety_stop(operator_name)
        -> (ok, message)``.
    :param say: sets the job's message.
    :param on_waiting: called with the detail each time the wait starts (the scripted operator's hook).
    :param log: a line for the station's log per wait, clear and refused clear.
    :returns: who cleared what (``"<operator> cleared the safety stop: <detail>"``; empty when no stop was in
        force), or None when the wait was cancelled.
    """
    detail = robot.safety_stop_detail()
    cleared: list = []
    refused = ""
    try:
        while detail:
            gate.open(detail)
            say(f"{WAITING_PREFIX}: {detail}" + (f" ({refused})" if refused else ""))
            log(f"{WAITING_PREFIX}: {detail}")
            on_waiting(detail)
            request = gate.wait()
            if request is None:
                return None
            ok, message = robot.clear_safety_stop(request.operator_name)
            if ok:
                cleared.append(f"{request.operator_name} cleared the safety stop: {request.detail}")
                log(cleared[-1])
            else:
                refused = f"{request.operator_name} could not clear it: {message}"
                log(refused)
            detail = robot.safety_stop_detail()
    finally:
        gate.shut()
    return "; ".join(cleared)
