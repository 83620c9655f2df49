"""A chaos run: one job while random SIGKILLs hit every process of a station, each started again at once.

The relay, the arm driver, the camera node, the rollout node and the station node each run as their own process
(``crash_harness.CrashStation``, the cameras of ``strands-robots up``), and the team's policy client too. The kills
are spread over the whole job: each lands at a random moment after a kept episode drawn at random (without
repeats) from the job's first to its last but one, so restarts come early and late in a long job alike. One of
the targets is SIGKILLed there and started again after a short random pause, as a supervisor restarts a child it
saw die. The job must end SUCCEEDED within the bound with every rule of ``crash_harness.check_invariants`` kept.

``test/test_station_chaos.py`` runs one random seed of it in CI; ``bench/chaos.py`` runs the issue's size (80
episodes, 20 kills) for the seeds it is given. The seed fixes what is killed, when (the episode and the pause
after it) and how long each restart waits; the wall clock still varies, so a replay is the same schedule, not the
same interleaving.

One kill per kept episode at most: a kept episode separates every two kills, so the station's restart limit,
which counts restarts without a kept episode between them (a crash loop), never ends the job however often the
station is killed.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

from crash_harness import (
    INFRASTRUCTURE,
    SUITE,
    TERMINAL,
    ObserverRecorder,
    SnapshotWatch,
    check_invariants,
    crash_station,
    task,
)
from suite_harness import submit_suite

TARGETS = ("relay", "arm_driver", "camera", "rollout", "station")
CAMERAS = "scene,wrist"  # what `strands-robots up` renders
# 0.5 s episodes: the kills land at random moments of rollouts, start poses and score sheets alike; the episode
# length is not what is tested (the episodes and the kills are).
TASKS = [task("a", duration_s="0.5"), task("b", duration_s="0.5"), task("c", duration_s="0.5")]
STATION_PARAMS = {"attach_timeout_s": "20.0", "policy_attach_timeout_s": "120.0",
                  "max_infrastructure_retries": "5"}


@dataclass
class ChaosResult:
    """What a chaos run did and how its job ended (``figures`` from ``check_invariants`` when it SUCCEEDED)."""

    seed: int
    episodes: int
    state: str = ""
    message: str = ""
    took_s: float = 0.0
    schedule: List[Tuple[float, str, int]] = field(default_factory=list)  # (s after submit, target, kept before)
    # (target, seconds from its restart to the next kept episode; 0 when one was kept while it restarted)
    recovered_s: List[Tuple[str, float]] = field(default_factory=list)
    faults: List[Tuple[str, str]] = field(default_factory=list)  # (episode id, end_detail) of station faults
    figures: dict = field(default_factory=dict)
    tail: str = ""
    left_running: List[int] = field(default_factory=list)  # PIDs still alive after the stop (must be none)

    @property
    def kills(self) -> Counter:
        return Counter(target for _, target, _ in self.schedule)

    def line(self) -> str:
        kills = ", ".join(f"{t} {self.kills.get(t, 0)}" for t in sorted(self.kills))
        worst = max((s for _, s in self.recovered_s), default=0.0)
        return (f"seed {self.seed}: {self.state} in {self.took_s:.0f} s; {self.episodes} episodes, "
                f"{self.figures.get('episodes', '?')} run ({len(self.faults)} station faults); "
                f"{len(self.schedule)} kills ({kills}); slowest restart to the next kept episode {worst:.1f} s")


def kept(status) -> int:
    return sum(1 for e in status.episodes if e.end_condition != INFRASTRUCTURE)


def run_chaos(workdir: str, seed: int, episodes: int, kills: int, bound_s: float,
              targets: Sequence[str] = TARGETS, say: Callable[[str], None] = print) -> ChaosResult:
    """Run one chaos job (see the module docstring); end every process it started by PID before returning.

    ``left_running`` lists any still alive after that.

    :raises AssertionError: a rule of ``check_invariants`` broken, or the job not terminal within ``bound_s``.
    """
    if not 0 <= kills < episodes:
        raise ValueError(f"kills must be fewer than the episodes ({kills} >= {episodes})")
    rng = random.Random(seed)
    kill_after = sorted(rng.sample(range(1, episodes), kills))  # kept episodes before each kill
    namespace = f"chaos_{seed}"
    result = ChaosResult(seed=seed, episodes=episodes)
    stack = crash_station(workdir, namespace=namespace, station_params=STATION_PARAMS, suite_tasks=TASKS,
                          cameras=CAMERAS if "camera" in targets else "")
    recorder: Optional[ObserverRecorder] = None
    watch: Optional[SnapshotWatch] = None
    try:
        stack.start_relay()
        stack.start_nodes()
        recorder = ObserverRecorder(namespace)
        assert recorder.wait_matched(), "the rollout node's observer_events never appeared"
        client = stack.client()
        submitted = time.monotonic()
        job_id = submit_suite(client, stack.station_id, SUITE, TASKS, episodes)
        stack.start_client(job_id)
        watch = SnapshotWatch(stack, job_id)
        deadline = submitted + bound_s
        done_before = 0
        for n, after in enumerate(kill_after):
            wanted = max(after, done_before + 1)
            status = watch.wait(lambda s: s.state in TERMINAL or kept(s) >= wanted,
                                deadline - time.monotonic(), f"{wanted} episodes kept before kill {n + 1}")
            if status.state in TERMINAL:
                break
            done_before = kept(status)
            time.sleep(rng.uniform(0.1, 1.2))  # somewhere in the next episode (or between two)
            target = rng.choice(list(targets))
            pause = rng.uniform(0.0, 0.5)
            result.schedule.append((round(time.monotonic() - submitted, 1), target, done_before))
            stack.kill(target, signal.SIGKILL)
            time.sleep(pause)  # the supervisor notices, then starts it again
            restarted = time.monotonic()
            stack.restart(target)
            say(f"chaos seed {seed}: kill {n + 1} of {kills}: {target} at {result.schedule[-1][0]} s "
                f"({done_before} episodes kept)")
            status = watch.wait(lambda s: s.state in TERMINAL or kept(s) > done_before,
                                deadline - time.monotonic(), f"an episode kept after kill {n + 1}")
            result.recovered_s.append((target, time.monotonic() - restarted))
            if status.state in TERMINAL:
                break
        final = watch.wait(lambda s: s.state in TERMINAL, deadline - time.monotonic(), "a terminal state")
        result.took_s = time.monotonic() - submitted
        result.state, result.message = final.state, final.message
        result.faults = [(e.episode_id, e.end_detail[:300]) for e in final.episodes
                         if e.end_condition == INFRASTRUCTURE]
        if final.state != "SUCCEEDED":
            result.tail = stack.tail(200)
            return result
        result.figures = check_invariants(stack, job_id, final, watch, recorder, TASKS,
                                          killed_rollouts=result.kills.get("rollout", 0))
        return result
    finally:
        try:
            if watch is not None:
                watch.close()
            if recorder is not None:
                recorder.close()
        finally:
            stack.stop()  # every process ever started, by PID
            result.left_running = stack.left_running()
