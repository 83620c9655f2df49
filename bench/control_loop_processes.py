"""The control-loop benchmark's child processes and their CPU.

:class:`Child` runs a process (the arm driver, the event counter) in its own session and ends it by its process
group (SIGINT, then SIGTERM, then SIGKILL), also when a run fails or the bench is interrupted
(:meth:`Child.stop_all`). :class:`CpuMeter` measures a window's CPU: this process (all threads), each child
(``/proc/<pid>/stat``) and the whole machine (``/proc/stat``), so a row says what other load ran beside it.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
import traceback
from typing import Any, Optional



HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Child:
    """A process in its own session, ended by its process group (SIGINT, then SIGTERM, then SIGKILL)."""

    live: "list[Child]" = []

    def __init__(self, name: str, argv: list, stdout: Any, stderr: Any) -> None:
        self.name = name
        self.proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                     start_new_session=True, cwd=ROOT)
        self.pid = self.proc.pid
        Child.live.append(self)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_s(self) -> Optional[float]:
        """Utime + stime of the process (all its threads) from /proc/<pid>/stat; None once it is gone."""
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / CLK_TCK
        except (OSError, IndexError, ValueError):
            return None

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace_s: float = 5.0) -> Optional[int]:
        if self.alive():
            for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
                self.signal(sig)
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # Stragglers left in the group (none expected) go too.
        self.signal(signal.SIGKILL)
        if self in Child.live:
            Child.live.remove(self)
        return self.proc.returncode

    @classmethod
    def stop_all(cls) -> None:
        for child in list(cls.live):
            try:
                child.stop(grace_s=3.0)
            except Exception:
                traceback.print_exc()


# -- CPU of the processes and the machine -----------------------------------------------------------------------------
def _machine_busy_s() -> Optional[float]:
    """CPU seconds all cores spent busy since boot (/proc/stat: everything but idle and iowait)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        ticks = [int(x) for x in fields[1:]]
        return (sum(ticks[:8]) - ticks[3] - ticks[4]) / CLK_TCK  # user..steal, less idle and iowait
    except (OSError, ValueError, IndexError):
        return None


class CpuMeter:
    """CPU seconds of this process (all threads), of the given children and of the whole machine over a window.

    ``machine_cpu_pct`` is every core's busy time (100 = one core busy); ``others_cpu_pct`` what is left of it
    after the bench's own processes: load the bench did not make (other jobs on a shared machine).
    """

    def __init__(self, children: "dict[str, Child]") -> None:
        self.children = children
        self.machine0 = _machine_busy_s()
        self.wall0 = time.perf_counter()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.self0 = ru.ru_utime + ru.ru_stime
        self.child0 = {k: c.cpu_s() for k, c in children.items()}

    def stop(self) -> dict:
        wall = time.perf_counter() - self.wall0
        ru = resource.getrusage(resource.RUSAGE_SELF)
        out = {"wall_s": wall, "bench_cpu_s": ru.ru_utime + ru.ru_stime - self.self0}
        out["bench_cpu_pct"] = 100.0 * out["bench_cpu_s"] / wall if wall > 0 else float("nan")
        for k, c in self.children.items():
            now, then = c.cpu_s(), self.child0.get(k)
            if now is not None and then is not None:
                out[f"{k}_cpu_s"] = now - then
                out[f"{k}_cpu_pct"] = 100.0 * (now - then) / wall if wall > 0 else float("nan")
        machine = _machine_busy_s()
        if machine is not None and self.machine0 is not None and wall > 0:
            out["machine_cpu_pct"] = 100.0 * (machine - self.machine0) / wall
            ours = out["bench_cpu_s"] + sum(v for k, v in out.items() if k.endswith("_cpu_s") and k != "bench_cpu_s")
            out["others_cpu_pct"] = max(0.0, 100.0 * (machine - self.machine0 - ours) / wall)
        return out
