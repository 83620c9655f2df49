"""The comparison job's stop rule, simulated through the station's comparison core with known truth (seeded).

Policies whose success probability is known run comparison jobs through ``station.comparison`` (the state the
station's ``JobRunner`` runs every comparison job by; ``test_station_comparison`` pins that whole jobs through the
runner stop exactly where this core does): equal policies, looked at after every block, are declared different in
at most 5.5 % of 1 000 jobs at alpha 0.05; at 0.8 against 0.4 the better one is named in at least 95 % of 1 000
jobs, using on average at most 70 % of the blocks the fixed-size exact paired test needs for 95 % power.
"""

from __future__ import annotations

import numpy as np
import pytest
from known_rate_port import simulate_comparisons

from strands_robots.stats.paired_power import blocks_needed

RUNS = 1000


@pytest.mark.xdist_group("comparison_simulation")
def test_equal_policies_looked_at_after_every_block_are_declared_different_in_at_most_5_5_percent_of_jobs():
    verdicts, blocks = simulate_comparisons({"a": 0.5, "b": 0.5}, RUNS, 60, seed=30)
    false_winner = np.mean(np.isin(verdicts, ["a_better", "b_better"]))
    assert false_winner <= 0.055
    assert np.mean(verdicts == "not_separated") == pytest.approx(1 - false_winner)
    assert blocks[verdicts == "not_separated"].min() == 60  # none stopped early without out_of_reach


@pytest.mark.xdist_group("comparison_simulation")
def test_at_0_8_against_0_4_the_better_policy_is_named_in_95_percent_of_jobs_with_70_percent_of_fixed_blocks():
    fixed = blocks_needed(0.8, 0.4, alpha=0.05, power=0.95)
    assert 35 <= fixed <= 50  # the fixed-size exact paired test's blocks for 95 % power (about 42)
    verdicts, blocks = simulate_comparisons({"better": 0.8, "worse": 0.4}, RUNS, 2 * fixed, seed=31)
    assert np.mean(verdicts == "a_better") >= 0.95
    assert np.mean(verdicts == "b_better") <= 0.01
    assert blocks.mean() <= 0.70 * fixed
