"""The control-loop benchmark's ROS modes (``stream``, ``service``): the driver process and the client node.

:class:`RosHarness` starts one arm driver process (autostart, leases required, ``joint_states`` at one rate) and,
in this process, the rollout node's control path: a :class:`RosDriverBackend` on a node spun on a background
thread by the executor asked for, the lease acquired once and kept by the backend's heartbeat.
:meth:`RosHarness.run` moves to the start pose (not timed), then runs one episode, with observer through the
rollout node's own ``QueuedEventPublisher`` to ``bench/event_counter.py`` in a process of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Optional

import numpy as np

from control_loop_processes import Child, CpuMeter
from control_loop_runs import run_rollout, summarise
from control_loop_timing import TimedBackend, TimedObserver, percentiles


HERE = os.path.dirname(os.path.abspath(__file__))
NAMESPACE = "/bench"
EVENTS_TOPIC = f"{NAMESPACE}/observer_events"


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

        from strands_robots.ros.qos import EVENT_QOS
        from strands_robots.driver_link.client import RosDriverBackend

        self._log = open(os.path.join(self.log_dir, f"driver-{self.command_path}-{self.driver_rate_hz:g}hz.log"), "ab")
        argv = [sys.executable, "-m", "strands_robots.nodes.arm_driver.node", "--ros-args",
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
            from strands_robots.ros.executor_choice import make_executor

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
        from strands_robots.nodes.rollout.event_publisher import QueuedEventPublisher
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
            extra["c2v_ms"] = percentiles(lat)
            sent, answered, foreign = stream.counts()
            extra["stream"] = {"sent": sent - stream_counts0[0], "answered": answered - stream_counts0[1],
                               "foreign": foreign - stream_counts0[2]}
        return summarise(self.command_path, with_obs, rate, duration, result, timed, timed_obs, cpu, extra)

    @staticmethod
    def _collect(counter: Child, queued: Any, flushed: bool) -> dict:
        """Return the counter's JSON (it exits after the Ended event; SIGINT makes it print what it has)."""
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
