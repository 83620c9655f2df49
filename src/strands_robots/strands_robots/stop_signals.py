"""Stop signals taken by a program's main: SIGINT/SIGTERM set an event, the program stops in its own order.

No ROS here: the node processes (``strands_robots.ros.process`` re-exports this), the relay and the command
line use it alike. See :class:`StopSignals` for why the handler takes no lock, and :meth:`StopSignals.restore`
for what happens once the program's shutdown is done (stop signals ignored, the exit watched).
"""

from __future__ import annotations

import atexit
import gc
import os
import signal
import sys
import threading
import time
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

EXIT_HUNG_AT_EXIT = 4  # the process had not exited EXIT_GRACE_S after its shutdown (a thread that never ended)

# How long a process may take from StopSignals.restore() (its shutdown done) to its exit. Stop signals are
# ignored in that time, so a process stuck there (a non-daemon thread that never ends) ends itself instead.
EXIT_GRACE_S = 10.0


def _program_name() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def _exit_if_still_here(grace_s: float) -> None:
    time.sleep(grace_s)
    sys.stderr.write(f"{_program_name()}: still running {grace_s:g} s after its shutdown "
                     f"(threads left: {', '.join(t.name for t in threading.enumerate())}); exiting now\n")
    sys.stderr.flush()
    os._exit(EXIT_HUNG_AT_EXIT)


def _ignore_stop_signals() -> None:
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def ignore_until_exit() -> None:
    """Ignore stop signals from now on: a program whose command is done and that only exits now.

    For a command that took its signals in a ``with StopSignals()`` block (whose end puts Python's default handler
    back): a terminal's second Ctrl-C, or a launcher's SIGINT after it, during the interpreter's teardown would
    otherwise end in a KeyboardInterrupt traceback. The heap is frozen too (see :meth:`StopSignals.restore`).
    """
    _ignore_stop_signals()
    gc.freeze()


class StopSignals:
    """SIGINT/SIGTERM set ``event`` instead of raising.

    The first one's number is in ``signum``; every one is counted in ``count``.

    :meth:`install` takes them for the rest of the process (a node's ``main``); ``with StopSignals() as s:``
    takes them for the block and puts the previous handlers back after it.

    The event is set by a thread of its own, woken through a pipe that the interpreter's C-level signal
    handler writes to (``signal.set_wakeup_fd``) in whichever thread the kernel delivered the signal to. So
    ``event`` is set at once even while the main thread sits in a long blocking call (the Python-level handler
    runs only on the main thread, between bytecodes), and no handler takes a lock: setting the event inside the
    handler could deadlock, since the handler may interrupt the main thread inside ``event.wait()`` while that
    holds the event's (non-reentrant) lock, and ``while not event.wait(0.1)`` would then hang for good on the
    signal meant to stop it.
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum = 0
        self.count = 0
        self._previous: dict = {}
        self._process_wide = False  # taken by install(): this process's main, which ends after restore()
        self._wake_write = -1
        self._previous_wakeup = -1
        self._wakeup_set = False

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signum = self.signum or signum
        self.count += 1
        if not self._wakeup_set:  # taken off the main thread's wakeup fd: wake the relay ourselves
            try:
                os.write(self._wake_write, bytes([signum]))
            except OSError:  # full (a wake-up is pending anyway) or closed (uninstalled)
                pass

    def _relay(self, read_fd: int) -> None:
        try:
            while True:
                data = os.read(read_fd, 64)
                if not data:
                    break
                if not self.signum:
                    self.signum = next((b for b in data if b in STOP_SIGNALS), 0)
                self.event.set()
        except OSError:
            pass
        finally:
            os.close(read_fd)

    def _take(self) -> None:
        read_fd, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)
        threading.Thread(target=self._relay, args=(read_fd,), name="stop-signals", daemon=True).start()
        self._previous = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}
        try:
            self._previous_wakeup = signal.set_wakeup_fd(self._wake_write, warn_on_full_buffer=False)
            self._wakeup_set = True
        except ValueError:  # not the main thread: the Python-level handler wakes the relay
            self._wakeup_set = False

    @classmethod
    def install(cls) -> "StopSignals":
        """Take SIGINT/SIGTERM from now until the process exits."""
        signals = cls()
        signals._take()
        signals._process_wide = True
        atexit.register(_ignore_stop_signals)
        return signals

    def restore(self, exit_grace_s: "float | None" = EXIT_GRACE_S) -> None:
        """Ignore stop signals from here on: the process is ending.

        Python's default SIGINT handler is deliberately not put back (see the module docstring): a second
        Ctrl-C during the last part of the shutdown would raise KeyboardInterrupt out of it. Ignoring (SIG_IGN)
        rather than keeping our handler also covers the interpreter's own teardown, where Python resets every
        handler of its own back to the default action (and a signal then kills the process) but leaves an
        ignored signal ignored. :meth:`install` arranges the same at interpreter exit, should ``main`` not get
        here.

        Since stop signals no longer end it, a watch ends the process with ``EXIT_HUNG_AT_EXIT`` (and a line
        saying so) should it still be there ``exit_grace_s`` later; only after :meth:`install`, the signals of
        a process's main (a ``with`` block runs inside a program that goes on).
        """
        _ignore_stop_signals()
        if self._process_wide:
            # The interpreter's last collection at exit walks every object left (rclpy's, the messages', the
            # DDS entities' wrappers: over a second of a loaded 2-core machine's time, which put a stopped node
            # past a launch's 5 s SIGINT grace); frozen objects are skipped, and the process is ending anyway.
            gc.freeze()
        if self._process_wide and exit_grace_s is not None and exit_grace_s >= 0:
            threading.Thread(target=_exit_if_still_here, args=(exit_grace_s,), name="exit-watch", daemon=True).start()

    def uninstall(self) -> None:
        """Put the handlers that were there before back (for code that runs inside another program)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        if self._wakeup_set:
            try:
                signal.set_wakeup_fd(self._previous_wakeup)
            except ValueError:
                pass
            self._wakeup_set = False
        if self._wake_write >= 0:
            os.close(self._wake_write)  # the relay thread reads end-of-file and ends
            self._wake_write = -1

    def __enter__(self) -> "StopSignals":
        self._take()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()


