"""The arm driver node: a lifecycle shell around :class:`~strands_robots.arm.driver.DriverCore`.

Lifecycle (``ros2 lifecycle set /arm_driver configure|activate|deactivate|cleanup|shutdown``):

- configure: load the driver config (parameter ``config_file``), build the MuJoCo arms and the core, create
  the publishers and services. The latched topics announce the state at once (``DriverStatus.active`` false).
- activate: start the physics thread (real time, on deadlines) and the publish timers.
- deactivate: stop the timers and the physics thread, hold the arms; ``send_action`` answers "driver not
  active".
- cleanup: revoke the lease and drop the model, publishers and services.
- shutdown: all of the above from any state.

Topics (relative names, so a launch namespace applies): ``joint_states`` (``sensor_msgs/JointState``, names
``<arm>.<joint>``, stamped with robot time, at ``control_rate_hz``), ``safety_stop``, ``driver_status`` and
``lease_state`` (latched: reliable + transient_local depth 1), and ``/diagnostics``.

Services: ``send_action``, ``acquire_lease``, ``renew_lease``, ``release_lease``, ``reset_safety``,
``move_to_start_pose`` (served by a side node ``<name>_start_pose`` in the same namespace, on its own thread,
because it blocks for the whole move). Every rule (verdicts, safety, leases, start pose) lives in the core; this module
translates messages (:mod:`strands_robots.convert`), keeps time, and publishes.

Run: ``ros2 run strands_robots arm_driver_node --ros-args --params-file config/arm_driver.yaml`` and drive
the lifecycle, or add ``--autostart`` (or ``-p autostart:=true``) to configure and activate at start.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time
from typing import Any, Callable, List, Optional

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from strands_robots_msgs.msg import DriverStatus, LeaseState, SafetyStop
from strands_robots_msgs.srv import (
    AcquireLease,
    MoveToStartPose,
    ReleaseLease,
    RenewLease,
    ResetSafety,
    SendAction,
)

from strands_robots import convert
from strands_robots.arm.config import ConfigError, DriverConfig
from strands_robots.arm.driver import DriverCore
from strands_robots.arm.lease import LeaseManager, LeaseSnapshot
from strands_robots.arm.start_pose import StartPoseReport, StartPoseSettings, run_start_pose
from strands_robots.arm.verdict import ActionVerdict
from strands_robots.nodes._qos import DIAGNOSTICS_QOS, LATCHED_QOS, STATE_QOS
from strands_robots.nodes.process import StopSignals, init_without_signal_handlers, spin_in_background

NODE_NAME = "arm_driver"
HARDWARE = "mujoco"

# How often the lease is polled for a lazy expiry to be published (LeaseState "on change").
LEASE_POLL_HZ = 10.0
# Physics that falls this far behind the wall clock drops the backlog instead of running a catch-up burst.
MAX_PHYSICS_LAG_S = 0.1
# Timers that run only while active (the lease poll runs while configured).
_ACTIVE_TIMERS = ("status", "diagnostics")

_DEFAULTS = {
    "config_file": "",
    "control_rate_hz": 200.0,
    "status_rate_hz": 2.0,
    "diagnostics_rate_hz": 1.0,
    "require_lease": True,
    "autostart": False,
}


def default_config_path() -> Optional[str]:
    """The package's ``config/arms.yaml``: beside the imported sources first, else the ament share dir.

    The source tree wins so a developer running from ``src/`` never reads a stale installed copy that no
    longer matches the (also source-tree) MJCF.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.normpath(os.path.join(here, "..", "..", "config", "arms.yaml"))
    if os.path.isfile(source):
        return source
    try:
        from ament_index_python.packages import get_package_share_directory

        shared = os.path.join(get_package_share_directory("strands_robots"), "config", "arms.yaml")
        if os.path.isfile(shared):
            return shared
    except Exception:  # PackageNotFoundError, or ament_index missing: fall back to the built-in default
        pass
    return None


class _MoveAborted(Exception):
    """The start-pose move stopped before settling (driver deactivated, lease lost, arm stopped)."""


