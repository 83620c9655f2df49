"""Coverage: of the episodes a job attempted, how many were scored, and where every other one went.

A success rate is read against its denominator. An episode that faulted, was discarded, was taken over by the
operator, was safety-stopped or was never scored is not a trial of the policy, and dropping it silently (or
counting it as a failure) changes the rate. :class:`Coverage` holds every attempted episode in exactly one
bucket, by id: ``attempted`` is the sum of the buckets, never a separate number that could disagree, and an id
in two buckets is refused. The success rate's ``n`` is ``len(scored)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Dict, Iterable, Mapping, Tuple, Union

from strands_robots.stats import arguments
from strands_robots.stats.proportion import IntervalMethod, Proportion, proportion_interval


class Disposition(str, Enum):
    """Where one attempted episode ended up; exactly one per episode."""

    SCORED = "scored"  # a real outcome: in the success rate's n
    FAULTED = "faulted"  # the station, the arm or the policy link failed (not the policy's task performance)
    SAFETY_STOPPED = "safety_stopped"  # a safety stop ended it
    DISCARDED = "discarded"  # the operator discarded it (bad reset, wrong scene, ...)
    TAKEN_OVER = "taken_over"  # the operator took over the arm
    UNSCORED = "unscored"  # it ran, but no score was given (yet)
    INTERRUPTED = "interrupted"  # it ended without a result (a station restart, a lost session, a cancel during it)


_FIELDS = {
    Disposition.SCORED: "scored",
    Disposition.FAULTED: "faulted",
    Disposition.SAFETY_STOPPED: "safety_stopped",
    Disposition.DISCARDED: "discarded",
    Disposition.TAKEN_OVER: "taken_over",
    Disposition.UNSCORED: "unscored",
    Disposition.INTERRUPTED: "interrupted",
}


@dataclass(frozen=True)
class Coverage:
    """Every attempted episode of a job (or a task) by id, in exactly one bucket.

    Build it with :meth:`tally`. ``attempted`` is derived, so no episode is silently in or out of it.

    :param scored: ids of episodes with a real outcome (the success rate's ``n``).
    :param faulted: ids of episodes a fault ended.
    :param safety_stopped: ids of episodes a safety stop ended.
    :param discarded: ids of episodes the operator discarded.
    :param taken_over: ids of episodes the operator took over.
    :param unscored: ids of episodes that ran but carry no score.
    :param interrupted: ids of episodes that ended without any result.
    """

    scored: Tuple[str, ...] = ()
    faulted: Tuple[str, ...] = ()
    safety_stopped: Tuple[str, ...] = ()
    discarded: Tuple[str, ...] = ()
    taken_over: Tuple[str, ...] = ()
    unscored: Tuple[str, ...] = ()
    interrupted: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        seen: Dict[str, str] = {}
        for field_name in _FIELDS.values():
            ids = getattr(self, field_name)
            if isinstance(ids, str) or not isinstance(ids, tuple):
                raise TypeError(f"{field_name} must be a tuple of episode ids, got {type(ids).__name__}")
            for episode_id in ids:
                if not isinstance(episode_id, str) or not episode_id:
                    raise ValueError(f"episode ids must be non-empty strings, got {episode_id!r} in {field_name}")
                if episode_id in seen:
                    where = seen[episode_id]
                    raise ValueError(f"episode {episode_id!r} is in {where} and {field_name}: "
                                     "an episode lands in exactly one bucket" if where != field_name else
                                     f"episode {episode_id!r} is listed twice in {field_name}")
                seen[episode_id] = field_name

    @classmethod
    def tally(cls, episodes: Union[Mapping[str, Union[Disposition, str]],
                                   Iterable[Tuple[str, Union[Disposition, str]]]]) -> "Coverage":
        """Return the coverage of ``episodes``, each ``(episode_id, disposition)``; order kept per bucket.

        :param episodes: a mapping id -> disposition, or ``(id, disposition)`` pairs; a disposition may be
            given by its value (``"faulted"``).
        :raises ValueError: an id given twice, an empty id or an unknown disposition.
        """
        items = episodes.items() if isinstance(episodes, Mapping) else episodes
        buckets: Dict[Disposition, list] = {d: [] for d in Disposition}
        for episode_id, disposition in items:
            buckets[arguments.choice(Disposition, disposition, "disposition")].append(episode_id)
        return cls(**{_FIELDS[d]: tuple(ids) for d, ids in buckets.items()})

    def ids(self, disposition: Union[Disposition, str]) -> Tuple[str, ...]:
        """Return the ids in one bucket.

        :param disposition: the bucket.
        """
        return getattr(self, _FIELDS[arguments.choice(Disposition, disposition, "disposition")])

    def counts(self) -> Mapping[Disposition, int]:
        """How many episodes each bucket holds (every bucket, zeros included)."""
        return {d: len(getattr(self, name)) for d, name in _FIELDS.items()}

    @property
    def attempted(self) -> int:
        """Every episode, the sum of the buckets."""
        return sum(self.counts().values())

    @property
    def not_scored(self) -> int:
        """Attempted episodes without a real outcome (every bucket but ``scored``)."""
        return self.attempted - len(self.scored)

    def disposition_of(self, episode_id: str) -> Disposition:
        """Return the bucket holding ``episode_id``.

        :param episode_id: an attempted episode's id.
        :raises KeyError: the id was not attempted.
        """
        for d, name in _FIELDS.items():
            if episode_id in getattr(self, name):
                return d
        raise KeyError(f"episode {episode_id!r} was not attempted")

    def rate(self, *, confidence: float = 0.95, method: Union[IntervalMethod, str] = IntervalMethod.WILSON
             ) -> Proportion:
        """Coverage as a proportion: scored of attempted, with its interval.

        :param confidence: the two-sided level in (0, 1).
        :param method: ``"wilson"`` or ``"clopper-pearson"``.
        """
        return proportion_interval(len(self.scored), self.attempted, confidence=confidence, method=method)

    def text(self) -> str:
        """One line for a person: ``scored 8 of 11 attempted (faulted 1, discarded 2)``."""
        others = ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in
                           ((_FIELDS[d], n) for d, n in self.counts().items() if d is not Disposition.SCORED)
                           if n)
        return f"scored {len(self.scored)} of {self.attempted} attempted" + (f" ({others})" if others else "")
