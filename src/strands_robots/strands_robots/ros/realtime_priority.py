"""Real-time scheduling of the hot-path node processes (driver, rollout, station): on when permitted.

The station node holds the arms' lease while an episode runs, so its renewals are on the control path too.

As ros2_control's controller_manager does for its update thread, the node tries ``SCHED_FIFO`` at priority 50
and, when it may not, stays on the normal scheduler and says why in a warning. Each node logs one line at start
either way (:attr:`Decision.line`): ``real-time scheduling: SCHED_FIFO 50 (...)`` or ``real-time scheduling:
off (...)``.

``STRANDS_ROBOTS_RT_PRIORITY`` (environment, read at process start):

- unset or empty (the default): ``SCHED_FIFO`` at :data:`DEFAULT_PRIORITY` when the process may, else the normal
  scheduler and a warning naming what is missing;
- ``1`` .. the system's maximum (99 on Linux): ``SCHED_FIFO`` at that priority, required: a refusal is an error
  (the node exits 2 naming what it needs), never a silent fallback, so a benchmark or a deployment that asked for
  it never measures the other scheduler;
- ``off`` (or ``0``): the normal scheduler.

The process may when it holds ``CAP_SYS_NICE`` (root has it unless a container dropped it) or when its
``RLIMIT_RTPRIO`` (``ulimit -r``; ``rtprio`` in limits.conf, ``LimitRTPRIO=`` in a systemd unit) reaches the
priority; under the default a lower non-zero limit is used as the priority. The soft limit is raised to the hard
one when that is what it takes (no privilege needed).

When: the decision is made first thing in ``main`` (a malformed or refused explicit value ends the process
before anything starts); it is taken once the node is built, just before it starts serving (:func:`take_realtime`).
Start-up is CPU-bound work (rclpy and Fast DDS set-up, the MuJoCo model's compilation, the GL contexts): taken
real-time it held a core for about 0.1 s from every time-shared process and from any other real-time loop of
equal priority on the machine (a second station's).

Which threads: every thread of the process then moves to ``SCHED_FIFO``, and every thread made after inherits it:
the executor's spin thread, the control loop, the driver's physics thread, and Fast DDS's receive threads (a
starved shared-memory receive thread held the driver's commands for 0.1-0.5 s under load: bench/README.md). All of
them, not only the control loop, because they share the GIL: a real-time thread waiting for a GIL held by a
time-shared thread that the scheduler put aside waits for that thread's next turn (a priority inversion). Every
one of them blocks between periods: on a deadline (the control loop's pacer, the physics stepper), in the
executor's wait set, in a DDS receive call, on a queue. The threads made while the node's modules were imported
(:func:`process_threads` before anything else) stay time-shared: LTTng's idle listeners and OpenBLAS's worker,
which spins on ``sched_yield`` for a while after each job (at ``SCHED_FIFO`` a yield leaves the core to no
time-shared work).

What a real-time thread that never blocks would do on a 2-core machine: hold a core (the kernel's real-time
throttling still leaves other work 5 % of it by default), two of them both cores. Three guards:

1. not with ``STRANDS_ROBOTS_EXECUTOR=events``: that executor's task loop spins while an action awaits (a whole
   episode or start-pose move), so the process stays on the normal scheduler (an explicit priority is refused);
2. the default is off where the kernel's real-time throttling is (``sched_rt_runtime_us`` -1): nothing would
   then bound what a spinning thread takes;
3. :mod:`.realtime_guard` watches the process's real-time threads and puts one that was on the CPU almost all
   of several seconds back on the normal scheduler, with a warning naming it.

A process started from a node process inherits its scheduling (Linux); the guard watches this process's threads
only. The camera node takes the same decision with its own variable and a lower default
(``cameras/render_priority.py``): below the driver and the rollout node, above every time-shared process.

:func:`decide` is the rule alone (facts in, decision out); :func:`read_privilege` reads the facts from the
system; :func:`decide_realtime` decides for this process, :func:`take_realtime` takes the decision for its threads
(scheduler calls injectable); :func:`apply_realtime_priority` is both at once.
"""

from __future__ import annotations

