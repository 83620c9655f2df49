#!/usr/bin/env python3
"""The hot-path executor: SingleThreadedExecutor vs EventsExecutor, side by side in one run.

For every rate and executor (interleaved, so both see the same machine) it runs ``strands-robots up --rollout
--control-frequency <rate> --duration <d>`` with ``STRANDS_ROBOTS_EXECUTOR=<executor>`` (the arm driver and the
rollout node, each its own process, both on that executor) and listens on ``/<ns>/action_commands`` from this
process, a separate subscriber. Per run it prints:

- ``held %``: 1 - missed_deadlines / steps, from the episode's Ended line (the runner's own count);
- ``sent dev p50/p99/max``: |interval - period| in ms between consecutive commands' ``sent`` stamps (when the
  rollout's control loop published them, its node clock);
- ``recv dev p99``: the same between their arrivals here (adds the transport and this subscriber's jitter);
- ``recv``: commands heard / steps; ``c2v p99``: the rollout's command-to-verdict p99 (its log line);
- ``CPU ms/step``: CPU time of ``up`` and its two node processes (RUSAGE_CHILDREN: both nodes, start-up and
  the start-pose move included) per step;
- the load average before and after, since the machine may be shared.

First, for each executor, the CPU this process uses while a coroutine task awaits an unfinished future (what the
rollout node's RunEpisode and the driver's start-pose action do for a whole episode or move).

    source scripts/env.sh --no-install && PYTHONPATH=src/strands_robots python bench/executor_bench.py
    ... bench/executor_bench.py --rates 200,500 --executors single,events --duration 5 --rounds 2
    ... bench/executor_bench.py --rates 200,500 --executors single,single@10 --duration 5 --rounds 3

``<executor>@<priority>`` runs that executor with ``STRANDS_ROBOTS_RT_PRIORITY=<priority>`` (both node processes
on SCHED_FIFO, ``ros/realtime_priority.py``); without ``@`` the run sets ``STRANDS_ROBOTS_RT_PRIORITY=off`` (the
normal scheduler; the nodes' default where permitted is SCHED_FIFO 50).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

ENDED = re.compile(r"^Ended .*applied=(\d+) .*missed_deadlines=(\d+)")
C2V = re.compile(r"command-to-verdict p50 ([\d.]+) ms p99 ([\d.]+) ms")
EXECUTOR_LINE = re.compile(r"\[strands\.(\w+)\]: executor: (\w+)")
# The rollout node's own line, for a run whose Ended event the supervisor did not hear before the exit.
NODE_ENDED = re.compile(r"\]: episode \w+ ended: .*?, (\d+) actions, (\d+) missed deadlines")
REALTIME_LINE = re.compile(r"\]: real-time scheduling: (SCHED_FIFO \d+)")


def percentile(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100.0 * (len(ordered) - 1)))))]


def deviations_ms(stamps_ns: List[int], period_s: float) -> List[float]:
    """|interval - period| in ms between consecutive stamps."""
    period_ns = period_s * 1e9
    return [abs((b - a) - period_ns) / 1e6 for a, b in zip(stamps_ns, stamps_ns[1:])]


class CommandListener:
    """A node in this process on ``<ns>/action_commands``: each command's sent stamp and arrival time."""

    def __init__(self, namespace: str) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from strands_robots_msgs.msg import ActionCommand

        from strands_robots.ros.qos import COMMAND_QOS

        rclpy.init()
        self._rclpy = rclpy
        self.node = rclpy.create_node("executor_bench_listener")
        self._lock = threading.Lock()
        self._runs: Dict[str, List[tuple]] = {}
        self.node.create_subscription(ActionCommand, f"/{namespace}/action_commands", self._on_command, COMMAND_QOS)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name="listener", daemon=True)
        self._thread.start()

    def _on_command(self, msg: Any) -> None:
        now = time.monotonic_ns()
        sent = msg.sent.sec * 1_000_000_000 + msg.sent.nanosec
        with self._lock:
            self._runs.setdefault(msg.run_id, []).append((int(msg.step_index), sent, now))

    def _spin(self) -> None:
        while not self._stop.is_set() and self._rclpy.ok():
            self.executor.spin_once(timeout_sec=0.1)

    def take(self) -> Dict[str, List[tuple]]:
        with self._lock:
            runs, self._runs = self._runs, {}
        return runs

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self._rclpy.try_shutdown()


