"""The scripted operator: a stand-in for the person at a simulated station, driven by each task's parameters.

It acts through the same :class:`~strands_robots.station.operator.OperatorConsole` a person's actions go
through, so a scripted run obeys the station's rules (``station/operator.py``).
"""

from __future__ import annotations

import math
import threading
from typing import Any, Mapping, Optional

from strands_robots.station.job import EpisodePlan
from strands_robots.station.model import AnswerType, OperatorReply, Task
from strands_robots.station.operator import OperatorConsole, PendingEpisode
from strands_robots.station.score_sheet import ScoreSheetError, parse_answer
from strands_robots.station.success_predicate import SuccessPredicate, parse_success_predicate

__all__ = [
    "ScriptedOperator",
    "PARAM_TAKEOVER_AT_S",
    "PARAM_TAKEOVER_FOR_S",
    "PARAM_CLAIM_AT_S",
    "PARAM_DISCARD",
    "PARAM_SCORE",
    "PARAM_SUCCESS_WHEN",
    "PARAM_ANSWER_PREFIX",
    "scripted_answers",
]

PARAM_TAKEOVER_AT_S = "operator_takeover_at_s"   # take over at this rollout time
PARAM_TAKEOVER_FOR_S = "operator_takeover_for_s"  # hand back after this many wall seconds (default 0.05)
PARAM_CLAIM_AT_S = "operator_claim_at_s"          # claim the arms (authority_lost) at this rollout time
PARAM_DISCARD = "operator_discard"                # "true": discard the taken-over episode (first attempt only)
PARAM_SCORE = "operator_score"                    # "false": keep episodes of this task unscored
PARAM_SUCCESS_WHEN = "success_when"               # the success predicate (parse_success_predicate)
PARAM_ANSWER_PREFIX = "answer."                   # "answer.<item>": the text answer of a non-success item

_DEFAULT_SUCCESS = "end_condition == policy_completed"


def _seconds(params: Mapping[str, str], name: str) -> Optional[float]:
    if name not in params:
        return None
    try:
        value = float(params[name])
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"task parameter {name} must be a finite number >= 0, got {params[name]!r}")
    return value


def _flag(params: Mapping[str, str], name: str, default: bool) -> bool:
    if name not in params:
        return default
    text = params[name].strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise ValueError(f"task parameter {name} must be true or false, got {params[name]!r}")


