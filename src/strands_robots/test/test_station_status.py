"""Job snapshots and aggregates (station/status.py)."""

import pytest

from strands_robots.station.model import (
    AnswerType,
    EpisodeResult,
    JobState,
    ScoredItem,
    ScoringItemDefinition,
    ScoringSheet,
    Task,
)
from strands_robots.station.status import aggregate, make_snapshot

TASK = Task("t", "do", scoring=ScoringSheet((ScoringItemDefinition("ok", "Ok?", AnswerType.YES_NO, 1.0,
                                                                    success_answer="yes"),)))


def episode(i, *, scored=True, success=True, score=1.0, taken_over=False, end="timeout"):
    items = (ScoredItem("ok", "Ok?", AnswerType.YES_NO, success, score, 1.0, True),) if scored else ()
    return EpisodeResult(f"ep_{i:04d}", end, scored, success if scored else False, score if scored else 0.0,
                         items, TASK, taken_over, "")


def test_rates_leave_out_taken_over_and_unscored_episodes():
    episodes = [
        episode(0, success=True, score=1.0),
        episode(1, success=False, score=0.25),
        episode(2, success=True, score=1.0, taken_over=True),   # not the policy's alone
        episode(3, scored=False, end="start_pose_unreached"),    # nothing to count
        episode(4, success=False, score=0.0, taken_over=True),
    ]
    agg = aggregate(episodes)
    assert (agg.finished, agg.scored, agg.taken_over, agg.counted, agg.successes) == (5, 4, 2, 2, 1)
    assert agg.success_rate == 0.5
    assert agg.mean_score == pytest.approx(0.625)
    assert dict(agg.end_conditions) == {"timeout": 4, "start_pose_unreached": 1}


def test_rates_are_none_when_no_episode_counts():
    agg = aggregate([episode(0, taken_over=True), episode(1, scored=False)])
    assert agg.counted == 0 and agg.success_rate is None and agg.mean_score is None
    assert aggregate([]).finished == 0


def test_snapshot_is_stamped_by_the_station_clock_not_the_caller():
    calls = []

    def clock():
        calls.append(1)
        return 1_700_000_000_123

    status = make_snapshot(job_id="j", station_id="s", state=JobState.RUNNING, episodes_total=3,
                           episodes=[episode(0)], message="ep_0001 running", clock_ms=clock)
    assert status.updated_unix_ms == 1_700_000_000_123 and len(calls) == 1
    assert status.state is JobState.RUNNING and status.state == "RUNNING"  # the spec's string
    assert isinstance(status.episodes, tuple) and status.episodes[0].episode_id == "ep_0000"
    with pytest.raises(ValueError):
        make_snapshot(job_id="j", station_id="s", state="RUNNING", episodes_total=1, episodes=(), message="")
