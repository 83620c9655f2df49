"""More than two policies: one anytime-valid test per pair at alpha / pairs, the job stops when all are decided."""

from __future__ import annotations

import numpy as np
import pytest

from strands_robots.stats.blocks import Block
from strands_robots.stats.pairwise_sequential import PairwiseSequentialTests
from strands_robots.stats.sequential import StopRule, Verdict, replay_stop_rule


def simulate(rates: dict, runs: int, blocks: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {policy: rng.random((runs, blocks)) < p for policy, p in rates.items()}


def test_alpha_is_split_over_the_pairs():
    job = PairwiseSequentialTests.start(["c", "a", "b"], StopRule(50, alpha=0.06))
    assert job.policies == ("a", "b", "c") and job.pairs == (("a", "b"), ("a", "c"), ("b", "c"))
    assert job.pair_alpha == pytest.approx(0.02)
    assert all(test.rule.alpha == pytest.approx(0.02) and test.rule.max_blocks == 50 for test in job.tests)


def test_the_job_updates_undecided_pairs_and_stops_when_every_pair_is_decided():
    outcomes = simulate({"strong": 0.9, "mid": 0.5, "weak": 0.1}, runs=1, blocks=150, seed=9)
    job = PairwiseSequentialTests.start(outcomes, StopRule(150))
    frozen_at = {}
    for i in range(150):
        job = job.after(Block({p: bool(o[0, i]) for p, o in outcomes.items()}, f"block-{i}"))
        for pair, test in zip(job.pairs, job.tests):
            if test.decided:
                frozen_at.setdefault(pair, test)
                assert test == frozen_at[pair]  # a decided pair keeps its verdict and ignores later blocks
        if job.decided:
            break
    assert job.decided and job.blocks == max(test.stopped_at for test in job.tests)
    assert job.verdict("strong", "weak") is Verdict.A_BETTER
    assert job.verdict("weak", "strong") is Verdict.B_BETTER
    assert job.verdict("strong", "mid") is Verdict.A_BETTER and job.best == "strong"
    with pytest.raises(ValueError, match="every pair was decided"):
        job.after(Block({"strong": True, "mid": True, "weak": True}))


def test_each_pair_behaves_as_its_own_test_at_the_split_alpha():
    rates = {"a": 0.8, "b": 0.5, "c": 0.5}
    outcomes = simulate(rates, runs=15, blocks=80, seed=21)
    rule = StopRule(80, alpha=0.05, stop_when_out_of_reach=True)
    for run in range(15):
        job = PairwiseSequentialTests.start(rates, rule)
        for i in range(80):
            job = job.after(Block({p: bool(o[run, i]) for p, o in outcomes.items()}))
            if job.decided:
                break
        for (a, b), test in zip(job.pairs, job.tests):
            alone = replay_stop_rule(outcomes[a][run], outcomes[b][run], StopRule(80, 0.05 / 3, True))
            assert (test.verdict.value, test.stopped_at) == (alone.verdicts[0], alone.blocks_used[0])


def test_three_equal_policies_declare_any_false_winner_in_at_most_alpha_of_jobs():
    runs, max_blocks = 1000, 150
    outcomes = simulate({"a": 0.5, "b": 0.5, "c": 0.5}, runs=runs, blocks=max_blocks, seed=33)
    job = PairwiseSequentialTests.start(outcomes, StopRule(max_blocks, alpha=0.05))
    any_winner = np.zeros(runs, dtype=bool)
    for a, b in job.pairs:
        pair = replay_stop_rule(outcomes[a], outcomes[b], job.tests[0].rule)
        any_winner |= np.isin(pair.verdicts, [Verdict.A_BETTER.value, Verdict.B_BETTER.value])
    assert np.mean(any_winner) <= 0.055


def test_a_block_without_every_policy_is_refused():
    job = PairwiseSequentialTests.start(["a", "b", "c"], StopRule(20))
    with pytest.raises(ValueError, match="every policy once"):
        job.after(Block({"a": True, "b": False}))
    with pytest.raises(TypeError, match="complete Blocks"):
        job.after({"a": True, "b": False, "c": None})
    with pytest.raises(KeyError, match="not a pair"):
        job.test("a", "z")


def test_bad_policy_lists_are_refused():
    with pytest.raises(ValueError, match="at least two policies"):
        PairwiseSequentialTests.start(["a"], StopRule(20))
    with pytest.raises(ValueError, match="named twice"):
        PairwiseSequentialTests.start(["a", "b", "a"], StopRule(20))
    with pytest.raises(ValueError, match="non-empty strings"):
        PairwiseSequentialTests.start(["a", ""], StopRule(20))
