"""The station operator: takeover, resume, arm claims, discard and score sheets — and a scripted operator.

:class:`OperatorConsole` is the one validated entry point for operator actions during a job; the station
node's services (Takeover, Resume, Discard, SubmitScoreSheet) and :class:`ScriptedOperator` both go through
it, so a scripted run obeys the same rules as a person at the station:

- **takeover** only while a rollout runs and no takeover is in force: the arms are the operator's and the
  rollout time stands still (the budget clock pauses); the episode is marked ``taken_over`` for good;
- **resume** only during a takeover, and only by the operator who took over or a supervisor (the station's
  configured list of supervisor operator names): the policy's ``resume()`` runs and control restarts from the
  arms' current state, never a stale command (the rollout loop does that on resume);
- **claim** only while a rollout runs: the operator takes the arms with a higher-priority lease, and the
  episode ends ``authority_lost``;
- **discard** only a taken-over episode, after its rollout (awaiting its sheet) or during it (the rollout
  stops at once): it is left out of the job's episodes and its task runs again as a new episode;
- **submit a score sheet** only for the finished episode awaiting its sheet; every item answered exactly
  once, with the right type (a refusal names the item and the reason; the operator may submit again);
- **skip scoring**: the episode is kept unscored;
- **clear a safety stop** only while an episode waits on one (``station.safety_gate``): the request is handed
  to the waiting episode, which relays it to the driver naming the operator; the station never clears a stop
  by itself.

Every call answers an :class:`OperatorReply` with the reason when refused. Thread-safe: services and the
procedure call it from different threads, and no call holds the console's lock while the robot side answers
(pause, resume, claim may take seconds): a node's service callback can hand that part to a worker and answer
at once (``hand_off``).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Tuple

from strands_robots.station.job import EpisodePlan
from strands_robots.station.limits import IDENTIFIER_MAX, OPERATOR_TEXT_MAX
from strands_robots.station.model import AnswerType, OperatorReply, ScoringSheet
from strands_robots.station.safety_gate import SafetyGate
from strands_robots.station.score_sheet import ScoreSheetError, SheetScore, parse_answer, score_answers
from strands_robots.station.success_predicate import SuccessPredicate, parse_success_predicate

__all__ = [
    "OperatorReply",
    "OperatorConsole",
    "Decision",
    "DECISION_SCORED",
    "DECISION_UNSCORED",
    "DECISION_DISCARD",
    "DECISION_CANCELLED",
    "DECISION_TIMEOUT",
    "PendingEpisode",
    "ScriptedOperator",
    "PARAM_TAKEOVER_AT_S",
    "PARAM_TAKEOVER_FOR_S",
    "PARAM_CLAIM_AT_S",
    "PARAM_DISCARD",
    "PARAM_SCORE",
    "PARAM_SUCCESS_WHEN",
    "PARAM_ANSWER_PREFIX",
]

DECISION_SCORED = "scored"
DECISION_UNSCORED = "unscored"
DECISION_DISCARD = "discard"
DECISION_CANCELLED = "cancelled"
DECISION_TIMEOUT = "timeout"

#: Runs a callable on another thread (the station node's operator worker); raises when it cannot take it.
HandOff = Callable[[Callable[[], None]], None]

_IDLE = "idle"
_PREPARING = "preparing"
_ROLLOUT = "rollout"
_SCORING = "scoring"
_PHASE_WORDS = {_IDLE: "idle", _PREPARING: "being prepared (lease, start pose)", _ROLLOUT: "running its rollout",
                _SCORING: "awaiting its score sheet"}


@dataclass(frozen=True)
class Decision:
    """What the operator decided for a finished episode (``kind`` is one of ``DECISION_*``)."""

    kind: str
    sheet: Optional[SheetScore] = None
    message: str = ""


@dataclass(frozen=True)
class PendingEpisode:
    """A finished rollout awaiting the operator's sheet: what the operator sees before answering."""

    episode_id: str
    plan: EpisodePlan
    end_condition: str
    end_detail: str
    run_id: str
    taken_over: bool


