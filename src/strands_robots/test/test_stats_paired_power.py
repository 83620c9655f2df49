"""The exact power of the paired exact test, checked by seeded simulation with known true rates."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom
from statsmodels.stats.contingency_tables import mcnemar

from strands_robots.stats.paired_power import (
    DIFFERENCE_STEP,
    DiscordanceAssumption,
    blocks_needed,
    critical_wins,
    exact_paired_power,
    independent_cells,
    minimum_detectable_difference,
)


def simulated_power(blocks: int, p_a: float, p_b: float, runs: int, seed: int, alpha: float = 0.05) -> float:
    """Reject rate of the exact McNemar test over simulated jobs with independent outcomes."""
    rng = np.random.default_rng(seed)
    a = rng.random((runs, blocks)) < p_a
    b = rng.random((runs, blocks)) < p_b
    only_a = (a & ~b).sum(axis=1)
    only_b = (~a & b).sum(axis=1)
    p_value = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(only_a, only_b), only_a + only_b, 0.5))
    return float(np.mean(p_value <= alpha))


def test_the_critical_counts_follow_statsmodels_exact_mcnemar():
    crit = critical_wins(24, 0.05)
    for m in range(25):
        for loser in range(m // 2 + 1):
            rejects = mcnemar([[0, m - loser], [loser, 0]], exact=True).pvalue <= 0.05
            assert rejects == (loser <= crit[m]), (m, loser)
    assert list(crit[:6]) == [-1] * 6 and crit[6] == 0  # 5 discordant blocks never reject at 0.05


def test_a_fixed_size_test_at_08_vs_04_needs_42_blocks_for_95_percent_power():
    p10, p01 = independent_cells(0.8, 0.4)
    assert (p10, p01) == pytest.approx((0.48, 0.08))
    assert blocks_needed(0.8, 0.4, alpha=0.05, power=0.95) == 42
    assert exact_paired_power(41, p10, p01) < 0.95 <= exact_paired_power(42, p10, p01)
    assert blocks_needed(0.4, 0.8, power=0.95) == 42  # the direction does not matter
    assert blocks_needed(0.8, 0.4, power=0.8) < 42


@pytest.mark.parametrize("blocks, p_a, p_b", [(42, 0.8, 0.4), (30, 0.7, 0.5), (20, 0.5, 0.5)])
def test_exact_power_is_the_simulated_reject_rate(blocks, p_a, p_b):
    runs = 20_000
    exact = float(exact_paired_power(blocks, *independent_cells(p_a, p_b)))
    simulated = simulated_power(blocks, p_a, p_b, runs, seed=blocks)
    error = 4 * np.sqrt(max(exact * (1 - exact), 0.01) / runs)
    assert abs(simulated - exact) <= error, (exact, simulated)


def test_power_under_equal_rates_is_at_most_alpha():
    for blocks in (10, 25, 60):
        assert exact_paired_power(blocks, 0.2, 0.2) <= 0.05


def test_the_minimum_detectable_difference_is_detected_with_80_percent_power_and_a_smaller_one_is_not():
    result = minimum_detectable_difference(42, pooled_rate=0.6)
    assert result.assumption is DiscordanceAssumption.INDEPENDENT and result.rate == 0.6
    d = result.difference
    at = simulated_power(42, 0.6 + d / 2, 0.6 - d / 2, runs=20_000, seed=1)
    below = simulated_power(42, 0.6 + (d - 0.05) / 2, 0.6 - (d - 0.05) / 2, runs=20_000, seed=2)
    assert at >= 0.8 - 0.012 and below < 0.8 - 0.05, (d, at, below)
    step_below = minimum_detectable_difference(42, pooled_rate=0.6, power=0.8).difference - DIFFERENCE_STEP
    pa, pb = 0.6 + step_below / 2, 0.6 - step_below / 2
    assert exact_paired_power(42, pa * (1 - pb), (1 - pa) * pb) < 0.8


def test_the_minimum_detectable_difference_at_the_observed_discordance_rate():
    result = minimum_detectable_difference(42, assumption="observed_discordance_rate", discordance_rate=0.5)
    d = result.difference
    assert exact_paired_power(42, (0.5 + d) / 2, (0.5 - d) / 2) >= 0.8
    assert exact_paired_power(42, (0.5 + d - DIFFERENCE_STEP) / 2, (0.5 - d + DIFFERENCE_STEP) / 2) < 0.8
    assert "observed discordance rate" in result.text()


def test_more_blocks_detect_a_smaller_difference():
    ds = [minimum_detectable_difference(n, pooled_rate=0.5).difference for n in (20, 40, 80, 160)]
    assert ds == sorted(ds, reverse=True) and ds[-1] < 0.5 * ds[0]


def test_when_nothing_is_detectable_the_answer_is_none_with_the_reason():
    few = minimum_detectable_difference(5, pooled_rate=0.5)
    assert few.difference is None and "reaches 0.8 power with 5 blocks" in few.note
    nothing = minimum_detectable_difference(30, assumption=DiscordanceAssumption.OBSERVED_DISCORDANCE,
                                            discordance_rate=0.0)
    assert nothing.difference is None and "no discordant block" in nothing.note
    assert minimum_detectable_difference(0, pooled_rate=0.5).note == "no blocks"


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="rates are equal"):
        blocks_needed(0.5, 0.5)
    with pytest.raises(ValueError, match=r"p_a must be in \[0, 1\]"):
        blocks_needed(1.2, 0.4)
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\)"):
        blocks_needed(0.8, 0.4, alpha=0.0)
    with pytest.raises(ValueError, match=r"power must be in \(0, 1\)"):
        blocks_needed(0.8, 0.4, power=1.0)
    with pytest.raises(ValueError, match="do not reach"):
        blocks_needed(0.51, 0.5, max_blocks=50)
    with pytest.raises(ValueError, match="needs pooled_rate"):
        minimum_detectable_difference(30)
    with pytest.raises(ValueError, match="unknown discordance assumption"):
        minimum_detectable_difference(30, assumption="hope", pooled_rate=0.5)
    with pytest.raises(ValueError, match="p_only_a \\+ p_only_b <= 1"):
        exact_paired_power(10, 0.7, 0.6)


def test_the_detectable_difference_is_answered_for_every_pooled_rate_a_table_can_have():
    # Every pooled rate k / (2n) a paired table of n blocks can give, the widest difference included.
    answered = 0
    for n in (3, 6, 7, 20, 41):
        for k in range(2 * n + 1):
            result = minimum_detectable_difference(n, pooled_rate=k / (2 * n))
            assert result.difference is None or 0 < result.difference <= 2 * min(k, 2 * n - k) / (2 * n) + 1e-9
            answered += result.difference is not None
    assert answered > 0
