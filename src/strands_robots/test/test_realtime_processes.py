"""Real-time scheduling in real processes: taken where permitted, refused with the reason where not.

Also the guard demoting a thread that spins, and both node processes saying which in one line.

"Not permitted" is made for real: the child starts without ``CAP_SYS_NICE`` (dropped from its bounding set
before exec, so even root's child lacks it) and with ``RLIMIT_RTPRIO`` 0. The scheduler each thread ends up on
is read back from the system, never from what the code says it did.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from strands_robots.ros.realtime_priority import RT_PRIORITY_ENV

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_FIFO") or not os.path.isdir("/proc/self/task"),
                                reason="Linux scheduling only")

HERE = Path(__file__).resolve().parent
PR_CAPBSET_DROP = 24
START_S = 90.0  # start-up of a node process on a loaded 2-core machine
CAP_SYS_NICE = 23


def child_env(**extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), str(HERE), env.get("PYTHONPATH", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.pop(RT_PRIORITY_ENV, None)
    env.pop("STRANDS_ROBOTS_EXECUTOR", None)
    env.update(extra)
    return env


def unprivileged() -> None:
    """Set up the child (preexec_fn) without the privilege.

    No CAP_SYS_NICE after exec (dropped from the bounding set; EPERM without CAP_SETPCAP: then there was none to
    drop), RLIMIT_RTPRIO 0, and on the normal scheduler whatever the parent's.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_CAPBSET_DROP, CAP_SYS_NICE, 0, 0, 0)
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def time_shared() -> None:
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def run_python(code: str, *, env: dict, preexec=time_shared, timeout_s: float = 60.0) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=timeout_s, env=env, preexec_fn=preexec)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def policies(pid: int) -> dict:
    """{thread name: (policy, priority)} of every thread of ``pid``, read from the system."""
    seen = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            seen[f"{name}/{tid}"] = (os.sched_getscheduler(int(tid)), os.sched_getparam(int(tid)).sched_priority)
        except (OSError, ValueError):
            continue
    return seen


PROBE = """
    import json, os, threading
    from strands_robots.ros.realtime_priority import apply_realtime_priority, read_privilege
    facts = read_privilege()
    decision = apply_realtime_priority()
    seen = []
    t = threading.Thread(target=lambda: seen.append((os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)))
    t.start(); t.join()
    print(json.dumps({"line": decision.line, "cap_sys_nice": facts.cap_sys_nice, "rtprio": facts.rtprio_soft,
                      "main": [os.sched_getscheduler(0), os.sched_getparam(0).sched_priority], "thread": seen[0]}))
"""


def test_without_cap_sys_nice_and_with_rlimit_rtprio_0_the_default_stays_time_shared_and_says_why():
    got = run_python(PROBE, env=child_env(), preexec=unprivileged)
    if got["cap_sys_nice"]:
        pytest.skip("could not drop CAP_SYS_NICE for the child (no CAP_SETPCAP)")
    assert got["rtprio"] == 0
    assert got["main"] == [os.SCHED_OTHER, 0] and got["thread"] == [os.SCHED_OTHER, 0]
    line = got["line"]
    assert line.startswith("real-time scheduling: off, the normal scheduler (not permitted: no CAP_SYS_NICE and "
                           "RLIMIT_RTPRIO 0"), line
    assert "ulimit -r" in line


def test_an_explicit_priority_without_the_privilege_is_an_error_and_the_process_ends():
    out = subprocess.run([sys.executable, "-c", "from strands_robots.ros.realtime_priority import "
                          "apply_realtime_priority; apply_realtime_priority()"],
                         capture_output=True, text=True, timeout=60, env=child_env(**{RT_PRIORITY_ENV: "20"}),
                         preexec_fn=unprivileged)
    if "CAP_SYS_NICE" not in out.stderr and out.returncode == 0:
        pytest.skip("could not drop CAP_SYS_NICE for the child (no CAP_SETPCAP)")
    assert out.returncode != 0
    assert f"ValueError: {RT_PRIORITY_ENV}=20: not permitted: no CAP_SYS_NICE and RLIMIT_RTPRIO 0" in out.stderr


def test_where_permitted_the_default_puts_the_process_and_its_later_threads_on_fifo_50():
    got = run_python(PROBE, env=child_env())
    if "SCHED_FIFO" not in got["line"]:
        pytest.skip(f"this account may not use SCHED_FIFO: {got['line']}")
    assert got["main"] == [os.SCHED_FIFO, 50] and got["thread"] == [os.SCHED_FIFO, 50]
    assert got["line"].startswith("real-time scheduling: SCHED_FIFO 50 (every thread; permitted: ")


