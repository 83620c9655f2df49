"""The station's whole state of one job as one frozen value: what it persists and restores after a restart.

Episode ids are handed out in execution order (``ep_0000``, ``ep_0001``, …), one per attempt: an episode
that was discarded, lost to a restart or to a lost policy session keeps its id (it is never reused) and its
task runs again under the next id, so the listed ``episodes`` may skip ids. The task of the next episode is
the kept-episode slot ``len(episodes)`` (tasks cycle in order).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Tuple

from strands_robots.station.job import JobSpec
from strands_robots.station.model import EpisodeResult, JobState, Provenance

__all__ = ["RunningEpisode", "JobRecord", "episode_id_for"]


def episode_id_for(number: int) -> str:
    """``ep_0000`` for 0; more digits once past 9999."""
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise ValueError(f"episode number must be an integer >= 0, got {number!r}")
    return f"ep_{number:04d}"


@dataclass(frozen=True)
class RunningEpisode:
    """The episode the station is running (never listed in ``episodes``): its id, slot, attempt and task id."""

    episode_id: str
    slot: int
    attempt: int
    task_id: str = ""  # "" in a record written before it was kept: the episode's task is then not known


@dataclass(frozen=True)
class JobRecord:
    """One job at the station.

    :param next_episode_number: ids handed out so far (the next id is ``episode_id_for`` of it).
    :param discarded: ids of taken-over episodes the operator discarded.
    :param interrupted: ids of episodes that ended without a result (station restart, policy session lost).
    :param running: the running episode, if any.
    :param restarts: how many times the station resumed this job after a restart (its whole life).
    :param restarts_without_progress: the restarts since the job last kept an episode: what the restart limit
        counts (``persistence.MAX_RESTARTS``), so a crash loop fails the job and restarts far apart never do.
    :param slot_attempts: ids already spent on the current slot without keeping an episode (the next
        episode's ``attempt``); back to 0 when an episode is kept.
    :param sequence: the number of the job's newest snapshot (``JobStatus.sequence``): each new snapshot takes
        the next one and is persisted with it.
    :param provenance: what produced the job's scores (``station.provenance``), set when its policy was ready;
        every snapshot from then on carries it.
    :param unlisted_tasks: ``(episode id, task id)`` of each discarded or interrupted episode whose task is known:
        the job's summary lists it under that task's coverage as well as the job's.
    """

    spec: JobSpec
    state: JobState = JobState.CREATED
    message: str = ""
    episodes: Tuple[EpisodeResult, ...] = ()
    next_episode_number: int = 0
    discarded: Tuple[str, ...] = ()
    interrupted: Tuple[str, ...] = ()
    running: Optional[RunningEpisode] = None
    restarts: int = 0
    restarts_without_progress: int = 0
    slot_attempts: int = 0
    sequence: int = 0
    provenance: Optional[Provenance] = None
    unlisted_tasks: Tuple[Tuple[str, str], ...] = ()

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def done(self) -> bool:
        """Every requested episode is kept."""
        return len(self.episodes) >= self.spec.episodes_total

    def without_result(self, running: Optional[RunningEpisode]) -> Tuple[Tuple[str, str], ...]:
        """Return :attr:`unlisted_tasks` with ``running``'s task added (it ends with no result); as is for None."""
        if running is None or not running.task_id:
            return self.unlisted_tasks
        return self.unlisted_tasks + ((running.episode_id, running.task_id),)

    def replace(self, **changes) -> "JobRecord":
        return dataclasses.replace(self, **changes)

    def next_snapshot(self) -> "JobRecord":
        """Return this record numbered for its next snapshot (``sequence`` one more)."""
        return dataclasses.replace(self, sequence=self.sequence + 1)
