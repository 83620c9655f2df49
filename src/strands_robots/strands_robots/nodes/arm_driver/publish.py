"""What the arm driver node publishes, and when.

``joint_states`` (and ``/clock``), the latched ``safety_stop``, ``driver_status`` and ``lease_state`` (on every
change, plus the status heartbeat), and ``/diagnostics``.

Called from the executor (timers, services) and from the runner thread (every step): the "last published"
state each change detection compares against is guarded by one lock.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable, Optional, Tuple

from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState
from strands_robots_msgs.msg import DriverStatus, LeaseState, SafetyStop

from strands_robots.conversions.driver import driver_diagnostics_to_msg, driver_status_to_msg, lease_state_to_msg
from strands_robots.conversions.joint_state import SIM_TIME_KEY, clock_msg, driver_joint_state
from strands_robots.conversions.safety import safety_stop_to_msg
from strands_robots.arm.lease import STATE_HELD, LeaseManager, LeaseSnapshot
from strands_robots.ros.qos import DIAGNOSTICS_QOS, LATCHED_QOS, STATE_QOS

# (core, active, runner) as the node sees them now
View = Callable[[], Tuple[Any, bool, Any]]


def expires_unix_ms(leases: LeaseManager, expires_at: float) -> int:
    """Convert a lease expiry on the manager's monotonic clock to Unix milliseconds (0 for none)."""
    if not expires_at:
        return 0
    return int(round((time.time() + (expires_at - leases.now())) * 1000.0))


