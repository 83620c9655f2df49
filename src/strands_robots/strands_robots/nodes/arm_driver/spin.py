"""The arm driver's executor thread: a callback error never kills it silently, and its death is visible.

rclpy re-raises a callback's exception out of ``spin()``, ending the spin thread; the process would then go on
with nobody serving its topics and services, and exit 0 (Jazzy's rclpy raises ``RCLError`` from the lifecycle
``change_state`` service on an invalid transition, ros2/rclpy#1209). Here:

- :func:`guard_change_state` answers a raising ``change_state`` request as refused (``success=False``);
- :class:`SpinThread` spins one callback at a time, logs a callback's exception and keeps spinning; anything
  that still ends the thread other than a shutdown is kept in ``error``, so ``main()`` exits non-zero.

:func:`autostart` is ``main()``'s ``--autostart``: configure, then activate, each failure logged.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from rclpy.executors import ExternalShutdownException
from rclpy.lifecycle import TransitionCallbackReturn

from strands_robots.ros.process import StopFlag, spin_once_until

try:  # rclpy's own "executor was shut down" (raised by spin_once after executor.shutdown)
    from rclpy.executors import ShutdownException
except ImportError:  # pragma: no cover - every supported distro has it
    ShutdownException = ExternalShutdownException  # type: ignore[misc,assignment]


def guard_change_state(node: Any) -> bool:
    """Wrap the lifecycle ``change_state`` service of ``node``: an exception answers ``success=False``.

    The exception is logged instead of propagating into the executor. Returns whether the service was found.

    Uses only public API: ``Node.services`` and a service's ``callback`` attribute.
    """
    for service in node.services:
        if service.srv_name.endswith("/change_state"):
            inner = service.callback

            def guarded(request: Any, response: Any, _inner: Any = inner) -> Any:
                try:
                    return _inner(request, response)
                except Exception as exc:
                    try:
                        which = f"{request.transition.id} {request.transition.label!r}"
                    except Exception:
                        which = "(unreadable)"
                    node.get_logger().error(f"lifecycle transition {which} refused: {type(exc).__name__}: {exc}")
                    response.success = False
                    return response

            service.callback = guarded
            return True
    return False


class SpinThread:
    """Spins ``executor`` on a daemon thread until it or its context shuts down.

    :param executor: the node's executor.
    :param logger: where a callback's exception is reported (it does not end the spin).
    """

    def __init__(self, executor: Any, logger: Any, name: str = "arm_driver_executor") -> None:
        self._executor = executor
        self._logger = logger
        self.error: Optional[BaseException] = None
        self.callback_errors = 0
        self._stopping = StopFlag()
        self._thread = threading.Thread(target=self._spin, name=name, daemon=True)

    def start(self) -> "SpinThread":
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """End the spin, wait for the thread, then shut the executor down.

        Why in that order: :meth:`strands_robots.ros.process.SpinThread.stop`.
        """
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            wake = getattr(self._executor, "wake", None)
            if wake is not None:
                wake()
            self._thread.join(timeout_s)
        self._executor.shutdown(timeout_sec=timeout_s)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    @property
    def died(self) -> bool:
        """The thread ended by an error, not a shutdown."""
        return self.error is not None

    def _spin(self) -> None:
        executor = self._executor
        context = getattr(executor, "context", None)
        try:
            while (not self._stopping.is_set() and (context is None or context.ok())
                   and not getattr(executor, "_is_shutdown", False)):  # spin_once swallows a shutdown
                try:
                    spin_once_until(executor, self._stopping, 0.5)
                except (ExternalShutdownException, ShutdownException, KeyboardInterrupt):
                    return
                except Exception as exc:  # a callback raised: report it, keep serving everything else
                    if self._stopping.is_set() or (context is not None and not context.ok()):
                        return
                    self.callback_errors += 1
                    self._logger.error(f"a callback raised {type(exc).__name__}: {exc}; the driver keeps running")
        except BaseException as exc:  # noqa: B902 -- recorded for main()'s exit code, never swallowed silently
            self.error = exc
            self._logger.fatal(f"executor thread died: {type(exc).__name__}: {exc}")


def autostart(node: Any) -> int:
    """Configure and activate ``node`` (``--autostart``); return 1 when a transition failed (logged), else 0."""
    if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
        node.get_logger().error("autostart: configure failed")
        return 1
    if node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
        node.get_logger().error("autostart: activate failed")
        return 1
    return 0
