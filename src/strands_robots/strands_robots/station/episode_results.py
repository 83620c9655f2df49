"""How a rollout's outcome becomes an episode's result, and the counts the job's procedure keeps over them.

End conditions (spec/evaluation-status.txt): ``timeout`` (budget elapsed), ``policy_completed`` (EndEpisode),
``lease_lost`` (lease expired or revoked), ``authority_lost`` (a higher-priority controller or the operator held
the arms), ``safety_stop`` (``end_detail`` names every tripped check, as the driver words them),
``start_pose_unreached`` (no rollout ran). ``end_detail`` is empty for a timeout. Two more, the station's own
(``rollout/end_condition.py``, named in the proto's comments):

- ``policy_error``: the policy failed the rollout itself (an exception in ``act``, a malformed chunk, keys no
  actuator has). It is the policy's episode: kept, scored like any other, never re-run;
- ``infrastructure_fault``: the station's own infrastructure ended it (see :func:`.ports.fault_of`: the arm driver,
  the rollout node or the relay link died, the policy was silent past its deadline). It is kept with the
  reason in ``end_detail``, unscored (so out of the rates), and its task runs again as a new episode id; a
  lost policy session first waits for the policy again (WAITING_POLICY). One task's episode is run again at
  most ``max_infrastructure_retries`` times (``station/procedure_settings.py``); the next fault FAILs the job
  naming the cause.
  Kept episodes that fill the job's ``episodes_total`` are the others (:func:`kept_count`).

No ROS and no state here: ``station/episodes.py`` calls these for each episode it runs.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Tuple

from strands_robots.rollout.end_condition import END_INFRASTRUCTURE_FAULT, END_POLICY_ERROR, end_condition_for
from strands_robots.station.job import EpisodePlan
from strands_robots.station.limits import END_DETAIL_MAX, cut
from strands_robots.station.model import END_CONDITIONS, END_SAFETY_STOP, END_TIMEOUT, EpisodeResult
from strands_robots.station.ports import FAULT_INFRASTRUCTURE, FAULT_POLICY, RolloutOutcome, fault_of
from strands_robots.station.success_judgement import InputReader, Judgement, judge_episode, predicate_of

__all__ = ["kept_count", "trailing_faults", "judge", "end_detail_for", "unscored_result", "fault_result",
           "judge_success", "kept_result"]


def kept_count(episodes: "Tuple[EpisodeResult, ...]") -> int:
    """Count the episodes that fill a job's ``episodes_total`` (every one but ``infrastructure_fault``)."""
    return sum(1 for e in episodes if e.end_condition != END_INFRASTRUCTURE_FAULT)


def trailing_faults(episodes: "Tuple[EpisodeResult, ...]") -> int:
    """Count the ``infrastructure_fault`` episodes since the last kept one: the current task's re-runs."""
    count = 0
    for episode in reversed(episodes):
        if episode.end_condition != END_INFRASTRUCTURE_FAULT:
            break
        count += 1
    return count


def judge(outcome: RolloutOutcome) -> Tuple[str, str]:
    """Say what a rollout's outcome is: ended with an end condition, a station fault, or neither.

    :returns: ``("ended", end_condition)`` (``policy_error`` for a policy's fault), ``("fault", cause)`` for the
        station's own infrastructure, or ``("failed", reason)`` when it ended without an end condition.
    """
    end_condition = outcome.end_condition or end_condition_for(outcome.stopped_reason)
    fault = "" if end_condition in END_CONDITIONS else fault_of(outcome)
    if fault == FAULT_INFRASTRUCTURE:
        return "fault", outcome.infrastructure or outcome.end_detail or outcome.stopped_reason
    if fault == FAULT_POLICY:
        return "ended", END_POLICY_ERROR
    if end_condition not in END_CONDITIONS:
        return "failed", (f"the rollout ended without an end condition (stopped_reason {outcome.stopped_reason!r}: "
                          f"{outcome.end_detail or 'no detail'})")
    return "ended", end_condition


def end_detail_for(end_condition: str, detail: str) -> str:
    """Word how the episode ended, as the station says it; empty when the end condition says it all."""
    if end_condition == END_TIMEOUT:
        return ""
    if end_condition == END_SAFETY_STOP and not detail:
        return "the driver stopped the arms without naming a check"
    return cut(detail, END_DETAIL_MAX)  # a policy's or a driver's text is bounded before it is stored or sent


def unscored_result(plan: EpisodePlan, end_condition: str, detail: str) -> EpisodeResult:
    """Return ``plan``'s episode kept unscored with ``end_condition`` (no rollout ran: e.g. the start pose)."""
    return EpisodeResult(episode_id=plan.episode_id, end_condition=end_condition, scored=False, success=False,
                         score=0.0, items=(), task=plan.task, taken_over=False, end_detail=detail)


def fault_result(plan: EpisodePlan, cause: str, run_id: str = "", taken_over: bool = False) -> EpisodeResult:
    """Return the unscored ``infrastructure_fault`` episode of ``plan``, its cause as ``end_detail``."""
    return EpisodeResult(episode_id=plan.episode_id, end_condition=END_INFRASTRUCTURE_FAULT, scored=False,
                         success=False, score=0.0, items=(), task=plan.task, taken_over=taken_over,
                         end_detail=cut(cause or "the station's infrastructure failed", END_DETAIL_MAX),
                         run_id=run_id)


def judge_success(plan: EpisodePlan, end_condition: str, outcome: RolloutOutcome) -> Optional[Judgement]:
    """Judge the episode's success both ways (:mod:`.success_judgement`); None when its task has no predicate.

    The end judgement reads the predicate's inputs on the rollout's final observation (in its Ended event and
    its recording); a rollout that reported none (it ran before inputs were reported) is judged on the station's
    own final observation, as the scripted operator judged it.
    """
    params = plan.task.parameters
    predicate = predicate_of(params)
    if predicate is None:
        return None
    inputs: Mapping[str, Any] = outcome.end_inputs
    if not inputs and predicate.per_step and outcome.final_observation:
        inputs = InputReader(predicate, params, plan.seed)(outcome.final_observation)
    return judge_episode(params, end_condition, inputs, outcome.success_ever)


def kept_result(plan: EpisodePlan, end_condition: str, end_detail: str, outcome: RolloutOutcome, taken_over: bool,
                sheet: Optional[Any] = None, judgement: Optional[Judgement] = None) -> EpisodeResult:
    """Return the kept episode: scored by ``sheet`` (the operator's score sheet), unscored without one.

    :param judgement: both meanings of its success (:func:`judge_success`); None when its task has no predicate.
    """
    scored = sheet is not None
    return EpisodeResult(
        episode_id=plan.episode_id, end_condition=end_condition, scored=scored,
        success=sheet.success if scored else False, score=sheet.score if scored else 0.0,
        items=sheet.items if scored else (), task=plan.task, taken_over=taken_over, end_detail=end_detail,
        run_id=outcome.run_id, recording_sha256=outcome.recording_sha256,
        success_at_end=judgement.success_at_end if judgement is not None else None,
        success_ever=judgement.success_ever if judgement is not None else None,
        inference_latency_p50_ms=outcome.inference_latency_p50_ms,
        inference_latency_p99_ms=outcome.inference_latency_p99_ms,
        mean_observation_age_steps=outcome.mean_observation_age_steps,
        missed_deadlines=outcome.missed_deadlines if outcome.run_id else None)
