"""The power of the exact paired (McNemar) test: how many blocks a comparison needs, what a number can detect.

Exact, not a normal approximation: with ``n`` blocks, each discordant with probability ``psi = p10 + p01``
(``p10``: only A succeeds; ``p01``: only B succeeds), the number of discordant blocks ``D`` is
Binomial(``n``, ``psi``), and given ``D = m`` the blocks A won are Binomial(``m``, ``p10 / psi``). The exact
McNemar test at level ``alpha`` rejects when ``2 * P(X <= min(wins) | m, 1/2) <= alpha`` (the rule of
``statsmodels``' ``mcnemar(exact=True)``), so

    power = sum over m of P(D = m) * P(reject | m, p10 / psi)

summed with ``scipy.stats.binom``. Power of an exact test is not monotone in ``n`` (the test's discreteness);
:func:`blocks_needed` gives the smallest ``n`` whose power reaches the target.

For two policies whose outcomes in a block are independent with success rates ``pA`` and ``pB``,
``p10 = pA (1 - pB)`` and ``p01 = (1 - pA) pB`` (:func:`independent_cells`). When the outcomes of one block are
positively correlated (a hard task is hard for both policies), fewer blocks are discordant and the test has
*more* power than under independence: independence is the cautious planning assumption.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from strands_robots.stats import arguments

#: The resolution of the minimum detectable difference (differences are searched on this grid).
DIFFERENCE_STEP = 0.001


class DiscordanceAssumption(str, Enum):
    """How the minimum detectable difference models the discordant blocks as the difference grows."""

    #: The two policies' outcomes are independent, at rates ``pooled +- difference / 2`` around the observed
    #: pooled success rate; the discordance rate grows with the difference. Cautious when outcomes within a
    #: block are positively correlated.
    INDEPENDENT = "independent_at_pooled_rate"
    #: The observed share of discordant blocks is kept; the difference splits it (``(psi +- difference) / 2``).
    OBSERVED_DISCORDANCE = "observed_discordance_rate"


@dataclass(frozen=True)
class MinimumDetectableDifference:
    """The smallest ``|rate(A) - rate(B)|`` the exact paired test over ``blocks`` detects with ``power``.

    :param difference: that difference, to :data:`DIFFERENCE_STEP`; ``None`` when no difference reaches the
        power under the assumption (see ``note``).
    :param blocks: the number of blocks.
    :param alpha: the test's two-sided level.
    :param power: the power asked for.
    :param assumption: how discordance was modelled.
    :param rate: the rate the assumption held fixed: the pooled success rate (``INDEPENDENT``) or the
        discordance rate (``OBSERVED_DISCORDANCE``); ``None`` with no blocks.
    :param note: why ``difference`` is ``None`` (empty otherwise).
    """

    difference: Optional[float]
    blocks: int
    alpha: float
    power: float
    assumption: DiscordanceAssumption
    rate: Optional[float]
    note: str = ""

    def text(self) -> str:
        """One line for a person, naming the assumption."""
        if self.difference is None:
            return f"minimum detectable difference: none ({self.note})"
        held = ("independent outcomes around the pooled success rate" if
                self.assumption is DiscordanceAssumption.INDEPENDENT else "the observed discordance rate")
        return (f"these {self.blocks} blocks detect a difference of {self.difference * 100:.1f} points with "
                f"{self.power * 100:g} % power at alpha {self.alpha:g} (assuming {held}, {self.rate:.2f})")


def independent_cells(p_a: float, p_b: float) -> Tuple[float, float]:
    """Return ``(p10, p01)``: the chance a block is won by A, and by B, when outcomes are independent.

    :param p_a: policy A's true success rate in [0, 1].
    :param p_b: policy B's true success rate in [0, 1].
    """
    pa = arguments.closed_unit(p_a, "p_a")
    pb = arguments.closed_unit(p_b, "p_b")
    return pa * (1.0 - pb), (1.0 - pa) * pb


def critical_wins(max_discordant: int, alpha: float) -> np.ndarray:
    """For ``m = 0 .. max_discordant`` discordant blocks, the largest loser's win count the test rejects at.

    ``c[m]`` is the largest ``k`` with ``2 * P(X <= k | m, 1/2) <= alpha``, or -1 when no ``k`` rejects (the
    exact test over ``m`` discordant blocks then can never reach ``alpha``).

    :param max_discordant: the largest ``m``.
    :param alpha: the test's two-sided level in (0, 1).
    """
    from scipy.stats import binom

    level = arguments.open_unit(alpha, "alpha")
    m = np.arange(arguments.count(max_discordant, "max_discordant") + 1)
    guess = binom.ppf(level / 2.0, m, 0.5)
    crit = np.full(m.shape, -1, dtype=np.int64)
    for shift in (-1, 0, 1):  # ppf's guess, and its neighbours, checked with the test's own rule
        k = guess + shift
        ok = (k >= 0) & (k <= m) & (2.0 * binom.cdf(k, m, 0.5) <= level)
        crit = np.where(ok, np.maximum(crit, k), crit).astype(np.int64)
    return crit


def exact_paired_power(blocks: int, p_only_a: ArrayLike, p_only_b: ArrayLike, *, alpha: float = 0.05
                       ) -> np.ndarray:
    """Return the exact power of the two-sided exact McNemar test over ``blocks`` (vectorised over cells).

    :param blocks: the number of blocks ``n``.
    :param p_only_a: the chance a block is won by A (``p10``); a number or an array.
    :param p_only_b: the chance a block is won by B (``p01``); same shape as ``p_only_a``.
    :param alpha: the test's two-sided level in (0, 1).
    :raises ValueError: a chance outside [0, 1] or ``p10 + p01 > 1``.
    """
    from scipy.stats import binom

    n = arguments.count(blocks, "blocks")
    p10 = np.asarray(p_only_a, dtype=float)
    p01 = np.asarray(p_only_b, dtype=float)
    if p10.shape != p01.shape:
        raise ValueError(f"p_only_a and p_only_b differ in shape ({p10.shape} and {p01.shape})")
    if np.any(~np.isfinite(p10) | ~np.isfinite(p01) | (p10 < 0) | (p01 < 0) | (p10 + p01 > 1.0 + 1e-12)):
        raise ValueError("p_only_a and p_only_b must be in [0, 1] with p_only_a + p_only_b <= 1")
    crit = critical_wins(n, alpha)
    psi = np.clip(p10 + p01, 0.0, 1.0)
    theta = np.divide(p10, psi, out=np.full(psi.shape, 0.5), where=psi > 0)
    m = np.arange(n + 1)
    c = crit.reshape((-1,) + (1,) * psi.ndim)
    mm = m.reshape(c.shape)
    reject = np.where(c >= 0, binom.cdf(c, mm, theta) + binom.sf(mm - c - 1, mm, theta), 0.0)
    return np.sum(binom.pmf(mm, n, psi) * reject, axis=0)


def blocks_needed(p_a: float, p_b: float, *, alpha: float = 0.05, power: float = 0.8, max_blocks: int = 5000
                  ) -> int:
    """Return the blocks a fixed-size exact paired test needs to reach ``power`` when the rates are ``p_a``, ``p_b``.

    Outcomes in a block are taken as independent (:func:`independent_cells`); the answer is the smallest ``n``
    whose exact power reaches ``power``. For 0.8 vs 0.4 at alpha 0.05: 42 blocks for 95 % power.

    :param p_a: policy A's true success rate in [0, 1].
    :param p_b: policy B's true success rate in [0, 1].
    :param alpha: the test's two-sided level in (0, 1).
    :param power: the power to reach, in (0, 1).
    :param max_blocks: the most blocks to consider.
    :raises ValueError: equal rates (no number of blocks detects no difference), or no ``n <= max_blocks``
        reaches the power.
    """
    p10, p01 = independent_cells(p_a, p_b)
    target = arguments.open_unit(power, "power")
    arguments.open_unit(alpha, "alpha")
    limit = arguments.positive_int(max_blocks, "max_blocks")
    if p10 == p01:
        raise ValueError(f"the rates are equal ({p_a} and {p_b}): no number of blocks detects a difference")
    chunk = 256
    for first in range(1, limit + 1, chunk):
        ns = np.arange(first, min(first + chunk, limit + 1))
        reached = _power_by_blocks(ns, p10, p01, alpha) >= target
        if reached.any():
            return int(ns[int(np.argmax(reached))])
    raise ValueError(f"{limit} blocks do not reach {target:g} power for {p_a} vs {p_b} at alpha {alpha:g}")


def _power_by_blocks(ns: np.ndarray, p10: float, p01: float, alpha: float) -> np.ndarray:
    """Return the exact power for each block count in ``ns`` (one pair of cells), vectorised over ``ns``."""
    from scipy.stats import binom

    top = int(ns.max())
    m = np.arange(top + 1)
    crit = critical_wins(top, alpha)
    psi = p10 + p01
    theta = p10 / psi
    reject = np.where(crit >= 0, binom.cdf(crit, m, theta) + binom.sf(m - crit - 1, m, theta), 0.0)
    return binom.pmf(m[None, :], ns[:, None], psi) @ reject


def minimum_detectable_difference(blocks: int, *, alpha: float = 0.05, power: float = 0.8,
                                  assumption: DiscordanceAssumption = DiscordanceAssumption.INDEPENDENT,
                                  pooled_rate: Optional[float] = None, discordance_rate: Optional[float] = None
                                  ) -> MinimumDetectableDifference:
    """Return the smallest difference the exact paired test over ``blocks`` detects with ``power`` at ``alpha``.

    :param blocks: the number of blocks.
    :param alpha: the test's two-sided level in (0, 1).
    :param power: the power in (0, 1) (80 % by default).
    :param assumption: ``INDEPENDENT`` (needs ``pooled_rate``) or ``OBSERVED_DISCORDANCE`` (needs
        ``discordance_rate``).
    :param pooled_rate: the success rate of both policies together, in [0, 1].
    :param discordance_rate: the share of blocks where exactly one policy succeeded, in [0, 1].
    :raises ValueError: a level or power outside (0, 1), an unknown assumption, or the rate it needs missing.
    """
    n = arguments.count(blocks, "blocks")
    level = arguments.open_unit(alpha, "alpha")
    target = arguments.open_unit(power, "power")
    how = arguments.choice(DiscordanceAssumption, assumption, "discordance assumption")
    needed = "pooled_rate" if how is DiscordanceAssumption.INDEPENDENT else "discordance_rate"
    given = pooled_rate if how is DiscordanceAssumption.INDEPENDENT else discordance_rate

    def answer(difference: Optional[float], rate: Optional[float], note: str = "") -> MinimumDetectableDifference:
        return MinimumDetectableDifference(difference, n, level, target, how, rate, note)

    if n == 0:
        return answer(None, None, "no blocks")
    if given is None:
        raise ValueError(f"the {how.value} assumption needs {needed}")
    rate = arguments.closed_unit(given, needed)
    if how is DiscordanceAssumption.INDEPENDENT:
        widest = 2.0 * min(rate, 1.0 - rate)  # both rates stay in [0, 1]
        deltas = np.arange(DIFFERENCE_STEP, widest + DIFFERENCE_STEP / 2, DIFFERENCE_STEP)
        # arange's last step may pass ``widest`` by a rounding error: keep both rates inside [0, 1].
        pa, pb = np.clip(rate + deltas / 2, 0.0, 1.0), np.clip(rate - deltas / 2, 0.0, 1.0)
        p10, p01 = pa * (1 - pb), (1 - pa) * pb
        why_none = (f"no difference around a pooled success rate of {rate:.2f} reaches {target:g} power "
                    f"with {n} blocks")
    else:
        deltas = np.arange(DIFFERENCE_STEP, rate + DIFFERENCE_STEP / 2, DIFFERENCE_STEP)
        p10, p01 = (rate + deltas) / 2, np.clip((rate - deltas) / 2, 0.0, None)
        why_none = (f"no difference at a discordance rate of {rate:.2f} reaches {target:g} power with {n} blocks"
                    if rate > 0 else "no discordant block observed: no difference can be read from them")
    if deltas.size == 0:
        return answer(None, rate, why_none)
    reached = exact_paired_power(n, p10, p01, alpha=level) >= target
    if not reached.any():
        return answer(None, rate, why_none)
    return answer(round(float(deltas[int(np.argmax(reached))]), 6), rate)