class OperatorConsole:
    """Operator actions for the episode the station is running (one at a time).

    :param robot: the station's robot port (``pause_rollout``, ``resume_rollout``, ``claim_arms``).
    :param on_action: called with the message of every accepted action, outside the console's lock (the job
        runner makes it the job's progress message).
    :param supervisors: operator names that may resume anyone's takeover (others resume only their own).
    """

    def __init__(self, robot: Any, on_action: Optional[Callable[[str], None]] = None,
                 supervisors: Iterable[str] = ()) -> None:
        self._robot = robot
        self._on_action = on_action
        self._supervisors = frozenset(n.strip() for n in supervisors if isinstance(n, str) and n.strip())
        self._takeover_by = ""
        self.safety = SafetyGate()  # where the procedure waits for an operator to clear a safety stop
        self._cond = threading.Condition()
        self._phase = _IDLE
        self._episode_id = ""
        self._sheet: Optional[ScoringSheet] = None
        self._taken_over = False
        self._in_takeover = False
        self._claimed_by = ""
        self._decision: Optional[Decision] = None
        self._cancelled = False
        self._busy = ""  # the action whose robot call is under way (the lock is released meanwhile)

    # -- what the procedure calls ---------------------------------------------------------------------------
    def begin_episode(self, episode_id: str, sheet: ScoringSheet) -> None:
        """Start the console's record of ``episode_id`` (lease and start pose come next)."""
        with self._cond:
            self._phase = _PREPARING
            self._episode_id = episode_id
            self._sheet = sheet
            self._taken_over = False
            self._in_takeover = False
            self._takeover_by = ""
            self._claimed_by = ""
            self._decision = None

    def rollout_started(self) -> None:
        """Open takeover, resume and claim: the rollout runs."""
        with self._cond:
            self._phase = _ROLLOUT

    def rollout_ended(self) -> bool:
        """Mark the rollout over (the episode awaits its sheet); return whether it was taken over."""
        with self._cond:
            self._phase = _SCORING
            self._in_takeover = False
            return self._taken_over

    def end_episode(self) -> None:
        """Close the episode: every action refers to nothing until the next :meth:`begin_episode`."""
        with self._cond:
            self._phase = _IDLE
            self._episode_id = ""
            self._sheet = None
            self._decision = None
            self._cond.notify_all()

    def cancel(self) -> None:
        """Cancel the job: any wait for a decision ends at once."""
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()
        self.safety.cancel()

    def wait_decision(self, timeout_s: Optional[float] = None) -> Decision:
        """Block until the operator decides, the job is cancelled, or ``timeout_s`` passes (None: no limit)."""
        with self._cond:
            ended = self._cond.wait_for(lambda: self._decision is not None or self._cancelled, timeout_s)
            if self._decision is not None:
                return self._decision
            if self._cancelled:
                return Decision(DECISION_CANCELLED, message="job cancelled while waiting for the score sheet")
            assert not ended
            return Decision(DECISION_TIMEOUT, message=f"no score sheet within {timeout_s:g} s")

    @property
    def episode_id(self) -> str:
        """The current episode's id (empty between episodes)."""
        with self._cond:
            return self._episode_id

    @property
    def taken_over(self) -> bool:
        """Whether the current episode was taken over at some point."""
        with self._cond:
            return self._taken_over

    @property
    def in_takeover(self) -> bool:
        """Whether a takeover is in force now."""
        with self._cond:
            return self._in_takeover

    @property
    def claimed_by(self) -> str:
        """The operator who claimed the arms during the current episode, if any."""
        with self._cond:
            return self._claimed_by

    # -- operator actions -----------------------------------------------------------------------------------
    def takeover(self, operator_name: str, reason: str = "", hand_off: Optional[HandOff] = None) -> OperatorReply:
        """Take the arms over; the rollout clock stands still until :meth:`resume`.

        ``hand_off``: answer at once and pause the rollout on another thread (see :meth:`_robot_action`).
        """
        name = operator_name.strip() if isinstance(operator_name, str) else ""

        def begin() -> str:
            if not name:
                return "operator_name must be a non-empty string"
            if _operator_text_refusal(name, reason if isinstance(reason, str) else ""):
                return _operator_text_refusal(name, reason if isinstance(reason, str) else "")
            if self._phase != _ROLLOUT:
                return (f"no rollout is running (episode {self._episode_id or 'none'} is "
                        f"{_PHASE_WORDS[self._phase]}); a takeover needs a running rollout")
            if self._in_takeover:
                return f"a takeover of {self._episode_id} is already in force"
            return ""

        def finish(ok: bool, detail: str) -> OperatorReply:
            if not ok:
                return OperatorReply(False, f"the rollout could not be paused: {detail}")
            self._taken_over = True
            self._in_takeover = True
            self._takeover_by = name
            why = f" ({reason})" if reason else ""
            return OperatorReply(True, f"{operator_name} took over {self._episode_id}{why}; rollout time stands "
                                       "still")

        return self._robot_action(f"{name}'s takeover", begin, self._robot.pause_rollout, finish, hand_off)

    def resume(self, operator_name: str, hand_off: Optional[HandOff] = None) -> OperatorReply:
        """Hand the arms back: the policy's ``resume()`` runs and control restarts from the current state."""
        name = operator_name.strip() if isinstance(operator_name, str) else ""

        def begin() -> str:
            if not name:
                return "operator_name must be a non-empty string"
            if _operator_text_refusal(name):
                return _operator_text_refusal(name)
            if self._phase != _ROLLOUT or not self._in_takeover:
                return "no takeover is in force"
            owner = self._takeover_by
            if name != owner and name not in self._supervisors:
                supervisors = ", ".join(sorted(self._supervisors)) or "none configured"
                return (f"{name} may not resume {owner}'s takeover of {self._episode_id}: only {owner} or a "
                        f"supervisor ({supervisors}) may")
            return ""

        def finish(ok: bool, detail: str) -> OperatorReply:
            if not ok:
                return OperatorReply(False, f"the rollout could not be resumed: {detail}")
            owner = self._takeover_by
            self._in_takeover = False
            whose = "" if name == owner else f" (taken over by {owner}; resumed as a supervisor)"
            return OperatorReply(True, f"{name} handed {self._episode_id} back to the policy{whose}")

        return self._robot_action(f"{name}'s resume", begin, self._robot.resume_rollout, finish, hand_off)

    def clear_safety_stop(self, operator_name: str) -> OperatorReply:
        """Ask to clear the safety stop the episode waits on; answers at once (see ``station.safety_gate``)."""
        if isinstance(operator_name, str) and _operator_text_refusal(operator_name):
            return OperatorReply(False, _operator_text_refusal(operator_name))
        return self._notify(self.safety.request_clear(operator_name))

    def claim_arms(self, operator_name: str, hand_off: Optional[HandOff] = None) -> OperatorReply:
        """Hold the arms with a higher-priority lease: the episode ends ``authority_lost``."""
        name = operator_name.strip() if isinstance(operator_name, str) else ""

        def begin() -> str:
            if not name:
                return "operator_name must be a non-empty string"
            if _operator_text_refusal(name):
                return _operator_text_refusal(name)
            if self._phase != _ROLLOUT:
                return "no rollout is running; a claim needs a running rollout"
            return ""

        def finish(ok: bool, detail: str) -> OperatorReply:
            if not ok:
                return OperatorReply(False, f"the claim was refused: {detail}")
            self._claimed_by = operator_name
            return OperatorReply(True, f"{operator_name} holds the arms: {detail}")

        return self._robot_action(f"{name}'s claim", begin, lambda: self._robot.claim_arms(operator_name), finish,
                                  hand_off)

    def _robot_action(self, what: str, begin: Callable[[], str], call: Callable[[], Tuple[bool, str]],
                      finish: Callable[[bool, str], OperatorReply], hand_off: Optional[HandOff]) -> OperatorReply:
        """Run an action whose robot call may take seconds without holding the console's lock across it.

        ``begin()`` checks the action under the lock ("" or the refusal). ``call()`` asks the robot with the lock
        released, so the procedure, scoring and other operators go on meanwhile; one such call at a time (another
        action needing one is refused until it is answered). ``finish(ok, detail)`` applies the answer under the
        lock if the episode it was asked for still runs its rollout. Without ``hand_off`` this waits for the
        answer and returns the reply (an accepted one becomes the job's message). With ``hand_off`` (runs a
        callable on another thread, e.g. the station node's operator worker) it answers at once that the action
        is under way, and the outcome, accepted or refused, becomes the job's message when it comes.
        """
        with self._cond:
            refusal = begin()
            if not refusal and self._busy:
                refusal = f"{self._busy} is under way; try again once it is answered"
            if refusal:
                return OperatorReply(False, refusal)
            episode = self._episode_id
            self._busy = f"{what} of {episode}"

        def run() -> OperatorReply:
            try:
                ok, detail = call()
            except Exception as exc:  # a port failure is a refusal with its reason, never a console left busy
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            with self._cond:
                self._busy = ""
                if self._phase != _ROLLOUT or self._episode_id != episode:
                    return OperatorReply(False, f"{what}: the rollout of {episode} ended before the answer came")
                return finish(ok, detail)

        if hand_off is None:
            return self._notify(run())
        try:
            hand_off(lambda: self._report(run()))
        except Exception as exc:  # the worker refused it (full, closing): nothing was asked of the robot
            with self._cond:
                self._busy = ""
            return OperatorReply(False, f"{what} could not be started: {exc}")
        return OperatorReply(True, f"{what} of {episode} is under way; the job's message says how it went")

    def _report(self, reply: OperatorReply) -> None:
        """Make a handed-off action's outcome, accepted or refused, the job's message."""
        if self._on_action is not None:
            self._on_action(reply.message if reply.ok else f"refused: {reply.message}")

    def discard(self, episode_id: str) -> OperatorReply:
        """Leave a taken-over episode out of the job; its task runs again as a new episode.

        Allowed for the episode awaiting its sheet, and during the rollout once it was taken over (the rollout
        is then stopped at once: the operator need not hand back a ruined episode).
        """
        return self._notify(self._discard(episode_id))

    def _discard(self, episode_id: str) -> OperatorReply:
        with self._cond:
            if self._phase == _ROLLOUT and episode_id == self._episode_id and self._decision is None:
                if not self._taken_over:
                    return OperatorReply(False, f"{episode_id} was not taken over; only a taken-over episode can "
                                                "be discarded")
                self._decide(Decision(DECISION_DISCARD, message=f"{episode_id} discarded during its takeover"))
                self._robot.stop_rollout("discarded by the operator")
                return OperatorReply(True, f"{episode_id} discarded; its rollout stops and its task runs again as "
                                           "a new episode")
            refusal = self._scoring_refusal(episode_id)
            if refusal:
                return OperatorReply(False, refusal)
            if not self._taken_over:
                return OperatorReply(False, f"{episode_id} was not taken over; only a taken-over episode can be "
                                            "discarded")
            self._decide(Decision(DECISION_DISCARD, message=f"{episode_id} discarded by the operator"))
            return OperatorReply(True, f"{episode_id} discarded; its task runs again as a new episode")

    @property
    def decision(self) -> Optional[Decision]:
        """The decision already made for the current episode, if any."""
        with self._cond:
            return self._decision

    def submit_score_sheet(self, episode_id: str, answers: Any) -> OperatorReply:
        """Score the episode awaiting its sheet.

        :param answers: ``{name: answer}`` or ``(name, answer)`` pairs, typed (bool / int) or as text ("yes",
            "3", a choice).
        """
        return self._notify(self._submit_score_sheet(episode_id, answers))

    def _submit_score_sheet(self, episode_id: str, answers: Any) -> OperatorReply:
        with self._cond:
            refusal = self._scoring_refusal(episode_id)
            if refusal:
                return OperatorReply(False, refusal)
            sheet = self._sheet
            assert sheet is not None
            try:
                result = score_answers(sheet, _typed_answers(sheet, answers))
            except ScoreSheetError as exc:
                return OperatorReply(False, f"score sheet refused: {exc}")
            self._decide(Decision(DECISION_SCORED, sheet=result))
            return OperatorReply(True, f"{episode_id} scored {result.score:.2f} "
                                       f"({'success' if result.success else 'no success'})")

    def skip_scoring(self, episode_id: str, reason: str = "") -> OperatorReply:
        """Keep the episode awaiting its sheet unscored."""
        return self._notify(self._skip_scoring(episode_id, reason))

    def _skip_scoring(self, episode_id: str, reason: str = "") -> OperatorReply:
        if isinstance(reason, str) and _operator_text_refusal("", reason):
            return OperatorReply(False, _operator_text_refusal("", reason))
        with self._cond:
            refusal = self._scoring_refusal(episode_id)
            if refusal:
                return OperatorReply(False, refusal)
            self._decide(Decision(DECISION_UNSCORED, message=reason or "the operator did not score it"))
            return OperatorReply(True, f"{episode_id} kept unscored")

    # -- internals ------------------------------------------------------------------------------------------
    def _notify(self, reply: OperatorReply) -> OperatorReply:
        if reply.ok and self._on_action is not None:
            self._on_action(reply.message)
        return reply

    def _scoring_refusal(self, episode_id: str) -> str:
        if self._phase != _SCORING:
            if self._episode_id:
                return f"no episode awaits a score sheet ({self._episode_id} is {_PHASE_WORDS[self._phase]})"
            return "no episode awaits a score sheet"
        if episode_id != self._episode_id:
            return f"episode {episode_id!r} does not await a score sheet; {self._episode_id} does"
        if self._decision is not None:
            return f"{episode_id} was already decided ({self._decision.kind})"
        return ""

    def _decide(self, decision: Decision) -> None:
        self._decision = decision
        self._cond.notify_all()



