"""A station whose policy succeeds with a known probability, every episode at once: known truth for the statistics.

:class:`KnownRatePort` is a real :class:`~strands_robots.station.ports.RobotPort` (the lease, the start pose and
safety always granted) whose rollout is one draw of a seeded policy; :func:`run_job` runs a job of it through the
station core's ``JobRunner`` with the scripted operator judging and scoring each episode, so the figures in its
status are the station's own. Shared by the summary's unit tests and the interval-coverage simulation.
"""

from __future__ import annotations

import random
import threading

from strands_robots.station.episodes import JobRunner
from strands_robots.station.job_file import job_spec_from_mapping
from strands_robots.station.ports import RolloutOutcome
from strands_robots.station.record import JobRecord
from strands_robots.station.scripted_operator import ScriptedOperator

SHEET = [{"name": "done", "question": "Did it finish the task?", "answer_type": "yes_no", "max_points": 1,
          "success_answer": "yes"}]


class KnownRatePort:
    """The robot side of a station whose policy finishes its task with probability ``p``, every episode at once.

    The lease, the start pose and safety are always granted; the rollout is one draw of the seeded policy: it ends
    ``policy_completed`` (the policy raised EndEpisode: the scripted operator's default success) with probability
    ``p``, else at its budget (``timeout``, a failure).
    """

    def __init__(self, p: float, seed: int) -> None:
        self._p = p
        self._rng = random.Random(seed)
        self.draws = []

    def wait_for_policy(self, spec, cancelled: threading.Event):
        return True, "known-rate policy"

    def acquire_lease(self, holder, priority, duration_s):
        return True, ""

    def release_lease(self, stop_reason=""):
        pass

    def move_to_start_pose(self, plan):
        return True, ""

    def safety_stop_detail(self):
        return ""

    def clear_safety_stop(self, operator_name):
        return True, ""

    def run_rollout(self, plan, progress):
        finished = self._rng.random() < self._p
        self.draws.append(finished)
        progress(0.0)
        return RolloutOutcome(stopped_reason="policy_completed" if finished else "budget", run_id=plan.episode_id)

    def pause_rollout(self):
        return True, ""

    def resume_rollout(self):
        return True, ""

    def stop_rollout(self, reason):
        pass

    def claim_arms(self, holder):
        return False, "no operator claims in this simulation"


def run_job(n: int, p: float, seed: int, operator: ScriptedOperator, intervals: str = "wilson",
            tasks: int = 1, publish=None):
    """Run one job of ``n`` episodes (its tasks cycled) through the station core; its final status, the draws."""
    spec = job_spec_from_mapping({
        "job_id": f"known-rate-{seed}", "client_id": "team", "station_id": "sim", "episodes_total": n,
        "intervals": intervals, "policy": {"provider": "scripted"},
        "tasks": [{"task_id": f"finish_{t}" if tasks > 1 else "finish", "instruction": "finish the task",
                   "scoring": SHEET} for t in range(tasks)]})
    port = KnownRatePort(p, seed)
    status = JobRunner(JobRecord(spec), port, operator, publish=publish).run()
    return status, port.draws
