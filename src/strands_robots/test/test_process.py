"""ros/process.py on real processes and executors.

Stop signals during shutdown, an executor killed by a callback, the supervisor watch, parameter-file errors.

Child processes run in a session of their own and are ended by PID in ``finally``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")

from ros_harness import wait_for  # noqa: E402

from strands_robots.cli import parameters_file  # noqa: E402

from strands_robots.ros import process  # noqa: E402

PACKAGE_SRC = Path(__file__).resolve().parent.parent


def _env(**extra: str) -> dict:
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONUNBUFFERED="1",
                PYTHONPATH=os.pathsep.join(p for p in (str(PACKAGE_SRC), path) if p), **extra)


def _spawn(argv: list, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=kwargs.pop("env", None) or _env(), **kwargs)


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.communicate(timeout=10.0)
    except (subprocess.TimeoutExpired, ValueError):
        pass


def _read_until(proc: subprocess.Popen, marker: str, timeout_s: float = 60.0) -> list:
    """Lines of ``proc`` up to the first containing ``marker`` (read on a thread: the pipe may stay quiet)."""
    lines: list = []
    found = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if marker in line:
                found.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    found.wait(timeout_s)
    assert found.is_set(), f"no line with {marker!r} within {timeout_s} s:\n" + "\n".join(lines)
    return lines


# A node main's shape without the node: take the stop signals, wait for one, do the shutdown work, call
# restore(), and keep working a while after it, as the end of a real process does (DDS and MuJoCo teardown,
# interpreter exit). Every stop signal that arrives during all of that must be taken.
SHUTDOWN_SCRIPT = textwrap.dedent("""
    import sys, time
    from strands_robots.ros.process import StopSignals
    signals = StopSignals.install()
    print("ready", flush=True)
    signals.event.wait(30.0)
    time.sleep(0.005)          # the node's own shutdown
    signals.restore()
    deadline = time.monotonic() + 0.25
    while time.monotonic() < deadline:   # teardown after restore()
        time.sleep(0.001)
    print(f"exiting after {signals.count} stop signal(s), first {signals.signum}", flush=True)
    sys.exit(0)
""")


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("gap_s", [0.010, 0.040, 0.080])
def test_second_stop_signal_10_to_80_ms_after_the_first_still_exits_zero(gap_s, second):
    proc = _spawn([sys.executable, "-c", SHUTDOWN_SCRIPT])
    try:
        _read_until(proc, "ready", 30.0)
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(gap_s)
        os.kill(proc.pid, second)
        out, _ = proc.communicate(timeout=30.0)
        assert proc.returncode == 0, out
        assert "stop signal(s), first 2" in out, out  # the second came after restore(): ignored, not counted
        assert "KeyboardInterrupt" not in out and "Traceback" not in out, out
    finally:
        _end(proc)


def test_arm_driver_node_takes_two_sigints_10_to_80_ms_apart_and_exits_zero():
    pytest.importorskip("mujoco", reason="MuJoCo is not installed")
    pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
    for gap_s in (0.010, 0.030, 0.080):
        namespace = f"/h4_process_{uuid.uuid4().hex[:8]}"
        proc = _spawn([sys.executable, "-m", "strands_robots.nodes.arm_driver.node", "--autostart",
                       "--ros-args", "-r", f"__ns:={namespace}"])
        try:
            _read_until(proc, "active:", 60.0)
            os.kill(proc.pid, signal.SIGINT)  # the terminal's, to the process group ...
            time.sleep(gap_s)
            try:
                os.kill(proc.pid, signal.SIGINT)  # ... and the one ros2 launch forwards
            except ProcessLookupError:
                pass  # already gone: nothing to take
            out, _ = proc.communicate(timeout=30.0)
            assert proc.returncode == 0, f"second SIGINT {gap_s * 1000:.0f} ms after the first:\n{out}"
            assert "Traceback" not in out, out
        finally:
            _end(proc)


def test_stop_signals_are_counted_then_ignored_after_restore_and_a_with_block_puts_the_handler_back():
    previous = signal.getsignal(signal.SIGTERM)
    with process.StopSignals() as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        assert wait_for(lambda: signals.count == 1 and signals.event.is_set(), 5.0)
        assert signals.signum == signal.SIGTERM
        signals.restore()  # a with block: no exit watch (this test process goes on)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)  # ignored: this test process lives on
    assert signal.getsignal(signal.SIGTERM) == previous


# ------------------------------------------------------------------------------------------- executor death
class _Boom(RuntimeError):
    pass


def _raising_node(context, name: str, after_calls: int):
    from rclpy.executors import SingleThreadedExecutor

    node = rclpy.create_node(name, context=context)
    calls = []

    def tick() -> None:
        calls.append(1)
        if len(calls) >= after_calls:
            raise _Boom(f"callback failed on call {len(calls)}")

    node.create_timer(0.01, tick)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    return node, executor, calls


def test_executor_killed_by_a_raising_callback_is_recorded_on_the_thread_and_reported():
    context = rclpy.Context()
    rclpy.init(context=context)
    node, executor, calls = _raising_node(context, "h4_raising", after_calls=3)
    try:
        thread = process.spin_in_background(executor, "h4-raising-executor")
        thread.join(10.0)
        assert not thread.is_alive()
        assert isinstance(thread.error, _Boom), thread.error
        assert str(thread.error) == "callback failed on call 3"
        assert len(calls) == 3
        assert thread.died
        assert process.executor_died(None, thread) is thread
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def test_executor_shut_down_normally_is_not_reported_as_died():
    context = rclpy.Context()
    rclpy.init(context=context)
    node, executor, calls = _raising_node(context, "h4_quiet", after_calls=10**9)
    try:
        thread = process.spin_in_background(executor, "h4-quiet-executor")
        assert wait_for(lambda: len(calls) >= 3, 10.0)
        assert process.executor_died(thread) is None  # running
        executor.shutdown()
        thread.join(10.0)
        assert not thread.is_alive() and thread.error is None and not thread.died
        assert process.executor_died(thread) is None
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def test_context_shutdown_under_a_spinning_executor_is_not_reported_as_died():
    context = rclpy.Context()
    rclpy.init(context=context)
    node, executor, calls = _raising_node(context, "h4_ctx", after_calls=10**9)
    try:
        thread = process.spin_in_background(executor, "h4-ctx-executor")
        assert wait_for(lambda: len(calls) >= 3, 10.0)
        rclpy.try_shutdown(context=context)
        thread.join(10.0)
        assert not thread.is_alive() and thread.error is None
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


# A node main using the API as the module docstring shows, with a timer that raises on its third call.
DYING_MAIN = textwrap.dedent("""
    import sys
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from strands_robots.ros import process

    signals = process.StopSignals.install()
    process.init_without_signal_handlers(sys.argv)
    node = rclpy.create_node("h4_dying")
    calls = []
    def tick():
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("invalid transition")
    node.create_timer(0.01, tick)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin = process.spin_in_background(executor, "h4-dying-executor")
    code = 0
    while not signals.event.wait(0.05):
        if process.executor_died(spin):
            code = process.EXIT_EXECUTOR_DIED
            break
    executor.shutdown()
    spin.join(2.0)
    node.destroy_node()
    rclpy.try_shutdown()
    signals.restore()
    sys.exit(code)