class DriverPublishers:
    """The driver's publishers on ``node`` (created at configure, destroyed at cleanup).

    :param view: the node's core, whether it is active, and its runner, now.
    :param leases: the lease manager (``lease_state``, the status's holder).
    :param hardware: the ``hardware`` parameter (status and diagnostics name it).
    :param publish_clock: also publish the robot time on ``/clock``.
    """

    def __init__(self, node: Any, view: View, leases: LeaseManager, hardware: str, publish_clock: bool) -> None:
        self._node = node
        self._view = view
        self._leases = leases
        self._hardware = hardware
        self._lock = threading.Lock()
        self._stopped: Optional[bool] = None
        self._status_key: Optional[tuple] = None
        self._lease: Optional[LeaseSnapshot] = None
        self._diag_prev: Optional[Tuple[float, float]] = None
        self._lifecycle = {
            "joint_states": node.create_lifecycle_publisher(JointState, "joint_states", STATE_QOS),
            "diagnostics": node.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", DIAGNOSTICS_QOS),
        }
        # Latched state: plain publishers so the state is announced while inactive too.
        self._plain = {
            "safety_stop": node.create_publisher(SafetyStop, "safety_stop", LATCHED_QOS),
            "driver_status": node.create_publisher(DriverStatus, "driver_status", LATCHED_QOS),
            "lease_state": node.create_publisher(LeaseState, "lease_state", LATCHED_QOS),
        }
        if publish_clock:
            from rosgraph_msgs.msg import Clock

            self._plain["clock"] = node.create_publisher(Clock, "/clock", STATE_QOS)

    def destroy(self) -> None:
        destroy_lifecycle = getattr(self._node, "destroy_lifecycle_publisher", self._node.destroy_publisher)
        for pub in self._lifecycle.values():
            destroy_lifecycle(pub)
        for pub in self._plain.values():
            self._node.destroy_publisher(pub)
        self._lifecycle.clear()
        self._plain.clear()

    def _now_ns(self) -> int:
        return self._node.get_clock().now().nanoseconds

    @property
    def published_stopped(self) -> Optional[bool]:
        """The safety state last published (None before the first)."""
        return self._stopped

    def announce(self) -> None:
        """Publish every latched state at once (after configure)."""
        self.safety_if_changed(force=True)
        self.status()
        self.lease_if_changed(force=True)

    # -- robot state (runner thread) ----------------------------------------------------------------------------
    def joint_states(self) -> None:
        core, active, _ = self._view()
        pub = self._lifecycle.get("joint_states")
        if core is None or pub is None or not active:
            return
        if core.hardware_fault():  # silence: the rollout ends the episode as a driver fault, no stale state out
            return
        obs = core.observe()
        pub.publish(driver_joint_state(obs, self._now_ns()))
        clock = self._plain.get("clock")
        if clock is not None:
            clock.publish(clock_msg(obs[SIM_TIME_KEY]))

    # -- latched state ----------------------------------------------------------------------------------------
    def safety_if_changed(self, force: bool = False) -> None:
        core, _, _ = self._view()
        pub = self._plain.get("safety_stop")
        if core is None or pub is None:
            return
        with self._lock:
            stopped = core.stopped
            if not force and stopped == self._stopped:
                return
            checks = core.safety_checks() if stopped else ()
            msg = safety_stop_to_msg(checks, stopped=stopped, stamp_ns=self._now_ns())
            pub.publish(msg)
            self._stopped = stopped
        if stopped:
            self._node.get_logger().error(f"SAFETY STOP: {msg.detail}")
        elif not force:
            self._node.get_logger().warning("safety stop released")
        self.status()

    def status(self) -> None:
        core, active, _ = self._view()
        pub = self._plain.get("driver_status")
        if core is None or pub is None:
            return
        lease = self._leases.state()
        msg = driver_status_to_msg(
            core.status(), hardware=self._hardware, active=active,
            physics_rate_hz=1.0 / float(core.adapter.timestep_s),
            lease_holder=lease.holder if lease.state == STATE_HELD else "", keys=core.action_keys(),
            specs=core.joint_specs(), stamp_ns=self._now_ns())
        with self._lock:
            pub.publish(msg)
            self._status_key = (msg.active, msg.stopped, msg.lease_holder)

    def lease_if_changed(self, force: bool = False) -> None:
        pub = self._plain.get("lease_state")
        if pub is None:
            return
        with self._lock:
            snap = self._leases.state()
            if not force and snap == self._lease:
                return
            pub.publish(lease_state_to_msg(snap, expires_unix_ms(self._leases, snap.expires_at),
                                                   self._now_ns()))
            self._lease = snap
            status_key = self._status_key
        if status_key is not None and (snap.holder if snap.state == STATE_HELD else "") != status_key[2]:
            self.status()

    # -- diagnostics ------------------------------------------------------------------------------------------
    def diagnostics(self) -> None:
        core, active, runner = self._view()
        pub = self._lifecycle.get("diagnostics")
        if core is None or pub is None:
            return
        s = core.status()
        now = time.monotonic()
        rtf = float("nan")
        with self._lock:
            prev, self._diag_prev = self._diag_prev, (now, s.sim_time_s)
        if prev is not None and now > prev[0]:
            rtf = (s.sim_time_s - prev[1]) / (now - prev[0])
        fault = runner.fault if runner is not None else ""
        hardware_fault = core.hardware_fault()
        if hardware_fault:
            level, message = "error", f"{self._hardware} driver fault: {hardware_fault}"
        elif fault:
            level, message = "error", f"{self._hardware} stopped: {fault}"
        elif s.stopped:
            level, message = "error", f"safety stop: {s.stop_detail}"
        elif not active:
            level, message = "warn", "inactive"
        elif math.isfinite(rtf) and rtf < 0.9:
            level, message = "warn", f"behind real time ({rtf:.2f}x)"
        else:
            level, message = "ok", "running"
        lease = self._leases.state()
        values = {
            "sim_time_s": f"{s.sim_time_s:.3f}",
            "real_time_factor": f"{rtf:.3f}",
            "physics_rate_hz": f"{1.0 / core.adapter.timestep_s:g}",
            "physics_overruns": str(runner.overruns if runner is not None else 0),
            "actions_received": str(s.actions_received),
            "actions_applied": str(s.actions_applied),
            "actions_refused": str(s.actions_refused),
            "coarse_errors": str(s.coarse_errors),
            "safety_trips": str(s.safety_trips),
            "commands_stale": str(s.commands_stale),
            "commands_out_of_order": str(s.commands_out_of_order),
            "stopped_arms": ",".join(s.stopped_arms),
            "lease_state": lease.state,
            "lease_holder": lease.holder,
            "hardware_fault": hardware_fault,
        }
        pub.publish(driver_diagnostics_to_msg(f"{self._node.get_name()}: arms", self._hardware, level,
                                                      message, values, self._now_ns()))

    def restart_rates(self) -> None:
        """Forget the real-time-factor baseline (a new activation)."""
        with self._lock:
            self._diag_prev = None
