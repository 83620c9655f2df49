"""What the crash and chaos tests share: the whole station as processes, killed for real and started again.

:class:`CrashStation` is :class:`~strands_robots.cli.station_demo.LocalStation` (relay, arm driver, rollout node,
station node under one supervisor) plus the team's policy client as a process of its own (this file run as a
script), every one of them SIGKILLable and restartable by name the way a supervisor restarts it; an observer
stream recorder (a node in the test process on ``<ns>/observer_events``); and :func:`check_invariants`, the
rules every crash must keep:

- the job is terminal with a reason;
- each episode id is listed once, in the relay's final snapshot and in the station's own log alike, ids
  increasing; no snapshot ever removed or changed a finished episode (nothing lost, nothing re-run);
- the episodes that fill the job (every one but ``infrastructure_fault``) ran the tasks in their order;
- every rollout on the observer stream has exactly one Started and at most one Ended, and every kept episode
  with a rollout has its one Ended (a rollout whose process was killed under it ends with no Ended; the first
  run of a restarted rollout node may go unseen while this recorder discovers it: bounded by the restarts);
- nothing is left running: every process is ended by PID in ``finally``.

The policy client: ``python crash_harness.py RELAY JOB_ID`` with its token in ``STRANDS_ROBOTS_TOKEN`` serves the
scripted torque policy until the job ends, attaching again when the relay goes away (or until the job is
submitted: a test may start it first). Its first line (``CLIENT_READY``) says its imports are done.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
SCRIPTED = {"mode": "torque_ramp", "joint": "right.joint_4", "target": 1.0}  # holds right.joint_4 near start
SHEET = [{"name": "task_done", "question": "Did the arm do what the instruction asked?", "answer_type": "yes_no",
          "max_points": 1, "success_answer": "yes"}]
INFRASTRUCTURE = "infrastructure_fault"
CLIENT_READY = "policy client ready"  # the client process's first line: imported, about to attach


def task(task_id: str, **params: str) -> dict:
    parameters = {"duration_s": "1", "control_frequency": "50", "success_when": "end_condition == timeout",
                  **params}
    return {"task_id": task_id, "instruction": f"instruction of {task_id}", "layout": "table",
            "parameters": parameters, "scoring": SHEET}


def _local_station_class():
    from strands_robots.cli.station_demo import LocalStation

    class CrashStation(LocalStation):
        """The station's processes, each killable and restartable by name (see the module docstring)."""

        def __init__(self, workdir: str, **kw) -> None:
            self.lines: list = []
            self._lines_lock = threading.Lock()
            super().__init__(workdir, out=self._line, **kw)
            self.client_proc = None
            self.client_job = ""
            self.started: list = []  # every process ever started (ended by PID in stop)

        def _line(self, name: str, line: str) -> None:
            with self._lines_lock:
                self.lines.append(f"[{name}] {line}")
                if len(self.lines) > 4000:
                    del self.lines[:1000]

        def tail(self, n: int = 80) -> str:
            with self._lines_lock:
                return "\n".join(self.lines[-n:])

        def start_driver(self):
            hz = f"{self.control_frequency:.1f}"
            self.driver = self.sup.start("arm_driver", self._node_argv(
                "strands_robots.nodes.arm_driver.node", "arm_driver", self.params_file,
                {"control_rate_hz": hz, "autostart": "true"}), on_line=self._emit)
            self.started.append(self.driver)
            return self.driver

        @property
        def params_file(self) -> str:
            from strands_robots.cli.station_demo import config_file

            return config_file("rollout.yaml")

        def start_nodes(self) -> None:
            super().start_nodes()  # the camera (when there is one), rollout and station through their start_*
            self.started.append(self.driver)

        def start_rollout(self):
            proc = super().start_rollout()
            self.started.append(proc)
            return proc

        def start_camera(self):
            proc = super().start_camera()
            self.started.append(proc)
            return proc

        def start_station(self):
            proc = super().start_station()
            self.started.append(proc)
            return proc

        def start_relay(self, port=None):
            target = super().start_relay(port)
            self.started.append(self.relay_proc)
            return target

        def start_client(self, job_id: str, wait_ready_s: float = 0.0):
            """Start the team's policy client process serving ``job_id``.

            :param wait_ready_s: when > 0, return once the process says it is ready to attach (its imports done:
                seconds on a loaded machine), at most this long (RuntimeError past it). A client started before
                its job is submitted then attaches within the station's attach deadline however slowly a
                process starts; a supervisor-style restart (0) does not wait.
            """
            self.client_job = job_id
            env = dict(os.environ, STRANDS_ROBOTS_TOKEN=self.client_token, PYTHONUNBUFFERED="1")
            ready = threading.Event()

            def on_line(name: str, line: str) -> None:
                if line.startswith(CLIENT_READY):
                    ready.set()
                self._emit(name, line)

            self.client_proc = self.sup.start("client", [sys.executable, __file__, self.relay_target, job_id],
                                              env=env, on_line=on_line)
            self.started.append(self.client_proc)
            if wait_ready_s > 0 and not ready.wait(wait_ready_s):
                raise RuntimeError(f"the policy client process was not ready within {wait_ready_s:g} s\n"
                                   f"{self.tail()}")
            return self.client_proc

        def proc(self, name: str):
            return {"relay": self.relay_proc, "arm_driver": self.driver, "rollout": self.rollout,
                    "station": self.station, "client": self.client_proc,
                    "camera": getattr(self, "camera", None)}[name]

        def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
            """Signal ``name``'s process group; for SIGKILL wait for it to be gone."""
            proc = self.proc(name)
            if proc is None or proc.poll() is not None:
                return
            os.killpg(proc.pid, sig)
            if sig == signal.SIGKILL:
                proc.wait(20.0)

        def restart(self, name: str) -> None:
            """Start ``name`` again, as a supervisor does once it saw it die."""
            if name == "relay":
                self.start_relay()
            elif name == "arm_driver":
                self.start_driver()
            elif name == "rollout":
                self.start_rollout()
            elif name == "station":
                self.start_station()
            elif name == "camera":
                self.start_camera()
            elif name == "client":
                self.start_client(self.client_job)
            else:
                raise ValueError(name)

        def stop(self) -> None:
            for proc in self.started:  # SIGCONT first: a stopped process cannot act on SIGINT
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
            super().stop()
            for proc in self.started:  # the supervisor knows only the newest process of each name
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait(10.0)

        def left_running(self) -> list:
            return [p.pid for p in self.started if p.poll() is None]

    return CrashStation


