"""Control-loop benchmark: how well PolicyRunner holds its rate, over ROS and in process, with and without observer.

The observer stream: DESIGN.md §5 "Rollout loop", §8 targets. Not a pass/fail test: it prints figures. The
parts: the probes (``control_loop_timing.py``), the child processes and their CPU (``control_loop_processes.py``),
the runs and the in-process mode (``control_loop_runs.py``), the ROS modes (``control_loop_ros.py``), the
microbenchmark and the pacer floor (``control_loop_micro.py``), the report (``control_loop_report.py``).

Modes:

- ``stream`` / ``service``: the arm driver node in its own process (``strands_robots.nodes.arm_driver.node``,
  autostart, leases required, ``joint_states`` at the control rate); in this process :class:`PolicyRunner`
  drives a :class:`RosDriverBackend` (``command_path`` ``stream``, the rollout node's default: an
  ActionCommand published per step, never waited for; each step's event dispatched when its ActionVerdict
  arrives, at most ``command_window_s`` (50 ms) of commands in flight, the loop holding beyond it;
  ``service``: one SendAction call per step) whose node a ``SingleThreadedExecutor`` (as the rollout node;
  ``--executor multi`` for a ``MultiThreadedExecutor``) spins on a background thread. The lease is acquired
  once per driver; the arms move to the start pose before every run. ``ros`` is another name for ``service``.
  "with observer": the rollout node's own :class:`QueuedEventPublisher` publishes every event on
  ``/bench/observer_events`` and ``bench/event_counter.py``, **a separate process**, subscribes with
  ``EVENT_QOS`` and counts what arrives (per ``run_id``, gaps in ``event_seq``).
- ``inproc``: :class:`PolicyRunner` on :class:`InProcessBackend` (``DriverCore.simulated()`` called directly;
  ``backend.advance`` steps the physics once per control step, inside the loop). "with observer": a counting
  observer on the control thread doing the same minimal work as the counter process (count per ``run_id``,
  check ``event_seq``, read the kind and the observation's size); ``--inproc-observer queued`` uses the
  :class:`QueuedEventPublisher` instead (copies, queue, ROS message conversion on its thread, no DDS).

Every run: the mock policy, ``fast_mode=False`` (deadline pacing), ``seed=0``, a supplied stop token (as the
rollout node does). ``send_action`` (on the stream: the command window's ``submit``) is timed by a thin
decorator around the backend (call start and duration, ``time.perf_counter_ns``, preallocated lists); the
observer by a thin wrapper. On the stream the command-to-verdict latency is publish to verdict arrival (the
stream's own figures); on the service and in process it is the call's round trip. The step budget is
``duration * rate``; a loop that cannot keep up is stopped cooperatively after ``1.5 * duration + 10 s`` (its
row then says ``outcome=cancelled`` and how many steps ran). Before the runs: the observer-lane microbenchmark
and the "pacer floor" (the project's ``DeadlinePacer`` alone, no work: the best this machine allows right now).

Usage (through ``make bench`` / ``bash scripts/bench.sh``, which set up ROS and a private ROS_DOMAIN_ID)::

    bash scripts/bench.sh                                  # the full default (6-9 minutes)
    bash scripts/bench.sh --rates 200 --duration 5         # a quick look
    bash scripts/bench.sh --modes inproc --observer without --rates 500,1000

Results: a table on stdout and ``bench/results/control_loop-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import traceback
from typing import Any, Callable

from control_loop_micro import microbench, pacer_floor
from control_loop_processes import Child, CpuMeter
from control_loop_report import find_row, machine_info, machine_line, ratios, table, targets
from control_loop_ros import RosHarness
from control_loop_runs import run_inproc


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS_DIR = os.path.join(HERE, "results")
DEFAULT_RATES = "200,500,1000"
ROS_MODES = ("stream", "service")
DEFAULT_INPROC_EXTRA = (1000.0,)


# -- main ---------------------------------------------------------------------------------------------------------
def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    p = argparse.ArgumentParser(description="strands_robots control-loop benchmark (DESIGN.md §8)")
    p.add_argument("--rates", default=None, help=f"control rates in Hz, comma-separated (default {DEFAULT_RATES})")
    p.add_argument("--inproc-rates", default=None,
                   help="in-process rates (default: --rates, plus 1000 when --rates is not given)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds per run (default 20)")
    p.add_argument("--modes", default="stream,service,inproc",
                   help="stream (the nodes' command path), service (SendAction per step), inproc; comma-separated "
                        "(default all three; ros = service)")
    p.add_argument("--observer", choices=("both", "with", "without"), default="both")
    p.add_argument("--inproc-observer", choices=("counting", "queued"), default="counting",
                   help="in-process 'with observer': a counting observer (default) or the QueuedEventPublisher")
    p.add_argument("--driver-rate", default="match",
                   help="driver joint_states rate in Hz, or 'match' (= the control rate; default)")
    p.add_argument("--executor", choices=("multi", "single", "events"), default="single",
                   help="ROS mode: the client node's executor (default single, as the rollout node's control path; "
                        "events: rclpy's EventsExecutor in the client and the driver process)")
    p.add_argument("--executor-threads", type=int, default=4,
                   help="MultiThreadedExecutor threads with --executor multi (default 4)")
    p.add_argument("--switch-interval-ms", type=float, default=0.5,
                   help="sys.setswitchinterval for the bench process in ms (default 0.5, as the node processes: "
                        "strands_robots.ros.process; 0: Python's default, 5 ms)")
    p.add_argument("--floor-duration", type=float, default=5.0,
                   help="seconds of DeadlinePacer-only timing per rate, the machine's floor (0: skip)")
    p.add_argument("--micro-events", type=int, default=100_000, help="events per microbenchmark (0: skip)")
    p.add_argument("--output", default="", help="JSON path (default bench/results/control_loop-<time>.json)")
    args = p.parse_args(argv)

    def rates(text: str) -> list:
        out = []
        for part in text.split(","):
            part = part.strip()
            if part:
                value = float(part)
                if not (0 < value <= 2000):
                    p.error(f"rate {value:g} Hz is outside (0, 2000]")
                out.append(value)
        return out

    args.rate_list = rates(args.rates or DEFAULT_RATES)
    if args.inproc_rates:
        args.inproc_rate_list = rates(args.inproc_rates)
    else:
        args.inproc_rate_list = args.rate_list + (
            [r for r in DEFAULT_INPROC_EXTRA if r not in args.rate_list] if args.rates is None else [])
    args.mode_list = [("service" if m.strip() == "ros" else m.strip()) for m in args.modes.split(",") if m.strip()]
    for m in args.mode_list:
        if m not in ROS_MODES + ("inproc",):
            p.error(f"unknown mode {m!r} (stream, service, inproc)")
    args.obs_list = {"both": [False, True], "with": [True], "without": [False]}[args.observer]
    if args.duration <= 0:
        p.error("--duration must be > 0")
    return args


def _on_sigterm(*_: Any) -> None:
    raise KeyboardInterrupt("SIGTERM")


def main(argv: "list[str] | None" = None) -> int:
    args = parse_args(argv)
    # Discovery on this host only, on a domain of our own, unless the caller (scripts/bench.sh) chose one.
    os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 100 + 1))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    signal.signal(signal.SIGTERM, _on_sigterm)
    if args.switch_interval_ms > 0:
        sys.setswitchinterval(args.switch_interval_ms / 1e3)
    os.makedirs(RESULTS_DIR, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_path = args.output or os.path.join(RESULTS_DIR, f"control_loop-{stamp}.json")
    log_dir = os.path.join(RESULTS_DIR, f"logs-{stamp}")
    os.makedirs(log_dir, exist_ok=True)

    ros_needed = any(m in ROS_MODES for m in args.mode_list)
    rclpy = None
    if ros_needed:
        import rclpy as _rclpy

        rclpy = _rclpy
        try:
            from rclpy.signals import SignalHandlerOptions

            rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
        except (ImportError, TypeError):
            rclpy.init()
    machine = machine_info()
    print(machine_line(machine), flush=True)
    plan = []
    for mode in args.mode_list:
        for rate in (args.rate_list if mode in ROS_MODES else args.inproc_rate_list):
            for obs in args.obs_list:
                plan.append((mode, rate, obs))
    labels = ", ".join(f"{m} {r:g} Hz{' +obs' if o else ''}" for m, r, o in plan)
    print(f"plan: {len(plan)} runs of {args.duration:g} s ({labels})", flush=True)

    rows: list = []
    micro: dict = {}
    floor: list = []
    report: dict = {"machine": machine, "args": {k: v for k, v in vars(args).items()}, "runs": rows,
                    "microbench": micro, "pacer_floor": floor, "started_utc": stamp}
    code = 0
    try:
        if args.micro_events > 0:
            print("microbench: observer lane ...", flush=True)
            micro.update(microbench(args.micro_events))
        if args.floor_duration > 0:
            all_rates = sorted(set(args.rate_list if ros_needed else [])
                               | set(args.inproc_rate_list if "inproc" in args.mode_list else []))
            print(f"pacer floor: DeadlinePacer alone, {args.floor_duration:g} s per rate ...", flush=True)
            for rate in all_rates:
                meter = CpuMeter({})
                f = pacer_floor(rate, args.floor_duration)
                f["cpu"] = meter.stop()
                floor.append(f)
        for mode in args.mode_list:
            if mode == "inproc":
                for rate in args.inproc_rate_list:
                    for obs in args.obs_list:
                        rows.append(_one(lambda: run_inproc(rate, args.duration, obs, args.inproc_observer),
                                         mode, rate, obs, args.duration))
            else:
                by_driver_rate: dict = {}
                for rate in args.rate_list:
                    drv = rate if args.driver_rate == "match" else float(args.driver_rate)
                    by_driver_rate.setdefault(drv, []).append(rate)
                for drv, rates in by_driver_rate.items():
                    try:
                        with RosHarness(drv, log_dir, args.executor, args.executor_threads, mode) as ros:
                            for rate in rates:
                                for obs in args.obs_list:
                                    rows.append(_one(lambda: ros.run(rate, args.duration, obs), mode, rate, obs,
                                                     args.duration))
                    except KeyboardInterrupt:
                        raise
                    except Exception as exc:
                        traceback.print_exc()
                        for rate in rates:
                            for obs in args.obs_list:
                                if not find_row(rows, mode, rate, obs):
                                    rows.append({"mode": mode, "rate_hz": rate, "observer": obs,
                                                 "failed": f"driver set-up: {type(exc).__name__}: {exc}"})
    except KeyboardInterrupt:
        print("interrupted: reporting what ran", file=sys.stderr)
        code = 130
    finally:
        Child.stop_all()
        if rclpy is not None:
            rclpy.try_shutdown()
        report["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        report["ratios"] = ratios(rows)
        report["targets"] = targets(rows, micro)
        with open(out_path, "w") as f:
            json.dump(report, f, indent=1, default=str)
        print()
        print(machine_line(machine))
        executor = {"single": "SingleThreadedExecutor", "events": "EventsExecutor (client and driver)"}.get(
            args.executor, f"MultiThreadedExecutor({args.executor_threads})")
        print(f"{args.duration:g} s per run; mock policy, deadline pacing; deviation = |step interval - period| "
              f"between send_action starts, ms; rtt = send_action on the control thread, ms; c2v = command to "
              f"verdict (stream: publish to verdict arrival; service/inproc: the round trip), ms"
              + (f"; ROS client executor: {executor}" if ros_needed else ""))
        print(table(rows))
        others = [r["cpu"]["others_cpu_pct"] for r in rows if "others_cpu_pct" in r.get("cpu", {})]
        if others:
            mean_others = sum(others) / len(others)
            print(f"other processes on this machine: {mean_others:.0f}% of one core on average during the runs "
                  f"(max {max(others):.0f}%; column oth%)"
                  + ("; the machine was not quiet, so read the timing figures as upper bounds"
                     if mean_others > 20 else ""))
        if floor:
            print("pacer floor (DeadlinePacer alone, no work; deviation ms): " + "; ".join(
                f"{f['rate_hz']:g} Hz p50 {f['interval_dev_ms']['p50']:.3f} p99 {f['interval_dev_ms']['p99']:.3f} "
                f"max {f['interval_dev_ms']['max']:.2f} missed {f['missed_pct']:.2f}% "
                f"(oth {f['cpu'].get('others_cpu_pct', float('nan')):.0f}%)" for f in floor))
        if micro:
            print()
            print("observer lane microbench (us/event, best of 5): " + ", ".join(
                f"{k[:-3] if k.endswith('_us') else k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in micro.items() if k not in ("events_per_round",)))
        print()
        for line in report["ratios"]:
            print(line)
        print()
        for line in report["targets"]:
            print(line)
        print(f"\nresults: {os.path.relpath(out_path, ROOT)} (logs: {os.path.relpath(log_dir, ROOT)})")
    if any(r.get("failed") for r in rows):
        code = code or 1
    return code


def _one(fn: Callable[[], dict], mode: str, rate: float, obs: bool, duration: float) -> dict:
    label = f"{mode} {rate:g} Hz {'with' if obs else 'without'} observer"
    print(f"run: {label} ({duration:g} s) ...", flush=True)
    try:
        row = fn()
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        traceback.print_exc()
        return {"mode": mode, "rate_hz": rate, "observer": obs, "failed": f"{type(exc).__name__}: {exc}"}
    print(f"     {row.get('achieved_hz', float('nan')):.1f} steps/s, p99 deviation "
          f"{row.get('interval_dev_ms', {}).get('p99', float('nan')):.3f} ms, missed {row.get('missed_pct', 0):.2f} %"
          f", rtt p50 {row.get('rtt_ms', {}).get('p50', float('nan')):.3f} ms, cpu "
          f"{row.get('cpu', {}).get('bench_cpu_pct', float('nan')):.0f}%", flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main())
