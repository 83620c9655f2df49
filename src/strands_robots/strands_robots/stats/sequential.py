"""Stop a two-policy comparison when the answer is clear: the anytime-valid test, updated after every block.

A :class:`PairedSequentialTest` is the test's whole state (frozen): its :class:`StopRule`, the blocks seen,
the discordant wins of each policy, the e-value (:mod:`strands_robots.stats.e_process`) and the verdict.
:meth:`PairedSequentialTest.after` returns the state after one more complete block. The rule, in order:

1. the e-value reaches ``1 / alpha``: the verdict is ``a_better`` or ``b_better`` (the policy with more
   discordant wins) and the comparison stops; Ville's inequality keeps the chance of naming a winner when the
   policies are equally good at or below ``alpha``, however often the test is looked at;
2. the block was the ``max_blocks``-th: ``not_separated``, and the comparison stops;
3. only when the rule asks (``stop_when_out_of_reach``): the largest e-value any outcome of the blocks left
   could reach is below ``1 / alpha``: ``not_separated``, and the comparison stops early;
4. otherwise ``undecided``: run another block.

A decided test takes no more blocks (:meth:`~PairedSequentialTest.after` raises). Only a complete block, two
real outcomes (:class:`~strands_robots.stats.blocks.PairedBlock`), updates the test: a faulted, discarded or
safety-stopped episode cannot be passed in, so it can never trigger a stop.

:func:`replay_stop_rule` applies the same rule to whole sequences of blocks at once (numpy), for simulation,
the bench, and a "where would it have stopped" reading of a recorded job; a test pins that it agrees with
block-by-block updates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Optional, Union

import numpy as np
from numpy.typing import ArrayLike

from strands_robots.stats import arguments
from strands_robots.stats.blocks import PairedBlock
from strands_robots.stats.e_process import (
    E_PROCESS_NAME,
    log_e_value,
    log_threshold,
    max_reachable_log_e_value,
)


class Verdict(str, Enum):
    """A comparison's verdict; the value is the string the status, the CLI and the report show."""

    A_BETTER = "a_better"
    B_BETTER = "b_better"
    NOT_SEPARATED = "not_separated"
    UNDECIDED = "undecided"

    @property
    def final(self) -> bool:
        """True for every verdict but ``undecided``."""
        return self is not Verdict.UNDECIDED

    def flipped(self) -> "Verdict":
        """Return the same verdict with A and B swapped."""
        return {Verdict.A_BETTER: Verdict.B_BETTER, Verdict.B_BETTER: Verdict.A_BETTER}.get(self, self)


@dataclass(frozen=True)
class StopRule:
    """When a comparison stops: ``stop: {when: separated, alpha, max_blocks}``.

    :param max_blocks: the most blocks the comparison runs (>= 1); the verdict is ``not_separated`` if the
        e-value has not reached ``1 / alpha`` by then.
    :param alpha: the false-winner rate allowed, in (0, 1).
    :param stop_when_out_of_reach: also stop (``not_separated``) as soon as no outcome of the blocks left could
        reach ``1 / alpha``.
    """

    max_blocks: int
    alpha: float = 0.05
    stop_when_out_of_reach: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_blocks", arguments.positive_int(self.max_blocks, "max_blocks"))
        object.__setattr__(self, "alpha", arguments.open_unit(self.alpha, "alpha"))
        if not isinstance(self.stop_when_out_of_reach, bool):
            raise TypeError(f"stop_when_out_of_reach must be True or False, got {self.stop_when_out_of_reach!r}")

    @property
    def threshold(self) -> float:
        """The e-value that separates the policies, ``1 / alpha``."""
        return 1.0 / self.alpha