#: The crash stations' suite: the tasks their jobs name (the station owns each task's predicate).
SUITE = "crash"


def crash_station(workdir: str, suite_tasks=(), **kw):
    """Make a :class:`CrashStation` (imported late: the module is also the policy client script).

    :param suite_tasks: the tasks (``task(...)``) its jobs name, written as the station's suite :data:`SUITE`.
    """
    from suite_harness import write_suite

    if suite_tasks:
        suites = Path(workdir) / "suites"
        write_suite(suites, SUITE, suite_tasks, seeds=10000)
        kw["station_params"] = {**dict(kw.get("station_params") or {}), "suites_dir": str(suites)}
    return _local_station_class()(workdir, **kw)


class ObserverRecorder:
    """Every ObserverEvent of ``<namespace>/observer_events`` (Started / Ended per run id), in a node of its own."""

    def __init__(self, namespace: str) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from strands_robots_msgs.msg import ObserverEvent

        from strands_robots.ros.qos import EVENT_QOS

        self._rclpy = rclpy
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("observer_recorder", namespace=f"/{namespace}", context=self.context)
        self.lock = threading.Condition()  # notified on every event (wait_started_since)
        self.started: dict = defaultdict(int)
        self.ended: dict = defaultdict(int)
        self.node.create_subscription(ObserverEvent, "observer_events", self._on_event, EVENT_QOS)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True, name="observer-recorder")
        self.thread.start()

    def _spin(self) -> None:
        while self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except Exception:  # noqa: BLE001  (shut down under it)
                return

    def _on_event(self, msg) -> None:
        with self.lock:
            if msg.kind == "started":
                self.started[msg.run_id] += 1
            elif msg.kind == "ended":
                self.ended[msg.run_id] += 1
            self.lock.notify_all()

    def wait_started_since(self, runs: frozenset, timeout_s: float = 30.0) -> bool:
        """Wait until a rollout not in ``runs`` has started (its Started event came); False at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self.lock:
            while not set(self.started) - runs:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(left)
            return True

    def wait_matched(self, timeout_s: float = 30.0) -> bool:
        """Wait until a rollout node's observer_events publisher is matched (events before that are lost)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.node.count_publishers("observer_events") >= 1:
                return True
            time.sleep(0.05)
        return False

    def runs(self) -> frozenset:
        """Return every run id seen so far (to tell a job's runs from those before it)."""
        with self.lock:
            return frozenset(self.started) | frozenset(self.ended)

    def counts(self) -> tuple:
        with self.lock:
            return dict(self.started), dict(self.ended)

    def close(self) -> None:
        self._rclpy.try_shutdown(context=self.context)
        self.thread.join(5.0)
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()


