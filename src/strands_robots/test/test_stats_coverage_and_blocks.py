"""Coverage puts every attempted episode in exactly one bucket; a block holds only real outcomes."""

from __future__ import annotations

import numpy as np
import pytest

from strands_robots.stats.blocks import Block, PairedBlock
from strands_robots.stats.coverage import Coverage, Disposition

EPISODES = [("ep0", "scored"), ("ep1", Disposition.FAULTED), ("ep2", "scored"), ("ep3", "discarded"),
            ("ep4", "taken_over"), ("ep5", "scored"), ("ep6", "unscored"), ("ep7", "safety_stopped"),
            ("ep8", "interrupted")]


def test_every_attempted_episode_is_counted_once_and_attempted_is_their_sum():
    coverage = Coverage.tally(EPISODES)
    assert coverage.scored == ("ep0", "ep2", "ep5")
    assert coverage.attempted == 9 and coverage.not_scored == 6
    assert coverage.counts() == {Disposition.SCORED: 3, Disposition.FAULTED: 1, Disposition.SAFETY_STOPPED: 1,
                                 Disposition.DISCARDED: 1, Disposition.TAKEN_OVER: 1, Disposition.UNSCORED: 1,
                                 Disposition.INTERRUPTED: 1}
    assert {coverage.disposition_of(ep) for ep, _ in EPISODES} == set(Disposition)
    assert coverage.text() == ("scored 3 of 9 attempted (faulted 1, safety stopped 1, discarded 1, taken over 1, "
                               "unscored 1, interrupted 1)")


def test_coverage_rate_is_scored_of_attempted_with_its_interval():
    rate = Coverage.tally(dict(EPISODES)).rate()
    assert (rate.successes, rate.trials) == (3, 9) and rate.low < 3 / 9 < rate.high


def test_an_episode_in_two_buckets_is_refused():
    with pytest.raises(ValueError, match="'ep1' is in scored and faulted: an episode lands in exactly one"):
        Coverage(scored=("ep0", "ep1"), faulted=("ep1",))
    with pytest.raises(ValueError, match="listed twice in scored"):
        Coverage.tally([("ep0", "scored"), ("ep0", "scored")])
    with pytest.raises(ValueError, match="'ep0' is in scored and discarded"):
        Coverage.tally([("ep0", "scored"), ("ep0", "discarded")])


def test_unknown_dispositions_and_bad_ids_are_refused():
    with pytest.raises(ValueError, match="unknown disposition 'lost'"):
        Coverage.tally([("ep0", "lost")])
    with pytest.raises(ValueError, match="non-empty strings"):
        Coverage.tally([("", "scored")])
    with pytest.raises(TypeError, match="tuple of episode ids"):
        Coverage(scored="ep0")
    with pytest.raises(KeyError, match="was not attempted"):
        Coverage.tally(EPISODES).disposition_of("ep99")


def test_no_episodes_is_zero_attempted_with_no_rate():
    empty = Coverage()
    assert empty.attempted == 0 and not empty.rate().has_interval


@pytest.mark.parametrize("not_an_outcome", [None, 0, 1, "success", 0.0, "faulted"])
def test_a_paired_block_takes_only_true_or_false(not_an_outcome):
    with pytest.raises(TypeError, match="not an outcome"):
        PairedBlock(not_an_outcome, True)
    with pytest.raises(TypeError, match="not an outcome"):
        PairedBlock(False, not_an_outcome)
    with pytest.raises(TypeError, match="not an outcome"):
        Block({"a": True, "b": not_an_outcome})


def test_numpy_booleans_are_real_outcomes_stored_as_bool():
    block = PairedBlock(np.bool_(True), np.bool_(False), "task-1/seed-3")
    assert block.a_success is True and block.b_success is False and block.discordant


def test_a_block_needs_two_named_policies_and_pairs_them_either_way():
    block = Block({"vision": True, "blind": False}, "t/7")
    assert block.policies == ("blind", "vision")
    assert block.pair("vision", "blind") == PairedBlock(True, False, "t/7")
    assert block.pair("blind", "vision") == PairedBlock(False, True, "t/7")
    with pytest.raises(ValueError, match="at least two policies"):
        Block({"vision": True})
    with pytest.raises(KeyError, match="'other' is not in block"):
        block.pair("vision", "other")
    with pytest.raises(ValueError, match="two different policies"):
        block.pair("vision", "vision")
    with pytest.raises(TypeError):
        block.outcomes["vision"] = False  # read-only once made
