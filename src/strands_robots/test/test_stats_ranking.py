"""Bradley-Terry over a suite's blocks: recovers a known order, intervals cover the truth at about 95 %.

The truth: four policies succeed independently with rates 0.2, 0.4, 0.6, 0.8. For decisive comparisons that
is exactly a Bradley-Terry model with log-strengths ``logit(p)`` (centred to mean 0), so the true strengths
are known and the coverage of every interval can be counted.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from strands_robots.stats.blocks import Block
from strands_robots.stats.ranking import bradley_terry

RATES = {"p20": 0.2, "p40": 0.4, "p60": 0.6, "p80": 0.8}
LOGITS = {name: math.log(p / (1 - p)) for name, p in RATES.items()}
TRUTH = {name: value - float(np.mean(list(LOGITS.values()))) for name, value in LOGITS.items()}


def suite_blocks(n_blocks: int, rng: np.random.Generator) -> list:
    draws = rng.random((n_blocks, len(RATES))) < np.array(list(RATES.values()))
    return [Block(dict(zip(RATES, map(bool, row)))) for row in draws]


def test_enough_comparisons_recover_the_known_order():
    ranking = bradley_terry(suite_blocks(400, np.random.default_rng(1)))
    assert ranking.order == ("p80", "p60", "p40", "p20")
    assert [entry.rank for entry in ranking.entries] == [1, 2, 3, 4]
    assert sum(entry.log_strength for entry in ranking.entries) == pytest.approx(0.0, abs=1e-9)
    for entry in ranking.entries:
        assert entry.low < TRUTH[entry.policy] < entry.high
        assert entry.comparisons == 3 * 400 and entry.wins + entry.losses + entry.ties == entry.comparisons
    assert ranking.blocks == 400 and ranking.note == ""


def test_the_order_is_recovered_in_most_small_suites():
    rng = np.random.default_rng(2)
    recovered = [bradley_terry(suite_blocks(80, rng)).order == ("p80", "p60", "p40", "p20") for _ in range(100)]
    assert np.mean(recovered) >= 0.9


def test_intervals_cover_the_true_strengths_at_about_the_nominal_rate():
    # 200 suites of 80 blocks: 800 intervals at 95 %. Monte Carlo sd 0.8 points, so [92, 98] % is a wide
    # band for a correct interval and a narrow one for the model's own (unclustered) variance, which covers
    # about 86 % here because the pairs of a block share outcomes.
    rng = np.random.default_rng(3)
    hits = []
    for _ in range(200):
        ranking = bradley_terry(suite_blocks(80, rng))
        hits += [entry.low <= TRUTH[entry.policy] <= entry.high for entry in ranking.entries]
    coverage = float(np.mean(hits))
    assert 0.92 <= coverage <= 0.98, coverage


def test_a_policy_that_won_everything_gets_a_finite_strength_and_a_wide_interval():
    blocks = [Block({"always": True, "never": False})] * 6
    ranking = bradley_terry(blocks)
    top = ranking.entry("always")
    assert top.rank == 1 and (top.wins, top.losses, top.ties) == (6, 0, 0)
    assert math.isfinite(top.log_strength) and top.log_strength > 0
    assert top.low < 0 < top.high  # six straight wins still leave the size of the gap open


def test_policies_never_compared_with_each_other_are_named_in_the_note():
    blocks = [Block({"a": True, "b": False}), Block({"a": False, "b": True}), Block({"c": True, "d": False})]
    ranking = bradley_terry(blocks)
    assert "a, b; c, d" in ranking.note and "prior's" in ranking.note


def test_blocks_of_different_policy_sets_are_pooled_and_ties_counted():
    blocks = [Block({"a": True, "b": True}), Block({"a": True, "b": False, "c": False}),
              Block({"b": False, "c": True})]
    ranking = bradley_terry(blocks)
    a, b, c = (ranking.entry(p) for p in "abc")
    assert (a.wins, a.losses, a.ties, a.comparisons) == (2, 0, 1, 3)
    assert (b.wins, b.losses, b.ties, b.comparisons) == (0, 2, 2, 4)
    assert (c.wins, c.losses, c.ties, c.comparisons) == (1, 1, 1, 3)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least two policies"):
        bradley_terry([])
    with pytest.raises(TypeError, match="complete Blocks"):
        bradley_terry([{"a": True, "b": False}])
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
        bradley_terry([Block({"a": True, "b": False})], confidence=0)
    with pytest.raises(ValueError, match="prior_sd must be a positive number"):
        bradley_terry([Block({"a": True, "b": False})], prior_sd=0)
    with pytest.raises(KeyError, match="not in the ranking"):
        bradley_terry([Block({"a": True, "b": False})]).entry("z")
