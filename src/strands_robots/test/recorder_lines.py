"""The lines of ``strands-robots record`` (and of any process) as they come, and waits on them.

``Lines`` reads one of a process's pipes on a thread; :func:`wait_matched` waits for the recorder's ``matched``
lines (its subscriptions have met the publishers named); :func:`end` stops a process with SIGINT, then SIGKILL.
Every wait is on an event with a bound.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from typing import Any, Callable, Iterable

RECORDING = "recording "  # the recorder's line once its subscriptions are up
MATCHED = re.compile(r"^matched (\S+): (\d+) publisher\(s\)$")


class LineLog:
    """Lines added by one or more threads; waits for a line are event waits. ``end()``: no more lines come."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._ended = threading.Event()

    def add(self, text: str) -> None:
        """Add ``text``, one line per line of it."""
        with self._cond:
            self.lines.extend(line + "\n" for line in text.split("\n"))
            self._cond.notify_all()

    def end(self) -> None:
        with self._cond:
            self.lines.append("")  # the end
            self._cond.notify_all()
        self._ended.set()

    def wait_for(self, matches: Callable[[str], Any], timeout_s: float, what: str) -> str:
        """Return the first line for which ``matches(line)`` holds; AssertionError at the deadline or the end."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._cond:
            while True:
                for line in self.lines[seen:]:
                    if line == "":
                        raise AssertionError(f"the output ended before {what}: {''.join(self.lines)[-2000:]}")
                    if matches(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} within {timeout_s} s: {''.join(self.lines)[-2000:]}")
                self._cond.wait(left)

    def text(self, timeout_s: float = 10.0) -> str:
        """All the lines, once ended (waited for up to ``timeout_s``)."""
        self._ended.wait(timeout_s)
        with self._cond:
            return "".join(self.lines)


class Lines(LineLog):
    """Every line of one of a process's pipes, read by a thread."""

    def __init__(self, pipe) -> None:
        super().__init__()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe) -> None:
        for line in iter(pipe.readline, ""):
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        self.end()


def wait_matched(out: LineLog, names: Iterable[str], timeout_s: float) -> dict[str, int]:
    """Wait until the recorder's ``matched`` lines say every topic in ``names`` has a publisher; their counts."""
    wanted = set(names)
    counts: dict[str, int] = {}

    def all_matched(line: str) -> bool:
        found = MATCHED.match(line.strip())
        if found:
            counts[found.group(1)] = int(found.group(2))
        return all(counts.get(name, 0) > 0 for name in wanted)

    out.wait_for(all_matched, timeout_s, f"publisher matched on each of {', '.join(sorted(wanted))}")
    return {name: counts[name] for name in sorted(wanted)}


def end(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """SIGINT, then SIGKILL after ``timeout_s``; its pipes are read by :class:`Lines`."""
    if proc.poll() is None:
        proc.send_signal(2)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout_s)