import os
import resource
import threading
from dataclasses import dataclass, replace
from typing import Callable, Collection, FrozenSet, Mapping, Optional

from strands_robots.ros.executor_choice import EXECUTOR_ENV, EXECUTOR_EVENTS

RT_PRIORITY_ENV = "STRANDS_ROBOTS_RT_PRIORITY"
# controller_manager's default thread_priority: the middle of Linux's 1-99, below the kernel's own per-CPU
# threads (migration, watchdog: 99).
DEFAULT_PRIORITY = 50
OFF_VALUES = ("off", "0")
CAP_SYS_NICE = 23  # linux/capability.h
RT_RUNTIME_FILE = "/proc/sys/kernel/sched_rt_runtime_us"
RT_PERIOD_FILE = "/proc/sys/kernel/sched_rt_period_us"
LINE_PREFIX = "real-time scheduling: "
TASK_DIR = "/proc/self/task"
UNLIMITED = 1 << 30  # RLIM_INFINITY, as a number above every priority
MAX_PASSES = 5  # listings of the threads while moving them (a thread may start one meanwhile)


@dataclass(frozen=True)
class Privilege:
    """What this process may do about its scheduling, as read from the system (:func:`read_privilege`)."""

    has_fifo: bool  # the platform has SCHED_FIFO and sched_setscheduler
    max_priority: int  # sched_get_priority_max(SCHED_FIFO)
    cap_sys_nice: bool  # CAP_SYS_NICE in the effective set
    euid: int
    rtprio_soft: int  # RLIMIT_RTPRIO, the limit the kernel checks
    rtprio_hard: int  # what the soft limit may be raised to without privilege
    rt_runtime_us: Optional[int] = None  # kernel real-time throttling: -1 off; None unknown
    rt_period_us: Optional[int] = None


@dataclass(frozen=True)
class Decision:
    """What the process does: ``priority`` 0 is the normal scheduler; ``reason`` says why, either way."""

    priority: int
    reason: str
    required: bool = False  # asked for explicitly: not getting it is an error
    warn: bool = False  # the line is a warning (the default could not be had)
    raise_rtprio_to: int = 0  # raise the soft RLIMIT_RTPRIO to this first (0: no)
    asked: str = ""  # what asked, "<variable>=<value>", for an error's text

    @property
    def line(self) -> str:
        """The node's one log line about its scheduling."""
        if self.priority:
            return f"{LINE_PREFIX}SCHED_FIFO {self.priority} ({self.reason})"
        return f"{LINE_PREFIX}off, the normal scheduler ({self.reason})"


def parse_priority(value: "str | None", max_priority: int, variable: str = RT_PRIORITY_ENV) -> "int | None":
    """Return the priority ``value`` asks for: None for the default, 0 for off, else 1..``max_priority``.

    :raises ValueError: anything else; the text names the variable.
    """
    text = (value or "").strip().lower()
    if not text:
        return None
    if text in OFF_VALUES:
        return 0
    try:
        priority = int(text)
    except ValueError:
        raise ValueError(f"{variable} must be off or an integer 1-{max_priority}, got {value!r}") from None
    if not 1 <= priority <= max_priority:
        raise ValueError(f"{variable} must be off or 1-{max_priority}, got {priority}")
    return priority


