"""The guard on a real-time node process: a thread that stops sleeping goes back to the normal scheduler.

Every thread of a real-time node process (:mod:`.realtime_priority`) is meant to block between periods. One that
does not (a busy-wait, a catch-up loop that never catches up, a policy computing without pause) would hold a
core at ``SCHED_FIFO``: on a 2-core machine that is half of it, two such threads all of it but the 5 % the
kernel's real-time throttling leaves. The guard looks at the process's real-time threads every
:data:`WINDOW_S` and puts back on ``SCHED_OTHER`` any that was on the CPU at least :data:`BUSY_SHARE` of each of
the last :data:`WINDOWS` windows, with a warning naming it. A thread that sleeps on its deadlines never comes
near that: at 50 Hz with both cameras the whole driver process uses 0.15-0.2 of a core, the rollout node
0.25-0.3 (bench/README.md, "realtime_bench.py"); the node's start-up is done before the process goes real-time.

The guard's own thread runs one priority above the process (where allowed), so two spinning threads of equal
priority cannot keep it off both cores. It reads ``/proc/self/task/<tid>/stat`` (policy, user and system CPU
in clock ticks): one read per thread per window.

:class:`BusyRule` is the rule alone (CPU seconds per window in, threads to demote out); :class:`RealtimeGuard`
is the thread; :func:`start_realtime` logs the node's scheduling line and starts the guard when it applies.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Protocol

from strands_robots.ros.realtime_priority import Decision

WINDOW_S = 1.0
WINDOWS = 3
BUSY_SHARE = 0.9
REALTIME_POLICIES = tuple(p for p in (getattr(os, "SCHED_FIFO", None), getattr(os, "SCHED_RR", None))
                          if p is not None)


class BusyRule:
    """Which threads were busy (on the CPU ``busy_share`` of the window or more) for ``windows`` windows in a row.

    Feed it each window's CPU seconds per thread (:meth:`observe`); a thread missing from a window (it ended, or
    it is not real-time any more) starts again from zero.
    """

    def __init__(self, windows: int = WINDOWS, busy_share: float = BUSY_SHARE) -> None:
        if windows < 1:
            raise ValueError(f"windows must be >= 1, got {windows!r}")
        if not 0 < busy_share <= 1:
            raise ValueError(f"busy_share must be in (0, 1], got {busy_share!r}")
        self.windows = int(windows)
        self.busy_share = float(busy_share)
        self._streak: Dict[int, int] = {}
        self._cpu: Dict[int, float] = {}

    def observe(self, window_s: float, cpu_s: Mapping[int, float]) -> List[int]:
        """Take one window's CPU seconds per thread; return the threads busy for the last ``windows`` windows."""
        streak, cpu = {}, {}
        for tid, used in cpu_s.items():
            if used >= self.busy_share * window_s:
                streak[tid] = self._streak.get(tid, 0) + 1
                cpu[tid] = self._cpu.get(tid, 0.0) + used
        self._streak, self._cpu = streak, cpu
        return sorted(tid for tid, n in streak.items() if n >= self.windows)

    def busy_s(self, tid: int) -> float:
        """CPU seconds ``tid`` used over its current busy streak."""
        return self._cpu.get(tid, 0.0)

    def forget(self, tid: int) -> None:
        self._streak.pop(tid, None)
        self._cpu.pop(tid, None)


@dataclass(frozen=True)
class ThreadSample:
    """One thread as ``/proc/self/task/<tid>/stat`` shows it."""

    tid: int
    name: str
    policy: int
    cpu_ticks: int  # user + system


def parse_stat(tid: int, text: str) -> ThreadSample:
    """Parse a ``/proc/<pid>/task/<tid>/stat`` line (the name may hold spaces and parentheses)."""
    head, _, tail = text.rpartition(")")
    fields = tail.split()  # fields[0] is field 3 (state)
    return ThreadSample(tid=tid, name=head.partition("(")[2], policy=int(fields[38]),
                        cpu_ticks=int(fields[11]) + int(fields[12]))


def read_threads(task_dir: str = "/proc/self/task") -> List[ThreadSample]:
    """Sample every thread of this process (threads that end while being read are left out)."""
    out = []
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return out
    for name in tids:
        try:
            with open(f"{task_dir}/{name}/stat", encoding="utf-8", errors="replace") as handle:
                out.append(parse_stat(int(name), handle.read()))
        except (OSError, ValueError, IndexError):
            continue
    return out