GUARD = """
    import json, os, sys, threading, time
    from strands_robots.ros.realtime_guard import RealtimeGuard
    from strands_robots.ros.realtime_priority import apply_realtime_priority
    sys.setswitchinterval(0.0005)
    try:
        apply_realtime_priority({"STRANDS_ROBOTS_RT_PRIORITY": "1"})
    except ValueError as exc:
        print(json.dumps({"refused": str(exc)})); raise SystemExit(0)
    reports, stop, tids = [], threading.Event(), {}
    def spin():
        tids["spin"] = threading.get_native_id()
        while not stop.is_set():
            pass
    def sleep_on_deadlines():
        tids["sleep"] = threading.get_native_id()
        deadline = time.monotonic()
        while not stop.is_set():
            deadline += 0.01
            time.sleep(max(0.0, deadline - time.monotonic()))
    guard = RealtimeGuard(1, reports.append, window_s=0.2, windows=2).start()
    threads = [threading.Thread(target=f) for f in (spin, sleep_on_deadlines)]
    for t in threads: t.start()
    end = time.monotonic() + 20.0
    while time.monotonic() < end and not reports:
        time.sleep(0.05)
    time.sleep(0.5)  # two more windows: nothing else is demoted
    policy = {k: os.sched_getscheduler(v) for k, v in tids.items()}
    stop.set()
    for t in threads: t.join()
    guard.stop()
    print(json.dumps({"policy": policy, "reports": reports, "tids": tids}))
"""


def test_the_guard_puts_a_spinning_real_time_thread_back_on_the_normal_scheduler_and_says_so():
    # Priority 1 and 0.2 s windows: the spinner holds at most one core for about 0.4 s of this shared machine.
    got = run_python(GUARD, env=child_env())
    if "refused" in got:
        pytest.skip(f"this account may not use SCHED_FIFO: {got['refused']}")
    assert got["policy"] == {"spin": os.SCHED_OTHER, "sleep": os.SCHED_FIFO}, got
    assert len(got["reports"]) == 1, got
    assert f"({got['tids']['spin']}) was on the CPU" in got["reports"][0]
    assert "back on SCHED_OTHER" in got["reports"][0]


# -- the node processes ------------------------------------------------------------------------------------------
class NodeProcess:
    """A node process whose output is read line by line; waits are bounded and it is ended by PID."""

    def __init__(self, module: str, preexec, *args: str, **env: str) -> None:
        self.lines: list = []
        self._got = threading.Condition()
        self.proc = subprocess.Popen([sys.executable, "-m", module, *args, "--ros-args", "-r",
                                      f"__ns:=/rt_{os.getpid()}_{time.monotonic_ns() % 10**6}"],
                                     env=child_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, preexec_fn=preexec)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._got:
                self.lines.append(line)
                self._got.notify_all()

    def wait_line(self, pattern: str, timeout_s: float) -> str:
        rx = re.compile(pattern)
        with self._got:
            assert self._got.wait_for(lambda: any(rx.search(x) for x in self.lines) or self.proc.poll() is not None,
                                      timeout_s), "".join(self.lines)
            found = [x for x in self.lines if rx.search(x)]
        assert found, "".join(self.lines)
        return found[0].rstrip()

    def stop(self) -> int:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout=30.0)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def threads_made_at_import(module: str) -> int:
    """Threads a plain import of ``module`` starts (OpenBLAS's worker, LTTng's listeners), the main one aside."""
    out = subprocess.run([sys.executable, "-c", f"import os, {module}; print(len(os.listdir('/proc/self/task')))"],
                         capture_output=True, text=True, timeout=START_S, env=child_env())
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip()) - 1


NODES = ["strands_robots.nodes.arm_driver.node", "strands_robots.nodes.rollout.node"]


@pytest.mark.parametrize("module", NODES)
def test_the_node_takes_fifo_50_by_default_where_permitted_for_every_thread_and_logs_one_line(module):
    pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
    node = NodeProcess(module, time_shared)
    try:
        line = node.wait_line(r"real-time scheduling: ", START_S)
        if "SCHED_FIFO" not in line:
            pytest.skip(f"this account may not use SCHED_FIFO: {line}")
        assert re.search(r"\]: real-time scheduling: SCHED_FIFO 50 \(every thread; permitted: .*\); guard: ", line)
        node.wait_line(r"\]: executor: single$", START_S)
        threads = policies(node.proc.pid)
        fifo = [k for k, v in threads.items() if v == (os.SCHED_FIFO, 50)]
        assert sorted(threads.values()).count((os.SCHED_FIFO, 51)) == 1, threads  # the guard, one above
        assert f"python/{node.proc.pid}" in fifo and len(fifo) > 10, threads  # the main thread and its offspring
        dds = [k for k in threads if k.startswith("dds.")]
        assert dds and set(dds) <= set(fifo), threads  # Fast DDS's receive and event threads
        # Only the threads made while the module was imported, before main() decided, are time-shared.
        time_shared_threads = [k for k, v in threads.items() if v == (os.SCHED_OTHER, 0)]
        assert len(time_shared_threads) == threads_made_at_import(module), threads
        assert len([x for x in node.lines if "real-time scheduling: " in x]) == 1
    finally:
        code = node.stop()
    assert code == 0, "".join(node.lines)