class SnapshotWatch:
    """Polls the job's status through the relay (as a team would) and checks that finished episodes only grow."""

    def __init__(self, stack, job_id: str, period_s: float = 0.1) -> None:
        self.stack = stack
        self.job_id = job_id
        self.period_s = period_s
        self.latest = None
        self.violations: list = []
        self.seen = 0
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True, name="snapshot-watch")
        self.thread.start()

    def _run(self) -> None:
        from strands_robots.client import RelayError

        client = None
        previous: list = []
        while not self._stop.is_set():
            try:
                client = client or self.stack.client()
                status = client.get_status(self.job_id)
            except RelayError:  # the relay is restarting
                client = None
                self._stop.wait(self.period_s)
                continue
            rows = [(e.episode_id, e.end_condition, e.task.task_id) for e in status.episodes]
            if rows[:len(previous)] != previous:
                self.violations.append(f"finished episodes changed: {previous} -> {rows}")
            previous = rows if len(rows) >= len(previous) else previous
            with self._changed:
                self.latest = status
                self.seen += 1
                self._changed.notify_all()
            self._stop.wait(self.period_s)

    def wait(self, predicate, timeout_s: float, what: str = "the expected state"):
        """Block until a polled snapshot satisfies ``predicate``; its snapshot (AssertionError at the deadline)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not (self.latest is not None and predicate(self.latest)):
                left = deadline - time.monotonic()
                if left <= 0 or (self.latest is not None and self.latest.state in TERMINAL):
                    raise AssertionError(f"job {self.job_id} never reached {what}; last status:\n{self.latest}\n"
                                         f"{self.stack.tail()}")
                self._changed.wait(min(left, 0.5))
            return self.latest

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5.0)


def running_episode(status) -> str:
    """Return the id of the episode a snapshot says is running ("ep_0003 running (...)"), or empty."""
    message = status.message
    return message.split(" ", 1)[0] if " running (" in message and message.startswith("ep_") else ""


def check_invariants(stack, job_id: str, final, watch: SnapshotWatch, recorder: ObserverRecorder, tasks: list,
                     killed_rollouts: int = 0, before: frozenset = frozenset()) -> dict:
    """Check every rule of the module docstring on the job's end; return figures (episodes, faults).

    :param before: run ids the recorder had seen before the job (``recorder.runs()``): not this job's.
    """
    from strands_robots.station.persistence import JobStore

    assert final.state in TERMINAL and final.message, final
    assert watch.violations == [], watch.violations
    relay_ids = [e.episode_id for e in final.episodes]
    assert len(relay_ids) == len(set(relay_ids)), relay_ids
    assert relay_ids == sorted(relay_ids), relay_ids
    record = JobStore(stack.state_dir).load(job_id)  # the station's own log, as it persisted it
    log_ids = [e.episode_id for e in record.episodes]
    assert log_ids == relay_ids, (log_ids, relay_ids)
    assert not set(log_ids) & set(record.interrupted) and not set(log_ids) & set(record.discarded)
    kept = [e for e in final.episodes if e.end_condition != INFRASTRUCTURE]
    faults = [e for e in final.episodes if e.end_condition == INFRASTRUCTURE]
    assert all(e.end_detail for e in faults) and not any(e.scored for e in faults), faults
    assert [e.task.task_id for e in kept] == [tasks[i % len(tasks)]["task_id"] for i in range(len(kept))]
    if final.state == "SUCCEEDED":
        assert len(kept) == final.episodes_total, (len(kept), final.episodes_total)
    # Observer stream: one Started per rollout; at most one Ended; every kept rollout seen starting has its one
    # Ended. A restarted rollout node's first run may start before this recorder has matched its new publisher
    # (discovery): such unseen runs are bounded by the rollout restarts.
    deadline = time.monotonic() + 10.0
    while True:
        started, ended = recorder.counts()
        started = {k: n for k, n in started.items() if k not in before}
        ended = {k: n for k, n in ended.items() if k not in before}
        missing = [e.episode_id for e in kept if e.run_id in started and ended.get(e.run_id, 0) != 1]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert missing == [], (missing, ended)
    unseen = {e.run_id for e in kept if e.run_id and e.run_id not in started}
    assert len(unseen) <= killed_rollouts, (sorted(unseen), killed_rollouts)
    assert all(n == 1 for n in started.values()), {k: n for k, n in started.items() if n != 1}
    assert all(n == 1 for n in ended.values()), {k: n for k, n in ended.items() if n != 1}
    assert set(ended) - set(started) <= unseen, set(ended) - set(started) - unseen
    no_end = set(started) - set(ended)
    assert len(no_end) <= killed_rollouts, (no_end, killed_rollouts)
    return {"episodes": len(final.episodes), "kept": len(kept), "faults": len(faults),
            "runs": len(started), "runs_without_end": len(no_end), "runs_unseen": len(unseen),
            "restarts": record.restarts}


# -- the policy client process ------------------------------------------------------------------------------
def _serve(target: str, job_id: str) -> int:
    from strands_robots.client import EvaluationClient, RelayError
    from strands_robots.policies.demo import DemoPolicy

    token = os.environ["STRANDS_ROBOTS_TOKEN"]
    policy = DemoPolicy("scripted", SCRIPTED)
    print(f"{CLIENT_READY} for {job_id}", flush=True)
    while True:
        client = EvaluationClient(target, token=token)
        try:
            final = client.serve_policy(job_id, policy, reconnect_s=120.0)
            print(f"job {job_id} ended {final.state}", flush=True)
            return 0
        except RelayError as exc:  # the session broke (the relay restarted, the station lost it): attach again
            print(f"session of {job_id} ended: {type(exc).__name__}: {exc}; attaching again", flush=True)
            try:
                status = client.get_status(job_id)
                if status.state in TERMINAL:
                    return 0
            except RelayError:  # the relay is away, or the job is not submitted yet (the client may start first)
                pass
            time.sleep(0.2)
        finally:
            client.close()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src" / "strands_robots"))
    sys.exit(_serve(sys.argv[1], sys.argv[2]))
