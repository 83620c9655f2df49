"""Mean score with a seeded bootstrap interval: repeatable, explicit about n < 2 and constant scores."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import bootstrap

from strands_robots.stats.mean_score import (
    CONSTANT_NOTE,
    NO_SCORES_NOTE,
    ONE_SCORE_NOTE,
    SMALL_SAMPLE_NOTE,
    BootstrapMethod,
    mean_score_interval,
)

SCORES = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 0.9, 0.1, 0.6, 0.4, 0.8]


def test_the_same_scores_in_any_order_give_the_same_interval_every_time():
    first = mean_score_interval(SCORES)
    again = mean_score_interval(list(SCORES))
    shuffled = mean_score_interval(list(np.random.default_rng(7).permutation(SCORES)))
    assert first == again == shuffled
    assert first.low < first.mean < first.high
    assert first.mean == pytest.approx(np.mean(SCORES))


def test_the_interval_is_scipys_bca_bootstrap_with_the_stated_seed():
    result = mean_score_interval(SCORES, seed=11, n_resamples=2000)
    expected = bootstrap((np.sort(SCORES),), np.mean, n_resamples=2000, method="BCa",
                         rng=np.random.default_rng(11)).confidence_interval
    assert (result.low, result.high) == pytest.approx((expected.low, expected.high), abs=1e-12)
    assert result.method is BootstrapMethod.BCA and result.seed == 11 and result.n_resamples == 2000
    assert result.note == ""  # 12 scores: no small-sample warning


def test_another_seed_moves_the_interval_only_by_resampling_noise():
    a = mean_score_interval(SCORES, seed=1)
    b = mean_score_interval(SCORES, seed=2)
    assert (a.low, a.high) != (b.low, b.high)
    assert abs(a.low - b.low) < 0.03 and abs(a.high - b.high) < 0.03


def test_percentile_on_request():
    result = mean_score_interval(SCORES, method="percentile")
    assert result.method is BootstrapMethod.PERCENTILE and result.low < result.mean < result.high


def test_more_scores_from_the_same_source_give_a_narrower_interval():
    rng = np.random.default_rng(3)
    few = mean_score_interval(rng.beta(2, 3, size=12))
    many = mean_score_interval(rng.beta(2, 3, size=200))
    assert (many.high - many.low) < 0.5 * (few.high - few.low)


def test_no_scores_one_score_and_constant_scores_give_no_interval_and_say_why():
    none = mean_score_interval([])
    assert none.mean is None and not none.has_interval and none.note == NO_SCORES_NOTE
    one = mean_score_interval([0.7])
    assert one.mean == 0.7 and not one.has_interval and one.note == ONE_SCORE_NOTE
    same = mean_score_interval([1.0, 1.0, 1.0, 1.0])
    assert same.mean == 1.0 and not same.has_interval and same.note == CONSTANT_NOTE
    assert "no interval" in same.text()


def test_a_small_sample_interval_carries_its_warning():
    result = mean_score_interval([0.2, 0.9, 0.4])
    assert result.has_interval and SMALL_SAMPLE_NOTE in result.note
    assert 0.2 <= result.low <= result.mean <= result.high <= 0.9


@pytest.mark.parametrize("scores, error, match", [
    ([0.5, float("nan")], ValueError, "finite"),
    ([0.5, float("inf")], ValueError, "finite"),
    (["a", "b"], TypeError, "numbers"),
    ([[0.1, 0.2], [0.3, 0.4]], ValueError, "flat"),
])
def test_bad_scores_are_refused(scores, error, match):
    with pytest.raises(error, match=match):
        mean_score_interval(scores)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="unknown bootstrap method 'studentized'"):
        mean_score_interval(SCORES, method="studentized")
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
        mean_score_interval(SCORES, confidence=1.5)
    with pytest.raises(ValueError, match="n_resamples must be >= 100"):
        mean_score_interval(SCORES, n_resamples=10)
    with pytest.raises(ValueError, match="seed must be >= 0"):
        mean_score_interval(SCORES, seed=-1)
