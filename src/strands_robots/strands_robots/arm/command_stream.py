"""The command stream's two extra rules: a command that is stale or out of order applies nothing.

Over the stream (``ActionCommand`` on ``action_commands``) a command can arrive late (a busy machine, a
reader that fell behind) or after a newer one (a retransmission). Applying it would move the arms to a target
the rollout has already moved past, so the driver refuses it and the arms hold:

1. ``stale``: the clock is past the command's ``apply_by`` deadline (``apply_by_ns == 0``: no deadline).
2. ``out_of_order``: its ``step_index`` is not newer than the last step *applied* for the same ``run_id``.
   Commands outside an episode (empty ``run_id``, e.g. ``ros2 topic pub``) have no order to keep.

Stale is checked first (a late command is refused for being late, whatever its order). "Applied" means the
command passed these rules and at least one of its keys was commanded: a command without the current lease's
proof applies nothing, so it cannot advance a run's step counter and lock the lease holder out (run ids are public).

Pure and thread-compatible (the driver core calls it under its lock); the clock is injected, in nanoseconds
on the same time base as ``apply_by_ns`` (the driver node passes its ROS clock).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from strands_robots.arm.command_auth import command_message, sign
from strands_robots.arm.verdict import REASON_OUT_OF_ORDER, REASON_STALE, ActionVerdict

# How many runs' last applied step are remembered; an older run reads as new (its commands are stale by then).
_RUNS_REMEMBERED = 64


@dataclass(frozen=True)
class StreamCommand:
    """One ``ActionCommand``: ``keys[i]`` commanded to ``values[i]``.

    :param lease_proof: HMAC of :meth:`message` keyed by the lease token (:mod:`strands_robots.arm.command_auth`);
        the token itself never travels on the stream.
    :param apply_by_ns: deadline on the sequencer's clock; 0 means none.
    :param lookahead: the chunk's next steps after this one, flattened in ``keys`` order, due every
        ``lookahead_period_ns`` (:mod:`strands_robots.arm.lookahead`); empty: none.
    """

    keys: tuple[str, ...]
    values: tuple[float, ...]
    run_id: str = ""
    step_index: int = 0
    lease_proof: str = field(default="", repr=False)
    apply_by_ns: int = 0
    lookahead: tuple[float, ...] = ()
    lookahead_period_ns: int = 0

    def message(self) -> bytes:
        """Return the bytes its ``lease_proof`` signs (:func:`strands_robots.arm.command_auth.command_message`)."""
        return command_message(self.run_id, self.step_index, self.apply_by_ns, self.keys, self.values,
                               self.lookahead, self.lookahead_period_ns)

    @classmethod
    def signed(cls, keys: Sequence[str], values: Sequence[float], run_id: str, step_index: int, lease_token: str,
               apply_by_ns: int = 0, lookahead: Sequence[float] = (),
               lookahead_period_ns: int = 0) -> "StreamCommand":
        """Return the command with its lease proof made from ``lease_token``.

        No proof for an empty token, or for keys and values of different lengths (the driver refuses those as a
        coarse error before any lease check).
        """
        command = cls(tuple(keys), tuple(float(v) for v in values), run_id, int(step_index), "", int(apply_by_ns),
                      tuple(float(v) for v in lookahead), int(lookahead_period_ns))
        if len(command.keys) != len(command.values):
            return command
        return replace(command, lease_proof=sign(lease_token, command.message()))


def refuse_every_key(keys: Sequence[str], reason: str) -> ActionVerdict:
    """Return a per-key verdict that applies nothing: every emitted key unresolved for ``reason``."""
    keys = tuple(keys)
    return ActionVerdict((), keys, (reason,) * len(keys))


class CommandSequencer:
    """Decides whether a streamed command may be applied at all (before any per-key rule).

    :param clock_ns: now, in nanoseconds on the time base of ``apply_by_ns``.
    """

    def __init__(self, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self._clock_ns = clock_ns
        self._last_applied: "OrderedDict[str, int]" = OrderedDict()

    def refusal(self, command: StreamCommand, now_ns: "int | None" = None) -> str:
        """Return ``stale``, ``out_of_order``, or empty when the command may go on to the per-key rules.

        :param now_ns: judge staleness at this time instead of the clock's now.
        """
        if command.apply_by_ns and (self._clock_ns() if now_ns is None else now_ns) > command.apply_by_ns:
            return REASON_STALE
        if not command.run_id:
            return ""
        last = self._last_applied.get(command.run_id)
        if last is not None and command.step_index <= last:
            return REASON_OUT_OF_ORDER
        return ""

    def record_applied(self, command: StreamCommand) -> None:
        """Remember that ``command`` moved something: older steps of its run are out of order from now on."""
        if not command.run_id:
            return
        runs = self._last_applied
        runs[command.run_id] = max(command.step_index, runs.get(command.run_id, command.step_index))
        runs.move_to_end(command.run_id)
        while len(runs) > _RUNS_REMEMBERED:
            runs.popitem(last=False)

    def last_applied(self, run_id: str) -> "int | None":
        """Return the newest step applied for ``run_id`` (None when none was)."""
        return self._last_applied.get(run_id)