def await_cpu(kind: str, seconds: float = 3.0) -> float:
    """CPU s/s of this process while a coroutine task awaits an unfinished future on executor ``kind``.

    The rollout node's RunEpisode and the driver's start-pose action are such coroutines, for a whole episode
    or move. Spun as the nodes spin (``process.SpinThread``).
    """
    import rclpy
    from rclpy.task import Future

    from strands_robots.ros import process
    from strands_robots.ros.executor_choice import make_executor

    node = rclpy.create_node(f"executor_bench_await_{kind}")
    executor, _ = make_executor(kind)
    executor.add_node(node)
    pending: Future = Future(executor=executor)

    async def waiter() -> bool:
        return await pending

    executor.create_task(waiter)
    spin = process.spin_in_background(executor, f"await-{kind}")
    time.sleep(0.5)
    c0 = time.process_time()
    time.sleep(seconds)
    used = (time.process_time() - c0) / seconds
    pending.set_result(True)
    spin.stop(2.0)
    node.destroy_node()
    return used


def run_once(rate: float, executor: str, duration: float, namespace: str, listener: CommandListener,
             timeout_s: float) -> Dict[str, Any]:
    kind, _, priority = executor.partition("@")
    env = dict(os.environ, STRANDS_ROBOTS_EXECUTOR=kind)
    env["STRANDS_ROBOTS_RT_PRIORITY"] = priority or "off"
    argv = ["strands-robots", "up", "--rollout", "--namespace", namespace, "--control-frequency", f"{rate:g}",
            "--duration", f"{duration:g}"]
    listener.take()
    load_before = os.getloadavg()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # A child inherits this process's scheduler: ``up`` and its nodes start on the normal one whatever the
    # listener's (--listener-priority), and take SCHED_FIFO only when the run asks for it (executor@priority).
    normal = getattr(os, "SCHED_OTHER", None)
    reset = (lambda: os.sched_setscheduler(0, normal, os.sched_param(0))) if normal is not None else None
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=reset)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, _ = proc.communicate(timeout=5.0)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            out = ""
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    time.sleep(0.3)  # the last commands' arrival at the listener (bounded: they were sent before the exit)
    runs = listener.take()
    row: Dict[str, Any] = {"rate_hz": rate, "executor": executor, "exit": proc.returncode,
                           "load_before": load_before, "load_after": os.getloadavg(),
                           "cpu_s": (cpu_after.ru_utime + cpu_after.ru_stime)
                           - (cpu_before.ru_utime + cpu_before.ru_stime)}
    row["executors_seen"] = sorted(set(EXECUTOR_LINE.findall(out or "")))
    row["realtime_seen"] = REALTIME_LINE.findall(out or "")  # one line per node process that got it
    for line in (out or "").splitlines():
        m = ENDED.search(line)
        if m:
            row["steps"], row["missed"] = int(m.group(1)), int(m.group(2))
        m = C2V.search(line)
        if m:
            row["c2v_p50_ms"], row["c2v_p99_ms"] = float(m.group(1)), float(m.group(2))
    if "steps" not in row:
        m = NODE_ENDED.search(out or "")
        if m:
            row["steps"], row["missed"] = int(m.group(1)), int(m.group(2))
            row["ended_from"] = "the rollout node's log (the Ended event did not reach up before the exit)"
    if "steps" not in row:
        row["tail"] = (out or "").splitlines()[-8:]
        return row
    commands = max(runs.values(), key=len) if runs else []
    commands.sort()
    period = 1.0 / rate
    sent = deviations_ms([c[1] for c in commands], period)
    recv = deviations_ms([c[2] for c in commands], period)
    row["held_pct"] = 100.0 * max(0.0, 1.0 - row["missed"] / max(1, row["steps"]))
    row["received"] = len(commands)
    row["sent_dev_ms"] = [percentile(sent, 50), percentile(sent, 99), max(sent) if sent else float("nan")]
    row["recv_dev_p99_ms"] = percentile(recv, 99)
    return row