@dataclass(frozen=True)
class PairedSequentialTest:
    """The anytime-valid comparison of policy A and policy B after ``blocks`` complete blocks.

    Start with ``PairedSequentialTest(StopRule(max_blocks=...))``; feed each complete block to :meth:`after`.

    :param rule: when the comparison stops.
    :param blocks: complete blocks seen.
    :param a_wins: blocks only A succeeded in.
    :param b_wins: blocks only B succeeded in.
    :param verdict: the verdict so far (``undecided`` until the rule stops the comparison).
    :param stopped_at: the block the verdict was reached at; ``None`` while undecided.
    :param test: the test's name.
    """

    rule: StopRule
    blocks: int = 0
    a_wins: int = 0
    b_wins: int = 0
    verdict: Verdict = Verdict.UNDECIDED
    stopped_at: Optional[int] = None
    test: str = E_PROCESS_NAME

    def __post_init__(self) -> None:
        if not isinstance(self.rule, StopRule):
            raise TypeError(f"rule must be a StopRule, got {type(self.rule).__name__}")
        for name in ("blocks", "a_wins", "b_wins"):
            object.__setattr__(self, name, arguments.count(getattr(self, name), name))
        if self.a_wins + self.b_wins > self.blocks:
            raise ValueError(f"{self.a_wins} + {self.b_wins} discordant blocks exceed {self.blocks} blocks")
        if self.blocks > self.rule.max_blocks:
            raise ValueError(f"{self.blocks} blocks exceed max_blocks {self.rule.max_blocks}")
        object.__setattr__(self, "verdict", arguments.choice(Verdict, self.verdict, "verdict"))
        if (self.stopped_at is None) == self.verdict.final:
            raise ValueError("stopped_at is set exactly when the verdict is final")
        if self.stopped_at is not None and self.stopped_at != self.blocks:
            raise ValueError("a decided test stopped at its last block")

    @property
    def concordant(self) -> int:
        """Blocks where both succeeded or both failed (no evidence)."""
        return self.blocks - self.a_wins - self.b_wins

    @property
    def decided(self) -> bool:
        """True once the verdict is final."""
        return self.verdict.final

    @property
    def log_e_value(self) -> float:
        """The natural log of the e-value."""
        return log_e_value(self.a_wins, self.b_wins)

    @property
    def e_value(self) -> float:
        """The e-value: the evidence against "equally good" (1 at the start; ``inf`` past float range)."""
        log_e = self.log_e_value
        return math.exp(log_e) if log_e < 709.0 else math.inf

    @property
    def max_reachable_e_value(self) -> float:
        """The largest e-value reachable in the blocks left before ``max_blocks``."""
        log_e = max_reachable_log_e_value(self.a_wins, self.b_wins, self.rule.max_blocks - self.blocks)
        return math.exp(log_e) if log_e < 709.0 else math.inf

    def after(self, block: PairedBlock) -> "PairedSequentialTest":
        """Return the test after one more complete block.

        :param block: the block's two real outcomes.
        :raises TypeError: not a :class:`~strands_robots.stats.blocks.PairedBlock`.
        :raises ValueError: the test is already decided.
        """
        if not isinstance(block, PairedBlock):
            raise TypeError(f"a comparison takes complete PairedBlocks, got {type(block).__name__}")
        if self.decided:
            raise ValueError(f"the comparison was decided ({self.verdict.value}) at block {self.stopped_at}; "
                             "a decided test takes no more blocks")
        blocks = self.blocks + 1
        a_wins = self.a_wins + (block.a_success and not block.b_success)
        b_wins = self.b_wins + (block.b_success and not block.a_success)
        verdict = _verdict(a_wins, b_wins, blocks, self.rule)
        return PairedSequentialTest(self.rule, blocks, a_wins, b_wins, verdict,
                                    blocks if verdict.final else None, self.test)

    def text(self) -> str:
        """One line for a person: the verdict, the e-value against its threshold, the blocks."""
        where = f"at block {self.stopped_at}" if self.decided else f"after {self.blocks} blocks"
        return (f"{self.verdict.value} {where} of at most {self.rule.max_blocks}: e-value {self.e_value:.3g} "
                f"(separates at {self.rule.threshold:g}); A won {self.a_wins}, B won {self.b_wins}, "
                f"{self.concordant} ties")