class _PhysicsThread:
    """Steps the core in real time: one physics timestep per deadline, deadlines on the monotonic clock.

    Deadlines advance by a fixed period (no drift from sleep jitter); a late tick steps at once to catch up,
    and a backlog over :data:`MAX_PHYSICS_LAG_S` is dropped and counted as an overrun (robot time then lags
    the wall clock rather than jumping).
    """

    def __init__(self, core: DriverCore, on_tick: Callable[[], None], on_fault: Callable[[BaseException], None]):
        self._core = core
        self._period = float(core.adapter.timestep_s)
        self._on_tick = on_tick
        self._on_fault = on_fault
        self._stop = threading.Event()
        self._ticked = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self.overruns = 0
        self.steps = 0
        self.fault = ""

    @property
    def rate_hz(self) -> float:
        return 1.0 / self._period

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="arm_driver_physics", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        with self._ticked:
            self._ticked.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def wait_sim_time(self, target_s: float, wall_timeout_s: float) -> bool:
        """Block until robot time reaches ``target_s``; False if physics stopped or the wall timeout passed."""
        deadline = time.monotonic() + wall_timeout_s
        adapter = self._core.adapter
        with self._ticked:
            while adapter.time_s() < target_s - 1e-9:
                if self._stop.is_set():
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._ticked.wait(min(left, 0.05))
        return True

    def _run(self) -> None:
        period = self._period
        core = self._core
        deadline = time.monotonic()
        try:
            while not self._stop.is_set():
                deadline += period
                delay = deadline - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif delay < -MAX_PHYSICS_LAG_S:
                    self.overruns += 1
                    deadline = time.monotonic()
                core.step(period)
                self.steps += 1
                with self._ticked:
                    self._ticked.notify_all()
                self._on_tick()
        except BaseException as exc:  # the physics must never die silently: report, then stop
            self.fault = f"{type(exc).__name__}: {exc}"
            self._stop.set()
            with self._ticked:
                self._ticked.notify_all()
            self._on_fault(exc)


