"""What a job's summary costs the station core: CPU per episode of a job run through ``JobRunner``.

Jobs of a policy that succeeds with probability 0.5 over the light port of the interval-coverage test
(``src/strands_robots/test/known_rate_port.py``: every episode ends at once, the scripted operator scores it), so
what is timed is the station core alone: the state machine, the episode procedure, the operator console, the
snapshots and their summary. Three ways:

- ``none``: snapshots without a summary (``summary_of`` replaced by a stub returning None): the core's own cost;
- ``per snapshot``: the summary recomputed from the whole episode list for every snapshot (about four per
  episode), what a straightforward ``snapshot_of`` would do;
- ``station``: what the station does (``JobRunner``: one running summary, updated once per listed episode).

CPU time (``time.process_time``) after a warm-up that fills the interval caches, so the machine's load changes
the wall time far more than these figures. Usage::

    .venv/bin/python bench/summary_bench.py [--jobs 200] [--n 10,20,50]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src" / "strands_robots"))
sys.path.insert(0, str(HERE.parent / "src" / "strands_robots" / "test"))

from known_rate_port import run_job  # noqa: E402

from strands_robots.station import episodes, status, summary  # noqa: E402
from strands_robots.station.scripted_operator import ScriptedOperator  # noqa: E402


def cpu_per_episode(n: int, jobs: int, operator: ScriptedOperator, seed: int) -> float:
    start = time.process_time()
    for job in range(jobs):
        run_job(n, 0.5, seed=seed + job, operator=operator)
    return (time.process_time() - start) / (jobs * n) * 1e6


class _PerSnapshot:
    """A JobRunner's summary without the running tally: every snapshot re-reads the whole list."""

    def __init__(self, *_a) -> None:
        pass

    def summary(self, episode_list, discarded=(), interrupted=()):
        return summary.summarize(episode_list, discarded=discarded, interrupted=interrupted)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs timed per setting (after as many to warm up)")
    parser.add_argument("--n", default="10,20,50", help="episodes per job, comma-separated")
    args = parser.parse_args()
    sizes = [int(x) for x in args.n.split(",")]
    print(f"# summary_bench: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, load {os.getloadavg()[0]:.1f}; {args.jobs} jobs per row, CPU us/episode")
    operator = ScriptedOperator()
    real_summary_of, real_running = episodes.summary_of, episodes.RunningSummary
    try:
        for n in sizes:
            cpu_per_episode(n, args.jobs, operator, seed=10_000)  # warm-up: imports, interval caches
            rows = []
            episodes.summary_of = status.summary_of = lambda record, running=None: None
            rows.append(("none", cpu_per_episode(n, args.jobs, operator, seed=0)))
            status.summary_of = real_summary_of
            episodes.summary_of, episodes.RunningSummary = real_summary_of, _PerSnapshot
            original_commit = episodes.JobRunner._commit

            def every_snapshot(self, _commit=original_commit):
                self._summary = None  # recompute for this snapshot
                _commit(self)

            episodes.JobRunner._commit = every_snapshot
            rows.append(("per snapshot", cpu_per_episode(n, args.jobs, operator, seed=0)))
            episodes.JobRunner._commit = original_commit
            episodes.RunningSummary = real_running
            rows.append(("station", cpu_per_episode(n, args.jobs, operator, seed=0)))
            for name, us in rows:
                print(f"n={n:<3} {name:<13} {us:8.0f} us/episode")
    finally:
        episodes.summary_of, episodes.RunningSummary = real_summary_of, real_running
        status.summary_of = real_summary_of
        operator.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
