"""A job's summary: success k of n with its interval, the mean score with its interval, coverage; per task and job.

Per task and for the whole job: successes k of n with a 95 % interval, the mean score with its bootstrap
interval, and coverage (where every attempted episode went).

The one place these numbers are computed: the station puts :func:`summary_of` in every snapshot
(``JobStatus.summary``), and the CLI, the web page, reports and exports show that summary (or call
:func:`summarize` on the same episodes), never a figure of their own.

Which episodes are outcomes (the rate's ``n``): scored, not taken over, not a station fault, not discarded. Each
attempted episode lands in exactly one :class:`~strands_robots.stats.coverage.Coverage` bucket, by
:func:`disposition_of`:

- ``infrastructure_fault`` -> faulted (the station's fault, never the policy's outcome; its task ran again);
- taken over -> taken_over (the score is not the policy's alone), scored or not;
- scored -> scored: an outcome, a safety-stopped episode the operator scored included (the policy drove the arm
  into the stop);
- an unscored ``safety_stop`` -> safety_stopped; any other unscored one (``start_pose_unreached``, a sheet never
  given) -> unscored;
- a discarded episode -> discarded, one that ended without any result (a station restart, a lost policy session,
  a cancel during it) -> interrupted. These two have no result; the station core records which task each one
  ran (``JobRecord.unlisted_tasks``), so they appear in that task's coverage as well as the job's (one whose task
  is not known, from a record written before the station kept it, in the job's only).

Tasks are told apart by the episode's own ``task.task_id`` (what ran), not by the job's shape, and listed in the
order they first ran (a task with only discarded or interrupted episodes after those with a result). The interval
method is the job's ``intervals`` setting (Wilson by default, Clopper-Pearson on request), at 95 %; the mean score's
interval is a seeded BCa bootstrap (``stats.mean_score``), so the same scores give the same interval in every
snapshot, report and re-run.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from strands_robots.rollout.end_condition import END_INFRASTRUCTURE_FAULT, END_SAFETY_STOP
from strands_robots.stats.coverage import Coverage, Disposition
from strands_robots.stats.mean_score import MeanScore, mean_score_interval
from strands_robots.stats.proportion import IntervalMethod, Proportion, proportion_interval

__all__ = ["CoverageCounts", "TaskSummary", "JobSummary", "RunningSummary", "disposition_of", "summarize",
           "summary_of", "CONFIDENCE", "BOOTSTRAP_SEED", "BOOTSTRAP_RESAMPLES", "rate_text", "score_text",
           "coverage_text", "load_statistics"]

#: Every interval of a summary is two-sided at this level.
CONFIDENCE = 0.95
#: The mean score's bootstrap: seeded, so every snapshot of the same scores shows the same interval.
BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 9999


@dataclass(frozen=True)
class CoverageCounts:
    """How many attempted episodes are in each coverage bucket: a :class:`Coverage` as a status carries it.

    The station's summary holds the episode ids (:class:`Coverage`); on the wire only the counts travel, so a
    snapshot's size stays bounded. Both answer :meth:`counts`, :attr:`attempted` and :attr:`not_scored`.
    """

    buckets: Tuple[Tuple[Disposition, int], ...]

    @classmethod
    def of(cls, counts: Mapping[Any, int]) -> "CoverageCounts":
        """Return the counts of ``counts`` (a disposition or its value -> count; a missing bucket is 0).

        :raises ValueError: a negative count or an unknown disposition.
        """
        given = {Disposition(getattr(d, "value", d)): int(n) for d, n in counts.items()}
        if any(n < 0 for n in given.values()):
            raise ValueError(f"coverage counts must be >= 0, got {given}")
        return cls(tuple((d, given.get(d, 0)) for d in Disposition))

    def counts(self) -> Mapping[Disposition, int]:
        """How many episodes each bucket holds (every bucket, zeros included)."""
        return dict(self.buckets)

    @property
    def attempted(self) -> int:
        return sum(n for _, n in self.buckets)

    @property
    def not_scored(self) -> int:
        return self.attempted - self.counts()[Disposition.SCORED]


@dataclass(frozen=True)
class TaskSummary:
    """One task's figures over its listed episodes.

    :param task_id: the episodes' ``task.task_id``.
    :param success: successes of the outcomes, with the job's interval.
    :param score: the outcomes' mean score with its bootstrap interval.
    :param coverage: the task's listed episodes, each in one bucket.
    """

    task_id: str
    success: Proportion
    score: MeanScore
    coverage: Any  # Coverage (episode ids) or CoverageCounts

    def __post_init__(self) -> None:
        _check_figures(self.success, self.score, self.coverage, f"task {self.task_id!r}")


@dataclass(frozen=True)
class JobSummary:
    """A job's figures: the whole job, then each task in the order it first ran.

    :param success: successes of every outcome, with its interval (the job's ``intervals`` method).
    :param score: the outcomes' mean score with its bootstrap interval.
    :param coverage: every attempted episode of the job (discarded and interrupted ones included): a
        :class:`Coverage` of episode ids at the station, its :class:`CoverageCounts` from a status on the wire.
    :param tasks: one :class:`TaskSummary` per task that has a listed episode.
    """

    success: Proportion
    score: MeanScore
    coverage: Any  # Coverage (episode ids) or CoverageCounts
    tasks: Tuple[TaskSummary, ...] = ()

    def __post_init__(self) -> None:
        _check_figures(self.success, self.score, self.coverage, "the job")

    def text(self) -> str:
        """One line: ``success 3/5 = 60 % [23 %, 88 %] Wilson 95 %; mean score 0.47 [0.20, 0.73] bootstrap; ...``."""
        return f"success {rate_text(self.success)}; mean score {score_text(self.score)}; " \
               f"coverage {coverage_text(self.coverage)}"

    def task(self, task_id: str) -> Optional[TaskSummary]:
        """Return the summary of ``task_id`` (None when no episode of it is listed)."""
        return next((t for t in self.tasks if t.task_id == task_id), None)


def _check_figures(success: Proportion, score: MeanScore, coverage: Any, whose: str) -> None:
    """Refuse figures that do not hold together: the rate's trials, the scores and the scored episodes are one n."""
    scored = coverage.counts()[Disposition.SCORED]
    if not success.trials == score.n == scored:
        raise ValueError(f"{whose}: {success.trials} trials, {score.n} scores and {scored} scored episodes: the "
                         "outcomes are one number")


def rate_text(rate: Proportion) -> str:
    """``3/5 = 60 % [23 %, 88 %] Wilson 95 %``, or ``0/0 (no outcomes)``."""
    if not rate.has_interval:
        return f"{rate.successes}/{rate.trials} (no outcomes)"
    return (f"{rate.successes}/{rate.trials} = {rate.rate * 100:.0f} % [{rate.low * 100:.0f} %, "  # type: ignore
            f"{rate.high * 100:.0f} %] {rate.method.label} {rate.confidence * 100:g} %")  # type: ignore[operator]


def score_text(score: MeanScore) -> str:
    """``0.47 [0.20, 0.73] bootstrap``, ``1.00 (one score: no interval ...)`` or ``n/a (no scores)``."""
    if score.mean is None:
        return "n/a (no scores)"
    if not score.has_interval:
        return f"{score.mean:.2f} ({score.note})"
    tail = " (fewer than 10 scores: likely too narrow)" if score.n < 10 else ""
    return f"{score.mean:.2f} [{score.low:.2f}, {score.high:.2f}] bootstrap{tail}"


def coverage_text(coverage: Any) -> str:
    """``5/8 scored (2 taken over, 1 unscored)``: outcomes of attempted, every other bucket named.

    :param coverage: a :class:`Coverage` or :class:`CoverageCounts`.
    """
    counts = coverage.counts()
    others = ", ".join(f"{n} {d.value.replace('_', ' ')}" for d, n in counts.items()
                       if d is not Disposition.SCORED and n)
    return f"{counts[Disposition.SCORED]}/{coverage.attempted} scored" + (f" ({others})" if others else "")


def disposition_of(episode: Any) -> Disposition:
    """Say which coverage bucket a listed ``EpisodeResult`` lands in (the rules in this module's docstring)."""
    if episode.end_condition == END_INFRASTRUCTURE_FAULT:
        return Disposition.FAULTED
    if episode.taken_over:
        return Disposition.TAKEN_OVER
    if episode.scored:
        return Disposition.SCORED
    if episode.end_condition == END_SAFETY_STOP:
        return Disposition.SAFETY_STOPPED
    return Disposition.UNSCORED


@functools.lru_cache(maxsize=4096)
def _rate(successes: int, trials: int, method: str, confidence: float) -> Proportion:
    return proportion_interval(successes, trials, confidence=confidence, method=method)


@functools.lru_cache(maxsize=4096)
def _mean(sorted_scores: Tuple[float, ...], confidence: float) -> MeanScore:
    # Keyed on the sorted scores: the interval is order-independent, and a job's every snapshot between two
    # finished episodes (and every job with the same scores) asks for the same one.
    return mean_score_interval(sorted_scores, confidence=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                               seed=BOOTSTRAP_SEED)


class _Tally:
    """One task's (or the job's) counts so far: outcomes, successes, sorted scores, ids by bucket."""

    __slots__ = ("outcomes", "successes", "scores", "buckets")

    def __init__(self) -> None:
        self.outcomes = 0
        self.successes = 0
        self.scores: List[float] = []
        self.buckets: Dict[Disposition, List[str]] = {d: [] for d in Disposition}

    def add(self, episode: Any) -> None:
        disposition = disposition_of(episode)
        self.buckets[disposition].append(episode.episode_id)
        if disposition is Disposition.SCORED:
            self.outcomes += 1
            self.successes += bool(episode.success)
            bisect.insort(self.scores, float(episode.score))

    def figures(self, method: str, confidence: float, unlisted: Optional[Dict[Disposition, Tuple[str, ...]]] = None
                ) -> Tuple[Proportion, MeanScore, Coverage]:
        buckets = {d.value: tuple(ids) + tuple((unlisted or {}).get(d, ())) for d, ids in self.buckets.items()}
        return (_rate(self.successes, self.outcomes, method, confidence), _mean(tuple(self.scores), confidence),
                Coverage(**buckets))


class RunningSummary:
    """A job's summary kept up to date as its episode list grows: each listed episode is read once.

    What the station's job runner holds (a snapshot per message would otherwise re-read every episode); the
    figures are :func:`summarize`'s, which builds one of these.

    :param method: the rates' interval, ``"wilson"`` or ``"clopper-pearson"``.
    :param confidence: the intervals' two-sided level.
    :raises ValueError: an unknown method.
    """

    def __init__(self, method: Any = IntervalMethod.WILSON, confidence: float = CONFIDENCE) -> None:
        self._method = IntervalMethod(getattr(method, "value", method)).value
        self._confidence = float(confidence)
        self._start()

    def _start(self) -> None:
        self._read: List[Any] = []  # the episodes read so far, in order
        self._ids: set = set()
        self._job = _Tally()
        self._tasks: Dict[str, _Tally] = {}

    def summary(self, episodes: Sequence[Any], discarded: Sequence[str] = (),
                interrupted: Sequence[str] = (), unlisted_tasks: Optional[Mapping[str, str]] = None) -> JobSummary:
        """Return the summary of ``episodes`` (the job's listed ones, in order) and its discards and interruptions.

        Episodes already read are not read again while the list only grew; any other list is read from the start.

        :param unlisted_tasks: episode id -> task id of discarded and interrupted episodes whose task is known:
            each is counted in that task's coverage too.
        :raises ValueError: an episode listed twice.
        """
        read = len(self._read)
        if len(episodes) < read or any(a is not b for a, b in zip(episodes, self._read)):
            self._start()
            read = 0
        for episode in episodes[read:]:
            if episode.episode_id in self._ids:
                raise ValueError(f"episode {episode.episode_id!r} is listed twice")
            self._ids.add(episode.episode_id)
            self._read.append(episode)
            self._job.add(episode)
            self._tasks.setdefault(episode.task.task_id, _Tally()).add(episode)
        method, confidence = self._method, self._confidence
        seen = set(self._ids)
        # An id is spent once; one with a result is never also discarded or interrupted (its result wins if it were).
        unlisted = {d: tuple(i for i in ids if i not in seen and not seen.add(i))  # type: ignore[func-returns-value]
                    for ids, d in ((discarded, Disposition.DISCARDED), (interrupted, Disposition.INTERRUPTED))}
        by_task: Dict[str, Dict[Disposition, Tuple[str, ...]]] = {}
        for disposition, ids in unlisted.items():
            for episode_id in ids:
                task_id = (unlisted_tasks or {}).get(episode_id)
                if task_id is not None:
                    slot = by_task.setdefault(task_id, {})
                    slot[disposition] = slot.get(disposition, ()) + (episode_id,)
        tallies = dict(self._tasks)
        for task_id in by_task:
            tallies.setdefault(task_id, _Tally())
        tasks = tuple(TaskSummary(task_id, *tally.figures(method, confidence, by_task.get(task_id)))
                      for task_id, tally in tallies.items())
        if len(tasks) == 1 and not any(unlisted.values()):  # the job's episodes are its one task's: same figures
            return JobSummary(tasks[0].success, tasks[0].score, tasks[0].coverage, tasks)
        return JobSummary(*self._job.figures(method, confidence, unlisted), tasks)


def summarize(episodes: Iterable[Any], *, discarded: Sequence[str] = (), interrupted: Sequence[str] = (),
              unlisted_tasks: Optional[Mapping[str, str]] = None, method: Any = IntervalMethod.WILSON,
              confidence: float = CONFIDENCE) -> JobSummary:
    """Return the summary of a job's listed ``episodes`` (``EpisodeResult``, in execution order).

    :param discarded: ids of the job's discarded episodes (no result).
    :param interrupted: ids of the job's episodes that ended without a result.
    :param unlisted_tasks: episode id -> task id of those discarded and interrupted episodes whose task is known
        (in that task's coverage as well as the job's; the others in the job's only).
    :param method: the rates' interval, ``"wilson"`` or ``"clopper-pearson"``.
    :param confidence: the intervals' two-sided level.
    :raises ValueError: an unknown method, or an episode listed twice.
    """
    return RunningSummary(method, confidence).summary(tuple(episodes), discarded, interrupted, unlisted_tasks)


def load_statistics() -> None:
    """Import the statistics libraries now, before the station runs a job, not inside a job's first summary.

    statsmodels (with pandas) and scipy.stats take seconds of CPU to import, holding the interpreter: inside a job
    that would starve the station's own threads (its lease heartbeat) in the middle of an episode. The station calls
    this once when it starts, before it takes a job. An import that fails is said by the first summary that needs it.
    """
    try:
        import scipy.stats  # noqa: F401
        import statsmodels.stats.proportion  # noqa: F401
    except ImportError:
        pass


def summary_of(record: Any, running: Optional[RunningSummary] = None) -> JobSummary:
    """Return the summary of a ``JobRecord``: its episodes, discards and interruptions, by its job's method.

    :param running: the job's :class:`RunningSummary` (made with the job's method) to update; None: a new one.
    """
    running = running or RunningSummary(getattr(record.spec, "intervals", IntervalMethod.WILSON.value))
    return running.summary(record.episodes, record.discarded, record.interrupted,
                           dict(getattr(record, "unlisted_tasks", ())))