""")


def test_node_process_whose_executor_died_exits_nonzero_with_the_error_logged():
    proc = _spawn([sys.executable, "-c", DYING_MAIN, "--ros-args", "-r", f"__ns:=/h4_{uuid.uuid4().hex[:8]}"])
    try:
        out, _ = proc.communicate(timeout=60.0)
        assert proc.returncode == process.EXIT_EXECUTOR_DIED, out
        assert "executor died: RuntimeError: invalid transition" in out, out
    finally:
        _end(proc)


# ------------------------------------------------------------------------------------------ supervisor watch
WATCHED_MAIN = textwrap.dedent("""
    import sys
    from strands_robots.ros import process
    signals = process.StopSignals.install()
    process.init_without_signal_handlers(sys.argv)
    print("ready", flush=True)
    signals.event.wait(60.0)
    import rclpy
    rclpy.try_shutdown()
    print(f"stopped by signal {signals.signum}", flush=True)
    sys.exit(0)
""")


def test_node_process_stops_as_on_sigterm_when_the_supervisor_pipe_closes():
    read_end, write_end = os.pipe()
    proc = None
    try:
        proc = _spawn([sys.executable, "-c", WATCHED_MAIN], pass_fds=(read_end,),
                      env=_env(**{process.SUPERVISOR_PIPE_ENV: str(read_end)}))
        os.close(read_end)
        read_end = -1
        _read_until(proc, "ready", 30.0)
        assert proc.poll() is None  # the supervisor is still there: nothing happens
        os.close(write_end)  # what the supervisor's death does to the pipe
        write_end = -1
        out, _ = proc.communicate(timeout=30.0)
        assert proc.returncode == 0, out
        assert f"stopped by signal {int(signal.SIGTERM)}" in out, out
    finally:
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)
        if proc is not None:
            _end(proc)


# ---------------------------------------------------------------------------------------- parameters files
@pytest.mark.parametrize("content, reason", [
    (None, "No such file or directory"),
    ("a: [1, 2\n", "line 2 column 1: not valid YAML"),
    ("- just\n- a list\n", "expected node names at the top level, got list"),
    ("rollout: 3\n", "'rollout' has no 'ros__parameters' mapping"),
])
def test_bad_parameters_file_is_one_line_naming_it_and_exit_2(tmp_path, content, reason):
    path = tmp_path / "params.yaml"
    if content is not None:
        path.write_text(content)
    script = "import sys; from strands_robots.ros import process; process.init_without_signal_handlers(sys.argv)"
    proc = _spawn([sys.executable, "-c", script, "--ros-args", "--params-file", str(path)])
    try:
        out, _ = proc.communicate(timeout=30.0)
        assert proc.returncode == process.EXIT_BAD_PARAMETERS, out
        lines = [line for line in out.splitlines() if line.strip()]
        assert len(lines) == 1, out
        assert str(path) in lines[0] and reason in lines[0], out
    finally:
        _end(proc)


def test_package_parameters_file_reads_as_one():
    assert process.params_file_error(str(PACKAGE_SRC / "config" / "rollout.yaml")) == ""
    assert process.params_files(["x", "--ros-args", "-r", "__ns:=/a", "--params-file", "p.yaml", "--", "y"]) == [
        "p.yaml"
    ]


def test_a_misspelt_parameter_is_named_with_the_close_spelling(tmp_path):
    source = (PACKAGE_SRC / "config" / "rollout.yaml").read_text()
    assert "    control_frequency: 50.0" in source
    path = tmp_path / "rollout.yaml"
    path.write_text(source.replace("    control_frequency: 50.0", "    control_frequncy: 50.0"))
    assert process.params_file_error(str(path)) == ""  # sound YAML: only the key is wrong
    assert parameters_file.unknown_parameters_error(str(path)) == (
        f"parameters file {path}: /**/rollout: unknown parameter 'control_frequncy' (did you mean control_frequency?)")


def test_the_package_config_files_declare_only_known_parameters():
    known = parameters_file.node_parameter_names()
    assert {"control_rate_hz", "require_lease"} <= known["arm_driver"]
    assert {"control_frequency", "policy_provider"} <= known["rollout"]
    assert {"station_id", "relay_credentials_file"} <= known["station"]
    for name in ("rollout.yaml", "arm_driver.yaml", "station.yaml"):
        assert parameters_file.unknown_parameters_error(str(PACKAGE_SRC / "config" / name)) == "", name


# A main whose shutdown is done but whose exit hangs: a non-daemon thread that never ends.
HANGING_EXIT = textwrap.dedent("""
    import sys, threading, time
    from strands_robots.ros.process import StopSignals
    signals = StopSignals.install()
    threading.Thread(target=time.sleep, args=(600,), name="never-ends").start()  # not a daemon
    print("ready", flush=True)
    signals.event.wait(30.0)
    signals.restore(exit_grace_s=float(sys.argv[1]))
    sys.exit(0)
