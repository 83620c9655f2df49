"""A private temporary directory (0700) that goes when the process owning it goes, however it goes.

``strands-robots up`` and ``rollout.launch.py`` write tokens into a directory of their own run (the relay's token
file, the station's credentials). ``tempfile.TemporaryDirectory`` and ``atexit`` remove it only when the process
ends normally; after a SIGKILL or the OOM killer the tokens would stay on disk. So each directory has a janitor:

1. a small process of its own (``python -I -S``, no imports beyond the standard library), in a session of its own
   (a terminal's Ctrl-C never reaches it), that blocks reading a pipe whose write end only the owner holds. The
   write end is close-on-exec and never inherited, so the pipe reads end-of-file exactly when the owner is gone,
   however it died; the janitor then removes the directory and exits. A SIGTERM to the janitor removes it too.
2. an ``.owner`` file in the directory (the owner's pid and start time): whoever makes a directory of the same
   kind next first removes every one whose owner is gone (:func:`sweep`), for the case where the janitor was
   killed along with its owner.

:meth:`PrivateDir.close` (or leaving the ``with`` block) removes the directory at once and lets the janitor go.
Linux and other POSIX systems; no ROS here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import List, Optional

__all__ = ["OWNER_FILE", "PrivateDir", "owner_alive", "sweep"]

OWNER_FILE = ".owner"
JANITOR_EXIT_WAIT_S = 5.0
JANITOR_READY_S = 30.0  # its interpreter start on a loaded machine; it says so once its signals are set

# The janitor: stdin is the owner's pipe. Standard library only, so it starts in tens of milliseconds.
_JANITOR = """
import os, shutil, signal, sys
path = sys.argv[1]
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
try:  # "ready" is said inside the try: a SIGTERM right after it still reaches the finally
    os.write(1, b"r")
    os.close(1)
    while os.read(0, 4096):
        pass
except OSError:
    pass
finally:
    shutil.rmtree(path, ignore_errors=True)
"""


def _start_time(pid: int) -> str:
    """Return the kernel's start time of ``pid`` (clock ticks since boot; "" where /proc has none)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return ""
    fields = text[text.rfind(")") + 2:].split()  # after "pid (comm) ": state is field 3, starttime field 22
    return fields[19] if len(fields) > 19 else ""


def owner_alive(pid: int, start_time: str) -> bool:
    """Whether process ``pid`` is running and (where /proc tells) is the one that started at ``start_time``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: alive, and not ours to judge
    now = _start_time(pid)
    return not (now and start_time and now != start_time)


def sweep(prefix: str, parent: Optional[str] = None) -> List[str]:
    """Remove this user's ``<parent>/<prefix>*`` directories whose owner is gone; return the paths removed.

    Only directories with an :data:`OWNER_FILE` are judged (one without it is not known to be ours to remove).
    """
    parent = parent or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    uid = os.getuid()
    for name in names:
        if not name.startswith(prefix):
            continue
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
            if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != uid:
                continue
            with open(os.path.join(path, OWNER_FILE), encoding="ascii") as handle:
                pid_text, _, start_time = handle.read().strip().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if not owner_alive(pid, start_time):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class PrivateDir:
    """A 0700 directory removed when this process ends, however it ends (see the module docstring).

    :param prefix: the directory's name starts with it (and :func:`sweep` removes the orphans of that kind).
    :param parent: where it is made (default: the temporary directory, ``TMPDIR``).
    """

    def __init__(self, prefix: str, parent: Optional[str] = None) -> None:
        sweep(prefix, parent)
        self.path = tempfile.mkdtemp(prefix=prefix, dir=parent)  # mode 0700
        self._janitor: Optional[subprocess.Popen] = None
        try:
            with open(os.path.join(self.path, OWNER_FILE), "w", encoding="ascii") as handle:
                handle.write(f"{os.getpid()} {_start_time(os.getpid())}\n")
            self._janitor = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _JANITOR, self.path], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
            self._wait_ready(self._janitor)
        except BaseException:
            if self._janitor is not None:
                self._janitor.kill()
                self._janitor.wait()
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    @staticmethod
    def _wait_ready(janitor: subprocess.Popen) -> None:
        """Wait (bounded) until the janitor has taken its signals: from then on a SIGTERM to it removes the dir."""
        import select

        assert janitor.stdout is not None
        try:
            ready, _, _ = select.select([janitor.stdout], [], [], JANITOR_READY_S)
            said = janitor.stdout.read(1) if ready else b""
        finally:
            janitor.stdout.close()
        if said != b"r":
            raise RuntimeError(f"the private directory's janitor did not start within {JANITOR_READY_S:g} s")

    @property
    def janitor_pid(self) -> Optional[int]:
        return self._janitor.pid if self._janitor is not None else None

    def close(self) -> None:
        """Remove the directory now and let the janitor end (idempotent)."""
        shutil.rmtree(self.path, ignore_errors=True)
        janitor, self._janitor = self._janitor, None
        if janitor is not None:
            try:
                if janitor.stdin is not None:
                    janitor.stdin.close()
                janitor.wait(JANITOR_EXIT_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass

    def __enter__(self) -> "PrivateDir":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
