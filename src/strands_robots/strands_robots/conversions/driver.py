"""The arm driver's status messages: ``DriverStatus``, ``LeaseState`` and the ``DiagnosticArray``."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from strands_robots.conversions.messages import NS_PER_S


def driver_status_to_msg(status: Any, *, hardware: str, active: bool, physics_rate_hz: float,
                         lease_holder: str, keys: Sequence[str], specs: Mapping[str, Any], stamp_ns: int) -> Any:
    """``DriverStatus`` of a core :class:`~strands_robots.arm.driver.DriverStatus` snapshot."""
    from strands_robots_msgs.msg import DriverStatus as StatusMsg

    m = StatusMsg()
    m.stamp.sec, m.stamp.nanosec = divmod(int(stamp_ns), NS_PER_S)
    m.hardware = hardware
    m.active = bool(active)
    m.stopped = bool(status.stopped)
    m.safety_detail = status.stop_detail
    m.sim_time_s = float(status.sim_time_s)
    m.physics_rate_hz = float(physics_rate_hz)
    m.actions_applied = int(status.actions_applied)
    m.actions_refused = int(status.actions_refused)
    m.lease_holder = lease_holder
    m.actuator_keys = list(keys)
    m.lower_limits = [float(specs[k].lower) for k in keys]
    m.upper_limits = [float(specs[k].upper) for k in keys]
    return m


def lease_state_to_msg(snapshot: Any, expires_unix_ms: int, stamp_ns: int) -> Any:
    """``LeaseState`` of a :class:`~strands_robots.arm.lease.LeaseSnapshot` (no token: it is never published)."""
    from strands_robots_msgs.msg import LeaseState as LeaseMsg

    m = LeaseMsg()
    m.stamp.sec, m.stamp.nanosec = divmod(int(stamp_ns), NS_PER_S)
    m.state = snapshot.state
    m.lease_id = snapshot.lease_id
    m.holder = snapshot.holder
    m.priority = int(snapshot.priority)
    m.expires_unix_ms = int(expires_unix_ms)
    m.previous_holder = snapshot.previous_holder
    return m


def driver_diagnostics_to_msg(name: str, hardware_id: str, level: str, message: str,
                              values: Mapping[str, str], stamp_ns: int) -> Any:
    """``DiagnosticArray`` with one status; ``level`` is ``ok``, ``warn`` or ``error``."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

    status = DiagnosticStatus()
    status.name = name
    status.hardware_id = hardware_id
    status.level = {"ok": DiagnosticStatus.OK, "warn": DiagnosticStatus.WARN,
                    "error": DiagnosticStatus.ERROR}[level]
    status.message = message
    status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
    array = DiagnosticArray()
    array.header.stamp.sec, array.header.stamp.nanosec = divmod(int(stamp_ns), NS_PER_S)
    array.status = [status]
    return array

