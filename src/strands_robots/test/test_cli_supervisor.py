"""supervisor.py: children die with their supervisor, each way on its own (parent-death signal, pipe watch).

A supervisor process (a small script using :class:`Supervisor`) starts a child and is killed with SIGKILL; the
child must be gone soon after (polled, no timing asserted). Every process is ended by PID in ``finally``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from strands_robots import supervisor

PACKAGE_SRC = Path(__file__).resolve().parent.parent

SUPERVISOR_SCRIPT = textwrap.dedent("""
    import sys, time
    from strands_robots.supervisor import Supervisor
    use_prctl = sys.argv[1] == "prctl"
    sup = Supervisor(parent_death_signal=use_prctl)
    child = sup.start("child", sys.argv[2:])
    print(child.pid, flush=True)
    time.sleep(120)
""")

# A node process's stop path without the node: stop signals taken, the supervisor watch started by init; on a
# stop it writes how it stopped to the file named by its argument.
WATCHED_CHILD = textwrap.dedent("""
    import sys
    from strands_robots.ros import process
    signals = process.StopSignals.install()
    process.init_without_signal_handlers(sys.argv[:1])
    signals.event.wait(120.0)
    import rclpy
    rclpy.try_shutdown()
    with open(sys.argv[1], "w") as f:
        f.write(f"stopped by signal {signals.signum}")
""")


def _env() -> dict:
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(PACKAGE_SRC), path) if p))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _gone_within(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def _supervise(mode: str, child_argv: list):
    sup = subprocess.Popen([sys.executable, "-c", SUPERVISOR_SCRIPT, mode, *child_argv], stdout=subprocess.PIPE,
                           text=True, start_new_session=True, env=_env())
    assert sup.stdout is not None
    line = sup.stdout.readline()
    assert line.strip().isdigit(), f"supervisor printed {line!r}"
    return sup, int(line)


@pytest.mark.skipif(not supervisor.parent_death_signal_available(), reason="no PR_SET_PDEATHSIG on this platform")
def test_child_gets_sigterm_when_its_supervisor_is_killed_with_sigkill():
    sup, child = _supervise("prctl", ["sleep", "120"])  # sleep has no watch of its own: only the kernel's signal
    try:
        assert _alive(child)
        _kill(sup.pid)
        sup.wait(10.0)
        assert _gone_within(child, 20.0), "the child outlived its supervisor"
    finally:
        _kill(child)
        _kill(sup.pid)
        sup.communicate(timeout=10.0)


def test_node_process_stops_cleanly_on_its_pipe_watch_when_the_supervisor_is_killed(tmp_path):
    pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
    marker = tmp_path / "stopped.txt"
    sup, child = _supervise("no-prctl", [sys.executable, "-c", WATCHED_CHILD, str(marker)])
    try:
        time.sleep(0.5)  # let the child get to its wait (a stop before it would be taken as well)
        assert _alive(child)
        _kill(sup.pid)
        sup.wait(10.0)
        assert _gone_within(child, 30.0), "the child outlived its supervisor"
        assert marker.read_text() == f"stopped by signal {int(signal.SIGTERM)}"
    finally:
        _kill(child)
        _kill(sup.pid)
        sup.communicate(timeout=10.0)


def test_stop_all_ends_each_child_and_its_group_and_collects_their_output():
    lines: list = []
    sup = supervisor.Supervisor()
    try:
        script = "import time; print('up', flush=True); time.sleep(120)"
        procs = [sup.start(f"c{i}", [sys.executable, "-c", script], on_line=lambda n, t: lines.append((n, t)))
                 for i in range(2)]
        deadline = time.monotonic() + 20.0
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(lines) == [("c0", "up"), ("c1", "up")]
        assert sorted(sup.alive()) == ["c0", "c1"]
        sup.stop_all(grace_s=5.0)
        assert sup.alive() == []
        # The first signal did it: an uncaught KeyboardInterrupt ends Python by SIGINT (not SIGTERM/SIGKILL).
        assert [p.returncode for p in procs] == [-signal.SIGINT, -signal.SIGINT]
    finally:
        for p in sup.procs.values():
            _kill(p.pid)


def test_children_of_a_supervisor_started_with_sigint_ignored_still_stop_on_the_first_sigint():
    # A shell script's background job (`cmd &` without job control) starts with SIGINT ignored, and an ignored
    # disposition survives fork and exec: the children must get the default back, or stop_all's SIGINT is lost.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    sup = supervisor.Supervisor()
    try:
        lines: list = []
        script = "import time; print('up', flush=True); time.sleep(120)"
        proc = sup.start("c", [sys.executable, "-c", script], on_line=lambda n, t: lines.append(t))
        deadline = time.monotonic() + 20.0
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lines == ["up"]
        sup.stop_all(grace_s=5.0)
        assert proc.returncode == -signal.SIGINT
    finally:
        signal.signal(signal.SIGINT, previous)
        for p in sup.procs.values():
            _kill(p.pid)


def test_supervisor_and_stop_signals_import_without_ros():
    code = ("import sys; import strands_robots.supervisor, strands_robots.stop_signals; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'launch', 'launch_ros')))")
    out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=_env(), timeout=60).stdout
    assert out.strip() == "[]", out