def machine() -> str:
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "")
    except OSError:
        pass
    try:
        import rclpy  # noqa: F401
        from importlib.metadata import version

        rclpy_version = version("rclpy")
    except Exception:
        rclpy_version = "?"
    return (f"{platform.node()} {cpu} x{os.cpu_count()}, Linux {platform.release()}, Python "
            f"{platform.python_version()}, rclpy {rclpy_version}, RMW {os.environ.get('RMW_IMPLEMENTATION', '?')}")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", default="200,500,1000")
    p.add_argument("--executors", default="single,events")
    p.add_argument("--duration", type=float, default=5.0, help="episode length in s (default 5)")
    p.add_argument("--rounds", type=int, default=1, help="runs per rate and executor, interleaved (default 1)")
    p.add_argument("--namespace", default="execbench")
    p.add_argument("--listener-priority", type=int, default=0,
                   help="put this process (the separate subscriber) on SCHED_FIFO at this priority (default 0: no)")
    args = p.parse_args(argv)
    if args.listener_priority:  # before rclpy.init: the listener's DDS and spin threads inherit it
        from strands_robots.ros.realtime_priority import RT_PRIORITY_ENV, apply_realtime_priority

        print(f"listener: {apply_realtime_priority({RT_PRIORITY_ENV: str(args.listener_priority)}).line}")
    rates = [float(r) for r in args.rates.split(",") if r]
    executors = [e.strip() for e in args.executors.split(",") if e.strip()]
    print(f"machine: {machine()}")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  ({when})")
    listener = CommandListener(args.namespace)
    rows = []
    awaiting = {}
    try:
        for executor in executors:
            kind = executor.partition("@")[0]
            if kind in awaiting:
                continue
            awaiting[kind] = await_cpu(kind)
            print(f"{kind}: CPU while an action's coroutine awaits a future: {awaiting[kind]:.3f} s/s")
        for rate in rates:
            for _ in range(args.rounds):
                for executor in executors:
                    row = run_once(rate, executor, args.duration, args.namespace, listener,
                                   timeout_s=1.5 * args.duration + 60.0)
                    rows.append(row)
                    print(format_row(row), flush=True)
    finally:
        listener.close()
    os.makedirs("bench/results", exist_ok=True)
    path = time.strftime("bench/results/executor_bench-%Y%m%dT%H%M%SZ.json", time.gmtime())
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"machine": machine(), "args": vars(args), "await_cpu_s_per_s": awaiting, "rows": rows}, handle,
                  indent=1)
    print(f"saved {path}")
    return 0


HEADER = ("| rate Hz | executor | steps | held % | sent dev p50/p99/max ms | recv dev p99 ms | recv | c2v p99 ms "
          "| CPU ms/step | load before→after |")


def format_row(row: Dict[str, Any]) -> str:
    if not format_row.header_done:  # type: ignore[attr-defined]
        print(HEADER)
        print("|---" * (HEADER.count("|") - 1) + "|")
        format_row.header_done = True  # type: ignore[attr-defined]
    load = f"{row['load_before'][0]:.1f}→{row['load_after'][0]:.1f}"
    if "steps" not in row:
        return f"| {row['rate_hz']:g} | {row['executor']} | failed (exit {row['exit']}) | | | | | | | {load} |"
    d = row["sent_dev_ms"]
    name = row["executor"]
    if "@" in name and len(row.get("realtime_seen", [])) < 2:
        name += " (SCHED_FIFO not applied)"
    return (f"| {row['rate_hz']:g} | {name} | {row['steps']} | {row['held_pct']:.2f} | "
            f"{d[0]:.3f} / {d[1]:.3f} / {d[2]:.1f} | {row['recv_dev_p99_ms']:.3f} | {row['received']}/{row['steps']} | "
            f"{row.get('c2v_p99_ms', float('nan')):.2f} | {1000.0 * row['cpu_s'] / row['steps']:.2f} | {load} |")


format_row.header_done = False  # type: ignore[attr-defined]

if __name__ == "__main__":
    sys.exit(main())
