"""Steps in flight: commands sent whose verdicts have not come back yet, completed strictly in step order.

DESIGN.md §5 "Command path": over the command stream the control loop never waits for a verdict inside a
control period. Step ``k``'s command is sent and the loop goes on; step ``k``'s ``RunPolicyStep`` is
dispatched when ``k``'s own verdict has arrived (possibly during a later period), after every earlier step's,
so ``event_seq`` stays dense and in step order and each event carries its own step's verdict.

The rules, in order (pure; the clock is injected, so they are tested without waiting):

1. A verdict for step ``j`` resolves ``j``. The driver answers in order on a reliable, in-order stream, so
   every step before ``j`` still open was **lost**: it is resolved as a coarse error (``unknown``) at once.
2. A step still open ``verdict_bound_ns`` after it was sent is resolved as a coarse error (``unknown``): the
   driver did not answer in time. (The rollout's dead-driver detection counts the same unanswered commands and
   ends the episode at its own bound.)
3. Steps complete from the oldest: only a resolved step whose predecessors have all completed is handed out.
4. **Hold**: the loop must not send another command while ``max_outstanding`` steps are open, or while the
   oldest open step is older than ``overdue_ns``. The loop then waits (its budget clock paused) for the driver
   to answer, or for the dead-driver bound to end the episode; it never runs ahead of a driver that is not
   keeping up, so a starved driver never finds more than the window's worth of commands queued.

Why a window of 50 ms of commands (``DEFAULT_WINDOW_S``, at least 2 steps): a backlog the driver applies in a
burst after a stall is at most the window's worth of trajectory (the mock moves at most ~0.8 rad/s: ~0.04 rad;
the safety trip seen before this window was a ~0.25 rad jump from a 0.3 s backlog), while the window is long
enough that the 10-40 ms stalls this loaded 2-core machine gives a healthy driver every few seconds neither make
the loop hold nor make a healthy driver's commands stale (their ``apply_by`` is the same 50 ms).

A backend that offers this path (the ROS driver client on the stream) returns a :class:`CommandWindow` from
``command_window()``; one that returns None (in process, the ``SendAction`` service) keeps the synchronous
``send_action`` per step.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Deque, Generic, List, Mapping, Optional, Protocol, Sequence, Tuple, TypeVar, runtime_checkable

from strands_robots.arm.verdict import ActionVerdict

__all__ = ["CommandWindow", "DEFAULT_WINDOW_S", "InFlight", "MIN_WINDOW_STEPS", "Resolved", "window_steps"]

# Commands in flight at most, as time: see the module docstring.
DEFAULT_WINDOW_S = 0.05
# ... and as steps, at least (at 50 Hz: 2 steps = 40 ms; a single step would make every late verdict a hold).
MIN_WINDOW_STEPS = 2

T = TypeVar("T")


def window_steps(window_s: float, period_s: float) -> int:
    """Return how many commands may be in flight at a control period: ``window_s`` of them, at least 2."""
    if not (window_s > 0 and period_s > 0):
        raise ValueError(f"window_s and period_s must be > 0, got {window_s!r}, {period_s!r}")
    return max(MIN_WINDOW_STEPS, int(window_s / period_s + 1e-9))


@runtime_checkable
class CommandWindow(Protocol):
    """A backend's asynchronous command path (one per episode, from ``backend.command_window()``)."""

    max_outstanding: int  # rule 4: commands in flight at most
    overdue_ns: int  # rule 4: hold while the oldest open step is older than this
    verdict_bound_ns: int  # rule 2: an open step older than this is unknown

    def submit(self, action: Mapping[str, Any],
               lookahead: "Sequence[Mapping[str, Any]]" = ()) -> "int | ActionVerdict":
        """Send one command; its ticket (increasing per episode), or a verdict when nothing was sent.

        ``lookahead``: the rest of the action's chunk (``PlannedAction.lookahead``), which a window may carry on with
        the command for hardware that takes trajectories; it never changes what this step applies.
        """

    def collect(self, timeout_s: float) -> "List[Tuple[int, ActionVerdict]]":
        """Return every verdict arrived so far (waiting at most ``timeout_s`` for the first), oldest first."""

    def describe_silence(self) -> str:
        """Return why a verdict is missing, naming the driver (the coarse error text of rules 1 and 2)."""


@dataclass(frozen=True)
class Resolved(Generic[T]):
    """A step ready to complete: what the loop stored when it sent it, and its verdict."""

    step: T
    verdict: ActionVerdict


class _Open:
    __slots__ = ("ticket", "step", "sent_ns", "verdict")

    def __init__(self, ticket: "int | None", step: Any, sent_ns: int, verdict: "ActionVerdict | None") -> None:
        self.ticket = ticket
        self.step = step
        self.sent_ns = sent_ns
        self.verdict = verdict


