"""The simulated camera process's priority: below the control loop, above everything time-shared; one render thread.

Where the process may (root, ``CAP_SYS_NICE`` or ``RLIMIT_RTPRIO``), the camera node takes ``SCHED_FIFO``
:data:`CAMERA_RT_PRIORITY` (10; ``STRANDS_ROBOTS_CAMERA_RT_PRIORITY``: ``off`` or 1-99, decided and logged in one
line as the driver and the rollout node do, ``ros/realtime_priority.py``): the driver and the rollout node at
50 preempt it whenever they are runnable, and no time-shared process does. Beside a busy machine a time-shared
camera node fell to 11-13 fps and cost the real-time loop 0.1-0.2 % of its deadlines, and at load 24-30 on these 2
cores its frames went stale past their 1 s bound (every such episode ends as an error); at ``SCHED_FIFO`` it kept
its 15 fps and the loop all its deadlines (bench/README.md, "realtime_bench.py"). Its threads sleep between
frames, and the busy-thread guard (``ros/realtime_guard.py``) watches it as it watches the others.

What follows is what holds either way, and all that holds when the process stays time-shared.

On this 2-core machine, a camera node rendering at its normal priority with Mesa's llvmpipe (software GL, one
render thread per core by default) takes both cores in bursts of a few ms 30 times a second; the arm driver's
verdict then comes back late, the rollout's command window fills and the 50 Hz loop holds: deadlines missed.
With llvmpipe on one thread the camera takes at most one core; its nice 10 ranks it below the driver and the
rollout where they share a scheduling group with it (bench/README.md, camera_bench.py: "the 50 Hz loop with
cameras").

With Linux's autogroup scheduling on (``/proc/sys/kernel/sched_autogroup_enabled``: this machine, most
distributions) the kernel shares the CPU between sessions first, and a nice value only ranks a process's threads
against the others of its own session. The supervisor starts every node in a session of its own, so there the
camera's nice changes nothing against the driver and the rollout node: what bounds the camera is its session's
fair share and its one render thread. Lowering the session's weight as well (``/proc/self/autogroup``) was tried
and left out: beside a second station and a busy process the camera then starved, its frames went stale past
their 1 s bound in 2 of 4 demo jobs (0 of 4 without), and each such episode is a station fault run again.

:func:`lower_render_priority` is called first thing in the camera node's ``main``, before any thread exists
(Linux threads inherit the creating thread's nice value, so every thread of the process gets it):

- ``STRANDS_ROBOTS_CAMERA_NICE`` (default 10; 0 keeps the priority): added to the process's nice value;
- ``LP_NUM_THREADS`` (llvmpipe's render threads) is set to 1 unless already set.
"""

from __future__ import annotations

import os
from typing import MutableMapping, Optional

NICE_ENV = "STRANDS_ROBOTS_CAMERA_NICE"
DEFAULT_NICE = 10
CAMERA_RT_PRIORITY_ENV = "STRANDS_ROBOTS_CAMERA_RT_PRIORITY"
CAMERA_RT_PRIORITY = 10


def nice_increment(environ: "MutableMapping[str, str]") -> int:
    """Return the nice increment ``environ`` asks for (0..19).

    :raises ValueError: not an integer in 0..19, naming the variable.
    """
    raw = environ.get(NICE_ENV, "").strip()
    if not raw:
        return DEFAULT_NICE
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{NICE_ENV} must be an integer 0..19, got {raw!r}") from None
    if not 0 <= value <= 19:
        raise ValueError(f"{NICE_ENV} must be an integer 0..19, got {raw!r}")
    return value


def lower_render_priority(environ: "Optional[MutableMapping[str, str]]" = None) -> int:
    """Lower this process's priority and keep llvmpipe on one thread; return the process's nice value after.

    Call before any thread is started. ``environ`` defaults to ``os.environ`` (``LP_NUM_THREADS`` must be in
    the real environment before the first GL context is made).
    """
    env = os.environ if environ is None else environ
    increment = nice_increment(env)
    env.setdefault("LP_NUM_THREADS", "1")
    return os.nice(increment) if increment else os.nice(0)