def _operator_text_refusal(name: str, reason: str = "") -> str:
    """Say why an operator's name or free text is refused ("" when both fit their limits)."""
    if len(name) > IDENTIFIER_MAX:
        return f"operator_name is {len(name)} characters long; at most {IDENTIFIER_MAX} are allowed"
    if len(reason) > OPERATOR_TEXT_MAX:
        return f"reason is {len(reason)} characters long; at most {OPERATOR_TEXT_MAX} are allowed"
    return ""


def _typed_answers(sheet: ScoringSheet, answers: Any) -> list:
    """Answers with text converted by each item's type (typed answers pass through for validation)."""
    by_name = {item.name: item for item in sheet.items}
    pairs = list(answers.items()) if isinstance(answers, Mapping) else list(answers)
    out = []
    for pair in pairs:
        if isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], str) and pair[0] in by_name:
            out.append((pair[0], parse_answer(by_name[pair[0]], pair[1])))
        else:
            out.append(pair)
    return out


# -- the scripted operator --------------------------------------------------------------------------------------
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
    - the sheet: the success item answered from the success predicate on the final state (``success_when``,
      default ``end_condition == policy_completed``), other items from ``answer.<item>`` (text) or, without
      one, yes_no = success, count = 0, choice = index 0.

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
        predicate = self._predicate or parse_success_predicate(params.get(PARAM_SUCCESS_WHEN, _DEFAULT_SUCCESS))
        if "object_distance_m" in params.get(PARAM_SUCCESS_WHEN, ""):  # the vision task: measured from the joints
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
        sheet = plan.task.scoring
        params = plan.task.parameters
        out = []
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