class ArmDriverNode(LifecycleNode):
    """The arm driver as a lifecycle node (see the module docstring for topics, services and transitions).

    :param node_name: ROS node name (default ``arm_driver``).
    :param kwargs: passed to :class:`rclpy.lifecycle.Node` (``context``, ``namespace``,
        ``parameter_overrides``, …).
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs: Any) -> None:
        # State first: if a parameter is refused below, the context still destroys this half-built node.
        self._leases = LeaseManager()
        # Serialises "is the driver active" with every path that commands the arms, so a deactivation
        # never races a command that already passed the check.
        self._gate = threading.Lock()
        self._active = False
        self._core: Optional[DriverCore] = None
        self._physics: Optional[_PhysicsThread] = None
        self._publish_lock = threading.Lock()
        self._published_stopped: Optional[bool] = None
        self._published_status_key: Optional[tuple] = None
        self._published_lease: Optional[LeaseSnapshot] = None
        self._diag_prev: Optional[tuple[float, float]] = None
        self._joint_states_period_s = 1.0 / _DEFAULTS["control_rate_hz"]
        self._next_joint_states = 0.0
        self._driver_pubs: dict[str, Any] = {}
        self._driver_services: List[Any] = []
        self._driver_timers: dict[str, Any] = {}

        super().__init__(node_name, **kwargs)
        self._declare_parameters()
        refusal = self._validate(self._parameters_now())
        if refusal:
            raise ValueError(f"invalid parameter: {refusal}")
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self._command_group = MutuallyExclusiveCallbackGroup()   # send_action, leases, reset_safety
        self._housekeeping_group = MutuallyExclusiveCallbackGroup()  # status, lease poll, diagnostics
        # move_to_start_pose blocks for the whole move (its answer is the move's outcome), so it is served by a
        # side node on its own single-threaded executor: the driver's own executor stays single-threaded
        # (rclpy's MultiThreadedExecutor busy-waits holding the GIL, which starved the control path) and keeps
        # answering send_action and lease renewals during a move. Same namespace, so the service name is
        # <ns>/move_to_start_pose as if the driver served it.
        # use_global_arguments=False: the process's `__node:=` remap must not rename this node too.
        self._move_node = rclpy.create_node(f"{self.get_name()}_start_pose", namespace=self.get_namespace(),
                                            context=self.context, use_global_arguments=False,
                                            start_parameter_services=False)
        self._move_executor = SingleThreadedExecutor(context=self.context)
        self._move_executor.add_node(self._move_node)
        self._move_thread = spin_in_background(self._move_executor, f"{self.get_name()}_start_pose")

    # -- parameters -------------------------------------------------------------------------------------------
    def _declare_parameters(self) -> None:
        # `-p control_rate_hz:=50` arrives as an integer; a float parameter would refuse it at declare time.
        overrides = getattr(self, "_parameter_overrides", None)
        if isinstance(overrides, dict):
            for name, default in _DEFAULTS.items():
                given = overrides.get(name)
                if isinstance(default, float) and given is not None and given.type_ == Parameter.Type.INTEGER:
                    overrides[name] = Parameter(name, value=float(given.value))

        def rate(description: str, low: float, high: float) -> ParameterDescriptor:
            return ParameterDescriptor(
                description=description,
                floating_point_range=[FloatingPointRange(from_value=low, to_value=high, step=0.0)],
            )

        self.declare_parameter("config_file", _DEFAULTS["config_file"], ParameterDescriptor(
            description="Driver config YAML (ratings, margins, start pose); empty: the package's "
                        "config/arms.yaml. Read at configure."))
        self.declare_parameter("control_rate_hz", _DEFAULTS["control_rate_hz"], rate(
            "joint_states publish rate in Hz; keep it equal to the rollout's control rate so every control "
            "step observes a fresh state. Applies at the next activate.", 1.0, 2000.0))
        self.declare_parameter("status_rate_hz", _DEFAULTS["status_rate_hz"], rate(
            "driver_status heartbeat rate in Hz (it is also published on every change). Applies at the next "
            "activate.", 0.1, 50.0))
        self.declare_parameter("diagnostics_rate_hz", _DEFAULTS["diagnostics_rate_hz"], rate(
            "/diagnostics rate in Hz. Applies at the next activate.", 0.1, 10.0))
        self.declare_parameter("require_lease", _DEFAULTS["require_lease"], ParameterDescriptor(
            description="Apply send_action / move_to_start_pose only with the current lease token. Takes "
                        "effect at once."))
        self.declare_parameter("autostart", _DEFAULTS["autostart"], ParameterDescriptor(
            description="Configure and activate at start (main() only), without lifecycle tools.",
            read_only=True))

    def _parameters_now(self) -> List[Parameter]:
        return [self.get_parameter(name) for name in _DEFAULTS]

    @staticmethod
    def _validate(parameters: List[Parameter]) -> str:
        """Why the values are refused (empty when accepted); ranges and types are checked by rclpy first."""
        for p in parameters:
            if p.name == "config_file":
                path = p.value
                if path and not os.path.isfile(path):
                    return f"config_file: no such file: {path!r}"
            elif p.name.endswith("_rate_hz"):
                if not math.isfinite(p.value) or p.value <= 0:
                    return f"{p.name} must be a finite number > 0, got {p.value!r}"
        return ""

    def _on_set_parameters(self, parameters: List[Parameter]) -> SetParametersResult:
        reason = self._validate(parameters)
        if reason:
            self.get_logger().warning(f"parameter refused: {reason}")
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _param(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _lease_valid(self, token: str) -> bool:
        """The core's lease validator: every token passes while ``require_lease`` is false."""
        return (not self._param("require_lease")) or self._leases.validate(token)

    # -- lifecycle --------------------------------------------------------------------------------------------
    @property
    def core(self) -> Optional[DriverCore]:
        """The driver core while configured (None otherwise); for in-process tests and tools."""
        return self._core

    @property
    def leases(self) -> LeaseManager:
        return self._leases

    @property
    def is_active(self) -> bool:
        return self._active

    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Load the config and build the arms; create publishers and services (nothing moves yet)."""
        try:
            path = self._param("config_file") or default_config_path()
            if path:
                config = DriverConfig.from_yaml(path)
            else:
                self.get_logger().warning("no config/arms.yaml found; using the built-in default configuration")
                config = DriverConfig.default()
            core = DriverCore.simulated(config, lease_validator=self._lease_valid)
        except (ConfigError, ValueError, OSError) as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        except Exception as exc:  # e.g. MuJoCo cannot load the model: say so instead of a silent ERROR
            self.get_logger().error(f"configure failed: {type(exc).__name__}: {exc}")
            return TransitionCallbackReturn.FAILURE
        self._core = core
        self._published_stopped = None
        self._published_status_key = None
        self._published_lease = None
        self._create_interfaces()
        self._publish_safety_if_changed(force=True)
        self._publish_status()
        self._publish_lease_if_changed(force=True)
        self.get_logger().info(
            f"configured: {HARDWARE} arms {', '.join(core.adapter.arm_names())} "
            f"({len(core.action_keys())} actuator keys, physics {1.0 / core.adapter.timestep_s:g} Hz) "
            f"from {path or 'built-in defaults'}")
        return super().on_configure(state)

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Start the physics thread and the publish timers; commands are accepted from now on."""
        core = self._core
        if core is None:
            return TransitionCallbackReturn.FAILURE
        ret = super().on_activate(state)  # activates the lifecycle publishers before anything publishes
        if ret != TransitionCallbackReturn.SUCCESS:
            return ret
        self._physics = _PhysicsThread(core, self._on_physics_tick, self._on_physics_fault)
        self._joint_states_period_s = 1.0 / self._param("control_rate_hz")
        self._next_joint_states = time.monotonic()
        with self._gate:
            self._active = True
        self._physics.start()
        self._diag_prev = None
        self._driver_timers["status"] = self.create_timer(
            1.0 / self._param("status_rate_hz"), self._publish_status, callback_group=self._housekeeping_group)
        self._driver_timers["diagnostics"] = self.create_timer(
            1.0 / self._param("diagnostics_rate_hz"), self._publish_diagnostics,
            callback_group=self._housekeeping_group)
        self._publish_status()
        self.get_logger().info(
            f"active: physics {self._physics.rate_hz:g} Hz real time, joint_states "
            f"{self._param('control_rate_hz'):g} Hz, require_lease={self._param('require_lease')}")
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        """Stop publishing and the physics; the arms hold where they are."""
        self._stop_running()
        self._publish_status()
        self.get_logger().info("inactive: physics stopped, arms held")
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        """Revoke the lease and drop the model, publishers and services."""
        self._stop_running()
        self._teardown()
        self.get_logger().info("cleaned up")
        return super().on_cleanup(state)

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        """Stop everything, from any state."""
        self._stop_running()
        self._teardown()
        return super().on_shutdown(state)

    def on_error(self, state: State) -> TransitionCallbackReturn:
        self._stop_running()
        self._teardown()
        self.get_logger().error("error processing: driver stopped and cleaned up")
        return super().on_error(state)

    def destroy_node(self) -> None:
        """Stop the physics before the node goes away, whatever state it is in."""
        self._stop_running()
        self._teardown()
        # getattr: a node whose __init__ refused its parameters is destroyed by the context's cleanup too
        executor = getattr(self, "_move_executor", None)
        if executor is not None:
            executor.shutdown(timeout_sec=2.0)
            self._move_thread.join(2.0)
            self._move_node.destroy_node()
            self._move_executor = None
        super().destroy_node()

    def _stop_running(self) -> None:
        with self._gate:
            was_active = self._active
            self._active = False
        for name in _ACTIVE_TIMERS:
            timer = self._driver_timers.pop(name, None)
            if timer is not None:
                self.destroy_timer(timer)
        physics, self._physics = self._physics, None
        if physics is not None:
            physics.stop()
        core = self._core
        if was_active and core is not None:
            # Nothing else touches the adapter now: the gate is closed and the physics thread joined.
            core.adapter.hold()

    def _teardown(self) -> None:
        if self._leases.revoke("revoked: the driver was cleaned up"):
            self._publish_lease_if_changed()
        for srv in self._driver_services:
            owner = self._move_node if srv in self._move_node.services else self
            owner.destroy_service(srv)
        self._driver_services.clear()
        timer = self._driver_timers.pop("lease", None)
        if timer is not None:
            self.destroy_timer(timer)
        for name, pub in list(self._driver_pubs.items()):
            if name in ("joint_states", "diagnostics"):
                getattr(self, "destroy_lifecycle_publisher", self.destroy_publisher)(pub)
            else:
                self.destroy_publisher(pub)
        self._driver_pubs.clear()
        self._core = None

    def _create_interfaces(self) -> None:
        self._driver_pubs = {
            "joint_states": self.create_lifecycle_publisher(JointState, "joint_states", STATE_QOS),
            "diagnostics": self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", DIAGNOSTICS_QOS),
            # Latched state: plain publishers so the state is announced while inactive too.
            "safety_stop": self.create_publisher(SafetyStop, "safety_stop", LATCHED_QOS),
            "driver_status": self.create_publisher(DriverStatus, "driver_status", LATCHED_QOS),
            "lease_state": self.create_publisher(LeaseState, "lease_state", LATCHED_QOS),
        }
        g = self._command_group
        self._driver_services = [
            self.create_service(SendAction, "send_action", self._on_send_action, callback_group=g),
            self.create_service(AcquireLease, "acquire_lease", self._on_acquire_lease, callback_group=g),
            self.create_service(RenewLease, "renew_lease", self._on_renew_lease, callback_group=g),
            self.create_service(ReleaseLease, "release_lease", self._on_release_lease, callback_group=g),
            self.create_service(ResetSafety, "reset_safety", self._on_reset_safety, callback_group=g),
            self._move_node.create_service(MoveToStartPose, "move_to_start_pose", self._on_move_to_start_pose),
        ]
        # The lease can expire while the driver is inactive too, so its poll lives as long as the services.
        self._driver_timers["lease"] = self.create_timer(1.0 / LEASE_POLL_HZ, self._publish_lease_if_changed,
                                                  callback_group=self._housekeeping_group)

    # -- physics thread hooks --------------------------------------------------------------------------------
    def _on_physics_tick(self) -> None:
        """After every physics step (physics thread): joint_states when due, SafetyStop on a change.

        joint_states is published here rather than from an executor timer: it is the freshest state (just
        stepped), its deadlines do not drift, and a 200 Hz rclpy timer in the MultiThreadedExecutor was
        measured to delay service answers (send_action p99 ~10 ms -> ~350 ms on a 2-core machine). Rates
        above the physics rate publish once per physics step (no newer state exists).
        """
        now = time.monotonic()
        if now >= self._next_joint_states:
            self._next_joint_states += self._joint_states_period_s
            if self._next_joint_states < now:  # fell behind (e.g. rate above the physics rate): no bursts
                self._next_joint_states = now + self._joint_states_period_s
            self._publish_joint_states()
        core = self._core
        if core is not None and core.stopped != self._published_stopped:
            self._publish_safety_if_changed()

    def _on_physics_fault(self, exc: BaseException) -> None:
        self.get_logger().error(f"physics stopped: {type(exc).__name__}: {exc}; the driver refuses commands")
        with self._gate:
            self._active = False
        self._publish_status()

    # -- services ----------------------------------------------------------------------------------------------
    def _on_send_action(self, req: SendAction.Request, res: SendAction.Response) -> SendAction.Response:
        """Resolve and command; never waits on the physics (the verdict is known at once)."""
        stopped, sim_time = False, 0.0
        with self._gate:
            core = self._core
            if not self._active or core is None:
                verdict = ActionVerdict.coarse("driver not active")
            else:
                verdict = self._execute(core, req)
            if core is not None:
                stopped, sim_time = core.stopped, core.adapter.time_s()
        if core is not None and stopped != self._published_stopped:
            self._publish_safety_if_changed()
        if verdict.is_coarse_error or verdict.unresolved_keys:
            self.get_logger().warning(
                f"send_action step {req.step_index}: "
                + (verdict.error or ", ".join(f"{k}: {r}" for k, r in verdict.reasons().items())),
                throttle_duration_sec=1.0)
        return convert.verdict_to_response(verdict, stopped=stopped, sim_time_s=sim_time)

    @staticmethod
    def _execute(core: DriverCore, req: SendAction.Request) -> ActionVerdict:
        keys = list(req.keys)
        if len(keys) != len(req.values):
            return ActionVerdict.coarse(f"send_action has {len(keys)} keys but {len(req.values)} values")
        if len(set(keys)) != len(keys):
            seen: set = set()
            dupes = sorted({k for k in keys if k in seen or seen.add(k)})
            return ActionVerdict.coarse(f"send_action repeats keys {dupes}")
        return core.send_action(convert.request_to_action(req), req.lease_token)

    def _expires_unix_ms(self, expires_at: float) -> int:
        if not expires_at:
            return 0
        return int(round((time.time() + (expires_at - self._leases.now())) * 1000.0))

    def _on_acquire_lease(self, req: AcquireLease.Request, res: AcquireLease.Response) -> AcquireLease.Response:
        grant = self._leases.acquire(req.holder, int(req.priority), float(req.duration_s))
        res.granted = grant.granted
        res.token = grant.token
        res.lease_id = grant.lease_id
        res.expires_unix_ms = self._expires_unix_ms(grant.expires_at) if grant.granted else 0
        res.message = grant.message
        if grant.granted:
            self.get_logger().info(f"lease {grant.lease_id} granted to {req.holder!r} (priority {req.priority})"
                                   + (f", revoking {grant.revoked_holder!r}" if grant.revoked_holder else ""))
        else:
            self.get_logger().info(f"lease refused to {req.holder!r}: {grant.message}")
        self._publish_lease_if_changed()
        return res

    def _on_renew_lease(self, req: RenewLease.Request, res: RenewLease.Response) -> RenewLease.Response:
        renewal = self._leases.renew(req.token, float(req.duration_s))
        res.ok = renewal.ok
        res.expires_unix_ms = self._expires_unix_ms(renewal.expires_at) if renewal.ok else 0
        res.message = renewal.message
        if not renewal.ok:
            self.get_logger().warning(f"lease renewal refused: {renewal.message}", throttle_duration_sec=1.0)
        self._publish_lease_if_changed()
        return res

    def _on_release_lease(self, req: ReleaseLease.Request, res: ReleaseLease.Response) -> ReleaseLease.Response:
        released = self._leases.release(req.token)
        res.ok = released.ok
        res.message = released.message
        self._publish_lease_if_changed()
        return res

    def _on_reset_safety(self, req: ResetSafety.Request, res: ResetSafety.Response) -> ResetSafety.Response:
        core = self._core
        if core is None:
            res.ok, res.message = False, "driver not configured"
            return res
        was = core.safety_stop_detail()
        core.reset_safety()
        self._publish_safety_if_changed()
        if core.stopped:
            res.ok = False
            res.message = f"still outside the safety envelope: {core.safety_stop_detail()}"
        else:
            res.ok = True
            res.message = f"safety stop cleared (was: {was})" if was else "no safety stop in force"
        self.get_logger().warning(f"reset_safety by {req.operator_name or 'unnamed operator'}: {res.message}")
        return res

    def _on_move_to_start_pose(self, req: MoveToStartPose.Request,
                               res: MoveToStartPose.Response) -> MoveToStartPose.Response:
        """Ramp to the start pose and wait until the arms settle, in robot time.

        This callback blocks its executor thread for the move (bounded by the timeout), on purpose: the
        answer *is* the outcome of the move, the wait is on a condition variable the physics thread signals
        (no polling, no sleep), and the callback sits alone in a mutually exclusive group so a second move
        queues instead of interleaving two ramps, while ``send_action``, the leases and the publish timers
        keep being served by the driver's own executor (this one is the side node's; see ``__init__``).
        """
        report = self._move_to_start_pose(req)
        res.reached = report.reached
        res.max_error = float(report.max_error) if math.isfinite(report.max_error) else -1.0
        res.elapsed_s = float(report.elapsed_s)
        res.detail = report.detail
        text = (f"move_to_start_pose: {'reached' if report.reached else 'not reached'} in "
                f"{report.elapsed_s:.2f} s, max error {report.max_error:.4f} rad"
                f"{': ' + report.detail if report.detail else ''}")
        # rclpy keys a log call site to one severity, hence two calls
        if report.reached:
            self.get_logger().info(text)
        else:
            self.get_logger().warning(text)
        return res

    def _move_to_start_pose(self, req: MoveToStartPose.Request) -> StartPoseReport:
        core, physics = self._core, self._physics
        if not self._active or core is None or physics is None:
            return StartPoseReport(False, math.inf, 0.0, "driver not active")
        token = req.lease_token
        if not self._lease_valid(token):
            return StartPoseReport(False, math.inf, 0.0,
                                   f"not the lease holder: {self._leases.refusal(token)}")
        base = core.config.start_pose
        try:
            settings = StartPoseSettings(
                pose=base.pose,
                position_tolerance_rad=req.tolerance if req.tolerance != 0.0 else base.position_tolerance_rad,
                velocity_tolerance_rad_s=base.velocity_tolerance_rad_s,
                timeout_s=req.timeout_s if req.timeout_s != 0.0 else base.timeout_s,
                max_speed_rad_s=base.max_speed_rad_s,
                control_period_s=base.control_period_s,
            )
        except ValueError as exc:
            return StartPoseReport(False, math.inf, 0.0, str(exc))

        def command(targets: Any) -> None:
            # Through send_action, so the core enforces the lease, the safety stop and the limits on every
            # ramp step (an operator who takes the lease mid-move stops it at once).
            with self._gate:
                if not self._active:
                    raise _MoveAborted("driver deactivated during the move")
                verdict = core.send_action(targets, token)
            if verdict.is_coarse_error:
                raise _MoveAborted(verdict.error)
            reasons = set(verdict.unresolved_reasons)
            if reasons and reasons != {"arm_stopped"}:  # a stop is reported by run_start_pose itself
                raise _MoveAborted(f"start pose command refused: {', '.join(sorted(reasons))}")

        def step(dt: float) -> None:
            # Robot time passes on the physics thread; wait for it (generous wall margin for a slow machine).
            if not physics.wait_sim_time(core.adapter.time_s() + dt, wall_timeout_s=10.0 * dt + 1.0):
                raise _MoveAborted("physics stopped during the move" if not physics.running
                                   else "physics did not advance")

        t0 = core.adapter.time_s()
        try:
            return run_start_pose(read=core.read, command=command, step=step,
                                  stop_detail=core.safety_stop_detail, settings=settings)
        except _MoveAborted as exc:
            return StartPoseReport(False, math.inf, core.adapter.time_s() - t0, str(exc))

    # -- publishing --------------------------------------------------------------------------------------------
    def _publish_joint_states(self) -> None:
        core = self._core
        pub = self._driver_pubs.get("joint_states")
        if core is None or pub is None or not self._active:
            return
        pub.publish(convert.observation_to_joint_state(core.observe()))

    def _publish_safety_if_changed(self, force: bool = False) -> None:
        core = self._core
        pub = self._driver_pubs.get("safety_stop")
        if core is None or pub is None:
            return
        with self._publish_lock:
            stopped = core.stopped
            if not force and stopped == self._published_stopped:
                return
            checks = core.safety_checks() if stopped else ()
            pub.publish(convert.safety_stop_to_msg(checks, stopped=stopped, stamp_ns=self._now_ns()))
            self._published_stopped = stopped
        if stopped:
            self.get_logger().error(f"SAFETY STOP: {convert.safety_stop_to_msg(checks).detail}")
        elif not force:
            self.get_logger().warning("safety stop released")
        self._publish_status()

    def _status_msg(self) -> Optional[DriverStatus]:
        core = self._core
        if core is None:
            return None
        s = core.status()
        lease = self._leases.state()
        msg = DriverStatus()
        msg.stamp = self.get_clock().now().to_msg()
        msg.hardware = HARDWARE
        msg.active = self._active
        msg.stopped = s.stopped
        msg.safety_detail = s.stop_detail
        msg.sim_time_s = float(s.sim_time_s)
        msg.physics_rate_hz = 1.0 / float(core.adapter.timestep_s)
        msg.actions_applied = s.actions_applied
        msg.actions_refused = s.actions_refused
        msg.lease_holder = lease.holder if lease.state == "held" else ""
        keys = list(core.action_keys())
        specs = core.joint_specs()
        msg.actuator_keys = keys
        msg.lower_limits = [float(specs[k].lower) for k in keys]
        msg.upper_limits = [float(specs[k].upper) for k in keys]
        return msg

    def _publish_status(self) -> None:
        pub = self._driver_pubs.get("driver_status")
        msg = self._status_msg()
        if pub is None or msg is None:
            return
        pub.publish(msg)
        self._published_status_key = (msg.active, msg.stopped, msg.lease_holder)

    def _publish_lease_if_changed(self, force: bool = False) -> None:
        pub = self._driver_pubs.get("lease_state")
        if pub is None:
            return
        with self._publish_lock:
            snap = self._leases.state()
            if not force and snap == self._published_lease:
                return
            msg = LeaseState()
            msg.stamp = self.get_clock().now().to_msg()
            msg.state = snap.state
            msg.lease_id = snap.lease_id
            msg.holder = snap.holder
            msg.priority = int(snap.priority)
            msg.expires_unix_ms = self._expires_unix_ms(snap.expires_at)
            msg.previous_holder = snap.previous_holder
            pub.publish(msg)
            self._published_lease = snap
        if self._published_status_key is not None and (
                (snap.holder if snap.state == "held" else "") != self._published_status_key[2]):
            self._publish_status()

    def _publish_diagnostics(self) -> None:
        core, physics = self._core, self._physics
        pub = self._driver_pubs.get("diagnostics")
        if core is None or pub is None:
            return
        s = core.status()
        now = time.monotonic()
        rtf = float("nan")
        if self._diag_prev is not None and now > self._diag_prev[0]:
            rtf = (s.sim_time_s - self._diag_prev[1]) / (now - self._diag_prev[0])
        self._diag_prev = (now, s.sim_time_s)
        status = DiagnosticStatus()
        status.name = f"{self.get_name()}: arms"
        status.hardware_id = HARDWARE
        if physics is not None and physics.fault:
            status.level, status.message = DiagnosticStatus.ERROR, f"physics stopped: {physics.fault}"
        elif s.stopped:
            status.level, status.message = DiagnosticStatus.ERROR, f"safety stop: {s.stop_detail}"
        elif not self._active:
            status.level, status.message = DiagnosticStatus.WARN, "inactive"
        elif math.isfinite(rtf) and rtf < 0.9:
            status.level, status.message = DiagnosticStatus.WARN, f"physics behind real time ({rtf:.2f}x)"
        else:
            status.level, status.message = DiagnosticStatus.OK, "running"
        lease = self._leases.state()
        values = {
            "sim_time_s": f"{s.sim_time_s:.3f}",
            "real_time_factor": f"{rtf:.3f}",
            "physics_rate_hz": f"{1.0 / core.adapter.timestep_s:g}",
            "physics_overruns": str(physics.overruns if physics else 0),
            "actions_received": str(s.actions_received),
            "actions_applied": str(s.actions_applied),
            "actions_refused": str(s.actions_refused),
            "coarse_errors": str(s.coarse_errors),
            "safety_trips": str(s.safety_trips),
            "stopped_arms": ",".join(s.stopped_arms),
            "lease_state": lease.state,
            "lease_holder": lease.holder,
        }
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        array = DiagnosticArray()
        array.header.stamp = self.get_clock().now().to_msg()
        array.status = [status]
        pub.publish(array)

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds


