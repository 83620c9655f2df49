"""Getting the arms before an episode: the station waits for them (bounded), it never plays an episode without.

The arms belong to one lease holder at a time (``arm.lease``). A station's rollouts hold
``station:<station_id>``; a claim of another station never preempts it (the lease's rule), so a station that
finds the arms held by someone else -- another station between or during its episodes, a maintenance claim, a
driver that is not up yet -- waits: it asks again every ``poll_s`` until the lease is granted, the job is
cancelled, or ``wait_s`` has passed. Past that the job FAILs with the reason; no episode is recorded for arms it
never had (an "authority_lost" episode with no rollout would count as a result of the policy).

No rclpy here.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Tuple

__all__ = ["acquire_arms", "WAITING_FOR_ARMS"]

WAITING_FOR_ARMS = "waiting for the arms"


def acquire_arms(
    robot: Any,
    holder: str,
    priority: int,
    duration_s: float,
    *,
    wait_s: float,
    cancelled: threading.Event,
    say: Callable[[str], None],
    episode_id: str,
    poll_s: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
) -> Tuple[str, str]:
    """Acquire the lease for an episode, waiting while it is refused.

    :returns: ``("granted", detail)``, ``("cancelled", "")`` or ``("failed", reason)`` (the reason names the
        holder the driver reported and how long the station waited).
    """
    deadline = clock() + wait_s
    said = ""
    while True:
        granted, detail = robot.acquire_lease(holder, priority, duration_s)
        if granted:
            return "granted", detail
        if cancelled.is_set():
            return "cancelled", ""
        if clock() >= deadline:
            return "failed", (f"{episode_id}: {holder} could not get the arms within {wait_s:g} s: {detail}; no "
                              "episode was played")
        if not said:  # once: a refusal's wording changes every poll ("for another 0.42 s")
            said = f"{episode_id} {WAITING_FOR_ARMS} (up to {wait_s:g} s): {detail}"
            say(said)
        if cancelled.wait(min(poll_s, max(0.0, deadline - clock()))):
            return "cancelled", ""