def decide(value: "str | None", privilege: Privilege, executor: str = "single", *, variable: str = RT_PRIORITY_ENV,
           default: int = DEFAULT_PRIORITY) -> Decision:
    """Decide the scheduling a node process takes.

    In this order: off when asked; off without ``SCHED_FIFO``, with the EventsExecutor, or (default only) without
    the kernel's real-time throttling; FIFO with ``CAP_SYS_NICE`` or an ``RLIMIT_RTPRIO`` that allows the priority
    (the default takes a lower non-zero limit); else off, saying what it needs. An explicit priority that is not
    granted comes back ``required`` (the caller refuses to start).

    :param value: the variable as set (None or empty: the default).
    :param executor: the executor the node will spin (``single`` or ``events``).
    :param variable: the variable's name (``STRANDS_ROBOTS_RT_PRIORITY``; the camera node has its own), for the texts.
    :param default: the priority the default asks for.
    :raises ValueError: a malformed value (see :func:`parse_priority`).
    """
    asked = parse_priority(value, privilege.max_priority if privilege.has_fifo else 99, variable)
    if asked == 0:
        return Decision(0, f"{variable}={(value or '').strip()}")
    explicit = asked is not None
    priority = asked if explicit else default

    def off(reason: str) -> Decision:
        return Decision(0, reason, required=explicit, warn=True)

    if not privilege.has_fifo:
        return off("this platform has no SCHED_FIFO")
    priority = min(priority, privilege.max_priority)
    if executor.strip().lower() == EXECUTOR_EVENTS:
        return off(f"{EXECUTOR_ENV}=events: its task loop spins while an action awaits, and a real-time thread that "
                   f"never sleeps holds a core")
    if not explicit and privilege.rt_runtime_us == -1:
        return off("the kernel's real-time throttling is off (sched_rt_runtime_us -1): nothing would bound what a "
                   f"spinning thread takes; set {variable}=<1-99> to take it anyway")
    throttling = ""
    if privilege.rt_runtime_us is not None and privilege.rt_period_us:
        throttling = ("; kernel RT throttling off" if privilege.rt_runtime_us < 0 else
                      f"; kernel RT throttling {privilege.rt_runtime_us} of {privilege.rt_period_us} us")
    if privilege.cap_sys_nice:
        who = "CAP_SYS_NICE" if privilege.euid else "root"
        return Decision(priority, f"every thread; permitted: {who}{throttling}", required=explicit)
    limit = max(privilege.rtprio_soft, privilege.rtprio_hard)
    if limit >= priority or (not explicit and limit >= 1):
        granted = min(priority, limit)
        raise_to = granted if privilege.rtprio_soft < granted else 0
        below = f", below the default {default}" if granted < priority else ""
        shown = "unlimited" if limit >= UNLIMITED else limit
        return Decision(granted, f"every thread; permitted: RLIMIT_RTPRIO {shown}{below}{throttling}",
                        required=explicit, raise_rtprio_to=raise_to)
    return off(f"not permitted: no CAP_SYS_NICE and RLIMIT_RTPRIO {limit} (uid {privilege.euid}); it needs root, "
               f"CAP_SYS_NICE or an RLIMIT_RTPRIO of at least {priority} (ulimit -r, limits.conf rtprio, systemd "
               f"LimitRTPRIO=); {variable}=off says this on purpose")


