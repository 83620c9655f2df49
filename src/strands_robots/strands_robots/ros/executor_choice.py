"""Which rclpy executor spins the hot-path nodes (the arm driver, the rollout node).

``STRANDS_ROBOTS_EXECUTOR`` (environment, read at process start) picks it:

- ``single`` (the default): ``rclpy.executors.SingleThreadedExecutor``, rclpy's Python executor;
- ``events``: ``rclpy.experimental.EventsExecutor`` (C++, an event queue: a message wakes exactly its
  callback), where the distro's rclpy ships it (Kilted's 9.1.2 and Jazzy's 7.1.6 both do).

The EventsExecutor costs the driver and the rollout node 30-45 % less CPU on the command stream, but it is not
the default because of how it behaves in these rclpy versions: while a coroutine callback awaits a future it
re-runs the task in a busy loop (0.4-0.5 of a core, mostly holding the GIL), and both nodes' action servers
await one for as long as an episode or a start-pose move lasts; and its ``spin()`` keeps the GIL while it
waits, so :class:`~strands_robots.ros.process.SpinThread` spins it with bounded ``spin_once`` calls.
bench/executor_bench.py measures both side by side (bench/README.md, "executor_bench.py").
:func:`resolve_executor` is the rule alone (no ROS); :func:`make_executor` builds the executor.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Tuple

EXECUTOR_ENV = "STRANDS_ROBOTS_EXECUTOR"
EXECUTOR_SINGLE = "single"
EXECUTOR_EVENTS = "events"
EXECUTOR_CHOICES = (EXECUTOR_SINGLE, EXECUTOR_EVENTS)


def resolve_executor(choice: str, events_available: bool) -> str:
    """Return ``single`` or ``events`` for ``choice`` (one of :data:`EXECUTOR_CHOICES`; empty means ``single``).

    ``events`` asked for where the distro has no EventsExecutor is refused, naming the variable: a benchmark or
    a deployment that asked for it must not silently measure the other one.
    """
    name = (choice or EXECUTOR_SINGLE).strip().lower()
    if name not in EXECUTOR_CHOICES:
        raise ValueError(f"{EXECUTOR_ENV} must be one of {', '.join(EXECUTOR_CHOICES)}, got {choice!r}")
    if name == EXECUTOR_EVENTS and not events_available:
        raise ValueError(f"{EXECUTOR_ENV}=events: this distro's rclpy has no rclpy.experimental.EventsExecutor")
    return name


def events_executor_class() -> Optional[Any]:
    """Return rclpy's EventsExecutor factory, or None when this rclpy has none."""
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        return None
    return EventsExecutor


def make_executor(choice: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
                  context: Any = None) -> Tuple[Any, str]:
    """Build the executor ``choice`` names (default: ``STRANDS_ROBOTS_EXECUTOR`` from ``environ``, else single).

    Returns ``(executor, name)`` with ``name`` ``single`` or ``events``. Call after ``rclpy.init`` (of
    ``context``, default the global one). Spin it with bounded ``spin_once`` calls (``process.SpinThread``):
    the EventsExecutor's ``spin()`` keeps the GIL while it waits.
    """
    env = os.environ if environ is None else environ
    events = events_executor_class()
    name = resolve_executor(env.get(EXECUTOR_ENV, "") if choice is None else choice, events is not None)
    if name == EXECUTOR_EVENTS:
        return events(context=context), name
    from rclpy.executors import SingleThreadedExecutor

    return SingleThreadedExecutor(context=context), name