def _verdict(a_wins: ArrayLike, b_wins: ArrayLike, blocks: ArrayLike, rule: StopRule
             ) -> Union[Verdict, np.ndarray]:
    """Return the rule's verdict after ``blocks`` blocks (vectorised: arrays in, an array of values out)."""
    crossed = log_e_value(a_wins, b_wins) >= log_threshold(rule.alpha)
    ended = np.asarray(blocks) >= rule.max_blocks
    if rule.stop_when_out_of_reach:
        ended = ended | (max_reachable_log_e_value(a_wins, b_wins, rule.max_blocks - np.asarray(blocks))
                         < log_threshold(rule.alpha))
    values = np.where(crossed, np.where(np.asarray(a_wins) > np.asarray(b_wins), Verdict.A_BETTER.value,
                                        Verdict.B_BETTER.value),
                      np.where(ended, Verdict.NOT_SEPARATED.value, Verdict.UNDECIDED.value))
    return Verdict(str(values)) if values.ndim == 0 else values


@dataclass(frozen=True, eq=False)
class ReplayResult:
    """The stop rule applied to many sequences of blocks (one per run).

    :param rule: the rule applied.
    :param verdicts: each run's verdict value (``"a_better"``, ...; ``"undecided"`` when its blocks ran out
        before the rule stopped it).
    :param blocks_used: each run's blocks up to and including the one it stopped at (all its blocks when
        undecided).
    :param log_e_values: each run's log e-value at that block.
    """

    rule: StopRule
    verdicts: np.ndarray
    blocks_used: np.ndarray
    log_e_values: np.ndarray

    def share(self, verdict: Verdict) -> float:
        """Return the share of runs with ``verdict``.

        :param verdict: the verdict to count.
        """
        return float(np.mean(self.verdicts == arguments.choice(Verdict, verdict, "verdict").value))


def replay_stop_rule(a_success: ArrayLike, b_success: ArrayLike, rule: StopRule) -> ReplayResult:
    """Apply the stop rule to sequences of complete blocks, as block-by-block updates would.

    :param a_success: A's outcomes, booleans shaped ``(runs, blocks)`` (or ``(blocks,)`` for one run); blocks
        past ``rule.max_blocks`` are never used.
    :param b_success: B's outcomes, the same shape.
    :param rule: the stop rule.
    :raises TypeError: outcomes that are not booleans (a missing outcome is not a failure).
    :raises ValueError: shapes that differ.
    """
    a = np.asarray(a_success)
    b = np.asarray(b_success)
    if a.dtype != np.bool_ or b.dtype != np.bool_:
        raise TypeError("outcomes must be boolean arrays: a faulted, discarded or safety-stopped episode is "
                        "not an outcome")
    if a.shape != b.shape or a.ndim not in (1, 2):
        raise ValueError(f"a_success and b_success must share a (runs, blocks) shape, got {a.shape}, {b.shape}")
    if a.ndim == 1:
        a, b = a[None, :], b[None, :]
    a, b = a[:, :rule.max_blocks], b[:, :rule.max_blocks]
    runs, length = a.shape
    if length == 0:
        zeros = np.zeros(runs, dtype=np.int64)
        return ReplayResult(rule, np.full(runs, Verdict.UNDECIDED.value), zeros, np.zeros(runs))
    a_wins = np.cumsum(a & ~b, axis=1)
    b_wins = np.cumsum(~a & b, axis=1)
    blocks = np.broadcast_to(np.arange(1, length + 1), a_wins.shape)
    verdicts = _verdict(a_wins, b_wins, blocks, rule)
    stopped = verdicts != Verdict.UNDECIDED.value
    first = np.where(stopped.any(axis=1), np.argmax(stopped, axis=1), length - 1)
    rows = np.arange(runs)
    return ReplayResult(rule, verdicts[rows, first].astype(str), first + 1,
                        np.asarray(log_e_value(a_wins[rows, first], b_wins[rows, first]), dtype=float))
