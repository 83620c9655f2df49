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
    ``p``, else at its budget (``timeout``, a failure). ``p`` may map a comparison job's slots to their rates: the
    episode's slot (``plan.compare_slot``) draws with its own.
    """

    serves_slots = True  # each slot's episode draws with its own rate

    def __init__(self, p, seed: int) -> None:
        self._p = p  # one rate, or a comparison job's rate of each slot (by the plan's compare_slot)
        self._rng = random.Random(seed)
        self.draws = []
        self.plans = []

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
        p = self._p[plan.compare_slot] if isinstance(self._p, dict) else self._p
        finished = self._rng.random() < p
        self.draws.append(finished)
        self.plans.append(plan)
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


def comparison_spec(job_id: str, slots, blocks: int, *, alpha: float = 0.05, max_blocks=None,
                    or_out_of_reach: bool = False, stop: bool = True):
    """Return a comparison job of ``blocks`` blocks (one task, seeds 0..blocks-1) of ``slots`` (scripted policy)."""
    compare = {"slots": list(slots), "suite": "known_rates"}
    if stop:
        compare["stop"] = {"alpha": alpha, "max_blocks": max_blocks or blocks, "or_out_of_reach": or_out_of_reach}
    return job_spec_from_mapping({
        "job_id": job_id, "client_id": "team", "station_id": "sim", "episodes_total": blocks * len(slots),
        "policy": {"provider": "scripted"}, "compare": compare,
        "tasks": [{"task_id": "finish", "instruction": "finish the task", "scoring": SHEET,
                   "parameters": {"seed": str(seed)}} for seed in range(blocks)]})


def run_comparison(rates, seed: int, operator: ScriptedOperator, blocks: int, publish=None, **stop):
    """Run one comparison job of slots with known ``rates`` through the station core; its final status, the port."""
    spec = comparison_spec(f"known-rates-{seed}", list(rates), blocks, **stop)
    port = KnownRatePort(dict(rates), seed)
    status = JobRunner(JobRecord(spec), port, operator, publish=publish).run()
    return status, port


def simulate_comparisons(rates, runs: int, max_blocks: int, *, seed: int = 0, alpha: float = 0.05,
                         or_out_of_reach: bool = False):
    """Run ``runs`` comparison jobs of slots with known ``rates`` through the station's comparison core.

    Each run is one job's ``station.comparison.ComparisonProgress`` (what ``JobRunner`` asks which slot runs next
    and whether to stop) folded over its episodes, each episode scored with its slot's seeded draw for its block,
    without the rollout, lease and snapshot machinery around it (``run_comparison`` runs that too). Returns
    ``(verdicts, blocks)``: each run's verdict on ``slots[0]`` against ``slots[1]`` and the blocks it ran.
    """
    from types import SimpleNamespace

    import numpy as np

    from strands_robots.job_model.compare import CompareRequest, StopRequest
    from strands_robots.station.comparison import start_progress

    slots = tuple(rates)
    compare = CompareRequest(slots, StopRequest(alpha=alpha, max_blocks=max_blocks, or_out_of_reach=or_out_of_reach))
    task = SimpleNamespace(task_id="finish")
    verdicts, blocks = [], []
    for run in range(runs):
        rng = np.random.default_rng([seed, run])
        draws = {slot: (rng.random(max_blocks) < rates[slot]).tolist() for slot in slots}
        progress = start_progress(f"sim-{seed}-{run}", compare, max_blocks)
        n = 0
        while (step := progress.next_run()) is not None:
            success = draws[step.slot][step.block.index]
            progress = progress.after(SimpleNamespace(
                episode_id=f"ep_{n:04d}", end_condition="policy_completed" if success else "timeout", scored=True,
                success=success, score=float(success), taken_over=False, slot=step.slot,
                block_id=step.block.block_id, task=task, seed=step.block.index))
            n += 1
        verdicts.append(progress.tests.verdict(slots[0], slots[1]).value)
        blocks.append(progress.block)
    return np.array(verdicts), np.array(blocks)
