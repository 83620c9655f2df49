"""How the station runs episodes: the settings of the episode procedure (``station/episodes.py``), checked.

:class:`ProcedureSettings` comes from the station node's parameters (``nodes/station/node.py``) or a test; an
out-of-range value is refused when it is made, naming the setting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Tuple

__all__ = ["ProcedureSettings"]


@dataclass(frozen=True)
class ProcedureSettings:
    """How the station runs episodes.

    :param lease_holder: the name the station claims the arms under; empty (the default): ``station:<station_id>``
        of the job (``arm.lease.station_holder``), so another station's claim never preempts it.
    :param lease_wait_s: how long an episode waits for the arms while another holder has them (asking again every
        half second); past it the job FAILs with the reason, and no episode is recorded for it.
    :param supervisors: operator names that may resume another operator's takeover.
    :param lease_priority: the rollout's lease priority (an operator claims above it).
    :param lease_duration_s: lease length without renewal.
    :param scoring_timeout_s: how long to wait for a sheet before keeping the episode unscored (None: wait).
    :param max_attempts_per_episode: ids one kept-episode slot may spend (discards, lost policy sessions,
        restarts) before the job fails, so nothing re-runs without end.
    :param max_infrastructure_retries: how many times one task's episode runs again after the station's own
        infrastructure ended it (``infrastructure_fault``); the next such fault FAILs the job naming its cause.
    :param infrastructure_backoff_s: the pause before a task runs again after a station fault, doubled for each
        further fault of that task (at most 8 times it): a process a supervisor is restarting, or the ROS graph still
        listing a killed one, gets time to settle instead of spending every retry at once (0: no pause).
    :param policy_attach_timeout_s: how long the job waits for its policy (a relay client attaching) each time it
        is WAITING_POLICY, unless the job names its own (``JobSpec.policy_attach_timeout_s``); past it the job
        is FAILED with that reason. The deadline counts while the job waits in the queue too.
    :param policy_turn_s: how long a job waiting for its policy holds the station while another team's job is
        queued; then it steps aside (keeping its place and its deadline) and that job runs
        (``station.policy_wait``).
    :param team_recordings: a job may ask for its episodes' recordings (``JobSpec.record``): the station records
        them and sends a relay job's to its team. False (the station's config forbids recordings leaving it): such
        a job is refused at submit, naming why.
    :param station_facts: what the station is (``station.provenance.StationFacts``: its arms, cameras, files and
        software): the station's side of the compatibility gate and the jobs' provenance. None: no gate, no
        provenance.
    """

    lease_holder: str = ""
    lease_priority: int = 10
    lease_duration_s: float = 1.0
    scoring_timeout_s: Optional[float] = None
    max_attempts_per_episode: int = 10
    max_infrastructure_retries: int = 3
    policy_attach_timeout_s: float = 600.0
    policy_turn_s: float = 10.0
    infrastructure_backoff_s: float = 1.0
    lease_wait_s: float = 120.0
    supervisors: Tuple[str, ...] = ()
    team_recordings: bool = True
    station_facts: Any = None

    def __post_init__(self) -> None:
        for name, low in (("max_attempts_per_episode", 1), ("max_infrastructure_retries", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not isinstance(self.lease_holder, str) or (self.lease_holder and not self.lease_holder.strip()):
            raise ValueError("lease_holder must be a string (empty: station:<station_id>)")
        if isinstance(self.lease_wait_s, bool) or not isinstance(self.lease_wait_s, (int, float)) \
                or not math.isfinite(self.lease_wait_s) or self.lease_wait_s < 0:
            raise ValueError(f"lease_wait_s must be a finite number >= 0, got {self.lease_wait_s!r}")
        if not isinstance(self.supervisors, tuple) or not all(isinstance(n, str) for n in self.supervisors):
            raise ValueError(f"supervisors must be a tuple of operator names, got {self.supervisors!r}")
        backoff = self.infrastructure_backoff_s
        if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or not math.isfinite(backoff) \
                or backoff < 0:
            raise ValueError(f"infrastructure_backoff_s must be a finite number >= 0, got {backoff!r}")
        if isinstance(self.lease_priority, bool) or not isinstance(self.lease_priority, int):
            raise ValueError(f"lease_priority must be an integer, got {self.lease_priority!r}")
        for name in ("lease_duration_s", "scoring_timeout_s", "policy_attach_timeout_s", "policy_turn_s"):
            value = getattr(self, name)
            if value is None and name == "scoring_timeout_s":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