def test_the_station_node_holding_the_lease_takes_the_rollout_nodes_fifo_50_once_built(tmp_path):
    pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
    module = "strands_robots.nodes.station.node"
    node = NodeProcess(module, time_shared, "--ros-args", "-p", f"state_dir:={tmp_path / 'state'}")
    try:
        line = node.wait_line(r"real-time scheduling: ", START_S)
        if "SCHED_FIFO" not in line:
            pytest.skip(f"this account may not use SCHED_FIFO: {line}")
        assert re.search(r"\]: real-time scheduling: SCHED_FIFO 50 \(every thread; permitted: .*\); guard: ", line)
        node.wait_line(r"\]: executor: single$", START_S)
        threads = policies(node.proc.pid)
        fifo = [k for k, v in threads.items() if v == (os.SCHED_FIFO, 50)]
        assert sorted(threads.values()).count((os.SCHED_FIFO, 51)) == 1, threads  # the guard, one above
        assert f"python/{node.proc.pid}" in fifo, threads  # the main thread (the executor's and the lease's later)
        dds = [k for k in threads if k.startswith("dds.")]
        assert dds and set(dds) <= set(fifo), threads
        time_shared_threads = [k for k, v in threads.items() if v == (os.SCHED_OTHER, 0)]
        assert len(time_shared_threads) == threads_made_at_import(module), threads
    finally:
        code = node.stop()
    assert code == 0, "".join(node.lines)


@pytest.mark.parametrize("module", NODES)
def test_the_node_without_the_privilege_stays_time_shared_and_warns_why_in_one_line(module):
    pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
    node = NodeProcess(module, unprivileged)
    try:
        line = node.wait_line(r"real-time scheduling: ", START_S)
        assert re.search(r"^\[WARN\].*\]: real-time scheduling: off, the normal scheduler \(not permitted: no "
                         r"CAP_SYS_NICE and RLIMIT_RTPRIO 0", line), line
        node.wait_line(r"\]: executor: single$", START_S)
        assert set(policies(node.proc.pid).values()) == {(os.SCHED_OTHER, 0)}
    finally:
        code = node.stop()
    assert code == 0, "".join(node.lines)


def test_the_driver_takes_it_once_started_so_its_start_up_never_runs_real_time():
    pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
    node = NodeProcess("strands_robots.nodes.arm_driver.node", time_shared, "--autostart")
    try:
        line = node.wait_line(r"real-time scheduling: ", START_S)
        if "SCHED_FIFO" not in line:
            pytest.skip(f"this account may not use SCHED_FIFO: {line}")
        text = "".join(node.lines)
        # configured (the MuJoCo model built) and active (the physics thread running) before it is taken
        assert text.index("]: configured: ") < text.index("]: active: ") < text.index("]: real-time scheduling: ")
        threads = policies(node.proc.pid)
        assert len([v for v in threads.values() if v == (os.SCHED_FIFO, 50)]) > 10, threads
    finally:
        code = node.stop()
    assert code == 0, "".join(node.lines)


def test_the_camera_node_takes_fifo_10_below_the_control_loop_where_permitted_and_one_line_says_which():
    pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
    pytest.importorskip("mujoco", reason="MuJoCo is not installed")
    for preexec, expected in ((time_shared, (os.SCHED_FIFO, 10)), (unprivileged, (os.SCHED_OTHER, 0))):
        node = NodeProcess("strands_robots.nodes.camera.node", preexec, MUJOCO_GL="egl")
        try:
            line = node.wait_line(r"real-time scheduling: ", START_S)
            if expected[0] == os.SCHED_FIFO and "SCHED_FIFO" not in line:
                continue  # this account may not use SCHED_FIFO: the unprivileged case still runs
            if expected[0] == os.SCHED_FIFO:
                assert "]: real-time scheduling: SCHED_FIFO 10 (every thread; permitted: " in line, line
            else:
                assert "]: real-time scheduling: off, the normal scheduler (not permitted: " in line, line
            assert policies(node.proc.pid)[f"python/{node.proc.pid}"] == expected
        finally:
            code = node.stop()
        assert code == 0, "".join(node.lines)


@pytest.mark.parametrize("module", NODES)
def test_the_node_with_the_events_executor_stays_time_shared_and_an_explicit_priority_then_refuses_to_start(module):
    pytest.importorskip("rclpy.experimental", reason="no EventsExecutor in this rclpy")
    node = NodeProcess(module, time_shared, STRANDS_ROBOTS_EXECUTOR="events")
    try:
        line = node.wait_line(r"real-time scheduling: ", START_S)
        assert "off, the normal scheduler (STRANDS_ROBOTS_EXECUTOR=events" in line, line
    finally:
        node.stop()
    refused = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, timeout=START_S,
                             env=child_env(STRANDS_ROBOTS_EXECUTOR="events", **{RT_PRIORITY_ENV: "10"}),
                             preexec_fn=time_shared)
    assert refused.returncode == 2, refused.stderr
    assert f"{RT_PRIORITY_ENV}=10: STRANDS_ROBOTS_EXECUTOR=events" in refused.stderr