def _has_cap(bit: int, status_file: str = "/proc/self/status") -> bool:
    try:
        with open(status_file, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def _limit(value: int) -> int:
    return UNLIMITED if value == resource.RLIM_INFINITY else int(value)


def read_privilege() -> Privilege:
    """Read this process's facts: ``SCHED_FIFO`` support, ``CAP_SYS_NICE``, ``RLIMIT_RTPRIO``, RT throttling."""
    fifo = getattr(os, "SCHED_FIFO", None)
    has_fifo = fifo is not None and hasattr(os, "sched_setscheduler") and hasattr(os, "sched_param")
    rtprio = getattr(resource, "RLIMIT_RTPRIO", None)
    soft, hard = resource.getrlimit(rtprio) if rtprio is not None else (0, 0)
    return Privilege(
        has_fifo=has_fifo,
        max_priority=os.sched_get_priority_max(fifo) if has_fifo else 0,
        cap_sys_nice=_has_cap(CAP_SYS_NICE),
        euid=os.geteuid() if hasattr(os, "geteuid") else -1,
        rtprio_soft=_limit(soft),
        rtprio_hard=_limit(hard),
        rt_runtime_us=_read_int(RT_RUNTIME_FILE),
        rt_period_us=_read_int(RT_PERIOD_FILE),
    )


def _raise_rtprio(value: int) -> None:
    rtprio = resource.RLIMIT_RTPRIO
    _soft, hard = resource.getrlimit(rtprio)
    resource.setrlimit(rtprio, (value, hard))


def decide_realtime(environ: Optional[Mapping[str, str]] = None, *, privilege: Optional[Privilege] = None,
                    variable: str = RT_PRIORITY_ENV, default: int = DEFAULT_PRIORITY,
                    executor: Optional[str] = None) -> Decision:
    """Decide this process's scheduling (:func:`decide`) from ``environ`` and the system's facts.

    :param variable: the environment variable that asks (the camera node has its own) and :param default: the
        priority its default takes; :param executor: the executor the process spins (default: the one
        ``STRANDS_ROBOTS_EXECUTOR`` picks).
    :raises ValueError: a malformed value, or an explicit priority the rule does not grant (the text says why).
    """
    env = os.environ if environ is None else environ
    facts = read_privilege() if privilege is None else privilege
    raw = env.get(variable)
    spun_by = env.get(EXECUTOR_ENV, "") if executor is None else executor
    decision = decide(raw, facts, spun_by, variable=variable, default=default)
    if decision.required and not decision.priority:
        raise ValueError(f"{variable}={raw}: {decision.reason}")
    return replace(decision, asked=f"{variable}={raw}")


def process_threads(task_dir: str = TASK_DIR) -> FrozenSet[int]:
    """Return the ids of this process's threads now (Linux: ``/proc/self/task``; empty elsewhere)."""
    try:
        return frozenset(int(name) for name in os.listdir(task_dir))
    except (OSError, ValueError):
        return frozenset()


def take_realtime(decision: Decision, keep: Collection[int] = (), *,
                  set_scheduler: "Callable[[int, int, object], None] | None" = None,
                  raise_rtprio: "Callable[[int], None] | None" = None,
                  threads: Callable[[], Collection[int]] = process_threads) -> Decision:
    """Move the calling thread, then every other thread of the process but ``keep``, to ``SCHED_FIFO``.

    The calling thread first: when the system refuses it (a container's or cgroup's real-time limit) nothing else
    is touched and the process stays on the normal scheduler; threads made afterwards by any moved thread inherit
    the scheduling. The threads are listed again until a pass finds none new, so one made by a thread not yet
    moved is not missed.

    :returns: the decision taken (the one given, or the normal scheduler with the system's refusal as the reason).
    :raises ValueError: the system refused a priority asked for explicitly.
    """
    if not decision.priority:
        return decision
    setter = os.sched_setscheduler if set_scheduler is None else set_scheduler
    param = os.sched_param(decision.priority)
    try:
        if decision.raise_rtprio_to:
            (_raise_rtprio if raise_rtprio is None else raise_rtprio)(decision.raise_rtprio_to)
        setter(0, os.SCHED_FIFO, param)
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        reason = (f"the system refused SCHED_FIFO {decision.priority} ({why}) although it looked permitted: a "
                  f"container's or cgroup's real-time limit (cpu.rt_runtime_us) may forbid it")
        if decision.required:
            raise ValueError(f"{decision.asked}: {reason}") from None
        return Decision(0, reason, warn=True)
    done = set(keep) | {threading.get_native_id()}
    for _ in range(MAX_PASSES):
        new = [tid for tid in threads() if tid not in done]
        if not new:
            break
        for tid in new:
            done.add(tid)
            try:
                setter(tid, os.SCHED_FIFO, param)
            except OSError:  # ended meanwhile
                continue
    return decision


def apply_realtime_priority(environ: Optional[Mapping[str, str]] = None, *, privilege: Optional[Privilege] = None,
                            set_scheduler: "Callable[[int, int, object], None] | None" = None,
                            raise_rtprio: "Callable[[int], None] | None" = None, variable: str = RT_PRIORITY_ENV,
                            default: int = DEFAULT_PRIORITY, executor: Optional[str] = None,
                            threads: Callable[[], Collection[int]] = process_threads) -> Decision:
    """Decide and take at once (:func:`decide_realtime`, :func:`take_realtime`).

    For a process with no start-up to keep off the real-time scheduler (a benchmark's listener, a test).

    :raises ValueError: a malformed value, or an explicit priority that was not granted (the text says why).
    """
    decision = decide_realtime(environ, privilege=privilege, variable=variable, default=default, executor=executor)
    return take_realtime(decision, set_scheduler=set_scheduler, raise_rtprio=raise_rtprio, threads=threads)
