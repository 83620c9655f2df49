"""Child processes that die with their supervisor: how ``strands-robots up`` runs the node processes.

A supervisor killed without a word (kill -9, the OOM killer) must not leave an arm driver running on its own.
Three things tie each child to the supervisor, each covering what another may miss:

1. PR_SET_PDEATHSIG (Linux, via ``prctl`` in the child before it execs): the kernel sends the child SIGTERM when
   the supervisor's thread that started it ends. ``start`` must therefore be called from a thread that lives as
   long as the supervisor (the main thread).
2. A process group per child (its own session): :meth:`Supervisor.stop_all` signals the child and anything it
   started, and a terminal's Ctrl-C reaches the supervisor only, which stops the children in order.
3. A pipe whose write end only the supervisor holds; the child gets the read end and its number in
   ``SUPERVISOR_PIPE_ENV``. A node process watches it (``ros.process.init_without_signal_handlers``) and sends
   itself SIGTERM on end-of-file: the watch that works where prctl does not exist.

A child that gets SIGTERM stops the way it always does on SIGTERM: the rollout ends its episode, the arm driver
holds the arms and shuts down. No rclpy here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Optional, Sequence

# Kept in step with strands_robots.ros.process.SUPERVISOR_PIPE_ENV (that module imports rclpy; this one must not).
SUPERVISOR_PIPE_ENV = "STRANDS_ROBOTS_SUPERVISOR_FD"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _load_prctl() -> Optional[Callable[..., int]]:
    """Libc's ``prctl`` resolved now, in the parent, so the child's pre-exec hook only makes one call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()


def parent_death_signal_available() -> bool:
    """Whether children get PR_SET_PDEATHSIG (Linux with a libc that has prctl)."""
    return _PRCTL is not None


def _die_with_parent(parent_pid: int, sig: int, use_prctl: bool = True) -> Callable[[], None]:
    prctl = _PRCTL if use_prctl else None

    def preexec() -> None:  # runs in the child between fork and exec: one libc call, nothing that locks
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        # SIGINT is how stop_all asks first; a supervisor started in the background of a script inherits SIGINT
        # ignored, and an ignored disposition survives exec: give the child the default back.
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        except (ValueError, OSError):
            pass
        if os.getppid() != parent_pid:  # the supervisor died before prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


class Supervisor:
    """Runs node processes, prefixes their output, stops them all (SIGINT, then SIGTERM, then SIGKILL).

    :param out: where each child's output line goes, as ``[name] line`` (stdout by default).
    :param death_signal: what a child gets when the supervisor dies.
    :param parent_death_signal: set PR_SET_PDEATHSIG in the children where the platform has it (off only to
        check that the pipe watch alone is enough).
    """

    def __init__(self, out=None, death_signal: int = signal.SIGTERM, parent_death_signal: bool = True) -> None:
        self.out = out
        self.death_signal = int(death_signal)
        self.parent_death_signal = parent_death_signal
        self.procs: dict = {}
        self._lifelines: dict = {}  # name -> write end of the child's pipe (closed when the child is stopped)
        self._threads: list = []
        self._print_lock = threading.Lock()

    def start(self, name: str, argv: Sequence[str], env: Optional[dict] = None,
              on_line: Optional[Callable[[str, str], None]] = None) -> subprocess.Popen:
        """Start ``argv`` as child ``name`` (from the main thread: see the module docstring).

        :param on_line: called with (name, line) for each output line instead of printing it.
        """
        read_end, write_end = os.pipe()
        child_env = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")
        child_env[SUPERVISOR_PIPE_ENV] = str(read_end)
        try:
            proc = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, env=child_env, pass_fds=(read_end,), start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid(), self.death_signal, self.parent_death_signal),
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self.procs[name] = proc
        self._lifelines[name] = write_end
        thread = threading.Thread(target=self._pump, args=(name, proc, on_line), name=f"pump-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)
        return proc

    def _pump(self, name: str, proc: subprocess.Popen, on_line) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            text = line.rstrip("\n")
            if on_line is not None:
                on_line(name, text)
                continue
            out = self.out or sys.stdout
            with self._print_lock:  # one write per line: other threads' lines never land inside it
                out.write(f"[{name}] {text}\n")
                out.flush()

    def alive(self) -> list:
        """Names of the children still running."""
        return [name for name, p in self.procs.items() if p.poll() is None]

    def stop_all(self, grace_s: float = 5.0, first: Sequence[str] = ()) -> None:
        """SIGINT each child's process group, then SIGTERM, then SIGKILL, each after ``grace_s``.

        :param first: children stopped (each to its end) before the others, in this order: a node that needs
            another to stop cleanly goes before it (the rollout node gives its lease back to the arm driver; a
            driver stopped at the same time never answers, and the release waited 2 s for nothing).

        Then wait for their output to end.
        """
        for name in first:
            if name in self.procs:
                self._signal_in_turn([self.procs[name]], grace_s)
        self._signal_in_turn(list(self.procs.values()), grace_s)
        for name in list(self._lifelines):
            os.close(self._lifelines.pop(name))
        for thread in self._threads:
            thread.join(timeout=1.0)

    def stop_one(self, name: str, grace_s: float = 5.0) -> None:
        """Stop the child ``name`` alone (SIGINT, SIGTERM, SIGKILL its process group ``grace_s`` apart)."""
        if name in self.procs:
            self._signal_in_turn([self.procs[name]], grace_s)

    @staticmethod
    def _signal_in_turn(procs: list, grace_s: float) -> None:
        """SIGINT, SIGTERM, SIGKILL the process groups of ``procs`` still running, ``grace_s`` apart."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            alive = [p for p in procs if p.poll() is None]
            if not alive:
                break
            for p in alive:
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + grace_s
            for p in alive:
                try:
                    p.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
