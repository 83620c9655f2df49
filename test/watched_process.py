"""A command a system test runs, watched: its output lines as they come, and waits on its lines and its end.

Every wait is on an event with a bound: a line arriving (a condition the reader thread notifies), a process
ending (``pidfd_open``: the kernel says when any process, not only a child of ours, has exited). The command
runs in a session of its own, so a signal sent to it reaches nothing else; :meth:`Command.kill` ends it and
whatever it left behind by PID, for a test's ``finally``.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import threading
import time
from typing import Iterable, Optional, Sequence


class Command:
    """``argv`` started now (stdout and stderr together, unbuffered), its lines collected on a thread.

    :param argv: the command line.
    :param env: its environment (default: this process's, with ``PYTHONUNBUFFERED=1``).
    """

    def __init__(self, argv: Sequence[str], env: Optional[dict] = None) -> None:
        self.lines: list = []
        self._ended = False  # the output ended (the command and everything holding its stdout exited)
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True,
                                     env=dict(os.environ if env is None else env, PYTHONUNBUFFERED="1"))
        self._reader = threading.Thread(target=self._read, name="command-lines", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:  # end of output: a waiter for a line that will never come stops waiting now
            self._ended = True
            self._cond.notify_all()

    @property
    def output(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def wait_line(self, pattern: str, timeout_s: float) -> str:
        """Return the first line that ``pattern`` (a regex) matches, waiting for it up to ``timeout_s``.

        :raises AssertionError: no such line within ``timeout_s``, or the output ended without one.
        """
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._cond:
            while True:
                for line in self.lines[seen:]:
                    if regex.search(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or self._ended:
                    raise AssertionError(f"no line matching {pattern!r} within {timeout_s} s:\n"
                                         + "\n".join(self.lines))
                self._cond.wait(left)

    def wait(self, timeout_s: float) -> int:
        """Wait for the command to exit and its output to end; its exit code."""
        rc = self.proc.wait(timeout=timeout_s)
        self._reader.join(10.0)
        return rc

    def children(self) -> list:
        """PIDs of the command's own child processes (e.g. a supervisor's nodes)."""
        return children_of(self.proc.pid)

    def kill(self) -> None:
        """End the command and anything it left behind, by PID (its children first), and reap it."""
        for pid in self.children():
            kill_pid(pid)
        if self.proc.poll() is None:
            kill_pid(self.proc.pid)
            try:
                self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                pass
        self._reader.join(5.0)


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def children_of(pid: int) -> list:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], stdout=subprocess.PIPE, text=True).stdout
    return [int(p) for p in out.split()]


def alive(pid: int) -> bool:
    """Tell whether ``pid`` runs (a zombie, exited but not reaped yet, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_gone(pids: Iterable[int], timeout_s: float) -> list:
    """Wait until every process of ``pids`` has exited, up to ``timeout_s``; those still running.

    Each process is watched through a pidfd (readable once it has exited), so this returns as soon as the last
    one ends. Where the kernel has no ``pidfd_open`` it checks every 20 ms instead.
    """
    pids = list(pids)
    deadline = time.monotonic() + timeout_s
    watched: dict = {}
    try:
        for pid in pids:
            try:
                watched[os.pidfd_open(pid)] = pid
            except ProcessLookupError:
                continue
            except (AttributeError, OSError):  # no pidfd here: check by /proc
                while any(alive(p) for p in pids) and time.monotonic() < deadline:
                    time.sleep(0.02)
                return [p for p in pids if alive(p)]
        poller = select.poll()
        for fd in watched:
            poller.register(fd, select.POLLIN)
        pending = set(watched)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for fd, _ in poller.poll(left * 1000.0):
                poller.unregister(fd)
                pending.discard(fd)
    finally:
        for fd in watched:
            os.close(fd)
    return [p for p in pids if alive(p)]


def kill_all(pids: Iterable[int]) -> None:
    """SIGKILL each of ``pids`` still running (a test's ``finally``: nothing is left behind)."""
    for pid in pids:
        if alive(pid):
            kill_pid(pid)