""")


def test_a_process_whose_exit_hangs_after_restore_ends_itself_with_exit_4_and_says_why():
    proc = _spawn([sys.executable, "-c", HANGING_EXIT, "0.5"])
    try:
        _read_until(proc, "ready", 30.0)
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)  # ignored: the watch, not a signal, ends it
        out, _ = proc.communicate(timeout=30.0)
        assert proc.returncode == process.EXIT_HUNG_AT_EXIT, out
        assert "still running 0.5 s after its shutdown" in out and "never-ends" in out, out
    finally:
        _end(proc)


# A main loop that spends nearly all its time inside event.wait(), where a handler that set the event itself
# could find the event's lock held by the very thread it interrupted. It ends when its stdin closes.
WAITING_MAIN = textwrap.dedent("""
    import sys, threading
    from strands_robots.ros.process import StopSignals
    signals = StopSignals.install()
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    print("ready", flush=True)
    while not done.is_set():
        signals.event.wait(0.00001)
    print(f"took {signals.count} event {signals.event.is_set()}", flush=True)
""")


def test_stop_signals_landing_inside_event_wait_never_hang_the_main_loop():
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WAITING_MAIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True, env=_env())
        try:
            _read_until(proc, "ready", 30.0)
            for _ in range(40):  # each handled one is a chance to land inside the wait (some coalesce)
                os.kill(proc.pid, signal.SIGTERM)
                time.sleep(0.002)
            out, _ = proc.communicate(input="", timeout=20.0)  # a deadlocked handler would never let it end
            assert proc.returncode == 0 and "event True" in out, out
        finally:
            _end(proc)


# The main thread blocks the stop signals, so the kernel must hand them to another thread, and then waits a
# whole minute: only a wake-up that does not need the main thread's Python-level handler ends the wait.
BLOCKED_MAIN = textwrap.dedent("""
    import signal, sys
    from strands_robots.ros.process import StopSignals
    signals = StopSignals.install()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    print("ready", flush=True)
    woke = signals.event.wait(60.0)
    print(f"woke {woke} signum {signals.signum}", flush=True)
    sys.exit(0)
""")


def test_a_stop_signal_delivered_to_another_thread_sets_the_event_at_once():
    proc = _spawn([sys.executable, "-c", BLOCKED_MAIN])
    try:
        _read_until(proc, "ready", 30.0)
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=20.0)  # well inside the minute the wait would otherwise take
        assert proc.returncode == 0 and f"woke True signum {int(signal.SIGTERM)}" in out, out
    finally:
        _end(proc)
