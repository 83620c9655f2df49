"""Chaos: random SIGKILLs of every process of a station during one 40-episode job, each restarted.

The relay, the arm driver, the rollout node, the station node and the team's policy client each run as their own
process (``crash_harness.CrashStation``). While the job runs, one of them is SIGKILLed at a random moment after
each finished episode and started again after a short random pause, as a supervisor restarts a child it saw die:
``STRANDS_CHAOS_KILLS`` kills (20) in all. The job must end SUCCEEDED within the bound with every rule of
``crash_harness.check_invariants`` kept (each episode id once in the relay and the station's log, nothing lost
or re-run, one Started and at most one Ended per rollout, every kept rollout's Ended, nothing left running).

The station node is killed at most ``persistence.MAX_RESTARTS`` times: a job whose station restarts more often
is FAILED by design (a station that keeps dying must not loop for ever), so more would test that rule instead.

The seed is printed; ``STRANDS_CHAOS_SEED=<seed>`` replays the same choices of what is killed, when (the episode
and the pause after it) and how long each restart waits. The wall clock still varies, so a replay is the same
schedule, not the same interleaving.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

from crash_harness import (  # noqa: E402
    INFRASTRUCTURE,
    TERMINAL,
    ObserverRecorder,
    SnapshotWatch,
    check_invariants,
    crash_station,
    task,
)

from strands_robots.station.persistence import MAX_RESTARTS  # noqa: E402

EPISODES = 40
KILLS = int(os.environ.get("STRANDS_CHAOS_KILLS", "20"))
BOUND_S = 330.0  # the job ends within this of its submission (the bound is 6 minutes for the test)
TARGETS = ("relay", "arm_driver", "rollout", "station", "client")
# 0.5 s episodes: the kills land at random moments of rollouts, start poses and score sheets alike; the episode
# length is not what is tested (the 40 episodes and 20 kills are), and each second saved is 40 of the test's.
TASKS = [task("a", duration_s="0.5"), task("b", duration_s="0.5"), task("c", duration_s="0.5")]


def kept(status) -> int:
    return sum(1 for e in status.episodes if e.end_condition != INFRASTRUCTURE)


def test_random_sigkills_of_every_process_during_a_40_episode_job_end_it_succeeded_with_nothing_lost(tmp_path):
    seed = int(os.environ.get("STRANDS_CHAOS_SEED", str(random.SystemRandom().randrange(2**32))))
    print(f"chaos seed {seed} (replay: STRANDS_CHAOS_SEED={seed}), {KILLS} kills", flush=True)
    rng = random.Random(seed)
    namespace = f"chaos_{seed}"
    stack = crash_station(str(tmp_path), namespace=namespace,
                          station_params={"attach_timeout_s": "20.0", "policy_attach_timeout_s": "120.0",
                                          "max_infrastructure_retries": "5"})
    recorder = watch = None
    schedule: list = []
    try:
        stack.start_relay()
        stack.start_nodes()
        recorder = ObserverRecorder(namespace)
        assert recorder.wait_matched(), "the rollout node's observer_events never appeared"
        client = stack.client()
        submitted = time.monotonic()
        job_id = client.submit_job(station_id=stack.station_id, tasks=TASKS, episodes=EPISODES)
        stack.start_client(job_id)
        watch = SnapshotWatch(stack, job_id)
        deadline = submitted + BOUND_S
        station_kills = 0
        done_before = 0
        for n in range(KILLS):
            # One kill per finished episode at most: the job always moves on between two kills.
            status = watch.wait(lambda s: s.state in TERMINAL or kept(s) > done_before,
                                deadline - time.monotonic(), f"an episode finished after kill {n}")
            if status.state in TERMINAL:
                break
            done_before = kept(status)
            time.sleep(rng.uniform(0.1, 1.2))  # somewhere in the next episode (or between two)
            choices = [t for t in TARGETS if t != "station" or station_kills < MAX_RESTARTS]
            target = rng.choice(choices)
            station_kills += target == "station"
            pause = rng.uniform(0.0, 0.5)
            schedule.append((round(time.monotonic() - submitted, 1), target, done_before))
            stack.kill(target, signal.SIGKILL)
            time.sleep(pause)  # the supervisor notices, then starts it again
            stack.restart(target)
        final = watch.wait(lambda s: s.state in TERMINAL, deadline - time.monotonic(), "a terminal state")
        took = time.monotonic() - submitted
        print(f"chaos seed {seed}: {len(schedule)} kills {schedule}", flush=True)
        faults = [(e.episode_id, e.end_detail[:300]) for e in final.episodes if e.end_condition == INFRASTRUCTURE]
        if final.state != "SUCCEEDED":
            print(f"chaos seed {seed}: {final.state}: {final.message}\nstation faults:\n" +
                  "\n".join(f"  {f}" for f in faults) + "\n" + stack.tail(200), flush=True)
        assert final.state == "SUCCEEDED", (seed, final.message)
        assert len(schedule) == KILLS, (seed, schedule)
        figures = check_invariants(stack, job_id, final, watch, recorder, TASKS,
                                   killed_rollouts=sum(1 for _, t, _ in schedule if t == "rollout"))
        print(f"chaos seed {seed}: SUCCEEDED in {took:.0f} s; {figures}; station faults {faults}", flush=True)
    finally:
        try:
            if watch is not None:
                watch.close()
            if recorder is not None:
                recorder.close()
        finally:
            stack.stop()  # every process ever started, by PID
    assert stack.left_running() == [], stack.left_running()
