"""Success rates with intervals: Wilson by default, Clopper-Pearson on request, k = 0 and n = 0, bad input.

The coverage test checks the implementation against the method: the exact coverage of the Wilson interval is
computed here from its closed form (independently of statsmodels), and jobs simulated with a known success
probability, their intervals computed through the API, must cover it as often, within Monte Carlo error.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest
from scipy.stats import beta, binom

from strands_robots.stats.proportion import (
    NO_TRIALS_NOTE,
    IntervalMethod,
    Proportion,
    proportion_interval,
    proportion_intervals,
)

Z95 = NormalDist().inv_cdf(0.975)


def wilson_closed_form(k: np.ndarray, n: int, z: float = Z95) -> tuple:
    """Wilson's score interval from its formula (the reference the implementation is checked against)."""
    centre = (k + z * z / 2) / (n + z * z)
    half = z / (n + z * z) * np.sqrt(k * (n - k) / n + z * z / 4)
    return centre - half, centre + half


def test_three_of_five_has_the_wilson_interval_23_to_88_percent():
    result = proportion_interval(3, 5)
    assert (result.successes, result.trials, result.rate) == (3, 5, 0.6)
    low, high = wilson_closed_form(np.array(3), 5)
    assert result.low == pytest.approx(float(low), abs=1e-12)
    assert result.high == pytest.approx(float(high), abs=1e-12)
    assert (round(result.low, 2), round(result.high, 2)) == (0.23, 0.88)
    assert result.method is IntervalMethod.WILSON and result.confidence == 0.95
    assert result.text() == "3/5 = 60 % (95 % Wilson 23-88 %)"


def test_clopper_pearson_on_request_matches_the_beta_quantiles_and_is_wider():
    cp = proportion_interval(3, 5, method="clopper-pearson")
    assert cp.method is IntervalMethod.CLOPPER_PEARSON
    assert cp.low == pytest.approx(beta.ppf(0.025, 3, 3), abs=1e-9)
    assert cp.high == pytest.approx(beta.ppf(0.975, 4, 2), abs=1e-9)
    wilson = proportion_interval(3, 5)
    assert cp.low < wilson.low and cp.high > wilson.high


def test_zero_successes_still_has_an_interval_with_its_lower_bound_at_zero():
    none_of_ten = proportion_interval(0, 10)
    assert none_of_ten.rate == 0.0 and none_of_ten.low == 0.0
    assert none_of_ten.high == pytest.approx(float(wilson_closed_form(np.array(0), 10)[1]), abs=1e-12)
    assert none_of_ten.high > 0.25  # 0 of 10 is far from "certainly 0 %"
    all_of_ten = proportion_interval(10, 10, method="clopper-pearson")
    assert all_of_ten.high == 1.0 and all_of_ten.low == pytest.approx(0.025 ** 0.1, abs=1e-9)


def test_no_trials_gives_no_rate_and_no_interval_and_says_so():
    empty = proportion_interval(0, 0)
    assert empty.rate is None and empty.low is None and empty.high is None
    assert not empty.has_interval and empty.note == NO_TRIALS_NOTE
    assert "no trials" in empty.text()


def test_a_batch_gives_the_same_bounds_as_one_at_a_time():
    ks, ns = [0, 3, 7, 0, 12], [4, 5, 9, 0, 12]
    batch = proportion_intervals(ks, ns, confidence=0.9)
    singles = tuple(proportion_interval(k, n, confidence=0.9) for k, n in zip(ks, ns))
    assert batch == singles
    assert [p.confidence for p in batch] == [0.9] * 5


@pytest.mark.parametrize("n", [10, 20, 50])
def test_simulated_wilson_coverage_is_the_exact_binomial_coverage_within_monte_carlo_error(n):
    rng = np.random.default_rng(20_000 + n)
    jobs = 2000
    k = np.arange(n + 1)
    for p in np.round(np.arange(0.1, 0.91, 0.1), 1):
        low, high = wilson_closed_form(k, n)
        exact = float(binom.pmf(k, n, p)[(low <= p) & (p <= high)].sum())
        successes = rng.binomial(n, p, size=jobs)
        intervals = proportion_intervals(successes.tolist(), n)
        simulated = np.mean([r.low <= p <= r.high for r in intervals])
        assert 0.92 <= exact <= 0.985, (n, p, exact)
        assert abs(simulated - exact) <= 0.015, f"n={n} p={p}: simulated {simulated:.4f}, exact {exact:.4f}"


@pytest.mark.parametrize("successes, trials, error, match", [
    (-1, 5, ValueError, "successes must be >= 0"),
    (2, -5, ValueError, "trials must be >= 0"),
    (6, 5, ValueError, r"successes \(6\) cannot exceed trials \(5\)"),
    (2.5, 5, TypeError, "integer count"),
    (True, 5, TypeError, "integer count"),
    ("3", 5, TypeError, "integer count"),
])
def test_bad_counts_are_refused_with_a_reason(successes, trials, error, match):
    with pytest.raises(error, match=match):
        proportion_interval(successes, trials)


@pytest.mark.parametrize("confidence", [0, 1, 95, -0.5, float("nan")])
def test_a_level_outside_zero_one_is_refused(confidence):
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
        proportion_interval(3, 5, confidence=confidence)


def test_an_unknown_method_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown interval method 'agresti'.*'wilson', 'clopper-pearson'"):
        proportion_interval(3, 5, method="agresti")


def test_a_batch_with_mismatched_lengths_is_refused():
    with pytest.raises(ValueError, match="differ in length"):
        proportion_intervals([1, 2], [5, 5, 5])


def test_a_proportion_whose_bounds_do_not_hold_the_rate_cannot_be_built():
    with pytest.raises(ValueError, match="low <= rate <= high"):
        Proportion(3, 5, 0.6, 0.7, 0.9, 0.95, IntervalMethod.WILSON)
    with pytest.raises(ValueError, match="exactly when trials is 0"):
        Proportion(0, 0, 0.0, 0.0, 0.0, 0.95, IntervalMethod.WILSON)
