"""The anytime-valid paired test: false winners at most alpha however often it is looked at.

Also: early right verdicts when the policies differ, and only complete blocks of real outcomes update it.

Seeded simulations with known truth; the rates are simulated through :func:`replay_stop_rule`, which a test
here pins to agree run for run with block-by-block :meth:`PairedSequentialTest.after`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from strands_robots.stats.blocks import PairedBlock
from strands_robots.stats.e_process import E_PROCESS_NAME
from strands_robots.stats.paired_power import blocks_needed
from strands_robots.stats.sequential import (
    PairedSequentialTest,
    StopRule,
    Verdict,
    replay_stop_rule,
)


def simulate(p_a: float, p_b: float, runs: int, blocks: int, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    return rng.random((runs, blocks)) < p_a, rng.random((runs, blocks)) < p_b


def run_block_by_block(a: np.ndarray, b: np.ndarray, rule: StopRule) -> PairedSequentialTest:
    test = PairedSequentialTest(rule)
    for a_success, b_success in zip(a, b):
        test = test.after(PairedBlock(bool(a_success), bool(b_success)))
        if test.decided:
            break
    return test


def test_an_a_a_comparison_checked_after_every_block_declares_a_winner_in_at_most_5_5_percent_of_runs():
    rule = StopRule(max_blocks=200, alpha=0.05)
    a, b = simulate(0.5, 0.5, runs=1000, blocks=200, seed=101)
    result = replay_stop_rule(a, b, rule)
    false_winners = result.share(Verdict.A_BETTER) + result.share(Verdict.B_BETTER)
    assert false_winners <= 0.055, false_winners
    assert result.share(Verdict.NOT_SEPARATED) == pytest.approx(1 - false_winners)


def test_08_vs_04_gets_the_right_verdict_in_95_percent_of_runs_with_at_most_70_percent_of_the_fixed_blocks():
    fixed = blocks_needed(0.8, 0.4, alpha=0.05, power=0.95)
    assert fixed == 42
    rule = StopRule(max_blocks=100, alpha=0.05)
    a, b = simulate(0.8, 0.4, runs=1000, blocks=100, seed=202)
    result = replay_stop_rule(a, b, rule)
    assert result.share(Verdict.A_BETTER) >= 0.95
    assert result.share(Verdict.B_BETTER) <= 0.005
    mean_blocks = float(np.mean(result.blocks_used))
    assert mean_blocks <= 0.7 * fixed, (mean_blocks, 0.7 * fixed)


def test_the_direction_of_the_verdict_follows_the_better_policy():
    a, b = simulate(0.4, 0.8, runs=300, blocks=100, seed=303)
    result = replay_stop_rule(a, b, StopRule(100))
    assert result.share(Verdict.B_BETTER) >= 0.95 and result.share(Verdict.A_BETTER) == 0.0


@pytest.mark.parametrize("out_of_reach", [False, True])
def test_replay_agrees_run_for_run_with_block_by_block_updates(out_of_reach):
    rule = StopRule(max_blocks=60, alpha=0.05, stop_when_out_of_reach=out_of_reach)
    runs = []
    for seed, (p_a, p_b) in enumerate([(0.8, 0.4), (0.5, 0.5), (0.7, 0.5), (0.3, 0.6)]):
        runs.append(simulate(p_a, p_b, runs=20, blocks=60, seed=400 + seed))
    a = np.concatenate([r[0] for r in runs])
    b = np.concatenate([r[1] for r in runs])
    replayed = replay_stop_rule(a, b, rule)
    for i in range(len(a)):
        test = run_block_by_block(a[i], b[i], rule)
        assert test.verdict.value == replayed.verdicts[i], i
        assert test.blocks == replayed.blocks_used[i] == test.stopped_at, i
        assert test.log_e_value == pytest.approx(replayed.log_e_values[i], abs=1e-9), i
    assert set(replayed.verdicts) >= {"a_better", "not_separated"}


def test_the_e_value_is_the_wealth_of_the_krichevsky_trofimov_bettor():
    rng = np.random.default_rng(5)
    test = PairedSequentialTest(StopRule(max_blocks=10_000, alpha=1e-12))
    wealth, a_wins, b_wins = 1.0, 0, 0
    for _ in range(300):
        a_success, b_success = bool(rng.random() < 0.55), bool(rng.random() < 0.45)
        if a_success != b_success:
            stake = (a_wins - b_wins) / (a_wins + b_wins + 1)  # the fraction staked on A, before the block
            wealth *= 1 + stake * (1 if a_success else -1)
            a_wins, b_wins = a_wins + a_success, b_wins + b_success
        test = test.after(PairedBlock(a_success, b_success))
        assert test.e_value == pytest.approx(wealth, rel=1e-9)
    assert (test.a_wins, test.b_wins) == (a_wins, b_wins)


def test_concordant_blocks_carry_no_evidence():
    test = PairedSequentialTest(StopRule(50))
    assert test.e_value == 1.0
    for block in [PairedBlock(True, True), PairedBlock(False, False)] * 10:
        test = test.after(block)
    assert test.e_value == 1.0 and test.blocks == 20 and test.concordant == 20 and not test.decided


def test_seven_straight_wins_separate_at_alpha_five_percent_and_six_do_not():
    test = PairedSequentialTest(StopRule(50))
    for _ in range(6):
        test = test.after(PairedBlock(True, False))
    assert not test.decided and test.e_value < 20
    test = test.after(PairedBlock(True, False))
    assert test.verdict is Verdict.A_BETTER and test.stopped_at == 7 and test.e_value >= 20
    assert test.test == E_PROCESS_NAME
    assert test.text().startswith("a_better at block 7 of at most 50: e-value 26.8")


def test_a_decided_test_takes_no_more_blocks():
    test = PairedSequentialTest(StopRule(3))
    for _ in range(3):
        test = test.after(PairedBlock(True, True))
    assert test.verdict is Verdict.NOT_SEPARATED and test.stopped_at == 3
    with pytest.raises(ValueError, match="decided .not_separated. at block 3"):
        test.after(PairedBlock(True, False))


def test_out_of_reach_stops_not_separated_as_soon_as_the_blocks_left_cannot_separate():
    plain = PairedSequentialTest(StopRule(10))
    early = PairedSequentialTest(StopRule(10, stop_when_out_of_reach=True))
    for _ in range(3):
        plain, early = plain.after(PairedBlock(True, True)), early.after(PairedBlock(True, True))
    # 7 blocks left: 7 straight wins reach 26.8 >= 20, so separation is still possible.
    assert not early.decided and early.max_reachable_e_value == pytest.approx(26.8125)
    plain, early = plain.after(PairedBlock(False, False)), early.after(PairedBlock(False, False))
    # 6 left: at most 14.4 < 20.
    assert early.verdict is Verdict.NOT_SEPARATED and early.stopped_at == 4
    assert not plain.decided and plain.max_reachable_e_value < 20


def test_stopping_when_out_of_reach_never_changes_a_winner_only_ends_hopeless_runs_sooner():
    a, b = simulate(0.7, 0.5, runs=2000, blocks=80, seed=606)
    plain = replay_stop_rule(a, b, StopRule(80))
    early = replay_stop_rule(a, b, StopRule(80, stop_when_out_of_reach=True))
    separated = plain.verdicts != Verdict.NOT_SEPARATED.value
    assert np.array_equal(plain.verdicts, early.verdicts)
    assert np.array_equal(plain.blocks_used[separated], early.blocks_used[separated])
    assert np.all(early.blocks_used <= plain.blocks_used)
    assert np.mean(early.blocks_used[~separated]) < np.mean(plain.blocks_used[~separated])


def test_a_run_shorter_than_max_blocks_stays_undecided():
    result = replay_stop_rule(np.array([True, True, False]), np.array([True, True, False]), StopRule(10))
    assert list(result.verdicts) == ["undecided"] and list(result.blocks_used) == [3]


def test_huge_evidence_reports_an_infinite_e_value_not_an_overflow():
    test = PairedSequentialTest(StopRule(5000, alpha=1e-300), blocks=3000, a_wins=3000)
    assert math.isinf(test.e_value) and test.log_e_value > 709


@pytest.mark.parametrize("kwargs, error, match", [
    ({"max_blocks": 0}, ValueError, "max_blocks must be >= 1"),
    ({"max_blocks": 10, "alpha": 1.5}, ValueError, r"alpha must be in \(0, 1\)"),
    ({"max_blocks": 10, "alpha": 0.0}, ValueError, r"alpha must be in \(0, 1\)"),
    ({"max_blocks": 10, "alpha": 5}, ValueError, r"0.05, not 5"),
    ({"max_blocks": 10, "stop_when_out_of_reach": "yes"}, TypeError, "True or False"),
    ({"max_blocks": 2.5}, TypeError, "integer count"),
])
def test_a_bad_stop_rule_is_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        StopRule(**kwargs)


def test_only_complete_blocks_of_real_outcomes_update_the_test():
    test = PairedSequentialTest(StopRule(10))
    with pytest.raises(TypeError, match="complete PairedBlocks"):
        test.after((True, None))
    with pytest.raises(TypeError, match="not an outcome"):
        test.after(PairedBlock(True, None))
    with pytest.raises(TypeError, match="boolean arrays"):
        replay_stop_rule(np.array([1.0, np.nan]), np.array([0.0, 1.0]), StopRule(10))
    with pytest.raises(ValueError, match="share a"):
        replay_stop_rule(np.ones(3, bool), np.ones(4, bool), StopRule(10))


def test_an_inconsistent_state_cannot_be_built():
    with pytest.raises(ValueError, match="exceed 3 blocks"):
        PairedSequentialTest(StopRule(10), blocks=3, a_wins=2, b_wins=2)
    with pytest.raises(ValueError, match="exceed max_blocks"):
        PairedSequentialTest(StopRule(10), blocks=11)
    with pytest.raises(ValueError, match="stopped_at is set exactly"):
        PairedSequentialTest(StopRule(10), blocks=5, verdict=Verdict.A_BETTER)
    with pytest.raises(ValueError, match="unknown verdict"):
        PairedSequentialTest(StopRule(10), verdict="a_wins")
