"""A job's wait for its policy at a station that runs other jobs meanwhile: its attach deadline and its turns.

A job nobody serves must not hold the station for every team. The rules, in order:

1. **Its own deadline.** A job waits for its policy (a relay client attaching, or a station-run policy being
   built) for at most ``policy_attach_timeout_s`` in all (the job's own, else the station's), counted from when it
   began waiting; the deadline is kept across its turns (:class:`AttachDeadlines`). A job that waits again later
   (its policy session was lost mid-job), or again after a station restart (deadlines live in the station
   process), gets a new deadline from then.
2. **Turns.** While another team's job (or a job that had started) is queued, a waiting job holds the station for
   at most one turn (``policy_turn_s``); then it steps aside: back in the queue at the head of its team's jobs
   (``JobQueue.park``: it keeps its place, its team's next turn is its turn) and the next job runs. With nothing
   else to run it keeps waiting, and steps aside as soon as its turn is over and such a job arrives. A team's own
   later jobs never pass it: a team's jobs start in the order the team submitted them.
3. **At the deadline.** A job that has stepped aside gets a last look when its deadline passes, even while another
   job runs (at most :data:`LAST_LOOK_S`): its policy attached, it runs next (ahead of the jobs that never
   started); not, it is FAILED with the reason. A job whose deadline passes during its own turn is FAILED then.

Pure and ROS-free; :class:`~strands_robots.station.episodes.JobRunner` and
:class:`~strands_robots.station.station.Station` apply it.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Optional, Tuple

__all__ = ["AttachDeadlines", "Turns", "LAST_LOOK_S", "attach_timeout_s", "deadline_text"]

#: How long the last look at a job past its attach deadline waits for its policy to answer: an attached relay
#: client is announced at once (one round trip), so this only covers a slow link.
LAST_LOOK_S = 2.0


def attach_timeout_s(spec: Any, settings: Any) -> float:
    """Return how long ``spec``'s job waits for its policy.

    That is the job's own ``policy_attach_timeout_s``, else the station's (``ProcedureSettings``).
    """
    own = getattr(spec, "policy_attach_timeout_s", None)
    if not isinstance(own, bool) and isinstance(own, (int, float)) and math.isfinite(own) and own > 0:
        return float(own)
    return float(settings.policy_attach_timeout_s)


def deadline_text(unix_ms: int) -> str:
    """Return a deadline as a team reads it: ISO 8601 UTC to the second (``2026-12-02T10:15:00Z``)."""
    return datetime.fromtimestamp(unix_ms / 1000.0, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class AttachDeadlines:
    """The attach deadline of every job that is waiting for its policy, kept across its turns (thread-safe).

    :param clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._deadlines: Dict[str, Tuple[float, float]] = {}  # job id -> (monotonic deadline, timeout_s)

    def start(self, job_id: str, timeout_s: float) -> float:
        """Return the job's deadline (monotonic): the one it has, or ``timeout_s`` from now when it has none."""
        with self._lock:
            held = self._deadlines.get(job_id)
            if held is None:
                held = self._deadlines[job_id] = (self._clock() + float(timeout_s), float(timeout_s))
            return held[0]

    def timeout_of(self, job_id: str) -> Optional[float]:
        """Return the ``timeout_s`` the job's deadline was set with (None: it has none)."""
        with self._lock:
            held = self._deadlines.get(job_id)
            return None if held is None else held[1]

    def left_s(self, job_id: str) -> Optional[float]:
        """Return the seconds until the job's deadline (negative once past; None: it has none)."""
        with self._lock:
            held = self._deadlines.get(job_id)
            return None if held is None else held[0] - self._clock()

    def clear(self, job_id: str) -> None:
        """Forget the job's deadline (its policy is ready, or the job ended)."""
        with self._lock:
            self._deadlines.pop(job_id, None)

    def __contains__(self, job_id: object) -> bool:
        with self._lock:
            return job_id in self._deadlines

    def next_due(self, job_ids: "set | frozenset") -> Tuple[Optional[str], float]:
        """Of ``job_ids``, return the one whose deadline comes first and the seconds until it (``(None, inf)``)."""
        now = self._clock()
        with self._lock:
            held = [(deadline, job_id) for job_id, (deadline, _) in self._deadlines.items() if job_id in job_ids]
        if not held:
            return None, math.inf
        deadline, job_id = min(held)
        return job_id, deadline - now


@dataclass(frozen=True)
class Turns:
    """What a job's runner needs of its station to take turns (rule 2).

    :param deadlines: the station's :class:`AttachDeadlines` (a job's deadline outlives each of its turns).
    :param turn_s: how long one turn lasts (``ProcedureSettings.policy_turn_s``).
    :param others_waiting: whether a job would run before this one if it stepped aside now (called from a timer
        thread and from the station under its lock; must not block).
    """

    deadlines: AttachDeadlines
    turn_s: float
    others_waiting: Callable[[], bool]