class ScriptedOperator:
    """A **scripted** stand-in for the person at a simulated station, driven by task parameters.

    Per episode, from its task's parameters:

    - ``operator_takeover_at_s``: take over when the rollout time reaches it; hand back after
      ``operator_takeover_for_s`` wall seconds (default 0.05) from a timer thread;
    - ``operator_discard: "true"``: discard the episode when it was taken over — on the slot's first attempt
      only, so the re-run is kept (with no ``operator_takeover_at_s`` it takes over at 0 s);
    - ``operator_claim_at_s``: claim the arms at that rollout time (the episode ends ``authority_lost``);
    - ``operator_score: "false"``: keep the episode unscored;
    - the sheet: the success item answered from the task's success predicate (``success_when``) as the station
      judged it, at the end or ever as the task's ``headline`` says (``station.success_judgement``; without a
      predicate: ``end_condition == policy_completed``), other items from ``answer.<item>`` (text) or, without
      one, yes_no = success, count = 0, choice = index 0 (:func:`scripted_answers`).

    - a safety stop the next episode waits on: cleared explicitly, under this operator's name (the simulated
      scene is restored; at most ``max_safety_clears`` tries per episode, then it waits for a person).

    Episodes with no rollout (start pose unreached) are not offered to the operator.

    :param success_predicate: replaces ``success_when`` for every task.
    :param name: the operator name used in every action.
    """

    def __init__(self, success_predicate: Optional[SuccessPredicate] = None, *,
                 name: str = "scripted-operator", max_safety_clears: int = 3) -> None:
        self.name = name
        self.max_safety_clears = int(max_safety_clears)
        self._safety_clears = 0
        self._predicate = success_predicate
        self._lock = threading.Lock()
        self._timers: list = []
        self._plan: Optional[EpisodePlan] = None
        self._took_over = False
        self._claimed = False
        self.replies: list = []  # every OperatorReply it got, for the log

    # -- OperatorPort -----------------------------------------------------------------------------------------
    def episode_started(self, plan: EpisodePlan, console: OperatorConsole) -> None:
        params = plan.task.parameters
        # Refuse malformed parameters before anything moves.
        _seconds(params, PARAM_TAKEOVER_AT_S)
        _seconds(params, PARAM_TAKEOVER_FOR_S)
        _seconds(params, PARAM_CLAIM_AT_S)
        _flag(params, PARAM_DISCARD, False)
        _flag(params, PARAM_SCORE, True)
        if self._predicate is None:
            parse_success_predicate(params.get(PARAM_SUCCESS_WHEN, _DEFAULT_SUCCESS))
        items = {item.name: item for item in plan.task.scoring.items}
        for key, text in params.items():
            if not key.startswith(PARAM_ANSWER_PREFIX):
                continue
            name = key[len(PARAM_ANSWER_PREFIX):]
            if name not in items:
                raise ValueError(f"task parameter {key} names no item of the sheet ({', '.join(items)})")
            if name == plan.task.scoring.items[0].name:
                raise ValueError(f"task parameter {key}: the success item is answered from success_when")
            try:
                parse_answer(items[name], text)
            except ScoreSheetError as exc:
                raise ValueError(f"task parameter {key}: {exc.reason}") from None
        with self._lock:
            self._plan = plan
            self._took_over = False
            self._claimed = False
            self._safety_clears = 0

    def safety_stop_waiting(self, plan: EpisodePlan, detail: str, console: OperatorConsole) -> None:
        """Clear the safety stop the episode waits on, explicitly and under this operator's name."""
        with self._lock:
            if self._safety_clears >= self.max_safety_clears:
                return  # the clears were refused: a person has to look at the arms
            self._safety_clears += 1
        self._log(console.clear_safety_stop(self.name))

    def rollout_progress(self, plan: EpisodePlan, rollout_time_s: float, console: OperatorConsole) -> None:
        params = plan.task.parameters
        takeover_at = _seconds(params, PARAM_TAKEOVER_AT_S)
        if takeover_at is None and _flag(params, PARAM_DISCARD, False):
            takeover_at = 0.0
        claim_at = _seconds(params, PARAM_CLAIM_AT_S)
        with self._lock:
            take = takeover_at is not None and not self._took_over and rollout_time_s >= takeover_at
            claim = claim_at is not None and not self._claimed and rollout_time_s >= claim_at
            if take:
                self._took_over = True
            if claim:
                self._claimed = True
        if take:
            reply = console.takeover(self.name, "scripted takeover")
            self._log(reply)
            if reply.ok:
                hold = _seconds(params, PARAM_TAKEOVER_FOR_S)
                timer = threading.Timer(0.05 if hold is None else hold, self._resume,
                                        args=(console, plan.episode_id))
                timer.daemon = True
                with self._lock:
                    self._timers.append(timer)
                timer.start()
        if claim:
            self._log(console.claim_arms(self.name))

    def rollout_ended(self, pending: PendingEpisode, final_observation: Mapping[str, Any],
                      console: OperatorConsole) -> None:
        params = pending.plan.task.parameters
        if pending.taken_over and _flag(params, PARAM_DISCARD, False) and pending.plan.attempt == 0:
            self._log(console.discard(pending.episode_id))
            return
        if not _flag(params, PARAM_SCORE, True):
            self._log(console.skip_scoring(pending.episode_id, "the scripted operator does not score this task"))
            return
        if self._predicate is None and pending.judgement is not None:
            success = bool(pending.judgement.success)  # the task's predicate, judged as its headline says
        else:
            predicate = self._predicate or parse_success_predicate(params.get(PARAM_SUCCESS_WHEN, _DEFAULT_SUCCESS))
            if "object_distance_m" in params.get(PARAM_SUCCESS_WHEN, ""):  # measured from the joints
                from strands_robots.cameras.reach import with_object_distance

                final_observation = with_object_distance(final_observation, params, pending.plan.seed)
            success = bool(predicate(pending, final_observation))
        reply = console.submit_score_sheet(pending.episode_id, self.answers(pending.plan, success))
        self._log(reply)
        if not reply.ok:  # never leave the procedure waiting for a sheet this operator cannot give
            self._log(console.skip_scoring(pending.episode_id, f"the scripted sheet was refused: {reply.message}"))

    # -- answers ----------------------------------------------------------------------------------------------
    def answers(self, plan: EpisodePlan, success: bool) -> list:
        """Answer the sheet as this operator does for a final state judged ``success``."""
        return scripted_answers(plan.task, success)

    def close(self) -> None:
        """Cancel pending hand-back timers."""
        with self._lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()

    def _resume(self, console: OperatorConsole, episode_id: str) -> None:
        if console.episode_id != episode_id:  # that episode already ended (cancelled, discarded): nothing to hand back
            return
        self._log(console.resume(self.name))

    def _log(self, reply: OperatorReply) -> None:
        with self._lock:
            self.replies.append(reply)


def scripted_answers(task: Task, success: bool) -> list:
    """Answer ``task``'s sheet as the scripted operator does for an episode judged ``success``.

    The success item from ``success``; each other item from its ``answer.<item>`` parameter (text) or, without
    one, yes_no = success, count = 0, choice = index 0. ``strands-robots rescore`` answers with it too.
    """
    sheet = task.scoring
    params = task.parameters
    out: list = []
    first = sheet.items[0]
    if first.answer_type is AnswerType.YES_NO:
        out.append((first.name, success == (first.success_answer == "yes")))
    elif first.answer_type is AnswerType.COUNT:
        minimum = int(first.success_answer)
        out.append((first.name, minimum if success else max(0, minimum - 1)))
    else:
        index = first.choices.index(first.success_answer)
        other = next((i for i in range(len(first.choices)) if i != index), index)
        out.append((first.name, index if success else other))
    for item in sheet.items[1:]:
        text = params.get(PARAM_ANSWER_PREFIX + item.name)
        if text is not None:
            out.append((item.name, text))
        elif item.answer_type is AnswerType.YES_NO:
            out.append((item.name, success))
        else:
            out.append((item.name, 0))
    return out
