"""One episode's steps, in order, over the injected ports (no ROS here).

:func:`run_episode` runs one planned episode for :class:`~strands_robots.station.episodes.JobRunner`::

    the operator is told          a task it refuses fails the job
    acquire the lease             held by another -> wait (station.arms, bounded), then FAILED; never an episode
    a safety stop in force        wait until an operator clears it (station.safety_gate); the station never does
    move to the start pose        not reached -> start_pose_unreached, no rollout
    rollout                       the operator may take over / resume / claim the arms meanwhile
    release the lease             always, whatever ended the episode; on a cancel the release says so (real
                                  arms then hold and stay stopped until an operator clears them)
    score sheet                   the operator scores it, keeps it unscored, or discards a taken-over one

and says what the episode became: ``("kept", EpisodeResult)``, ``("discarded", None)``, ``("fault",
(EpisodeResult, policy_lost))``, ``("cancelled", None)`` or ``("failed", reason)``; the runner files it. A port
that raises mid-rollout never leaves the rollout node running this episode: the rollout is stopped, the lease
released, and the error goes on to the runner.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional, Tuple

from strands_robots.arm.lease import station_holder
from strands_robots.station.arms import acquire_arms
from strands_robots.station.episode_results import (
    end_detail_for,
    fault_result,
    judge,
    judge_success,
    kept_result,
    unscored_result,
)
from strands_robots.station.job import EpisodePlan
from strands_robots.station.model import END_START_POSE_UNREACHED
from strands_robots.station.operator import (
    DECISION_CANCELLED,
    DECISION_DISCARD,
    DECISION_SCORED,
    OperatorConsole,
    PendingEpisode,
)
from strands_robots.station.ports import InfrastructureFault, OperatorPort, RobotPort, RolloutOutcome
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.safety_gate import clear_before_episode

_log = logging.getLogger("strands_robots.station")

__all__ = ["run_episode", "CANCELLED_STOP_REASON"]

# What the lease's release says when the job was cancelled (or suspended) while the episode held the arms.
CANCELLED_STOP_REASON = "the job was cancelled"


def run_episode(plan: EpisodePlan, robot: RobotPort, operator: OperatorPort, console: OperatorConsole,
                settings: ProcedureSettings, station_id: str, cancel: threading.Event, *,
                say: Callable[[str], None], note: Callable[[str], None]) -> Tuple[str, Any]:
    """Run one episode (see the module docstring).

    :param cancel: set when the job is cancelled or suspended; the episode ends at its next step.
    :param say: makes an accepted operator action (or a wait) the job's progress message.
    :param note: sets the job's progress message (the episode's own news).
    :returns: ("kept", EpisodeResult) / ("discarded", None) / ("fault", (EpisodeResult, policy_lost)) /
        ("cancelled", None) / ("failed", reason).
    """
    console.begin_episode(plan.episode_id, plan.task.scoring)
    try:
        try:
            operator.episode_started(plan, console)
        except ValueError as exc:
            return "failed", f"{plan.episode_id}: task {plan.task.task_id!r} refused by the operator: {exc}"
        s = settings
        try:  # while another holder has the arms the episode waits (bounded): never an unplayed result
            got, detail = acquire_arms(robot, s.lease_holder or station_holder(station_id),
                                       s.lease_priority, s.lease_duration_s, wait_s=s.lease_wait_s,
                                       cancelled=cancel, say=say, episode_id=plan.episode_id)
        except InfrastructureFault as exc:
            return "fault", (fault_result(plan, f"the arms could not be claimed: {exc}"), False)
        if got != "granted":
            return ("cancelled", None) if got == "cancelled" else ("failed", detail)
        rolled_out = False
        try:
            if cancel.is_set():
                return "cancelled", None
            cleared = _clear_safety_stop(plan, robot, operator, console, say)  # only an operator clears one
            if cleared is None or cancel.is_set():
                return "cancelled", None
            reached, detail = robot.move_to_start_pose(plan)
            if not reached:
                return "kept", unscored_result(plan, END_START_POSE_UNREACHED, detail)
            if cancel.is_set():
                return "cancelled", None
            console.rollout_started()
            rolled_out = True
            outcome = robot.run_rollout(plan, lambda t: operator.rollout_progress(plan, t, console))
        except InfrastructureFault as exc:
            if rolled_out:
                robot.stop_rollout("station fault")
            outcome = RolloutOutcome(stopped_reason="error", infrastructure=str(exc))
        except BaseException:
            if rolled_out:  # whatever failed, the rollout node is not left running this episode
                robot.stop_rollout("station error")
            raise
        finally:
            taken_over = console.rollout_ended()
            robot.release_lease(CANCELLED_STOP_REASON if cancel.is_set() else "")
        taken_over = taken_over or outcome.taken_over
        if cancel.is_set():
            return "cancelled", None
        early = console.decision
        if early is not None and early.kind == DECISION_DISCARD:  # discarded during its takeover
            return "discarded", None
        verdict, end_condition = judge(outcome)  # for a fault its cause, for a failure the reason
        if verdict == "fault":
            return "fault", (fault_result(plan, end_condition, outcome.run_id, taken_over), outcome.policy_lost)
        if verdict == "failed":
            return "failed", f"{plan.episode_id}: {end_condition}"
        end_detail = end_detail_for(end_condition, outcome.end_detail)
        try:
            judgement = judge_success(plan, end_condition, outcome)
        except ValueError as exc:  # the task was checked at submit: a predicate that does not parse is a bug
            return "failed", f"{plan.episode_id}: task {plan.task.task_id!r}: {exc}"
        pending = PendingEpisode(plan.episode_id, plan, end_condition, end_detail, outcome.run_id, taken_over,
                                 judgement)
        note(f"{plan.episode_id} ended ({end_condition}); waiting for the score sheet")
        operator.rollout_ended(pending, dict(outcome.final_observation), console)
        decision = console.wait_decision(s.scoring_timeout_s)
        if decision.kind == DECISION_CANCELLED:
            return "cancelled", None
        if decision.kind == DECISION_DISCARD:
            return "discarded", None
        sheet = decision.sheet if decision.kind == DECISION_SCORED else None
        assert decision.kind != DECISION_SCORED or sheet is not None
        return "kept", kept_result(plan, end_condition, end_detail, outcome, taken_over, sheet, judgement)
    finally:
        console.end_episode()


def _clear_safety_stop(plan: EpisodePlan, robot: RobotPort, operator: OperatorPort, console: OperatorConsole,
                       say: Callable[[str], None]) -> Optional[str]:
    """Wait (no lock held) until an operator cleared the safety stop in force, if one is; None: cancelled."""
    hook = getattr(operator, "safety_stop_waiting", None)
    cleared = clear_before_episode(
        robot, console.safety, say=say, log=_log.warning,
        on_waiting=(lambda detail: hook(plan, detail, console)) if hook is not None else (lambda _d: None))
    if cleared:
        say(f"{plan.episode_id} starting: {cleared}")
    return cleared
