"""What the status page shows of a job: a frozen value made from the relay's :class:`JobView`, no web, no I/O.

One :class:`JobPage` per job: its state and progress, and a row per finished episode with the end condition,
the score, the sheet as the operator answered it, the safety-stop detail, whether an operator took it over;
the job's figures (success k of n, mean score, coverage), each with its interval, as the station computed them;
a comparison job's result (``client.comparison_view``: each policy's rate with its interval, the paired
difference, the exact test, the stop rule and its verdict, the blocks; blind labels only until the job ends);
and the episode ids the station spent without keeping an episode (it numbers every attempt and never reuses an
id, so a gap in the listed ids is an episode discarded by the operator or interrupted, whose task ran again).
The templates render these values and nothing else, so what a page can show is decided here.

A client sees its own name for the job (``client_job_id``); a station sees the relay's id (what it was sent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from strands_robots.client.comparison_view import ComparisonView, comparison_view, early_stop_text
from strands_robots.relay.job_teams import Held
from strands_robots.relay.store import TERMINAL_STATES, JobView

END_SAFETY_STOP = "safety_stop"
END_INFRASTRUCTURE_FAULT = "infrastructure_fault"

#: What each end condition means, in a few words (spec/evaluation-status.txt and the station's own two).
END_LABELS = {
    "timeout": "ran to its time limit",
    "policy_completed": "the policy said it was done",
    "lease_lost": "the arm lease was lost",
    "authority_lost": "the rollout lost its authority over the arm",
    END_SAFETY_STOP: "a safety stop ended it",
    "start_pose_unreached": "the arm did not reach the start pose",
    "policy_error": "the policy failed (error or malformed chunk)",
    END_INFRASTRUCTURE_FAULT: "a station fault: unscored, its task ran again",
}

_EPISODE_ID = re.compile(r"^ep_(\d{4,})$")


@dataclass(frozen=True)
class Answer:
    """One answered item of an episode's score sheet."""

    name: str
    question: str
    answer: str          # "yes" / "no", the count, the chosen option; "(no answer)" when none was given
    points: float
    max_points: float
    is_success_item: bool


@dataclass(frozen=True)
class EpisodeRow:
    """One finished episode as the page shows it."""

    episode_id: str
    task_id: str
    instruction: str
    end_condition: str
    end_label: str        # END_LABELS' words ("" for a condition this page does not know)
    end_detail: str       # the station's words for what ended it ("" when the condition says it all)
    scored: bool
    success: bool
    score: Optional[float]  # None when unscored (an unscored episode's 0.0 means nothing)
    answers: Tuple[Answer, ...]
    taken_over: bool
    run_id: str

    @property
    def safety_stop(self) -> bool:
        return self.end_condition == END_SAFETY_STOP

    @property
    def fault(self) -> bool:
        return self.end_condition == END_INFRASTRUCTURE_FAULT


@dataclass(frozen=True)
class FigureRow:
    """One line of the job's figures: the whole job or one task, each number with its interval."""

    label: str       # "all tasks" or the task id
    success: str     # 3/5 = 60 % [23 %, 88 %] Wilson 95 %
    score: str       # 0.47 [0.20, 0.73] bootstrap
    coverage: str    # 5/8 scored (2 taken over, 1 unscored)


def figure_rows(status) -> Tuple[FigureRow, ...]:
    """Return the job's figures from the summary the station computed (``station/summary.py``); none without one."""
    if not status.HasField("summary"):
        return ()
    from strands_robots.station.summary import coverage_text, rate_text, score_text
    from strands_robots.wire.pb_model import summary_from_pb

    try:
        summary = summary_from_pb(status.summary)
    except ValueError:
        return ()
    rows = [("all tasks", summary)]
    if len(summary.tasks) > 1:
        rows += [(t.task_id, t) for t in summary.tasks]
    return tuple(FigureRow(label, rate_text(f.success), score_text(f.score), coverage_text(f.coverage))
                 for label, f in rows)


