"""Keep glibc's malloc from giving a policy session's large freed buffers back to the kernel between steps.

Every step of a policy session moves an observation of a few hundred kB (two 224x224 RGB frames are 300 kB)
through several buffers in each process: gRPC's receive buffer, the protobuf message, numpy arrays, msgpack and
the websocket frame of the openpi bridge. Each is allocated and freed within the step. glibc's malloc serves a
buffer above its mmap threshold with a fresh mapping, and returns a free heap top above its trim threshold to
the kernel (both thresholds adapt to about the largest buffer mapped so far, ~300 kB and ~600 kB here); either
way the next step writes into new pages and takes one page fault per 4 kB. Measured in the Evaluation Client
serving an openpi server (``bench/openpi_bench.py``): about 200 faults per step, 0.5-1 ms of a 3 ms round trip.

:func:`keep_freed_buffers` raises both thresholds once per process (``mallopt``: ``M_MMAP_THRESHOLD`` to
:data:`MMAP_THRESHOLD_BYTES`, the largest message a client takes; ``M_TRIM_THRESHOLD`` to
:data:`TRIM_THRESHOLD_BYTES`), so a step's buffers are reused from the heap by the next. What is kept is memory
the process already held at once (freed, not returned); nothing grows per step. Only on glibc (elsewhere it does
nothing); ``STRANDS_ROBOTS_MALLOC_TUNING=off`` in the environment leaves malloc as it is.

The relay's main, the station's :class:`~strands_robots.station_link.session.PolicySession`,
``EvaluationClient.serve_policy`` and :class:`~strands_robots.client.openpi.OpenPIPolicy` call it. No
strands_robots import (the client installs on its own).
"""

from __future__ import annotations

import ctypes
import os
import threading

__all__ = ["keep_freed_buffers", "MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "OPT_OUT_VARIABLE"]

#: Buffers below this come from the heap, not from a mapping of their own (glibc caps it at 32 MiB on 64 bit).
MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024
#: A free heap top up to this stays with the process (per malloc arena: a step's buffers, several times a message).
TRIM_THRESHOLD_BYTES = 32 * 1024 * 1024
#: Set to ``off`` (or ``0``, ``no``, ``false``) to leave malloc untouched.
OPT_OUT_VARIABLE = "STRANDS_ROBOTS_MALLOC_TUNING"

_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_lock = threading.Lock()
_done: "bool | None" = None


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError, AttributeError):  # not a glibc system
        return False


def keep_freed_buffers() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (once); return whether they are raised.

    False: not glibc, the opt-out variable is set, or ``mallopt`` refused.
    """
    global _done
    with _lock:
        if _done is not None:
            return _done
        _done = False
        if os.environ.get(OPT_OUT_VARIABLE, "").strip().lower() in ("off", "0", "no", "false"):
            return False
        if not _glibc():
            return False
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            return False
        mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
        _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
            mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
        return _done
