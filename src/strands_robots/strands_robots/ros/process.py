"""What every strands_robots node process does around its node: init, spin, a clean stop on signals.

rclpy's own SIGINT handler shuts the context down under whatever is running (an episode mid-step, a physics
thread), so the processes take SIGINT/SIGTERM themselves: the signal only sets an event, and the process stops
its work in order (episode ended and published, arms held) before the context goes.

The API a node's ``main`` uses, in order::

    signals = StopSignals.install()          # before rclpy.init; SIGINT/SIGTERM only set signals.event
    init_without_signal_handlers(argv)       # rclpy.init without rclpy's handlers; a bad --params-file is
                                             # one line on stderr and exit 2 (SystemExit), not a traceback
    spin = spin_in_background(executor, "name")     # a SpinThread
    while not signals.event.wait(0.1):
        if executor_died(spin):              # a callback raised out of the executor: the node is dead
            code = EXIT_EXECUTOR_DIED        # (spin.error holds the exception; it was logged)
            break
    ...  # stop the work, executor.shutdown(), spin.join(), node.destroy_node(), rclpy.try_shutdown()
    signals.restore()                        # the process is ending: stop signals are ignored from here on

Stop signals keep being taken until the process exits. A terminal's Ctrl-C reaches the whole process group and
``ros2 launch`` forwards its own SIGINT a few ms later; putting Python's default handler back while the process
is still shutting down let that second signal kill it (exit -2, ``process has died``), and so does the
interpreter's own teardown, which resets Python's handlers to the default action. :meth:`StopSignals.restore`
(and interpreter exit after :meth:`StopSignals.install`) therefore sets the stop signals to SIG_IGN, which the
teardown leaves alone, and watches the exit: a process still there ``EXIT_GRACE_S`` later (a thread that never
ends) exits with ``EXIT_HUNG_AT_EXIT`` and a line naming its threads. Only a ``with StopSignals()`` block, for
code that runs inside another program, puts the previous handlers back at its end.

Under ``strands-robots up`` the nodes are children of a supervisor that may die without a word (kill -9). The
supervisor sets PR_SET_PDEATHSIG in the child (Linux) and also hands it the read end of a pipe whose number is in
``SUPERVISOR_PIPE_ENV``: :func:`init_without_signal_handlers` watches it, and when the supervisor is gone (the pipe
reads end-of-file) the process sends itself SIGTERM, so it stops the way a SIGTERM stops it (arms held).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from typing import Any, Optional, Sequence

import rclpy
import rclpy.executors
import rclpy.logging
from rclpy.executors import ExternalShutdownException, ShutdownException

from strands_robots.dds.fastdds_profile import use_project_profile
from strands_robots.ros.realtime_guard import start_realtime
from strands_robots.ros.realtime_priority import Decision, process_threads, take_realtime

# The stop signals have no ROS in them (the relay and the CLI use them too); this module's API re-exports them.
from strands_robots.stop_signals import EXIT_GRACE_S, EXIT_HUNG_AT_EXIT, STOP_SIGNALS, StopSignals  # noqa: F401


# Exit codes of the node processes (beside 0, a clean stop, and 1, a failed run).
EXIT_BAD_PARAMETERS = 2  # refused parameters or an unreadable parameters file
EXIT_EXECUTOR_DIED = 3  # an exception escaped a callback and ended the executor's spin


# The read end of a pipe from the supervising process (a file descriptor number); end-of-file on it means the
# supervisor is gone.
SUPERVISOR_PIPE_ENV = "STRANDS_ROBOTS_SUPERVISOR_FD"

# Python hands the GIL over only every sys.getswitchinterval() (5 ms by default): in a node process whose
# physics or control thread keeps running, a service answer or a response callback could wait that long for
# the interpreter, which is a whole 200 Hz control period. Node processes switch every 0.5 ms instead.
NODE_SWITCH_INTERVAL_S = 0.0005


def _program_name(argv: "Sequence[str] | None") -> str:
    if argv:
        return os.path.basename(str(argv[0])) or "node"
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "node"


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def init_without_signal_handlers(argv: "Sequence[str] | None") -> None:
    """Call ``rclpy.init`` leaving SIGINT/SIGTERM to us, with the node processes' GIL switch interval.

    Plain init where rclpy has no signal handler options; the interval is ``NODE_SWITCH_INTERVAL_S``. The
    project's Fast DDS profile is taken first unless the user named their own (``dds/fastdds_profile.py``).

    An init that fails on the command line (an unreadable or malformed ``--params-file``, a bad ``-p``) prints
    one line naming the program and the reason on stderr and exits with ``EXIT_BAD_PARAMETERS``. Starts the
    supervisor watch when ``SUPERVISOR_PIPE_ENV`` is set (see the module docstring).
    """
    args = list(argv) if argv is not None else None
    sys.setswitchinterval(NODE_SWITCH_INTERVAL_S)
    watch_supervisor()
    for path in params_files(args or []):
        reason = params_file_error(path)
        if reason:
            print(f"{_program_name(argv)}: {reason}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_BAD_PARAMETERS)
    use_project_profile()  # before the first participant: Fast DDS reads the profile then
    try:
        try:
            from rclpy.signals import SignalHandlerOptions
        except ImportError:
            rclpy.init(args=args)
        else:
            rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as exc:  # rclpy's RCLError (not exported alike on every distro) and friends
        print(f"{_program_name(argv)}: cannot start ROS: {_first_line(exc)}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_BAD_PARAMETERS) from None


def params_files(argv: Sequence[str]) -> list:
    """Return the ``--params-file`` paths among the ``--ros-args`` of ``argv``."""
    files, in_ros_args = [], False
    for i, arg in enumerate(argv):
        if arg == "--ros-args":
            in_ros_args = True
        elif arg == "--":
            in_ros_args = False
        elif in_ros_args and arg == "--params-file" and i + 1 < len(argv):
            files.append(argv[i + 1])
    return files


def params_file_error(path: str) -> str:
    """Say in one line why ``path`` is not a ROS parameters file; "" when it reads as one.

    Missing, not YAML (the line and column are named), not ``node: {ros__parameters: {...}}``.
    """
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        return f"parameters file {path}: {exc.strerror or exc}"
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or _first_line(exc)
        return f"parameters file {path}:{where}: not valid YAML: {problem}"
    if not isinstance(data, dict):
        return f"parameters file {path}: expected node names at the top level, got {type(data).__name__}"
    for node, body in data.items():
        if not isinstance(body, dict) or "ros__parameters" not in body and not all(
            isinstance(v, dict) for v in body.values()
        ):
            return f"parameters file {path}: {node!r} has no 'ros__parameters' mapping"
    return ""


SPIN_ONCE_TIMEOUT_S = 0.2  # how long one spin_once waits: the bound on noticing stop() without a wake


class StopFlag:
    """What a spin thread's ``spin_once_until_future_complete`` waits on: done once :meth:`set`.

    rclpy ends a wait early only for a condition it checks after each wake-up (a plain ``wake()`` rebuilds the wait
    set and waits on to its timeout: a driver took 0.41 s to stop its spin). rclpy asks this for ``done()`` and adds a
    done callback per call; the callbacks are dropped (the stopper wakes the executor itself), so a spin of hours
    keeps none of them.
    """

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def done(self) -> bool:
        return self._event.is_set()

    def cancelled(self) -> bool:
        return False

    def add_done_callback(self, callback: Any) -> None:
        """Nothing kept: :meth:`set`'s caller wakes the executor."""


