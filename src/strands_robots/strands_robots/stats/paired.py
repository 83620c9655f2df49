"""A paired comparison of two policies over blocks: the 2x2 table, the difference with its interval, the test.

Each block ran policy A and policy B once on the same task and seed. The blocks where both succeeded or both
failed say nothing about which policy is better; the discordant ones (only A, only B) carry the comparison.

- **Difference** ``rate(A) - rate(B)`` with Newcombe's interval for paired proportions, method 10 of
  R. G. Newcombe, "Improved confidence intervals for the difference between binomial proportions based on
  paired data", Statistics in Medicine 17 (1998) 2635-2650: each policy's Wilson score interval
  (statsmodels), combined by "square and add" with the correlation ``phi`` of the paired outcomes, whose
  numerator ``AD - BC`` is corrected as Newcombe prescribes (``AD - BC - n/2`` when that is positive, 0 when
  ``0 <= AD - BC <= n/2``, unchanged when negative; ``phi = 0`` when a margin is empty). Worked example pinned
  by a test: Fagerland, Lydersen and Laake, *Statistical Analysis of Contingency Tables* (2017), ch. 8.
- **Exact McNemar test** (statsmodels ``mcnemar(exact=True)``): a two-sided binomial test of the discordant
  blocks against a fair coin. With ``d`` discordant blocks its p-value is never below ``2 / 2**d``: five
  discordant blocks can never reach 0.05.
- **Minimum detectable difference**: :mod:`strands_robots.stats.paired_power`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional

from strands_robots.stats import arguments
from strands_robots.stats.blocks import PairedBlock
from strands_robots.stats.paired_power import (
    DiscordanceAssumption,
    MinimumDetectableDifference,
    minimum_detectable_difference,
)
from strands_robots.stats.proportion import IntervalMethod, Proportion, proportion_interval

NEWCOMBE_METHOD = "Newcombe (1998) method 10: paired Wilson score intervals, square and add"
MCNEMAR_TEST = "exact McNemar (two-sided binomial test of the discordant blocks)"


@dataclass(frozen=True)
class PairedTable:
    """The 2x2 table of a paired comparison (counts of blocks).

    :param both_succeeded: blocks where A and B both succeeded.
    :param only_a: blocks where only A succeeded (A won).
    :param only_b: blocks where only B succeeded (B won).
    :param both_failed: blocks where both failed.
    """

    both_succeeded: int
    only_a: int
    only_b: int
    both_failed: int

    def __post_init__(self) -> None:
        for name in ("both_succeeded", "only_a", "only_b", "both_failed"):
            object.__setattr__(self, name, arguments.count(getattr(self, name), name))

    @classmethod
    def from_blocks(cls, blocks: Iterable[PairedBlock]) -> "PairedTable":
        """Count ``blocks`` into a table.

        :param blocks: complete paired blocks (each a :class:`PairedBlock`).
        :raises TypeError: an item that is not a :class:`PairedBlock`.
        """
        cells = [0, 0, 0, 0]
        for block in blocks:
            if not isinstance(block, PairedBlock):
                raise TypeError(f"expected PairedBlock, got {type(block).__name__}")
            cells[(0 if block.a_success else 2) + (0 if block.b_success else 1)] += 1
        both, only_a, only_b, neither = cells
        return cls(both, only_a, only_b, neither)

    @property
    def blocks(self) -> int:
        """All blocks, ``n``."""
        return self.both_succeeded + self.only_a + self.only_b + self.both_failed

    @property
    def discordant(self) -> int:
        """Blocks where exactly one policy succeeded."""
        return self.only_a + self.only_b

    @property
    def a_successes(self) -> int:
        return self.both_succeeded + self.only_a

    @property
    def b_successes(self) -> int:
        return self.both_succeeded + self.only_b


@dataclass(frozen=True)
class PairedDifference:
    """``rate(A) - rate(B)`` over the same blocks, with its interval.

    :param difference: the observed difference, in [-1, 1]; ``None`` with no blocks.
    :param low: the interval's lower bound; ``None`` with no blocks.
    :param high: the interval's upper bound; ``None`` with no blocks.
    :param confidence: the two-sided level.
    :param method: how the interval was computed.
    :param note: why a field is ``None``.
    """

    difference: Optional[float]
    low: Optional[float]
    high: Optional[float]
    confidence: float
    method: str = NEWCOMBE_METHOD
    note: str = ""


@dataclass(frozen=True)
class PairedTest:
    """The exact McNemar test of "A and B are equally good" over the discordant blocks.

    :param only_a: discordant blocks A won.
    :param only_b: discordant blocks B won.
    :param p_value: the two-sided exact p-value (1.0 with no discordant block).
    :param smallest_possible_p: the smallest p-value this many discordant blocks could give, ``2 / 2**d``
        (capped at 1): below ``alpha`` only when enough blocks were discordant.
    :param test: the test's name.
    """

    only_a: int
    only_b: int
    p_value: float
    smallest_possible_p: float
    test: str = MCNEMAR_TEST


@dataclass(frozen=True)
class PairedComparison:
    """Everything a paired comparison of two policies reports.

    :param table: the 2x2 table of blocks.
    :param a: policy A's success rate over the blocks, with its interval.
    :param b: policy B's success rate over the blocks, with its interval.
    :param difference: ``rate(A) - rate(B)`` with Newcombe's interval.
    :param test: the exact McNemar test.
    :param detectable: the smallest difference these blocks could detect (80 % power by default).
    """

    table: PairedTable
    a: Proportion
    b: Proportion
    difference: PairedDifference
    test: PairedTest
    detectable: MinimumDetectableDifference


def newcombe_difference(table: PairedTable, *, confidence: float = 0.95) -> PairedDifference:
    """Return ``rate(A) - rate(B)`` with Newcombe's (1998) method-10 interval for paired proportions.

    :param table: the paired 2x2 table.
    :param confidence: the two-sided level in (0, 1).
    :raises ValueError: a level outside (0, 1).
    """
    level = arguments.open_unit(confidence, "confidence")
    n = table.blocks
    if n == 0:
        return PairedDifference(None, None, None, level, note="no blocks: no difference and no interval")
    a, b, c, d = table.both_succeeded, table.only_a, table.only_b, table.both_failed
    wilson_a = proportion_interval(a + b, n, confidence=level, method=IntervalMethod.WILSON)
    wilson_b = proportion_interval(a + c, n, confidence=level, method=IntervalMethod.WILSON)
    p1, l1, u1 = wilson_a.rate, wilson_a.low, wilson_a.high
    p2, l2, u2 = wilson_b.rate, wilson_b.low, wilson_b.high
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0
    if margins > 0:
        cross = a * d - b * c
        corrected = cross - n / 2 if cross > n / 2 else (0.0 if cross >= 0 else cross)
        phi = corrected / math.sqrt(margins)
    delta = p1 - p2  # type: ignore[operator]
    down = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2  # type: ignore[operator]
    up = (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2  # type: ignore[operator]
    low = max(-1.0, delta - math.sqrt(max(down, 0.0)))
    high = min(1.0, delta + math.sqrt(max(up, 0.0)))
    return PairedDifference(delta, min(low, delta), max(high, delta), level)


def exact_mcnemar(table: PairedTable) -> PairedTest:
    """Return the exact McNemar test of ``table`` (statsmodels ``mcnemar(exact=True)``).

    :param table: the paired 2x2 table.
    """
    discordant = table.discordant
    if discordant == 0:
        p_value = 1.0
    else:
        from statsmodels.stats.contingency_tables import mcnemar

        result = mcnemar([[table.both_succeeded, table.only_a], [table.only_b, table.both_failed]], exact=True)
        p_value = min(1.0, float(result.pvalue))
    return PairedTest(table.only_a, table.only_b, p_value, min(1.0, 2.0 / 2.0 ** discordant))


def compare_paired(blocks: Iterable[PairedBlock], *, confidence: float = 0.95, alpha: float = 0.05,
                   power: float = 0.8,
                   assumption: DiscordanceAssumption = DiscordanceAssumption.INDEPENDENT) -> PairedComparison:
    """Return the paired comparison of policies A and B over ``blocks``.

    :param blocks: complete paired blocks (each one task and seed, each policy once, two real outcomes).
    :param confidence: the level of every interval, in (0, 1).
    :param alpha: the test's level for the minimum detectable difference, in (0, 1).
    :param power: the power the minimum detectable difference is computed for, in (0, 1).
    :param assumption: how the detectable difference's discordance is modelled (see
        :class:`~strands_robots.stats.paired_power.DiscordanceAssumption`).
    :raises ValueError: a level, alpha or power outside (0, 1).
    """
    table = PairedTable.from_blocks(blocks)
    level = arguments.open_unit(confidence, "confidence")
    return PairedComparison(
        table=table,
        a=proportion_interval(table.a_successes, table.blocks, confidence=level),
        b=proportion_interval(table.b_successes, table.blocks, confidence=level),
        difference=newcombe_difference(table, confidence=level),
        test=exact_mcnemar(table),
        detectable=minimum_detectable_difference(
            table.blocks, alpha=alpha, power=power, assumption=assumption,
            pooled_rate=(table.a_successes + table.b_successes) / (2 * table.blocks) if table.blocks else None,
            discordance_rate=table.discordant / table.blocks if table.blocks else None),
    )
