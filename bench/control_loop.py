"""Control-loop benchmark: how well PolicyRunner holds its rate, over ROS and in process, with and without the
observer stream (DESIGN.md §5 "Rollout loop", §8 targets). Not a pass/fail test: it prints figures.

Modes:

- ``stream`` / ``service``: the arm driver node in its own process (``strands_robots.nodes.arm_driver_node``,
  autostart, leases required, ``joint_states`` at the control rate); in this process :class:`PolicyRunner`
  drives a :class:`RosDriverBackend` (``command_path`` ``stream``, the rollout node's default: an
  ActionCommand published per step, never waited for; each step's event dispatched when its ActionVerdict
  arrives, at most ``command_window_s`` (50 ms) of commands in flight, the loop holding beyond it;
  ``service``: one SendAction call per step) whose node a ``SingleThreadedExecutor`` (as the rollout node; ``--executor multi`` for a
  ``MultiThreadedExecutor``) spins on a background thread. The lease is acquired once per driver; the arms
  move to the start pose before every run. ``ros`` is another name for ``service``.
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
import gc
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Callable, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS_DIR = os.path.join(HERE, "results")
NAMESPACE = "/bench"
EVENTS_TOPIC = f"{NAMESPACE}/observer_events"
DEFAULT_RATES = "200,500,1000"
ROS_MODES = ("stream", "service")
DEFAULT_INPROC_EXTRA = (1000.0,)

# DESIGN.md §8.
TARGET_ROS_RATE = 200.0
TARGET_ROS_RATES = (200.0, 500.0)
TARGET_ROS_P99_MS = 1.0
TARGET_MISSED_PCT = 0.1
TARGET_INPROC_RATES = (500.0, 1000.0)
TARGET_INPROC_P99_MS = 0.5
TARGET_OBSERVER_US = 10.0
PEER = "peer (strands-robots 0.5.3, in-process): 200 Hz p99 ~2.2 ms; 474 steps/s asked 500 Hz; observer 25-40 us/step"

CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- what the loop calls, timed ---------------------------------------------------------------------------------
class TimedBackend:
    """A RobotBackend decorator recording each ``send_action``'s start time and round trip (ns).

    Preallocated lists and two clock reads per call: ~0.3 µs. Other attributes (``core``, ``joint_limits``,
    the ROS backend's extras) are forwarded, so the runner sees the backend it wraps.
    """

    def __init__(self, inner: Any, capacity: int) -> None:
        self._inner = inner
        self._send = inner.send_action
        self.action_keys = inner.action_keys
        self.observe = inner.observe
        self.reset = inner.reset
        self.advance = inner.advance
        self.safety_stop_detail = inner.safety_stop_detail
        self.capacity = capacity
        self.starts = [0] * capacity
        self.rtts = [0] * capacity
        self.n = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def send_action(self, action: Any) -> Any:
        return self._timed(self._send, action)

    def _timed(self, call: Callable[[Any], Any], action: Any) -> Any:
        clock = time.perf_counter_ns
        t0 = clock()
        try:
            return call(action)
        finally:
            t1 = clock()
            n = self.n
            if n < self.capacity:
                self.starts[n] = t0
                self.rtts[n] = t1 - t0
                self.n = n + 1

    def command_window(self) -> Any:
        """The inner backend's asynchronous command path with its ``submit`` timed (None when it has none)."""
        factory = getattr(self._inner, "command_window", None)
        window = factory() if callable(factory) else None
        return None if window is None else TimedWindow(window, self)


class TimedWindow:
    """A command window (rollout/pipeline.py) whose ``submit`` calls are timed like ``send_action``."""

    def __init__(self, inner: Any, timed: TimedBackend) -> None:
        self._inner = inner
        self._timed = timed
        self.max_outstanding = inner.max_outstanding
        self.overdue_ns = inner.overdue_ns
        self.verdict_bound_ns = inner.verdict_bound_ns
        self.collect = inner.collect
        self.describe_silence = inner.describe_silence

    def submit(self, action: Any) -> Any:
        return self._timed._timed(self._inner.submit, action)


class TimedObserver:
    """Wraps an observer and records the time each call takes on the control thread (ns)."""

    def __init__(self, inner: Callable[[Any], Any], capacity: int) -> None:
        self.inner = inner
        self.capacity = capacity
        self.costs = [0] * capacity
        self.n = 0

    def __call__(self, event: Any) -> None:
        clock = time.perf_counter_ns
        t0 = clock()
        try:
            self.inner(event)
        finally:
            dt = clock() - t0
            n = self.n
            if n < self.capacity:
                self.costs[n] = dt
                self.n = n + 1


class CountingObserver:
    """The in-process "with observer": the counter process's minimal work, on the control thread."""

    def __init__(self) -> None:
        self.runs: dict[str, list] = {}   # run_id -> [received, next_seq, missing, steps]
        self.obs_values = 0

    def __call__(self, event: Any) -> None:
        r = self.runs.get(event.run_id)
        if r is None:
            r = self.runs[event.run_id] = [0, 0, 0, 0]
        r[0] += 1
        seq = event.event_seq
        if seq != r[1]:
            r[2] += max(0, seq - r[1])
        r[1] = seq + 1
        obs = getattr(event, "observation", None)
        if obs is not None:
            r[3] += 1
            self.obs_values += len(obs)

    def summary(self) -> dict:
        return {"received": sum(r[0] for r in self.runs.values()),
                "missing": sum(r[2] for r in self.runs.values()),
                "steps": sum(r[3] for r in self.runs.values())}


# -- child processes --------------------------------------------------------------------------------------------
class Child:
    """A process in its own session, ended by its process group (SIGINT, then SIGTERM, then SIGKILL)."""

    live: "list[Child]" = []

    def __init__(self, name: str, argv: list, stdout: Any, stderr: Any) -> None:
        self.name = name
        self.proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                     start_new_session=True, cwd=ROOT)
        self.pid = self.proc.pid
        Child.live.append(self)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_s(self) -> Optional[float]:
        """utime + stime of the process (all its threads) from /proc/<pid>/stat; None once it is gone."""
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / CLK_TCK
        except (OSError, IndexError, ValueError):
            return None

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace_s: float = 5.0) -> Optional[int]:
        if self.alive():
            for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
                self.signal(sig)
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # Stragglers left in the group (none expected) go too.
        self.signal(signal.SIGKILL)
        if self in Child.live:
            Child.live.remove(self)
        return self.proc.returncode

    @classmethod
    def stop_all(cls) -> None:
        for child in list(cls.live):
            try:
                child.stop(grace_s=3.0)
            except Exception:
                traceback.print_exc()


