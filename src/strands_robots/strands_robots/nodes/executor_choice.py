"""Which rclpy executor spins the hot-path nodes (the arm driver, the rollout node).

``STRANDS_ROBOTS_EXECUTOR`` (environment, read at process start) picks it:

- ``single``: ``rclpy.executors.SingleThreadedExecutor``, rclpy's Python executor: every wake rebuilds a wait
  set over all the node's entities in Python, holding the GIL;
- ``events``: ``rclpy.experimental.EventsExecutor`` (C++, event queue: a message wakes exactly its callback);
- ``auto`` (the default): ``events`` where the distro's rclpy ships it, else ``single``.

bench/control_loop.py ``--executor single,events`` measures both side by side (bench/README.md, "Executors").
:func:`resolve_executor` is the rule alone (no ROS); :func:`make_executor` builds the executor.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Tuple

EXECUTOR_ENV = "STRANDS_ROBOTS_EXECUTOR"
EXECUTOR_SINGLE = "single"
EXECUTOR_EVENTS = "events"
EXECUTOR_AUTO = "auto"
EXECUTOR_CHOICES = (EXECUTOR_AUTO, EXECUTOR_SINGLE, EXECUTOR_EVENTS)


def resolve_executor(choice: str, events_available: bool) -> str:
    """Return ``single`` or ``events`` for ``choice`` (one of :data:`EXECUTOR_CHOICES`; empty means ``auto``).

    ``events`` asked for where the distro has no EventsExecutor is refused, naming the variable: a benchmark or
    a deployment that asked for it must not silently measure the other one.
    """
    name = (choice or EXECUTOR_AUTO).strip().lower()
    if name not in EXECUTOR_CHOICES:
        raise ValueError(f"{EXECUTOR_ENV} must be one of {', '.join(EXECUTOR_CHOICES)}, got {choice!r}")
    if name == EXECUTOR_AUTO:
        return EXECUTOR_EVENTS if events_available else EXECUTOR_SINGLE
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
    """Build the executor ``choice`` names (default: ``STRANDS_ROBOTS_EXECUTOR`` from ``environ``, else auto).

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