class InFlight(Generic[T]):
    """The steps sent and not yet completed, oldest first (module docstring: rules 1-4).

    Not thread-safe: the control thread owns it (verdicts reach it through :meth:`CommandWindow.collect`).

    :param max_outstanding: rule 4's window, >= 1.
    :param overdue_ns: rule 4's age bound.
    :param verdict_bound_ns: rule 2's bound.
    """

    def __init__(self, max_outstanding: int, overdue_ns: int, verdict_bound_ns: int) -> None:
        if max_outstanding < 1:
            raise ValueError(f"max_outstanding must be >= 1, got {max_outstanding!r}")
        self.max_outstanding = int(max_outstanding)
        self.overdue_ns = int(overdue_ns)
        self.verdict_bound_ns = int(verdict_bound_ns)
        self._steps: Deque[_Open] = collections.deque()
        self.lost = 0  # rule 1
        self.timed_out = 0  # rule 2
        self.unmatched = 0  # verdicts for no open step (after their step timed out, or a duplicate)

    def __len__(self) -> int:
        return len(self._steps)

    @property
    def head_resolved(self) -> bool:
        """Whether the oldest step has its verdict (it can complete now)."""
        return bool(self._steps) and self._steps[0].verdict is not None

    @property
    def open_count(self) -> int:
        """Steps sent whose verdict has not arrived (completed or not)."""
        return sum(1 for s in self._steps if s.verdict is None)

    def add(self, ticket: "int | ActionVerdict", step: T, sent_ns: int) -> None:
        """Register a step just sent (``ticket``), or one resolved at once (a verdict: nothing was sent)."""
        if isinstance(ticket, ActionVerdict):
            self._steps.append(_Open(None, step, sent_ns, ticket))
        else:
            self._steps.append(_Open(int(ticket), step, sent_ns, None))

    def resolve(self, ticket: int, verdict: ActionVerdict, lost_text: str = "") -> bool:
        """Rule 1: give ``ticket`` its verdict; open steps before it are lost. False when no step is open for it."""
        found = False
        for s in self._steps:
            if s.ticket is None or s.verdict is not None:
                continue
            if s.ticket < ticket:
                self.lost += 1
                s.verdict = ActionVerdict.coarse(
                    f"no verdict for step {s.ticket}: step {ticket} was answered first (verdict lost)"
                    + (f"; {lost_text}" if lost_text else ""))
            elif s.ticket == ticket:
                s.verdict = verdict
                found = True
                break
            else:
                break
        if not found:
            self.unmatched += 1
        return found

    def expire(self, now_ns: int, why: str) -> int:
        """Rule 2: resolve every open step sent more than ``verdict_bound_ns`` ago as unknown; how many."""
        n = 0
        for s in self._steps:
            if s.verdict is None and now_ns - s.sent_ns > self.verdict_bound_ns:
                s.verdict = ActionVerdict.coarse(
                    f"no verdict for step {s.ticket} within {self.verdict_bound_ns / 1e9:g} s: {why}")
                n += 1
        self.timed_out += n
        return n

    def abandon(self, why: str) -> int:
        """Resolve every open step as unknown now (the episode ends without waiting for them); how many."""
        n = 0
        for s in self._steps:
            if s.verdict is None:
                s.verdict = ActionVerdict.coarse(f"no verdict for step {s.ticket}: {why}")
                n += 1
        return n

    def pop_ready(self) -> "List[Resolved[T]]":
        """Rule 3: the resolved steps at the head, in step order (removed)."""
        out: List[Resolved[T]] = []
        steps = self._steps
        while steps and steps[0].verdict is not None:
            s = steps.popleft()
            out.append(Resolved(s.step, s.verdict))
        return out

    def pop_one(self) -> "Optional[Resolved[T]]":
        """Rule 3, one step at a time: the head when it is resolved (removed), else None."""
        steps = self._steps
        if steps and steps[0].verdict is not None:
            s = steps.popleft()
            return Resolved(s.step, s.verdict)
        return None

    def hold_reason(self, now_ns: int) -> str:
        """Rule 4: why no new command may be sent now, or empty."""
        open_steps = [s for s in self._steps if s.verdict is None]
        if len(open_steps) >= self.max_outstanding:
            return f"{len(open_steps)} commands in flight (window {self.max_outstanding})"
        if open_steps:
            age = now_ns - open_steps[0].sent_ns
            if age > self.overdue_ns:
                return (f"no verdict for step {open_steps[0].ticket} after {age / 1e6:.1f} ms "
                        f"(limit {self.overdue_ns / 1e6:g} ms)")
        return ""
