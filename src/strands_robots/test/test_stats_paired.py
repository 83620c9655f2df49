"""Paired comparison: the 2x2 table, Newcombe's interval for the difference, the exact McNemar test."""

from __future__ import annotations

import pytest
from scipy.stats import binom

from strands_robots.stats.blocks import PairedBlock
from strands_robots.stats.paired import (
    MCNEMAR_TEST,
    NEWCOMBE_METHOD,
    PairedTable,
    compare_paired,
    exact_mcnemar,
    newcombe_difference,
)
from strands_robots.stats.paired_power import DiscordanceAssumption


def blocks_of(both: int, only_a: int, only_b: int, neither: int) -> list:
    return ([PairedBlock(True, True)] * both + [PairedBlock(True, False)] * only_a
            + [PairedBlock(False, True)] * only_b + [PairedBlock(False, False)] * neither)


def test_blocks_are_counted_into_the_paired_table():
    table = PairedTable.from_blocks(blocks_of(5, 3, 1, 2))
    assert table == PairedTable(5, 3, 1, 2)
    assert (table.blocks, table.discordant, table.a_successes, table.b_successes) == (11, 4, 8, 6)


def test_newcombe_interval_matches_the_published_worked_example():
    # Fagerland, Lydersen & Laake (2017), ch. 8: Cavo et al. (2012), table [[59, 6], [16, 80]]:
    # difference -0.0621, 95 % Newcombe square-and-add interval -0.1186 to -0.0046.
    result = newcombe_difference(PairedTable(59, 6, 16, 80))
    assert result.difference == pytest.approx(-10 / 161, abs=1e-12)
    assert (round(result.low, 4), round(result.high, 4)) == (-0.1186, -0.0046)
    assert result.method == NEWCOMBE_METHOD


def test_newcombe_interval_is_symmetric_under_swapping_the_policies():
    ab = newcombe_difference(PairedTable(10, 7, 2, 6))
    ba = newcombe_difference(PairedTable(10, 2, 7, 6))
    assert ab.difference == pytest.approx(-ba.difference)
    assert (ab.low, ab.high) == pytest.approx((-ba.high, -ba.low))


def test_newcombe_interval_narrows_with_more_blocks_at_the_same_rates():
    small = newcombe_difference(PairedTable(4, 4, 1, 3))
    large = newcombe_difference(PairedTable(40, 40, 10, 30))
    assert small.difference == pytest.approx(large.difference)
    assert (large.high - large.low) < 0.45 * (small.high - small.low)


def test_all_concordant_blocks_give_a_zero_difference_an_interval_around_it_and_p_one():
    table = PairedTable(6, 0, 0, 4)
    diff = newcombe_difference(table)
    assert diff.difference == 0.0 and diff.low < 0.0 < diff.high
    test = exact_mcnemar(table)
    assert test.p_value == 1.0 and test.smallest_possible_p == 1.0


def test_no_blocks_give_no_difference_and_say_so():
    diff = newcombe_difference(PairedTable(0, 0, 0, 0))
    assert diff.difference is None and diff.low is None and "no blocks" in diff.note


def test_exact_mcnemar_is_the_two_sided_binomial_test_of_the_discordant_blocks():
    test = exact_mcnemar(PairedTable(3, 9, 2, 4))
    assert test.p_value == pytest.approx(2 * binom.cdf(2, 11, 0.5), rel=1e-12)
    assert (test.only_a, test.only_b, test.test) == (9, 2, MCNEMAR_TEST)


def test_five_discordant_blocks_can_never_reach_five_percent():
    test = exact_mcnemar(PairedTable(0, 5, 0, 0))
    assert test.p_value == pytest.approx(2 / 2 ** 5) and test.p_value > 0.05
    assert test.smallest_possible_p == pytest.approx(0.0625)
    assert exact_mcnemar(PairedTable(0, 6, 0, 0)).p_value < 0.05


def test_compare_paired_reports_rates_difference_test_and_detectable_difference():
    result = compare_paired(blocks_of(12, 10, 2, 6))
    assert (result.a.successes, result.a.trials, result.b.successes, result.b.trials) == (22, 30, 14, 30)
    assert result.difference.difference == pytest.approx(8 / 30)
    assert result.difference.low > 0.0  # A is better beyond the interval
    assert result.test.p_value < 0.05
    detectable = result.detectable
    assert detectable.assumption is DiscordanceAssumption.INDEPENDENT and detectable.blocks == 30
    assert detectable.rate == pytest.approx(36 / 60) and 0.2 < detectable.difference < 0.6
    assert "30 blocks detect a difference of" in detectable.text()
    observed = compare_paired(blocks_of(12, 10, 2, 6), assumption=DiscordanceAssumption.OBSERVED_DISCORDANCE)
    assert observed.detectable.rate == pytest.approx(12 / 30)


def test_compare_paired_without_blocks_reports_nothing_it_cannot_know():
    result = compare_paired([])
    assert result.a.rate is None and result.difference.difference is None
    assert result.test.p_value == 1.0 and result.detectable.difference is None


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="only_a must be >= 0"):
        PairedTable(1, -1, 0, 0)
    with pytest.raises(TypeError, match="expected PairedBlock"):
        PairedTable.from_blocks([(True, False)])
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
        newcombe_difference(PairedTable(1, 2, 3, 4), confidence=95)
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\)"):
        compare_paired(blocks_of(1, 2, 3, 4), alpha=1.0)
    with pytest.raises(ValueError, match="unknown discordance assumption"):
        compare_paired(blocks_of(1, 2, 3, 4), assumption="guess")