@dataclass(frozen=True)
class JobPage:
    """A job as the page shows it; ``version`` changes whenever anything shown may have changed."""

    job_id: str
    station_id: str
    state: str
    episodes_total: int
    episodes: Tuple[EpisodeRow, ...]
    not_kept: Tuple[str, ...]      # ids spent without a kept episode (discarded or interrupted), in order
    message: str
    updated_unix_ms: int           # the station's time of the snapshot; 0 before its first report
    station_last_heard_unix_ms: Optional[int]
    submitted_unix_ms: int
    cancel_requested: bool
    version: tuple
    figures: Tuple[FigureRow, ...] = ()  # the job's, then each task's, with intervals (empty: none sent)
    comparison: Optional[ComparisonView] = None  # a comparison job's result (blind labels until revealed)
    waiting_for: Tuple[str, ...] = ()  # a held comparison: the invited teams that have not accepted
    held_until_unix_ms: Optional[int] = None  # ... and when its invitation ends it (None: not held, or unknown)
    held_left: str = ""  # ... how long that is from the page's now ("in 6 d 23 h"; "" when not known)

    @property
    def held(self) -> bool:
        return bool(self.waiting_for)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def episodes_done(self) -> int:
        return len(self.episodes)

    @property
    def stopped_early(self) -> str:
        """How a comparison its stop rule ended early stands (``14 episodes, stopped at block 7 of 12: ...``)."""
        if self.comparison is None:
            return ""
        return early_stop_text(self.episodes_done, self.episodes_total, self.comparison.stop)

    @property
    def progress_percent(self) -> int:
        """Finished episodes out of those requested, rounded down (0 for a job of no episodes)."""
        if self.episodes_total <= 0:
            return 0
        return min(100, (100 * self.episodes_done) // self.episodes_total)

    @property
    def scored_count(self) -> int:
        return sum(1 for e in self.episodes if e.scored)

    @property
    def success_count(self) -> int:
        return sum(1 for e in self.episodes if e.scored and e.success)

    @property
    def mean_score(self) -> Optional[float]:
        """The mean score of the scored episodes, excluding station faults; None when none is scored."""
        scores = [e.score for e in self.episodes if e.score is not None and not e.fault]
        return sum(scores) / len(scores) if scores else None

    @property
    def taken_over_count(self) -> int:
        return sum(1 for e in self.episodes if e.taken_over)

    @property
    def safety_stops(self) -> Tuple[EpisodeRow, ...]:
        return tuple(e for e in self.episodes if e.safety_stop)


def _answer_text(item, choices: Sequence[str]) -> str:
    which = item.WhichOneof("answer")
    if which == "yes_no":
        return "yes" if item.yes_no else "no"
    if which == "count":
        return str(item.count)
    if which == "choice_index":
        index = item.choice_index
        return choices[index] if 0 <= index < len(choices) else f"option {index}"
    return "(no answer)"


def _episode(result) -> EpisodeRow:
    choices = {d.name: tuple(d.choices) for d in result.task.scoring.items}
    answers = tuple(Answer(name=i.name, question=i.question, answer=_answer_text(i, choices.get(i.name, ())),
                           points=i.points, max_points=i.max_points, is_success_item=i.is_success_item)
                    for i in result.items)
    return EpisodeRow(
        episode_id=result.episode_id, task_id=result.task.task_id, instruction=result.task.instruction,
        end_condition=result.end_condition, end_label=END_LABELS.get(result.end_condition, ""),
        end_detail=result.end_detail, scored=result.scored, success=result.scored and result.success,
        score=result.score if result.scored else None, answers=answers, taken_over=result.taken_over,
        run_id=result.run_id,
    )


def not_kept_ids(episode_ids: Sequence[str]) -> Tuple[str, ...]:
    """Return the ids below the highest listed one that are not listed (``ep_0000`` numbering).

    The station numbers every attempt (``episode_id_for``) and never reuses an id; one it spent without keeping
    an episode is missing from the list. Ids of another shape are left out of the count.
    """
    numbers = sorted({int(m.group(1)) for m in map(_EPISODE_ID.match, episode_ids) if m})
    if not numbers:
        return ()
    have = set(numbers)
    return tuple(f"ep_{n:04d}" for n in range(numbers[-1]) if n not in have)


def time_left_text(left_ms: int) -> str:
    """How long until a deadline, in words, rounded down to the minute (``in 6 d 23 h``, ``in 2 h 5 min``)."""
    if left_ms <= 0:
        return "now"
    minutes = left_ms // 60_000
    if minutes == 0:
        return "in less than a minute"
    days, hours, mins = minutes // 1440, minutes // 60 % 24, minutes % 60
    if days:
        return f"in {days} d {hours} h" if hours else f"in {days} d"
    if hours:
        return f"in {hours} h {mins} min" if mins else f"in {hours} h"
    return f"in {mins} min"


def job_page(view: JobView, status, shown_id: str, held: Optional[Held] = None, now_ms: int = 0) -> JobPage:
    """Build the page of ``view`` from the ``JobStatus`` the relay answers for it (``RelayCore.status_of_view``).

    :param shown_id: the id the viewer knows the job by (a client's ``client_job_id``, a station's ``job_id``).
    :param held: what a held comparison waits for (``job_teams.held``), None for any other job.
    :param now_ms: the page's now (Unix ms), for how long a held job's invitation has left.
    """
    job, snapshot = view.job, view.snapshot
    episodes = tuple(_episode(e) for e in status.episodes)
    until = held.until_unix_ms if held is not None else None
    left = time_left_text(until - now_ms) if until is not None else ""
    return JobPage(
        job_id=shown_id, station_id=job.station_id, state=status.state,
        episodes_total=int(status.episodes_total or job.episodes_total), episodes=episodes,
        not_kept=not_kept_ids([e.episode_id for e in episodes]), message=status.message,
        updated_unix_ms=int(status.updated_unix_ms), station_last_heard_unix_ms=view.station_last_heard,
        submitted_unix_ms=job.submitted_unix_ms, cancel_requested=job.cancel_requested,
        version=(int(snapshot.sequence) if snapshot else 0, int(status.updated_unix_ms), len(episodes),
                 job.cancel_requested, view.station_last_heard, status.message, left),
        figures=figure_rows(status),
        comparison=comparison_view(status.comparison) if status.HasField("comparison") else None,
        waiting_for=held.waiting if held is not None else (), held_until_unix_ms=until, held_left=left,
    )
