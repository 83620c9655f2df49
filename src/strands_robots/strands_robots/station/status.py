"""Job snapshots (``JobStatus``) and the job's aggregates.

A snapshot is what the station reports: ``updated_unix_ms`` is the station's own clock when it produced the
snapshot (injectable for tests), never the time somebody polls it.

Aggregates count only what is the policy's own work: the success rate and the mean score are over scored
episodes that were not taken over (``counted``); a taken-over episode's score is not the policy's alone, and an
unscored episode's success and score are not meaningful. Both are None when no episode counts.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from strands_robots.station.model import TERMINAL_STATES, EpisodeResult, JobState, JobStatus
from strands_robots.station.summary import summary_of

__all__ = ["JobAggregates", "aggregate", "make_snapshot", "snapshot_of", "unix_ms_now", "UnixMsClock"]

UnixMsClock = Callable[[], int]


def unix_ms_now() -> int:
    """Milliseconds since the Unix epoch (the default snapshot clock)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class JobAggregates:
    """Figures over a job's finished episodes.

    :param finished: episodes listed (kept), scored or not.
    :param counted: scored and not taken over: the denominator of ``success_rate`` and ``mean_score``.
    :param success_rate: ``successes / counted``; None when nothing counts.
    :param mean_score: mean ``score`` of the counted episodes; None when nothing counts.
    :param end_conditions: how many finished episodes ended each way.
    """

    finished: int
    scored: int
    taken_over: int
    counted: int
    successes: int
    success_rate: Optional[float]
    mean_score: Optional[float]
    end_conditions: Mapping[str, int]


def aggregate(episodes: Iterable[EpisodeResult]) -> JobAggregates:
    """Aggregate ``episodes`` (taken-over and unscored episodes stay out of the rates)."""
    episodes = tuple(episodes)
    counted = [e for e in episodes if e.scored and not e.taken_over]
    successes = sum(1 for e in counted if e.success)
    return JobAggregates(
        finished=len(episodes),
        scored=sum(1 for e in episodes if e.scored),
        taken_over=sum(1 for e in episodes if e.taken_over),
        counted=len(counted),
        successes=successes,
        success_rate=successes / len(counted) if counted else None,
        mean_score=sum(e.score for e in counted) / len(counted) if counted else None,
        end_conditions=MappingProxyType(dict(Counter(e.end_condition for e in episodes))),
    )


def make_snapshot(
    *,
    job_id: str,
    station_id: str,
    state: JobState,
    episodes_total: int,
    episodes: Sequence[EpisodeResult],
    message: str,
    clock_ms: UnixMsClock = unix_ms_now,
    sequence: int = 0,
    provenance: Any = None,
    summary: Any = None,
    comparison: Any = None,
) -> JobStatus:
    """Make a :class:`JobStatus` stamped now on ``clock_ms``; ``episodes`` are the finished ones, in order.

    ``sequence`` is the job's snapshot number (``JobRecord.sequence`` of the record it shows).
    """
    if not isinstance(state, JobState):
        raise ValueError(f"state must be a JobState, got {state!r}")
    return JobStatus(job_id=job_id, station_id=station_id, state=state, episodes_total=int(episodes_total),
                     episodes=tuple(episodes), updated_unix_ms=int(clock_ms()), message=str(message),
                     sequence=int(sequence), provenance=provenance, summary=summary, comparison=comparison)


def snapshot_of(record: Any, clock_ms: UnixMsClock = unix_ms_now, sequence: Optional[int] = None,
                summary: Any = None, comparison: Any = None) -> JobStatus:
    """Make the snapshot of a ``JobRecord`` as it is, its summary with it, stamped now.

    :param sequence: the snapshot's number (None: the record's ``sequence``).
    :param summary: the record's summary when the caller already has it (None: computed here, ``summary_of``).

    A comparison's provenance names each slot's declared spec by the slot's name only once the job ended: the
    slots' names are revealed with its end, as the comparison's labels are (the record keeps them all along).
    """
    provenance = getattr(record, "provenance", None)
    if provenance is not None and provenance.slot_specs and record.state not in TERMINAL_STATES:
        provenance = dataclasses.replace(provenance, slot_specs=())
    return make_snapshot(job_id=record.job_id, station_id=record.spec.station_id, state=record.state,
                         episodes_total=record.spec.episodes_total, episodes=record.episodes,
                         message=record.message, clock_ms=clock_ms,
                         sequence=record.sequence if sequence is None else sequence,
                         provenance=provenance,
                         summary=summary_of(record) if summary is None else summary,
                         comparison=comparison_snapshot(record) if comparison is None else comparison)


def comparison_snapshot(record: Any) -> Any:
    """Return a comparison job's result as its record stands (None for a single-policy job)."""
    spec = record.spec
    if getattr(spec, "comparison", None) is None:
        return None
    from strands_robots.station.comparison import comparison_of, progress_of

    return comparison_of(progress_of(spec, record.episodes), suite=spec.comparison.suite, method=spec.intervals,
                         revealed=record.state in TERMINAL_STATES)