class Logger(Protocol):
    def info(self, message: str) -> object: ...

    def warning(self, message: str) -> object: ...


class RealtimeGuard:
    """Demotes this process's real-time threads that stop sleeping (see the module docstring).

    :param priority: the process's real-time priority; the guard's thread takes one above it where allowed.
    :param report: called with one line per thread put back on the normal scheduler.
    :param sample: reads the threads (injectable for tests); :param demote: moves a thread to ``SCHED_OTHER``.
    """

    def __init__(self, priority: int, report: Callable[[str], object], *, window_s: float = WINDOW_S,
                 windows: int = WINDOWS, busy_share: float = BUSY_SHARE,
                 sample: Callable[[], Iterable[ThreadSample]] = read_threads,
                 demote: Optional[Callable[[int], None]] = None) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s!r}")
        self.priority = int(priority)
        self.window_s = float(window_s)
        self.rule = BusyRule(windows, busy_share)
        self._report = report
        self._sample = sample
        self._demote = demote if demote is not None else _to_normal_scheduler
        self._tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.demoted: List[str] = []  # the lines reported, in order

    @property
    def summary(self) -> str:
        return (f"a thread on the CPU {self.rule.busy_share:.0%} of {self.rule.windows} x {self.window_s:g} s "
                f"goes back to SCHED_OTHER")

    def start(self) -> "RealtimeGuard":
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="realtime-guard", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def check(self, previous: Dict[int, int], samples: Iterable[ThreadSample], own_tid: int) -> Dict[int, int]:
        """One window: feed the rule the real-time threads' CPU since ``previous``; demote the busy ones.

        :returns: this window's ticks per thread (the next call's ``previous``).
        """
        ticks, names, used = {}, {}, {}
        python_names = {t.native_id: t.name for t in threading.enumerate()}  # comm is "python" for these
        for s in samples:
            if s.tid == own_tid or s.policy not in REALTIME_POLICIES:
                continue
            ticks[s.tid], names[s.tid] = s.cpu_ticks, python_names.get(s.tid, s.name)
            if s.tid in previous:
                used[s.tid] = (s.cpu_ticks - previous[s.tid]) * self._tick_s
        for tid in self.rule.observe(self.window_s, used):
            busy = self.rule.busy_s(tid)
            self.rule.forget(tid)
            try:
                self._demote(tid)
            except OSError as exc:  # it ended meanwhile, or the system refused: say so, the watch goes on
                line = f"real-time guard: thread {names[tid]!r} ({tid}) could not be put back: {exc.strerror or exc}"
            else:
                seconds = self.rule.windows * self.window_s
                line = (f"real-time guard: thread {names[tid]!r} ({tid}) was on the CPU {busy:.2f} s of the last "
                        f"{seconds:g} s without sleeping: back on SCHED_OTHER so it cannot hold a core")
                ticks.pop(tid, None)
            self.demoted.append(line)
            self._report(line)
        return ticks

    def _run(self) -> None:
        own = threading.get_native_id()
        fifo = getattr(os, "SCHED_FIFO", None)
        if fifo is not None:
            for priority in (self.priority + 1, self.priority):
                try:
                    os.sched_setscheduler(0, fifo, os.sched_param(min(priority, os.sched_get_priority_max(fifo))))
                    break
                except OSError:
                    continue
        previous: Dict[int, int] = {}
        while not self._stop.wait(self.window_s):
            try:
                previous = self.check(previous, self._sample(), own)
            except Exception as exc:  # noqa: BLE001 - the guard never takes the node down; it says it stopped
                self._report(f"real-time guard stopped: {type(exc).__name__}: {exc}")
                return


def _to_normal_scheduler(tid: int) -> None:
    os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))


def start_realtime(decision: Decision, logger: Logger, **guard_options: object) -> Optional[RealtimeGuard]:
    """Log the node's one scheduling line and, on ``SCHED_FIFO``, start the guard (None otherwise).

    The line is a warning when the default could not be had (it says why), else information.
    """
    if not decision.priority:
        (logger.warning if decision.warn else logger.info)(decision.line)
        return None
    guard = RealtimeGuard(decision.priority, logger.warning, **guard_options)  # type: ignore[arg-type]
    logger.info(f"{decision.line}; guard: {guard.summary}")
    return guard.start()