# -- entry point --------------------------------------------------------------------------------------------------
def main(args: Optional[List[str]] = None) -> int:
    """Run the driver on a SingleThreadedExecutor until SIGINT/SIGTERM; exit 0 on a clean shutdown.

    ``--autostart`` (or the ``autostart`` parameter) configures and activates the node at start.
    """
    argv = list(sys.argv if args is None else args)
    from rclpy.utilities import remove_ros_args

    parser = argparse.ArgumentParser(prog="arm_driver_node", description="strands_robots arm driver")
    parser.add_argument("--autostart", action="store_true", help="configure and activate at start")
    options = parser.parse_args(remove_ros_args(args=argv)[1:])

    signals = StopSignals.install()
    stop = signals.event
    init_without_signal_handlers(argv)
    node: Optional[ArmDriverNode] = None
    executor: Optional[SingleThreadedExecutor] = None
    spin_thread: Optional[threading.Thread] = None
    code = 0
    try:
        node = ArmDriverNode()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spin_thread = spin_in_background(executor, "arm_driver_executor")
        if options.autostart or node.get_parameter("autostart").value:
            if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                node.get_logger().error("autostart: configure failed")
                code = 1
            elif node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                node.get_logger().error("autostart: activate failed")
                code = 1
        while code == 0 and not stop.wait(0.2):
            if not spin_thread.is_alive():
                break
    except (ValueError, ParameterException) as exc:  # refused parameters at start: a reason, no traceback
        print(f"arm_driver_node: {exc}", file=sys.stderr)
        code = 2
    finally:
        if node is not None:
            try:
                node.trigger_shutdown()
            except Exception:  # already finalized, or the context is gone: destroy_node still stops physics
                pass
        if executor is not None:
            executor.shutdown(timeout_sec=2.0)
        if spin_thread is not None:
            spin_thread.join(2.0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        signals.restore()
    return code


if __name__ == "__main__":
    sys.exit(main())
