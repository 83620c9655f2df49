"""The station's waiting jobs and the order they run in: resumed jobs first, then round-robin across teams.

The rules, in order:

1. a job the station resumed after a restart (it had started: WAITING_POLICY, RUNNING or FINALIZING when the
   station died), or one whose policy was found attached at its attach deadline's last look, runs before any job
   that never started, in the order they were queued so;
2. the other jobs are taken **round-robin across teams** (a team is the job's ``client_id``): the team whose
   turn it is gives its oldest job, then goes to the back of the rotation; a team that joins goes to the back;
   a team with nothing waiting leaves the rotation. So one team's hundred jobs never hold another team's one
   job for more than one of them;
3. a job that stepped aside while waiting for its policy (:meth:`JobQueue.park`,
   :mod:`~strands_robots.station.policy_wait`) goes back to the head of its team's jobs: its team's next turn is
   its turn again, and the team's later jobs never pass it.

:meth:`JobQueue.order` is the exact run order if nothing changes, so each job's place (how many run before it)
is what the station tells the team. Pure and not thread-safe: the station holds its lock around every call.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Deque, Dict, Optional, Tuple

__all__ = ["JobQueue"]


class JobQueue:
    """Waiting job ids, each with its team (see the module docstring)."""

    def __init__(self) -> None:
        self._resumed: Deque[str] = deque()
        self._teams: "OrderedDict[str, Deque[str]]" = OrderedDict()  # rotation order: the first team is next
        self._team_of: Dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._team_of)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._team_of

    def add(self, job_id: str, team: str, *, resumed: bool = False) -> None:
        """Queue ``job_id`` of ``team`` (``resumed``: it had started before a restart, so it goes first).

        :raises ValueError: the job is already queued.
        """
        if job_id in self._team_of:
            raise ValueError(f"job {job_id!r} is already queued")
        self._team_of[job_id] = team
        if resumed:
            self._resumed.append(job_id)
            return
        jobs = self._teams.get(team)
        if jobs is None:
            jobs = self._teams[team] = deque()
        jobs.append(job_id)

    def park(self, job_id: str, team: str) -> None:
        """Queue ``job_id`` of ``team`` again at the head of its team's jobs (it stepped aside; it keeps its place).

        A team whose lane is in the rotation keeps its place there; a team that had no other job waiting joins at
        the back (it has just had its turn).

        :raises ValueError: the job is already queued.
        """
        if job_id in self._team_of:
            raise ValueError(f"job {job_id!r} is already queued")
        self._team_of[job_id] = team
        jobs = self._teams.get(team)
        if jobs is None:
            jobs = self._teams[team] = deque()
        jobs.appendleft(job_id)

    def others_ahead_of(self, team: str) -> bool:
        """Tell whether a job would run before ``team``'s waiting job if it stepped aside now.

        That is a job that had started, or another team's (whose turn then comes first).
        """
        return bool(self._resumed) or any(other != team for other in self._teams)

    def remove(self, job_id: str) -> bool:
        """Take ``job_id`` out of the queue (cancelled); False when it was not queued."""
        team = self._team_of.pop(job_id, None)
        if team is None:
            return False
        if job_id in self._resumed:
            self._resumed.remove(job_id)
            return True
        jobs = self._teams[team]
        jobs.remove(job_id)
        if not jobs:
            del self._teams[team]
        return True

    def pop(self) -> Optional[str]:
        """Return the next job to run and take it out of the queue; None when nothing waits."""
        if self._resumed:
            job_id = self._resumed.popleft()
        elif self._teams:
            team, jobs = next(iter(self._teams.items()))
            job_id = jobs.popleft()
            del self._teams[team]
            if jobs:
                self._teams[team] = jobs  # back of the rotation
        else:
            return None
        del self._team_of[job_id]
        return job_id

    def order(self) -> Tuple[str, ...]:
        """Every waiting job in the order they would run if nothing changed."""
        out = list(self._resumed)
        lanes = [list(jobs) for jobs in self._teams.values()]
        depth = 0
        while True:
            row = [lane[depth] for lane in lanes if depth < len(lane)]
            if not row:
                return tuple(out)
            out.extend(row)
            depth += 1

    def places(self) -> Dict[str, int]:
        """Each waiting job's place: how many waiting jobs run before it."""
        return {job_id: place for place, job_id in enumerate(self.order())}