# -- measurements -------------------------------------------------------------------------------------------------
def _pcts(values_ms: np.ndarray) -> dict:
    if values_ms.size == 0:
        return {"p50": float("nan"), "p99": float("nan"), "max": float("nan"), "mean": float("nan")}
    p50, p99 = np.percentile(values_ms, [50, 99])
    return {"p50": float(p50), "p99": float(p99), "max": float(values_ms.max()), "mean": float(values_ms.mean())}


def loop_metrics(timed: TimedBackend, rate: float) -> dict:
    """Achieved rate and step-interval deviation from send_action start times; round trips."""
    n = timed.n
    starts = np.asarray(timed.starts[:n], dtype=np.int64)
    rtts = np.asarray(timed.rtts[:n], dtype=np.int64) / 1e6
    period_ns = 1e9 / rate
    out: dict = {"steps_timed": n}
    if n >= 2:
        intervals = np.diff(starts)
        span_s = (starts[-1] - starts[0]) / 1e9
        out["achieved_hz"] = (n - 1) / span_s if span_s > 0 else float("nan")
        dev = np.abs(intervals - period_ns) / 1e6
        out["interval_dev_ms"] = _pcts(dev)
        out["intervals_over_period_plus_1ms"] = int(np.count_nonzero(intervals > period_ns + 1e6))
        worst = np.argsort(intervals)[-5:][::-1]
        out["worst_intervals"] = [{"step": int(i + 1), "interval_ms": float(intervals[i] / 1e6)} for i in worst]
    else:
        out["achieved_hz"] = float("nan")
        out["interval_dev_ms"] = _pcts(np.array([]))
    out["rtt_ms"] = _pcts(rtts)
    return out


def observer_metrics(timed_obs: Optional[TimedObserver], steps: int) -> dict:
    if timed_obs is None or timed_obs.n == 0:
        return {}
    costs = np.asarray(timed_obs.costs[:timed_obs.n], dtype=np.int64) / 1e3
    return {"calls": timed_obs.n, "us_per_event": _pcts(costs),
            "us_per_step": float(costs.sum() / max(1, steps))}


