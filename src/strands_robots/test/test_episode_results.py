"""How a rollout's outcome becomes an episode's result (station/episode_results.py): judged without a job."""

from __future__ import annotations

from strands_robots.station.episode_results import end_detail_for, judge, kept_count, trailing_faults
from strands_robots.station.model import EpisodeResult
from strands_robots.station.ports import RolloutOutcome


def _episode(episode_id: str, end_condition: str) -> EpisodeResult:
    return EpisodeResult(episode_id=episode_id, end_condition=end_condition, scored=False, success=False, score=0.0,
                         items=(), task=None, taken_over=False, end_detail="")


def test_an_outcome_is_an_end_condition_a_station_fault_a_policy_error_or_a_failure():
    assert judge(RolloutOutcome("budget")) == ("ended", "timeout")
    assert judge(RolloutOutcome("cancelled", end_condition="lease_lost")) == ("ended", "lease_lost")
    # the station's own infrastructure: its cause, the most specific first
    assert judge(RolloutOutcome("error", error_type="DriverSilent", end_detail="driver silent 0.5 s",
                                run_id="r1")) == ("fault", "driver silent 0.5 s")
    assert judge(RolloutOutcome("error", infrastructure="the rollout node died", end_detail="x")) \
        == ("fault", "the rollout node died")
    assert judge(RolloutOutcome("cancelled", policy_lost=True)) == ("fault", "cancelled")
    # a policy's own error in a rollout that ran is its episode; an error before any rollout ran is no episode
    assert judge(RolloutOutcome("error", error_type="ValueError", run_id="r2")) == ("ended", "policy_error")
    verdict, reason = judge(RolloutOutcome("error", error_type="GoalRejected", end_detail="goal refused"))
    assert verdict == "failed" and "without an end condition" in reason and "goal refused" in reason


def test_end_detail_is_empty_for_a_timeout_named_for_a_silent_safety_stop_and_cut_to_its_limit():
    assert end_detail_for("timeout", "budget of 4 s elapsed") == ""
    assert end_detail_for("safety_stop", "") == "the driver stopped the arms without naming a check"
    long = end_detail_for("policy_error", "x" * 100_000)
    assert 0 < len(long) < 100_000 and long.startswith("xxx")


def test_kept_episodes_leave_out_station_faults_and_trailing_faults_count_the_current_tasks_reruns():
    episodes = (_episode("ep_0000", "timeout"), _episode("ep_0001", "infrastructure_fault"),
                _episode("ep_0002", "policy_completed"), _episode("ep_0003", "infrastructure_fault"),
                _episode("ep_0004", "infrastructure_fault"))
    assert kept_count(episodes) == 2
    assert trailing_faults(episodes) == 2
    assert trailing_faults(episodes[:3]) == 0
