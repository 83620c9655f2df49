"""Chaos runs at the issue's size: a job of 80 episodes while 20 SIGKILLs hit every process of the station.

    source scripts/env.sh
    export ROS_DOMAIN_ID=<yours> ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST PYTHONPATH=src/strands_robots:test
    python bench/chaos.py --seeds 1,2,3            # those seeds
    python bench/chaos.py --count 10               # ten random seeds (each printed)
    python bench/chaos.py --count 10 --out chaos_runs.txt

One run per seed, one after another (a run is heavy: five processes rendering, simulating and restarting on a
small machine). ``test/chaos_run.py`` says what a run does and checks; test/test_station_chaos.py runs one random
seed of 40 episodes in CI. For each seed: the outcome, the time from submission to the job's end, the kills of
each process, the episodes run (kept + station faults) and the slowest restart-to-next-kept-episode. A run that
does not end SUCCEEDED prints the job's message, its station faults and the last 200 lines of the processes.
Exit 0 when every run SUCCEEDED.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "test"), str(ROOT / "src" / "strands_robots" / "test"), str(ROOT / "src" / "strands_robots")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="", help="comma-separated seeds")
    p.add_argument("--count", type=int, default=0, help="this many random seeds (after --seeds)")
    p.add_argument("--episodes", type=int, default=80)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--bound-s", type=float, default=0.0, help="the job must end within this (default 150 + 6/episode)")
    p.add_argument("--targets", default="relay,arm_driver,camera,rollout,station")
    p.add_argument("--out", default="", help="append each run's line to this file too")
    args = p.parse_args()
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    from strands_robots.dds.fastdds_profile import use_project_profile

    use_project_profile()  # this process's recorder and client nodes, as the station's processes take it
    from chaos_run import run_chaos

    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    seeds += [random.SystemRandom().randrange(2**32) for _ in range(args.count)]
    if not seeds:
        p.error("give --seeds or --count")
    bound_s = args.bound_s or 150.0 + 6.0 * args.episodes
    targets = tuple(t for t in args.targets.split(",") if t)
    header = (f"# chaos runs: {args.episodes} episodes, {args.kills} SIGKILLs of {', '.join(targets)}; "
              f"{platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the start; "
              f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    lines = [header]
    print(header, flush=True)
    failed = 0
    for seed in seeds:
        print(f"[chaos] seed {seed} ...", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"chaos_{seed}_") as workdir:
            try:
                result = run_chaos(workdir, seed, args.episodes, args.kills, bound_s, targets=targets,
                                   say=lambda line: print(line, flush=True))
                line = result.line() + f"; load {os.getloadavg()[0]:.1f}"
                if result.left_running:
                    line += f"; LEFT RUNNING {result.left_running}"
                if result.state != "SUCCEEDED" or result.left_running:
                    failed += 1
                    print(f"[chaos] seed {seed}: {result.message}\nstation faults:\n" +
                          "\n".join(f"  {f}" for f in result.faults) + "\n" + result.tail, flush=True)
            except AssertionError as exc:
                failed += 1
                line = f"seed {seed}: FAILED a check: {str(exc).splitlines()[0][:300]}"
        lines.append(line)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as out:
                out.write(("\n" if len(lines) == 2 else "") + (header + "\n" if len(lines) == 2 else "") +
                          line + "\n")
    print(f"\n{len(seeds) - failed} of {len(seeds)} runs SUCCEEDED with every check kept", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
