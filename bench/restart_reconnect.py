"""How long until a SIGKILLed and restarted process of a station is heard by its peers again, both ways.

    source scripts/env.sh
    export ROS_DOMAIN_ID=<yours> ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST PYTHONPATH=src/strands_robots:test
    python bench/restart_reconnect.py --rounds 10

The station's processes run as ``strands-robots up`` runs them (relay, arm driver, camera node, rollout node,
station node, with the project's Fast DDS profile), with one job left waiting for its policy, and a probe node in
this process that outlives every restart (``test/restart_probe.py`` says what it asks and hears). Each round
SIGKILLs every process in turn, waits ``--pause-s`` (as a supervisor notices a death) and starts it again; the
clock starts when the new process is started (its exec, so Python's imports and the node's set-up count):

- ``<node> up``: the new process has made its DDS participant (its own start-up: Python's imports, ``rclpy.init``);
- ``<node> answers``: the node's parameter service answered the probe (request peer -> restarted, answer back);
- ``<node> heard``: the node's periodic topic reached the probe (arm driver ``joint_states``, camera
  ``scene/camera_info``, station ``/diagnostics``);
- ``relay answers``: a team's ``get_status`` answered; ``relay hears station``: the station heard by the relay
  again (it reports every 2 s when nothing changes).

Prints p50 / p90 / max per figure and the machine's load; ``--profile none`` runs the same with Fast DDS's own
defaults (the project's profile not set) for comparison. Not a pass/fail test: test/test_restart_reconnect.py
holds the same figures to a generous bound.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "test"), str(ROOT / "src" / "strands_robots" / "test"), str(ROOT / "src" / "strands_robots")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=10, help="restarts of each process (default 10)")
    p.add_argument("--pause-s", type=float, default=0.3, help="pause between the SIGKILL and the restart")
    p.add_argument("--bound-s", type=float, default=60.0, help="give up on a figure after this long")
    p.add_argument("--targets", default="relay,arm_driver,camera,rollout,station")
    p.add_argument("--profile", choices=("project", "none"), default="project",
                   help="'none': Fast DDS's defaults instead of the project's profile, for comparison")
    args = p.parse_args()
    from strands_robots.dds.fastdds_profile import PROFILE_VARIABLES, use_project_profile

    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    if args.profile == "none":
        # an empty profile file: the variable is set, so no process takes the project's; Fast DDS's defaults apply
        empty = Path(tempfile.mkdtemp(prefix="fastdds_none_")) / "none.xml"
        empty.write_text('<dds xmlns="http://www.eprosima.com"><profiles/></dds>', encoding="utf-8")
        for name in PROFILE_VARIABLES:
            os.environ[name] = str(empty)
    else:
        use_project_profile()
    from restart_probe import ProbedStation

    targets = [t for t in args.targets.split(",") if t]
    figures: dict = {}
    missed: dict = {}
    rows: list = []  # (target, figures of that restart)
    load_before = os.getloadavg()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="restart_bench_") as workdir:
        station = ProbedStation(workdir, namespace=f"restart_bench_{os.getpid()}")
        try:
            ready = station.wait_all_heard(180.0)
            print(f"[bench] every process heard once: {ready}", flush=True)
            for n in range(args.rounds):
                for target in targets:
                    got = station.measure_restart(target, args.pause_s, args.bound_s)
                    rows.append((target, got))
                    for key, value in got.items():
                        if value is None:
                            missed[key] = missed.get(key, 0) + 1
                        else:
                            figures.setdefault(key, []).append(value)
                    print(f"[bench] round {n + 1} {target}: " + ", ".join(
                        f"{k} {'%.2f' % v if v is not None else 'MISSED'}" for k, v in got.items()), flush=True)
        finally:
            station.close()
    load_after = os.getloadavg()
    print(f"\nrestart -> first heard, seconds ({args.rounds} restarts of each process, pause {args.pause_s:g} s, "
          f"profile {args.profile}; {platform.node()}, {os.cpu_count()} cores, load "
          f"{load_before[0]:.1f} -> {load_after[0]:.1f}, {time.monotonic() - started:.0f} s)")
    print(f"{'figure':28s} {'n':>3s} {'p50':>6s} {'p90':>6s} {'max':>6s} {'missed':>7s}")
    for key in sorted(set(figures) | set(missed)):
        values = sorted(figures.get(key, []))
        if values:
            p90 = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
            print(f"{key:28s} {len(values):3d} {statistics.median(values):6.2f} {p90:6.2f} {values[-1]:6.2f} "
                  f"{missed.get(key, 0):7d}")
        else:
            print(f"{key:28s} {0:3d} {'-':>6s} {'-':>6s} {'-':>6s} {missed.get(key, 0):7d}")
    after_up: dict = {}  # node -> seconds from its participant made to its last figure, per restart
    for target, got in rows:
        up = got.get(f"{target} up")
        heard = [v for k, v in got.items() if k != f"{target} up"]
        if up is not None and heard and None not in heard:
            after_up.setdefault(target, []).append(max(heard) - up)
    if after_up:
        print("\nfrom the process's participant made (up) to its last figure, seconds: the DDS part")
        for name, values in sorted(after_up.items()):
            values.sort()
            print(f"  {name:12s} p50 {statistics.median(values):5.2f}  max {values[-1]:5.2f}")
    worst = max((v for vs in figures.values() for v in vs), default=0.0)
    print(f"worst of all: {worst:.2f} s; missed (not within {args.bound_s:g} s): {sum(missed.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