def spin_once_until(executor: Any, flag: StopFlag, timeout_s: float) -> None:
    """One bounded ``spin_once`` of ``executor`` that returns as soon as ``flag`` is set and the executor woken.

    rclpy's Python executors (single- and multi-threaded) check the flag after each wake-up; any other (the
    EventsExecutor, whose C++ spin asks more of a future) spins once to ``timeout_s``.
    """
    if isinstance(executor, (rclpy.executors.SingleThreadedExecutor, rclpy.executors.MultiThreadedExecutor)):
        executor.spin_once_until_future_complete(flag, timeout_sec=timeout_s)
    else:
        executor.spin_once(timeout_sec=timeout_s)


class SpinThread(threading.Thread):
    """The thread :func:`spin_in_background` spins an executor on.

    ``error`` is the exception that ended the spin when it was not a shutdown (a callback raised: rclpy passes
    it out of ``spin``), else None; ``died`` says the thread is over because of it.
    """

    def __init__(self, executor: Any, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.executor = executor
        self.error: Optional[BaseException] = None
        self._stopping = StopFlag()

    def stop(self, timeout_s: float = 2.0) -> None:
        """End the spin, wait (at most ``timeout_s``) for the thread, then shut the executor down.

        In that order: Jazzy's ``Executor.shutdown`` destroys its guard condition without waiting for a spin in
        progress (rclpy 7.1.6 skips its wait for outstanding work), and a callback handler still running then
        triggered the destroyed guard: ``InvalidHandle`` out of ``spin``, a traceback at a clean Ctrl-C.
        """
        self._stopping.set()
        if self.is_alive() and self is not threading.current_thread():
            wake = getattr(self.executor, "wake", None)
            if wake is not None:
                wake()  # the current spin_once sees the flag and returns now, not at its timeout
            self.join(timeout_s)
        self.executor.shutdown(timeout_sec=timeout_s)
        if self.is_alive() and self is not threading.current_thread():
            self.join(timeout_s)

    def run(self) -> None:
        try:
            # Bounded spin_once calls until stop(), the context's shutdown or the executor's (spin_once swallows
            # the latter: the loop reads the flag rclpy's own spin() reads), so stop() can end the spin before it
            # shuts the executor down. Never the EventsExecutor's spin(), which keeps the GIL while it waits
            # (every other thread of the process stalls; seen on Kilted's rclpy 9.1.2 and Jazzy's 7.1.6).
            context = self.executor.context
            while not self._stopping.is_set() and context.ok() and not getattr(self.executor, "_is_shutdown", False):
                spin_once_until(self.executor, self._stopping, SPIN_ONCE_TIMEOUT_S)
        except (ExternalShutdownException, ShutdownException, KeyboardInterrupt):
            pass
        except BaseException as exc:  # noqa: BLE001 - whatever killed the executor is recorded, not lost
            if self._shutting_down():
                return  # a handle destroyed under the executor while the context goes: a normal end
            self.error = exc
            rclpy.logging.get_logger(self.name).error(
                f"executor died: {type(exc).__name__}: {_first_line(exc)}\n"
                + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
            )

    def _shutting_down(self) -> bool:
        context = getattr(self.executor, "context", None)
        try:
            return context is not None and not context.ok()
        except Exception:
            return True

    @property
    def died(self) -> bool:
        """The executor's spin ended with an error (and the thread is over)."""
        return self.error is not None and not self.is_alive()


def spin_in_background(executor: Any, name: str) -> SpinThread:
    """Spin ``executor`` on a daemon :class:`SpinThread` until it is shut down.

    A context shutdown ends it quietly; an exception out of a callback is kept on ``thread.error`` and logged.
    """
    thread = SpinThread(executor, name)
    thread.start()
    return thread


def executor_died(*threads: SpinThread) -> Optional[SpinThread]:
    """Return the first of ``threads`` whose executor died of an error (see :class:`SpinThread`), else None."""
    for thread in threads:
        if thread is not None and getattr(thread, "died", False):
            return thread
    return None



class NodeProcess:
    """A node executable's process around its node, in the order every node needs.

    ``NodeProcess(argv, realtime)`` notes the threads the imports made (they stay time-shared), takes the stop
    signals and starts rclpy (:func:`init_without_signal_handlers`); :meth:`run` adds the built node to its
    executor, takes real-time scheduling for every thread from then on (``realtime``, decided before rclpy was
    touched: ``ros/realtime_priority.py``) and spins the executor in the background; :meth:`close` stops and
    joins the spin, then the real-time guard, destroys the node and shuts rclpy down. A node's ``main`` keeps
    only what is its own: how it builds the node, what it waits on, and how its work stops before :meth:`close`::

        process = NodeProcess(argv, realtime)
        try:
            spin = process.run(CameraNode(), SingleThreadedExecutor(), "camera-executor")
            while not process.stop.wait(0.2): ...
        finally:
            ...  # the node's own work stopped
            process.close(spin_timeout_s=5.0)
    """

    def __init__(self, argv: "Sequence[str] | None", realtime: Decision) -> None:
        self.realtime = realtime
        self.import_threads = process_threads()
        self.signals = StopSignals.install()
        self.node: Any = None
        self.executor: Any = None
        self.spin: Optional[SpinThread] = None
        self.guard: Any = None
        init_without_signal_handlers(argv)

    @property
    def stop(self) -> threading.Event:
        """Set by SIGINT/SIGTERM (or a gone supervisor): the node's work should end."""
        return self.signals.event

    def run(self, node: Any, executor: Any, thread_name: str) -> SpinThread:
        """Add ``node`` to ``executor``, take real-time scheduling and spin on a thread named ``thread_name``.

        Start-up is done by then: every thread now and every later one (an episode's, the render thread) runs
        real-time where the decision allows it.
        """
        self.node, self.executor = node, executor
        executor.add_node(node)
        self.guard = start_realtime(take_realtime(self.realtime, self.import_threads), node.get_logger())
        self.spin = spin_in_background(executor, thread_name)
        return self.spin

    def adopt(self, node: Any = None, executor: Any = None) -> None:
        """Hand :meth:`close` what was built before :meth:`run` (a start refused half way leaves nothing behind)."""
        self.node = node if node is not None else self.node
        self.executor = executor if executor is not None else self.executor

    def close(self, spin_timeout_s: float = 2.0) -> None:
        """Stop the executor and join its thread, stop the guard, destroy the node, shut rclpy down.

        The executor goes before the node and the context: a spin thread still in rclpy's wait when the
        interpreter exits is ended there by pthread_exit, which aborts the process ("terminate called without an
        active exception", exit -6 instead of the node's code).
        """
        if self.spin is not None:
            self.spin.stop(spin_timeout_s)
        elif self.executor is not None:
            self.executor.shutdown(timeout_sec=spin_timeout_s)
        if self.guard is not None:
            self.guard.stop()
        if self.node is not None:
            self.node.destroy_node()
        rclpy.try_shutdown()
        self.signals.restore()


# ------------------------------------------------------------------------------------------- supervisor watch
_SUPERVISOR_GONE = threading.Event()


def supervisor_gone() -> bool:
    """Whether this process's supervisor died (its pipe read end-of-file): nobody it served is listening now.

    A node stopping because of it skips what only its supervisor's readers needed (waiting for their
    acknowledgements), so every child is gone within seconds of a supervisor's kill -9.
    """
    return _SUPERVISOR_GONE.is_set()


def watch_supervisor(environ: "dict | None" = None) -> Optional[threading.Thread]:
    """Watch the supervisor's pipe named by ``SUPERVISOR_PIPE_ENV``, if any, on a daemon thread.

    At end-of-file (the supervisor exited, however it died) this process gets SIGTERM. None when unset.
    """
    env = os.environ if environ is None else environ
    value = env.get(SUPERVISOR_PIPE_ENV, "")
    if not value:
        return None
    try:
        fd = int(value)
        os.fstat(fd)
    except (ValueError, OSError):
        print(f"{_program_name(None)}: ignoring {SUPERVISOR_PIPE_ENV}={value!r}: not an open file descriptor",
              file=sys.stderr, flush=True)
        return None

    def watch() -> None:
        try:
            while os.read(fd, 4096):
                pass
        except OSError:
            pass
        _SUPERVISOR_GONE.set()
        # To the main thread itself: a blocking call there returns at once and its stop path runs.
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)

    thread = threading.Thread(target=watch, name="supervisor-watch", daemon=True)
    thread.start()
    return thread
