"""The station operator: takeover, resume, arm claims, discard and score sheets.

:class:`OperatorConsole` is the one validated entry point for operator actions during a job; the station
node's services (Takeover, Resume, Discard, SubmitScoreSheet) and the scripted operator
(``station.scripted_operator``) both go through it, so a scripted run obeys the same rules as a person at the
station:

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

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Tuple

from strands_robots.station.job import EpisodePlan
from strands_robots.station.limits import IDENTIFIER_MAX, OPERATOR_TEXT_MAX
from strands_robots.station.model import OperatorReply, ScoringSheet
from strands_robots.station.safety_gate import SafetyGate
from strands_robots.station.score_sheet import ScoreSheetError, SheetScore, parse_answer, score_answers

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
    judgement: Any = None  # both meanings of its success (station.success_judgement.Judgement); None: no predicate


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
