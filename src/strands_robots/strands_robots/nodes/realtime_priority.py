"""Real-time scheduling of the hot-path node processes (the arm driver, the rollout node), opt-in.

``STRANDS_ROBOTS_RT_PRIORITY`` (environment, read at process start) asks for it:

- unset, empty or ``0`` (the default): the process stays on the normal time-sharing scheduler;
- ``1`` .. the system's maximum (99 on Linux): the process's main thread moves to ``SCHED_FIFO`` at that
  priority **before** ``rclpy.init``, so every thread made after it inherits it: the executor's spin thread,
  the control loop, the driver's physics thread and the DDS threads that carry the commands, verdicts and
  joint states.

Why: on a loaded machine the normal scheduler wakes a thread whose sleep has ended several milliseconds late
(a bare 200 Hz deadline loop at load 5 on this 2-core machine: p99 4-9 ms late, 7-64 of 1 000 deadlines
missed), whatever the loop does; at ``SCHED_FIFO`` it runs as soon as it is runnable (the same loop: p99
5-200 us, none missed). All the process's threads get it, not only the control loop, because they share the
GIL: a real-time thread waiting for the GIL held by a time-shared thread that the scheduler has put aside
would wait for that thread's next turn (a priority inversion). bench/README.md ("executor_bench.py") has the
figures.

What it costs: a real-time thread that never blocks holds its core (the kernel's real-time throttling still
leaves other work 5 % by default), so it is for processes whose threads all block between periods. Not with
``STRANDS_ROBOTS_EXECUTOR=events``, whose task loop spins while an action awaits (executor_choice.py); not for
a policy whose inference runs in the rollout process for long stretches on a machine that needs that core.
It needs the privilege (root, ``CAP_SYS_NICE`` or an ``RLIMIT_RTPRIO`` of at least the priority): a refusal is
an error naming the variable, never a silent fallback (a benchmark or deployment that asked for it must not
measure the other scheduler).

:func:`resolve_priority` is the rule alone; :func:`apply_realtime_priority` applies it (the scheduler call is
injected for tests).
"""

from __future__ import annotations

import os
from typing import Callable, Mapping, Optional

RT_PRIORITY_ENV = "STRANDS_ROBOTS_RT_PRIORITY"


def resolve_priority(value: "str | None", max_priority: int) -> int:
    """Return the ``SCHED_FIFO`` priority ``value`` asks for, 0 for none.

    :raises ValueError: not an integer, negative, or above ``max_priority`` (the text names the variable).
    """
    text = (value or "").strip()
    if not text:
        return 0
    try:
        priority = int(text)
    except ValueError:
        raise ValueError(f"{RT_PRIORITY_ENV} must be an integer 0-{max_priority}, got {value!r}") from None
    if not 0 <= priority <= max_priority:
        raise ValueError(f"{RT_PRIORITY_ENV} must be 0-{max_priority} (0: no real-time priority), got {priority}")
    return priority


def apply_realtime_priority(environ: Optional[Mapping[str, str]] = None, *,
                            set_scheduler: "Callable[[int, int, object], None] | None" = None,
                            max_priority: "int | None" = None) -> str:
    """Move the calling thread (the process's main thread, before any other starts) to ``SCHED_FIFO``.

    :returns: what was done, for the node's log: ``""`` when not asked, else ``"SCHED_FIFO <priority>"``.
    :raises ValueError: a bad value, or the system refused (no privilege, no ``SCHED_FIFO`` on this platform).
    """
    env = os.environ if environ is None else environ
    raw = env.get(RT_PRIORITY_ENV, "")
    if not (raw or "").strip():
        return ""
    fifo = getattr(os, "SCHED_FIFO", None)
    if fifo is None or not hasattr(os, "sched_param"):
        raise ValueError(f"{RT_PRIORITY_ENV}={raw}: this platform has no SCHED_FIFO")
    top = os.sched_get_priority_max(fifo) if max_priority is None else int(max_priority)
    priority = resolve_priority(raw, top)
    if priority == 0:
        return ""
    setter = os.sched_setscheduler if set_scheduler is None else set_scheduler
    try:
        setter(0, fifo, os.sched_param(priority))
    except OSError as exc:
        raise ValueError(
            f"{RT_PRIORITY_ENV}={priority}: the system refused SCHED_FIFO ({exc.strerror or exc}); it needs root, "
            f"CAP_SYS_NICE or an RLIMIT_RTPRIO of at least {priority} (ulimit -r)") from None
    return f"SCHED_FIFO {priority}"