def _machine_busy_s() -> Optional[float]:
    """CPU seconds all cores spent busy since boot (/proc/stat: everything but idle and iowait)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        ticks = [int(x) for x in fields[1:]]
        return (sum(ticks[:8]) - ticks[3] - ticks[4]) / CLK_TCK  # user..steal, less idle and iowait
    except (OSError, ValueError, IndexError):
        return None


class CpuMeter:
    """CPU seconds of this process (all threads), of the given children and of the whole machine over a window.

    ``machine_cpu_pct`` is every core's busy time (100 = one core busy); ``others_cpu_pct`` what is left of it
    after the bench's own processes: load the bench did not make (other jobs on a shared machine).
    """

    def __init__(self, children: "dict[str, Child]") -> None:
        self.children = children
        self.machine0 = _machine_busy_s()
        self.wall0 = time.perf_counter()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.self0 = ru.ru_utime + ru.ru_stime
        self.child0 = {k: c.cpu_s() for k, c in children.items()}

    def stop(self) -> dict:
        wall = time.perf_counter() - self.wall0
        ru = resource.getrusage(resource.RUSAGE_SELF)
        out = {"wall_s": wall, "bench_cpu_s": ru.ru_utime + ru.ru_stime - self.self0}
        out["bench_cpu_pct"] = 100.0 * out["bench_cpu_s"] / wall if wall > 0 else float("nan")
        for k, c in self.children.items():
            now, then = c.cpu_s(), self.child0.get(k)
            if now is not None and then is not None:
                out[f"{k}_cpu_s"] = now - then
                out[f"{k}_cpu_pct"] = 100.0 * (now - then) / wall if wall > 0 else float("nan")
        machine = _machine_busy_s()
        if machine is not None and self.machine0 is not None and wall > 0:
            out["machine_cpu_pct"] = 100.0 * (machine - self.machine0) / wall
            ours = out["bench_cpu_s"] + sum(v for k, v in out.items() if k.endswith("_cpu_s") and k != "bench_cpu_s")
            out["others_cpu_pct"] = max(0.0, 100.0 * (machine - self.machine0 - ours) / wall)
        return out


# The budget is in steps (duration * rate): a loop that cannot keep up would run far longer than `duration`.
# Past this wall-clock cap the run is stopped cooperatively (outcome "cancelled", its figures still count).
WALL_CAP_FACTOR = 1.5
WALL_CAP_EXTRA_S = 10.0


def run_rollout(runner: Any, rate: float, duration: float, observer: Any) -> dict:
    # As the rollout node's main(): what exists before the run is frozen out of the garbage collector, so a full
    # collection (13 ms over ~60 000 objects here) does not stall the loop.
    gc.collect()
    gc.freeze()
    cap_s = duration * WALL_CAP_FACTOR + WALL_CAP_EXTRA_S
    timer = threading.Timer(cap_s, runner.request_stop, args=(f"bench wall-clock cap {cap_s:g} s",))
    timer.daemon = True
    timer.start()
    try:
        return runner.run("mock", duration=duration, control_frequency=rate, fast_mode=False, seed=0,
                          observer=observer, instruction="bench")
    finally:
        timer.cancel()


def summarise(mode: str, with_obs: bool, rate: float, duration: float, result: dict, timed: TimedBackend,
              timed_obs: Optional[TimedObserver], cpu: dict, extra: dict) -> dict:
    episode = result["episodes"][0] if result.get("episodes") else {}
    steps = int(episode.get("applied_actions", 0))
    missed = int(episode.get("missed_deadlines", 0))
    row = {
        "mode": mode, "observer": with_obs, "rate_hz": rate, "duration_s": duration,
        "status": result.get("status"), "outcome": episode.get("outcome"),
        "stopped_reason": episode.get("stopped_reason"), "end_detail": episode.get("end_detail", ""),
        "error": result.get("error_message") or episode.get("error_message", ""),
        "steps": steps, "steps_budget": int(round(duration * rate)), "missed_deadlines": missed,
        "missed_pct": 100.0 * missed / steps if steps else float("nan"),
        "unknown_count": episode.get("unknown_count", 0),
        "action_errors_first": list(episode.get("action_errors", []))[:3],
        "elapsed_s": episode.get("elapsed_s"),
        "paused_s": episode.get("paused_s", 0.0),
        "observer_failures": result.get("observer_failures", 0),
    }
    row.update(loop_metrics(timed, rate))
    # Command-to-verdict latency: on the stream, publish to verdict arrival (set in extra); on the service and
    # in process the verdict is the call's return, so it is the round trip.
    row["c2v_ms"] = row["rtt_ms"]
    row["observer_cost"] = observer_metrics(timed_obs, steps)
    row["cpu"] = cpu
    row.update(extra)
    return row


# -- in-process mode ----------------------------------------------------------------------------------------------
def run_inproc(rate: float, duration: float, with_obs: bool, observer_kind: str) -> dict:
    from strands_robots.arm.backend import InProcessBackend
    from strands_robots.arm.driver import DriverCore
    from strands_robots.rollout.runner import PolicyRunner
    from strands_robots.rollout.stop import StopToken

    steps = int(round(duration * rate))
    timed = TimedBackend(InProcessBackend(DriverCore.simulated()), steps + 16)
    runner = PolicyRunner(timed, robot_name="bench_inproc", stop=StopToken())
    inner: Any = None
    queued = None
    extra: dict = {"observer_kind": ""}
    if with_obs:
        if observer_kind == "queued":
            from strands_robots.nodes.event_publisher import QueuedEventPublisher

            sink_count = [0]

            def sink(_msg: Any) -> None:
                sink_count[0] += 1

            queued = QueuedEventPublisher(sink, depth=8192)
            inner = queued
            extra["observer_kind"] = "QueuedEventPublisher (no DDS)"
        else:
            inner = CountingObserver()
            extra["observer_kind"] = "counting observer"
    timed_obs = TimedObserver(inner, steps + 16) if inner is not None else None
    meter = CpuMeter({})
    result = run_rollout(runner, rate, duration, timed_obs)
    if queued is not None:
        queued.flush(10.0)
    cpu = meter.stop()
    if queued is not None:
        queued.close(5.0)
        extra["events"] = {"published": queued.published, "dropped": queued.dropped,
                           "received": queued.published, "missing": queued.dropped}
    elif isinstance(inner, CountingObserver):
        s = inner.summary()
        extra["events"] = {"published": s["received"], "dropped": 0, "received": s["received"],
                           "missing": s["missing"]}
    return summarise("inproc", with_obs, rate, duration, result, timed, timed_obs, cpu, extra)


# -- ROS mode -----------------------------------------------------------------------------------------------------
class RosHarness:
    """One driver process (at one joint_states rate) and this process's client node, executor and lease."""

    def __init__(self, driver_rate_hz: float, log_dir: str, executor: str, executor_threads: int,
                 command_path: str = "stream") -> None:
        self.driver_rate_hz = driver_rate_hz
        self.command_path = command_path
        self.log_dir = log_dir
        self.executor_kind = executor
        self.executor_threads = executor_threads
        self.driver: Optional[Child] = None
        self.node = None
        self.executor = None
        self.spinner: Optional[threading.Thread] = None
        self.backend = None
        self.events_pub = None
        self._log = None

    def __enter__(self) -> "RosHarness":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _start(self) -> None:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
        from strands_robots_msgs.msg import ObserverEvent

        from strands_robots.nodes._qos import EVENT_QOS
        from strands_robots.nodes.driver_client import RosDriverBackend

        self._log = open(os.path.join(self.log_dir, f"driver-{self.command_path}-{self.driver_rate_hz:g}hz.log"), "ab")
        argv = [sys.executable, "-m", "strands_robots.nodes.arm_driver_node", "--ros-args",
                "-r", f"__ns:={NAMESPACE}", "-p", "autostart:=true",
                "-p", f"control_rate_hz:={float(self.driver_rate_hz)}", "-p", "require_lease:=true"]
        # The driver process on the same executor kind as this client (multi: the driver's default, single).
        os.environ["STRANDS_ROBOTS_EXECUTOR"] = "events" if self.executor_kind == "events" else "single"
        self._spin_stop = threading.Event()
        self.driver = Child("driver", argv, self._log, subprocess.STDOUT)
        self.node = rclpy.create_node("bench_rollout", namespace=NAMESPACE)
        # As the rollout node (its defaults; the joint limits come from the driver's DriverStatus). The start
        # pose is moved to before every run, outside the timed episode, so reset() does not move again.
        self.backend = RosDriverBackend(self.node, action_timeout_s=0.5, wait_timeout_s=30.0,
                                        command_path=self.command_path, control_frequency=self.driver_rate_hz,
                                        reset_moves_to_start_pose=False)
        self.events_pub = self.node.create_publisher(ObserverEvent, "observer_events", EVENT_QOS)
        if self.executor_kind == "single":
            self.executor = SingleThreadedExecutor()
        elif self.executor_kind == "events":
            from strands_robots.nodes.executor_choice import make_executor

            self.executor, _ = make_executor("events")
        else:
            self.executor = MultiThreadedExecutor(num_threads=self.executor_threads)
        self.executor.add_node(self.node)
        self.spinner = threading.Thread(target=self._spin, name="bench-executor", daemon=True)
        self.spinner.start()
        if not self.backend.wait_until_ready(timeout_s=60.0):
            raise RuntimeError(f"arm driver not ready within 60 s (log: {self._log.name}; "
                               f"alive={self.driver.alive()})")
        self.backend.action_keys()  # waits for the latched DriverStatus
        res = self.backend.acquire("bench", priority=10, duration_s=5.0, timeout_s=10.0)
        if not res.granted:
            raise RuntimeError(f"lease refused: {res.message}")

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            if self.executor_kind == "events":  # its spin() keeps the GIL while it waits: bounded spin_once calls
                while self.node is not None and self.node.context.ok() and not self._spin_stop.is_set():
                    self.executor.spin_once(timeout_sec=0.2)
            else:
                self.executor.spin()
        except (ExternalShutdownException, KeyboardInterrupt):
            pass
        except Exception:  # the executor dying is a bench failure worth seeing
            traceback.print_exc()

    def close(self) -> None:
        try:
            if self.backend is not None and self.driver is not None and self.driver.alive():
                try:
                    self.backend.release(timeout_s=2.0)  # needs the executor: before it stops
                except Exception:
                    pass
        finally:
            if getattr(self, "_spin_stop", None) is not None:
                self._spin_stop.set()
            if self.executor is not None:
                self.executor.shutdown(timeout_sec=2.0)
            if self.spinner is not None:
                self.spinner.join(3.0)
            if self.backend is not None:
                try:
                    self.backend.close()  # destroyed after the executor stopped: nothing waits on them
                except Exception:
                    pass
            if self.node is not None:
                self.node.destroy_node()
            if self.driver is not None:
                self.driver.stop()
            if self._log is not None:
                self._log.close()
            self.node = self.executor = self.backend = self.driver = None

    def wait_subscribers(self, n: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.events_pub.get_subscription_count() >= n:
                return True
            time.sleep(0.05)
        return False

    def run(self, rate: float, duration: float, with_obs: bool) -> dict:
        from strands_robots.nodes.event_publisher import QueuedEventPublisher
        from strands_robots.rollout.runner import PolicyRunner
        from strands_robots.rollout.stop import StopToken

        backend = self.backend
        if backend.lease_lost:
            raise RuntimeError(f"lease lost: {backend.lease_lost}")
        move = backend.move_to_start_pose()
        if not move.reached:
            raise RuntimeError(f"start pose not reached: {move.detail}")
        backend.set_control_frequency(rate)
        # A run id of its own, as the rollout node gives each episode (the stream's step indices restart at 0).
        backend.begin_run(f"bench-{self.command_path}-{rate:g}-{time.monotonic_ns()}")
        stream = backend.stream
        stream.latencies_ns.clear()
        stream_counts0 = stream.counts()
        steps = int(round(duration * rate))
        timed = TimedBackend(backend, steps + 16)
        runner = PolicyRunner(timed, robot_name="bench_ros", stop=StopToken())
        counter: Optional[Child] = None
        queued = None
        timed_obs = None
        extra: dict = {"observer_kind": "", "driver_joint_states_hz": self.driver_rate_hz,
                       "client_executor": {"multi": f"MultiThreadedExecutor({self.executor_threads})",
                                           "events": "EventsExecutor"}.get(self.executor_kind,
                                                                           "SingleThreadedExecutor"),
                       "start_pose_s": move.elapsed_s, "command_path": self.command_path,
                       "start_pose_via": move.via, "command_window_ms": backend.stale_after_s * 1e3,
                       "window_steps": backend.window_steps if self.command_path == "stream" else 0,
                       "driver_silence_s": backend.silence_s}
        children = {"driver": self.driver}
        try:
            if with_obs:
                argv = [sys.executable, os.path.join(HERE, "event_counter.py"), "--topic", EVENTS_TOPIC,
                        # Generous: the budget is in steps, so a loop that cannot keep up runs longer than
                        # `duration`; the counter is stopped by us after the run anyway.
                        "--runs", "1", "--timeout", str(duration * 50.0 + 120.0)]
                counter = Child("counter", argv, subprocess.PIPE, self._log)
                if not self.wait_subscribers(1, 30.0):
                    raise RuntimeError("the event counter did not subscribe within 30 s")
                time.sleep(0.5)  # let discovery settle both ways before the Started event
                queued = QueuedEventPublisher(self.events_pub.publish, depth=8192)
                timed_obs = TimedObserver(queued, steps + 16)
                extra["observer_kind"] = "QueuedEventPublisher -> DDS -> event_counter.py (own process)"
                children["counter"] = counter
            meter = CpuMeter(children)
            result = run_rollout(runner, rate, duration, timed_obs)
            flushed = queued.flush(10.0) if queued is not None else True
            cpu = meter.stop()
            if queued is not None:
                queued.close(5.0)
                extra["events"] = self._collect(counter, queued, flushed)
                counter = None
        finally:
            if queued is not None:
                queued.close(1.0)
            if counter is not None:
                counter.stop(grace_s=2.0)
        extra["driver_alive"] = self.driver.alive() if self.driver else False
        if self.command_path == "stream":
            lat = np.asarray(stream.latencies_ns, dtype=np.int64) / 1e6
            extra["c2v_ms"] = _pcts(lat)
            sent, answered, foreign = stream.counts()
            extra["stream"] = {"sent": sent - stream_counts0[0], "answered": answered - stream_counts0[1],
                               "foreign": foreign - stream_counts0[2]}
        return summarise(self.command_path, with_obs, rate, duration, result, timed, timed_obs, cpu, extra)

    @staticmethod
    def _collect(counter: Child, queued: Any, flushed: bool) -> dict:
        """The counter's JSON (it exits after the Ended event; SIGINT makes it print what it has)."""
        try:
            out, _ = counter.proc.communicate(timeout=15.0)
        except subprocess.TimeoutExpired:
            counter.signal(signal.SIGINT)
            try:
                out, _ = counter.proc.communicate(timeout=5.0)
            except subprocess.TimeoutExpired:
                out = b""
        counter.stop(grace_s=1.0)
        summary: dict = {}
        for line in reversed((out or b"").decode(errors="replace").splitlines()):
            if line.startswith("{"):
                try:
                    summary = json.loads(line)
                    break
                except ValueError:
                    continue
        published = queued.published
        received = summary.get("received")
        runs = summary.get("runs", {})
        return {
            "published": published, "dropped": queued.dropped, "publish_errors": queued.publish_errors,
            "flushed": flushed, "received": received,
            "missing": summary.get("missing"),
            "lost": (published + queued.dropped - received) if received is not None else None,
            "counter_exit": summary.get("exit_reason", "no output"),
            "counter_cpu_s": summary.get("cpu_s"),
            "counter_runs": runs,
        }


# -- microbenchmarks ----------------------------------------------------------------------------------------------
def microbench(n: int = 100_000) -> dict:
    """µs per event of the observer lane's parts, on the bench process's main thread (best of 5 rounds)."""
    from strands_robots.arm.driver import DriverCore
    from strands_robots.simulation.observers import ObserverLane, RunPolicyStep

    core = DriverCore.simulated()
    observation = core.observe()
    action = {k: 0.0 for k in core.action_keys()}
    clock = time.perf_counter_ns

    def noop(_e: Any) -> None:
        return None

    def make_step(lane: Any, i: int) -> Any:
        seq, mono, utc = lane.stamp()
        return RunPolicyStep(
            run_id=lane.run_id, event_seq=seq, monotonic_ns=mono, utc_ns=utc, applied_action_index=i,
            legacy_step_index=i, action_resolution="full", applied_action_keys=tuple(action),
            unresolved_action_keys=(), unresolved_action_reasons=(), action_error="",
            observation_is_chunk_reused=False, observation_age_steps=0, legacy_hook_outcome="ok",
            chunk_index=0, elapsed_s=0.0, sim_time_s=0.0, deadline_missed=False,
            observation=observation, action=action)

    def best(fn: Callable[[int], None], rounds: int = 5) -> float:
        per = n // rounds
        times = []
        for _ in range(rounds):
            t0 = clock()
            fn(per)
            times.append((clock() - t0) / per / 1e3)
        return min(times)

    out: dict = {"events_per_round": n // 5, "observation_values": len(observation), "action_keys": len(action)}
    lane0 = ObserverLane(None)
    lane0.open_run()
    lane1 = ObserverLane(noop)
    lane1.open_run()
    event = make_step(lane1, 0)

    def loop_empty(k: int) -> None:
        for _ in range(k):
            pass

    def dispatch_none(k: int) -> None:
        d = lane0.dispatch
        for _ in range(k):
            d(event)

    def dispatch_noop(k: int) -> None:
        d = lane1.dispatch
        for _ in range(k):
            d(event)

    def stamp_make_dispatch(k: int) -> None:
        d = lane1.dispatch
        for i in range(k):
            d(make_step(lane1, i))

    def stamp_make(k: int) -> None:
        for i in range(k):
            make_step(lane0, i)

    counting = CountingObserver()
    lane2 = ObserverLane(counting)
    lane2.open_run()

    def dispatch_counting(k: int) -> None:
        d = lane2.dispatch
        for i in range(k):
            d(make_step(lane2, i))

    out["loop_overhead_us"] = best(loop_empty)
    out["dispatch_no_observer_us"] = best(dispatch_none)
    out["dispatch_noop_observer_us"] = best(dispatch_noop)
    out["stamp_and_build_step_us"] = best(stamp_make)
    out["stamp_build_dispatch_noop_us"] = best(stamp_make_dispatch)
    out["stamp_build_dispatch_counting_us"] = best(dispatch_counting)

    # The rollout node's publishing observer: the control thread's share (copies + put_nowait) while its
    # thread converts to ROS messages (publish itself a no-op), then the conversion alone.
    try:
        from strands_robots.conversions.events import event_to_msg
        from strands_robots.nodes.event_publisher import QueuedEventPublisher

        m = 20_000
        q = QueuedEventPublisher(lambda _m: None, depth=m + 10)
        lane3 = ObserverLane(q)
        lane3.open_run()
        events = [make_step(lane3, i) for i in range(m)]
        d = lane3.dispatch
        t0 = clock()
        for e in events:
            d(e)
        t1 = clock()
        q.flush(60.0)
        t2 = clock()
        q.close(5.0)
        out["queued_publisher_enqueue_us"] = (t1 - t0) / m / 1e3
        out["queued_publisher_drain_total_us"] = (t2 - t0) / m / 1e3
        out["queued_publisher_dropped"] = q.dropped

        def convert(k: int) -> None:
            for _ in range(k):
                event_to_msg(event, 0, observation=observation, action=action)

        out["event_to_msg_us"] = best(convert, rounds=5) if n >= 5 else float("nan")
    except Exception as exc:  # ROS messages not importable: the lane figures above still stand
        out["queued_publisher_error"] = f"{type(exc).__name__}: {exc}"
    return out


def pacer_floor(rate: float, duration: float) -> dict:
    """The machine's timing floor: the project's DeadlinePacer alone (no policy, no robot) at ``rate``.

    What the loop could hold at best on this machine at this moment; the difference to a real run is the
    loop's own cost and jitter.
    """
    from strands_robots.rollout.pacing import DeadlinePacer

    steps = max(2, int(round(duration * rate)))
    starts = [0] * steps
    clock = time.perf_counter_ns
    pacer = DeadlinePacer(1.0 / rate)
    pacer.start()
    for i in range(steps):
        pacer.wait()
        starts[i] = clock()
    a = np.asarray(starts, dtype=np.int64)
    intervals = np.diff(a)
    dev = np.abs(intervals - 1e9 / rate) / 1e6
    return {"rate_hz": rate, "duration_s": duration, "steps": steps,
            "achieved_hz": (steps - 1) / ((a[-1] - a[0]) / 1e9), "interval_dev_ms": _pcts(dev),
            "missed_pct": 100.0 * pacer.missed_deadlines / steps}


# -- machine and report ---------------------------------------------------------------------------------------
def machine_info() -> dict:
    info: dict = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        info["cpu"] = platform.processor() or "?"
    info["cores"] = os.cpu_count()
    try:
        info["cores_usable"] = len(os.sched_getaffinity(0))
    except AttributeError:
        info["cores_usable"] = info["cores"]
    info["python"] = platform.python_version()
    info["kernel"] = platform.release()
    info["loadavg_at_start"] = os.getloadavg()
    try:
        from importlib import metadata

        version = ""
        for dist in ("ros-rclpy", "rclpy"):
            try:
                version = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
        info["rclpy"] = version or "?"
    except Exception:
        info["rclpy"] = "?"
    distro = os.environ.get("ROS_DISTRO", "")
    if not distro:
        major = info["rclpy"].split(".")[0]
        distro = {"3": "humble", "7": "jazzy", "9": "kilted"}.get(major, "?") + " (PyPI wheels)"
    info["ros_distro"] = distro
    try:
        from rclpy.utilities import get_rmw_implementation_identifier

        info["rmw"] = get_rmw_implementation_identifier()
    except Exception:
        info["rmw"] = os.environ.get("RMW_IMPLEMENTATION", "?")
    try:
        import mujoco

        info["mujoco"] = mujoco.__version__
    except Exception:
        info["mujoco"] = "?"
    info["ros_domain_id"] = os.environ.get("ROS_DOMAIN_ID", "")
    info["switch_interval_ms"] = sys.getswitchinterval() * 1e3
    return info


def machine_line(m: dict) -> str:
    return (f"machine: {m['cpu']}, {m['cores']} cores ({m['cores_usable']} usable), Python {m['python']}, "
            f"rclpy {m['rclpy']} ({m['ros_distro']}), RMW {m['rmw']}, MuJoCo {m['mujoco']}, "
            f"load {m['loadavg_at_start'][0]:.2f}, ROS_DOMAIN_ID={m['ros_domain_id']}")


def _f(value: Any, fmt: str = "{:.3f}") -> str:
    if value is None:
        return "-"
    try:
        if isinstance(value, float) and value != value:
            return "-"
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


COLUMNS = [
    ("mode", 7, lambda r: r["mode"]),
    ("obs", 4, lambda r: "with" if r["observer"] else "-"),
    ("Hz", 5, lambda r: _f(r["rate_hz"], "{:g}")),
    ("steps/s", 8, lambda r: _f(r.get("achieved_hz"), "{:.1f}")),
    ("dev p50", 8, lambda r: _f(r.get("interval_dev_ms", {}).get("p50"))),
    ("dev p99", 8, lambda r: _f(r.get("interval_dev_ms", {}).get("p99"))),
    ("dev max", 8, lambda r: _f(r.get("interval_dev_ms", {}).get("max"), "{:.2f}")),
    ("miss %", 7, lambda r: _f(r.get("missed_pct"), "{:.2f}")),
    ("rtt p50", 8, lambda r: _f(r.get("rtt_ms", {}).get("p50"))),
    ("rtt p99", 8, lambda r: _f(r.get("rtt_ms", {}).get("p99"))),
    ("c2v p50", 8, lambda r: _f(r.get("c2v_ms", {}).get("p50"))),
    ("c2v p99", 8, lambda r: _f(r.get("c2v_ms", {}).get("p99"))),
    ("events pub/recv/lost", 20, lambda r: _events_cell(r)),
    ("obs us/st", 9, lambda r: _f(r.get("observer_cost", {}).get("us_per_step"), "{:.1f}")),
    ("cpu%", 5, lambda r: _f(r.get("cpu", {}).get("bench_cpu_pct"), "{:.0f}")),
    ("drv%", 5, lambda r: _f(r.get("cpu", {}).get("driver_cpu_pct"), "{:.0f}")),
    ("cnt%", 5, lambda r: _f(r.get("cpu", {}).get("counter_cpu_pct"), "{:.0f}")),
    ("oth%", 5, lambda r: _f(r.get("cpu", {}).get("others_cpu_pct"), "{:.0f}")),
]


def _events_cell(r: dict) -> str:
    ev = r.get("events")
    if not ev:
        return "-"
    lost = ev.get("lost", ev.get("missing"))
    cell = f"{ev.get('published')}/{ev.get('received')}/{_f(lost, '{}')}"
    exit_reason = ev.get("counter_exit", "ended")
    return cell if exit_reason == "ended" else f"{cell} ({exit_reason})"


def table(rows: list) -> str:
    head = " ".join(name.rjust(w) for name, w, _ in COLUMNS)
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.get("failed"):
            lines.append(f"{r['mode']:>7} {'with' if r['observer'] else '-':>4} {r['rate_hz']:>5g}  FAILED: "
                         f"{r['failed']}")
            continue
        lines.append(" ".join(str(fn(r)).rjust(w) for _, w, fn in COLUMNS))
        st = r.get("stream")
        if st:
            lines.append(f"{'':>12}verdicts: {st['sent']} commands, {st['answered']} verdicts, "
                         f"{st['sent'] - st['answered']} never arrived; window {r.get('window_steps')} steps "
                         f"({_f(r.get('command_window_ms'), '{:g}')} ms); held {_f(r.get('paused_s'), '{:.3f}')} s")
        if r.get("outcome") != "ok" or r.get("unknown_count"):
            lines.append(f"{'':>12}note: outcome={r.get('outcome')} ({r.get('stopped_reason')}: "
                         f"{r.get('end_detail') or r.get('error') or ''}), {r.get('steps')} of "
                         f"{r.get('steps_budget')} steps; {r.get('unknown_count')} unknown "
                         f"{r.get('action_errors_first') or ''}")
    return "\n".join(lines)


def _find(rows: list, mode: str, rate: float, obs: bool) -> Optional[dict]:
    for r in rows:
        if r["mode"] == mode and r["rate_hz"] == rate and r["observer"] == obs and not r.get("failed"):
            return r
    return None


def _ratio(a: Any, b: Any) -> str:
    try:
        return f"{a / b:.2f}x" if b else "-"
    except TypeError:
        return "-"


def ratios(rows: list) -> list:
    lines = []
    rates = sorted({r["rate_hz"] for r in rows})
    for rate in rates:
        for obs in (False, True):
            stream, service, inp = (_find(rows, "stream", rate, obs), _find(rows, "service", rate, obs),
                                    _find(rows, "inproc", rate, obs))
            tag = f"@ {rate:g} Hz{' (with observer)' if obs else ''}"
            for name, other in (("service", service), ("in-process", inp)):
                if stream and other:
                    lines.append(
                        f"stream / {name} {tag}: p99 deviation {stream['interval_dev_ms']['p99']:.3f} / "
                        f"{other['interval_dev_ms']['p99']:.3f} ms = "
                        f"{_ratio(stream['interval_dev_ms']['p99'], other['interval_dev_ms']['p99'])}, missed "
                        f"{stream['missed_pct']:.2f} / {other['missed_pct']:.2f} %, steps/s "
                        f"{stream['achieved_hz']:.1f} / {other['achieved_hz']:.1f}, command-to-verdict p50 "
                        f"{stream['c2v_ms']['p50']:.3f} / {other['c2v_ms']['p50']:.3f} ms")
    for mode in ("stream", "service", "inproc"):
        for rate in rates:
            w, wo = _find(rows, mode, rate, True), _find(rows, mode, rate, False)
            if w and wo:
                cpu_w = w["cpu"]["bench_cpu_s"]
                cpu_wo = wo["cpu"]["bench_cpu_s"]
                delta_us = (cpu_w / max(1, w["steps"]) - cpu_wo / max(1, wo["steps"])) * 1e6
                extra = ""
                if mode != "inproc" and "counter_cpu_s" in w["cpu"]:
                    extra = f", + counter process {w['cpu']['counter_cpu_pct']:.0f}% CPU"
                lines.append(
                    f"with / without observer, {mode} @ {rate:g} Hz: p99 deviation "
                    f"{w['interval_dev_ms']['p99']:.3f} / {wo['interval_dev_ms']['p99']:.3f} ms = "
                    f"{_ratio(w['interval_dev_ms']['p99'], wo['interval_dev_ms']['p99'])}; bench CPU "
                    f"{w['cpu']['bench_cpu_pct']:.0f} / {wo['cpu']['bench_cpu_pct']:.0f}% = "
                    f"{_ratio(w['cpu']['bench_cpu_pct'], wo['cpu']['bench_cpu_pct'])}; "
                    f"bench CPU delta {delta_us:+.1f} us/step; on the control thread "
                    f"{w['observer_cost'].get('us_per_step', float('nan')):.1f} us/step{extra}")
    return lines


def targets(rows: list, micro: dict) -> list:
    lines = []

    def verdict(ok: bool) -> str:
        return "met   " if ok else "MISSED"

    for mode, rate in [(m, x) for m in ("stream", "service") for x in TARGET_ROS_RATES]:
        r = _find(rows, mode, rate, True) or _find(rows, mode, rate, False)
        if not r:
            continue
        p99 = r["interval_dev_ms"]["p99"]
        label = f"ROS ({mode}) {rate:g} Hz"
        lines.append(f"[{verdict(p99 < TARGET_ROS_P99_MS)}] {label} p99 deviation < "
                     f"{TARGET_ROS_P99_MS:g} ms: {p99:.3f} ms ({'with' if r['observer'] else 'without'} observer)")
        lines.append(f"[{verdict(r['missed_pct'] < TARGET_MISSED_PCT)}] {label} missed "
                     f"deadlines < {TARGET_MISSED_PCT:g} %: {r['missed_pct']:.3f} %")
        ev = r.get("events")
        if ev:
            lost = ev.get("lost")
            lines.append(f"[{verdict(lost == 0 and ev.get('missing') == 0 and not ev.get('dropped'))}] {label} "
                         f"zero lost events: published {ev['published']}, dropped "
                         f"{ev['dropped']}, received {ev['received']}, event_seq gaps {ev.get('missing')}")
    for rate in TARGET_INPROC_RATES:
        for obs in (False, True):
            r = _find(rows, "inproc", rate, obs)
            if r:
                p99 = r["interval_dev_ms"]["p99"]
                lines.append(f"[{verdict(p99 < TARGET_INPROC_P99_MS)}] in-process {rate:g} Hz "
                             f"{'with' if obs else 'without'} observer p99 deviation < {TARGET_INPROC_P99_MS:g} ms: "
                             f"{p99:.3f} ms at {r['achieved_hz']:.1f} steps/s, missed {r['missed_pct']:.2f} %")
    full = micro.get("stamp_build_dispatch_noop_us")
    if full is not None:
        lines.append(f"[{verdict(full < TARGET_OBSERVER_US)}] observer-lane cost < {TARGET_OBSERVER_US:g} us/step "
                     f"(stamp + build RunPolicyStep + dispatch to a no-op, microbench): {full:.2f} us")
    for r in rows:
        if r["mode"] == "inproc" and r["observer"] and not r.get("failed"):
            c = r["observer_cost"].get("us_per_step")
            if c is not None:
                lines.append(f"[{verdict(c < TARGET_OBSERVER_US)}] in-process {r['rate_hz']:g} Hz observer call on the "
                             f"control thread ({r['observer_kind']}): {c:.2f} us/step")
    lines.append(PEER)
    return lines


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
                        "strands_robots.nodes.process; 0: Python's default, 5 ms)")
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
                                if not _find(rows, mode, rate, obs):
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
