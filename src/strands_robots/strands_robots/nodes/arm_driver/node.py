"""The arm driver node: a lifecycle shell around :class:`~strands_robots.arm.driver.DriverCore`.

Lifecycle (``ros2 lifecycle set /arm_driver configure|activate|deactivate|cleanup|shutdown``):

- configure: load the driver config (``config_file``), build the arms named by ``hardware``
  (:mod:`strands_robots.arm.hardware`) and the core, create the publishers, the command stream, the services
  and the start-pose action. The latched topics announce the state at once (``DriverStatus.active`` false).
- activate: start the hardware's real-time runner (the simulator's physics thread) and the publish timers.
- deactivate: stop the timers and the runner, hold the arms; commands answer "driver not active". It stays
  that way until an explicit activate.
- cleanup: revoke the lease and drop the arms, publishers and services. shutdown: all of it from any state.

Topics (relative names, so a launch namespace applies): ``joint_states`` (``sensor_msgs/JointState``, names
``<arm>.<joint>``, stamped with the node clock, robot time carried as
``conversions.joint_state.driver_joint_state`` says, at ``control_rate_hz``), ``action_commands`` in and
``action_verdicts`` out (:mod:`.driver_stream`), ``safety_stop``, ``driver_status``, ``lease_state`` (latched),
``/diagnostics``, and ``/clock`` (robot time) with ``publish_clock``.

Services: ``send_action``, ``acquire_lease``, ``renew_lease``, ``release_lease``, ``reset_safety`` (the lease
holder only; :mod:`.driver_commands`, :mod:`.driver_leases`). Action: ``move_to_start_pose``
(:mod:`.driver_start_pose`; also still a service). Parameters: :mod:`.driver_params`. Every rule lives in the
core; this module translates (:mod:`strands_robots.conversions`), keeps time and publishes.

Run: ``ros2 run strands_robots arm_driver_node --ros-args --params-file config/arm_driver.yaml`` and drive
the lifecycle, or add ``--autostart`` (or ``-p autostart:=true``) to configure and activate at start.
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
import time
from functools import partial
from typing import Any, List, Optional, Tuple

import rclpy
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.exceptions import ParameterException
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.parameter import Parameter
from strands_robots_msgs.srv import ResetSafety, SendAction

from strands_robots.arm import hardware as hardware_registry
from strands_robots.arm.command_stream import StreamCommand
from strands_robots.arm.config import ConfigError, DriverConfig
from strands_robots.arm.driver import DriverCore
from strands_robots.arm.lease import STATE_EXPIRED, STATE_HELD, STATE_REVOKED, LeaseManager
from strands_robots.arm.realtime import Runner
from strands_robots.arm.publish_pacing import PublishPacer
from strands_robots.arm.start_pose import StartPoseReport
from strands_robots.arm.verdict import ActionVerdict
from strands_robots.nodes.arm_driver import params
from strands_robots.nodes.arm_driver.commands import log_refusal, reset_safety_response, run_gated, send_action_response
from strands_robots.nodes.arm_driver.leases import LeaseServices
from strands_robots.nodes.arm_driver.publish import DriverPublishers
from strands_robots.nodes.arm_driver.spin import SpinThread, autostart, guard_change_state
from strands_robots.nodes.arm_driver.start_pose import StartPoseServer, log_move, move_on_runner
from strands_robots.ros.executor_choice import make_executor
from strands_robots.ros.realtime_guard import start_realtime
from strands_robots.ros.realtime_priority import decide_realtime, process_threads, take_realtime
from strands_robots.nodes.arm_driver.stream import CommandStream
from strands_robots.ros import process
from strands_robots.ros.process import StopSignals, init_without_signal_handlers

NODE_NAME = "arm_driver"

# How often the lease is polled for a lazy expiry to be published (LeaseState "on change").
LEASE_POLL_HZ = 10.0


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
        self._lifecycle_label = params.STATE_UNCONFIGURED
        self._core: Optional[DriverCore] = None
        self._hardware_name = ""
        self._hardware: Optional[hardware_registry.Hardware] = None
        self._runner: Optional[Runner] = None
        # Set by the executor (parameters, transitions) and read by the runner thread.
        self._joint_states_pacer = PublishPacer(params.DEFAULTS["control_rate_hz"])
        self._out: Optional[DriverPublishers] = None
        self._drv_services: List[Any] = []
        self._drv_timers: dict[str, Any] = {}
        self._stream: Optional[CommandStream] = None
        self._start_pose: Optional[StartPoseServer] = None
        self._lease_services: Optional[LeaseServices] = None
        self._lease_held = ""  # the holder the lease poll last saw (a loss latches a stop on real arms)

        super().__init__(node_name, **kwargs)
        for name, default in params.DEFAULTS.items():
            self.declare_parameter(name, default, params.descriptor(name))
        for name in params.DEFAULTS:
            reason = params.value_refusal(name, self._param(name))
            if reason:
                raise ValueError(f"invalid parameter: {reason}")
        try:
            hardware_registry.resolve(self._param("hardware"))
        except ConfigError as exc:
            raise ValueError(f"invalid parameter: {exc}") from exc
        self._hardware_name = self._param("hardware")
        # Read on every command; it changes only while inactive, through _apply_parameter.
        self._require_lease = bool(self._param("require_lease"))
        self._joint_states_pacer.set_rate(float(self._param("control_rate_hz")))
        self.add_on_set_parameters_callback(self._on_set_parameters)
        guard_change_state(self)

        self._command_group = MutuallyExclusiveCallbackGroup()   # commands, leases, reset_safety
        self._housekeeping_group = MutuallyExclusiveCallbackGroup()  # status, lease poll, diagnostics
        self._move_group = MutuallyExclusiveCallbackGroup()  # start pose (its callbacks never block)

    # -- parameters -------------------------------------------------------------------------------------------
    def _param(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _on_set_parameters(self, parameters: List[Parameter]) -> SetParametersResult:
        # Under the gate: an activation (from another thread at autostart) cannot slip between the check of
        # the lifecycle state and the change of a safety parameter.
        with self._gate:
            reason = params.parameters_refusal([(p.name, p.value) for p in parameters], self._param,
                                               self._lifecycle_label, self.get_logger())
            if reason:
                return SetParametersResult(successful=False, reason=reason)
            for p in parameters:
                self._apply_parameter(p.name, p.value)
            return SetParametersResult(successful=True)

    def _apply_parameter(self, name: str, value: Any) -> None:
        """Rates apply at once (the value is already validated)."""
        if name == "require_lease":
            self._require_lease = bool(value)
        elif name == "control_rate_hz":
            self._joint_states_pacer.set_rate(float(value))
        elif name in ("status_rate_hz", "diagnostics_rate_hz") and self._active:
            key = name.split("_")[0]
            timer = self._drv_timers.pop(key, None)
            if timer is not None:
                self.destroy_timer(timer)
            self._create_rate_timer(key, float(value))

    def _create_rate_timer(self, key: str, rate_hz: float) -> None:
        callback = self._publish_status if key == "status" else self._publish_diagnostics
        self._drv_timers[key] = self.create_timer(1.0 / rate_hz, callback, callback_group=self._housekeeping_group)

    def _lease_valid(self, token: str) -> bool:
        """Validate a lease token for the core: every token passes while ``require_lease`` is false."""
        return (not self._require_lease) or self._leases.validate(token)

    def _proof_valid(self, message: bytes, proof: str) -> bool:
        """Check a streamed command's proof against the current lease (any passes with require_lease off)."""
        return (not self._require_lease) or self._leases.verify(message, proof)

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

    @property
    def runner(self) -> Optional[Runner]:
        """The hardware's real-time runner while active."""
        return self._runner

    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Load the config and build the arms; create publishers and services (nothing moves yet)."""
        try:
            path = self._param("config_file") or params.default_config_path(self._hardware_name)
            if path:
                config = DriverConfig.from_yaml(path)
            else:
                self.get_logger().warning("no config/arms.yaml found; using the built-in default configuration")
                config = DriverConfig.default()
            hw = hardware_registry.load(self._hardware_name, config)
            core = DriverCore(hw.adapter, config, lease_validator=self._lease_valid, clock_ns=self._now_ns,
                              lease_refusal=self._leases.refusal, command_proof_validator=self._proof_valid)
        except (ConfigError, ValueError, OSError) as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        except Exception as exc:  # e.g. MuJoCo cannot load the model: say so instead of a silent ERROR
            self.get_logger().error(f"configure failed: {type(exc).__name__}: {exc}")
            return TransitionCallbackReturn.FAILURE
        self._core, self._hardware = core, hw
        self._create_interfaces()
        self._lifecycle_label = params.STATE_INACTIVE
        self._out.announce()
        self.get_logger().info(
            f"configured: {self._hardware_name} arms {', '.join(core.adapter.arm_names())} "
            f"({len(core.action_keys())} actuator keys, {1.0 / core.adapter.timestep_s:g} Hz) "
            f"from {path or 'built-in defaults'}")
        return super().on_configure(state)

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Start the hardware's runner and the publish timers; commands are accepted from now on."""
        core, hw = self._core, self._hardware
        if core is None or hw is None:
            return TransitionCallbackReturn.FAILURE
        ret = super().on_activate(state)  # activates the lifecycle publishers before anything publishes
        if ret != TransitionCallbackReturn.SUCCESS:
            return ret
        runner = hw.runner(core, self._on_tick, self._on_runner_fault)
        self._joint_states_pacer.restart(time.monotonic())
        with self._gate:
            self._runner = runner
            self._active = True
            self._lifecycle_label = params.STATE_ACTIVE
        runner.start()
        self._out.restart_rates()
        self._create_rate_timer("status", float(self._param("status_rate_hz")))
        self._create_rate_timer("diagnostics", float(self._param("diagnostics_rate_hz")))
        self._publish_status()
        self.get_logger().info(
            f"active: {self._hardware_name} {runner.rate_hz:g} Hz real time, joint_states "
            f"{float(self._param('control_rate_hz')):g} Hz, require_lease={self._param('require_lease')}")
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        """Stop publishing and the runner; the arms hold where they are until an explicit activate."""
        self._stop_running()
        self._lifecycle_label = params.STATE_INACTIVE
        self._publish_status()
        self.get_logger().info("inactive: arms held, commands refused until activated again")
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        """Revoke the lease and drop the arms, publishers and services."""
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
        """Stop the runner before the node goes away, whatever state it is in."""
        self._stop_running()
        self._teardown()
        super().destroy_node()

    def _stop_running(self) -> None:
        with self._gate:
            was_active = self._active
            self._active = False
            runner, self._runner = self._runner, None
        for name in ("status", "diagnostics"):
            timer = self._drv_timers.pop(name, None)
            if timer is not None:
                self.destroy_timer(timer)
        if runner is not None:
            runner.stop()
        core = self._core
        if was_active and core is not None:
            core.hold()  # the gate is closed and the runner joined: nothing commands the arms after this

    def _teardown(self) -> None:
        if self._leases.revoke("revoked: the driver was cleaned up"):
            self._publish_lease_if_changed()
        for part in (self._stream, self._start_pose, self._lease_services):
            if part is not None:
                part.destroy()
        self._stream = self._start_pose = self._lease_services = None
        for srv in self._drv_services:
            self.destroy_service(srv)
        self._drv_services.clear()
        timer = self._drv_timers.pop("lease", None)
        if timer is not None:
            self.destroy_timer(timer)
        if self._out is not None:
            self._out.destroy()
        self._out = None
        close = getattr(self._hardware.adapter, "close", None) if self._hardware is not None else None
        if close is not None:
            close()
        self._core = self._hardware = None
        self._lifecycle_label = params.STATE_UNCONFIGURED

    def _create_interfaces(self) -> None:
        self._out = DriverPublishers(self, lambda: (self._core, self._active, self._runner), self._leases,
                                     self._hardware_name, bool(self._param("publish_clock")))
        g = self._command_group
        self._drv_services = [
            self.create_service(SendAction, "send_action", self._on_send_action, callback_group=g),
            self.create_service(ResetSafety, "reset_safety", self._on_reset_safety, callback_group=g),
        ]
        self._lease_services = LeaseServices(self, self._leases, self._publish_lease_if_changed, g,
                                             on_cancel=self._stop_on_cancel)
        log = self.get_logger()
        self._stream = CommandStream(self, self._apply_command, self._now_ns, partial(log_refusal, log),
                                     callback_group=g)
        self._start_pose = StartPoseServer(self, self._run_move, partial(log_move, log),
                                           callback_group=self._move_group)
        # The lease can expire while the driver is inactive too, so its poll lives as long as the services.
        self._drv_timers["lease"] = self.create_timer(1.0 / LEASE_POLL_HZ, self._publish_lease_if_changed,
                                                  callback_group=self._housekeeping_group)

    # -- runner hooks (runner thread) ------------------------------------------------------------------------
    def _on_tick(self) -> None:
        """After every step: joint_states (and /clock) when due, SafetyStop on a change.

        Published here rather than from an executor timer: it is the freshest state (just stepped) and its
        deadlines do not drift. Rates above the step rate publish once per step (no newer state exists).
        """
        due = self._joint_states_pacer.due(time.monotonic())
        out, core = self._out, self._core
        if out is None:
            return
        if due:
            out.joint_states()
        if core is not None and core.stopped != out.published_stopped:
            out.safety_if_changed()

    def _on_runner_fault(self, exc: BaseException) -> None:
        self.get_logger().error(f"{self._hardware_name} stopped: {type(exc).__name__}: {exc}; commands refused")
        with self._gate:
            self._active = False
        self._publish_status()

    # -- commands ----------------------------------------------------------------------------------------------
    def _gated(self, run: Any) -> Tuple[ActionVerdict, bool, float]:
        """``run(core) -> verdict`` while active (else "driver not active"), with the stop and robot time after."""
        return run_gated(self._gate, lambda: (self._core, self._active), lambda: self._out, run)

    def _apply_command(self, command: StreamCommand, received_ns: int) -> Tuple[ActionVerdict, bool, float]:
        return self._gated(lambda core: core.apply_command(command, received_ns))

    def _on_send_action(self, req: SendAction.Request, res: SendAction.Response) -> SendAction.Response:
        """Resolve and command; never waits on the runner (the verdict is known at once)."""
        return send_action_response(self._gated, req, self.get_logger())

    def _on_reset_safety(self, req: ResetSafety.Request, res: ResetSafety.Response) -> ResetSafety.Response:
        return reset_safety_response(self._core, self._leases, req, res, self._publish_safety_if_changed,
                                     self.get_logger())

    # -- start pose (on the start-pose server's thread) ----------------------------------------------------------
    def _run_move(self, token: str, tolerance: float, timeout_s: float, should_stop: Any,
                  on_progress: Any) -> StartPoseReport:
        with self._gate:
            core, runner = self._core, self._runner
            if not self._active or core is None or runner is None:
                return StartPoseReport(False, math.inf, 0.0, "driver not active")
        return move_on_runner(core, runner, lambda: self._active, token, tolerance, timeout_s, should_stop,
                              on_progress)

    # -- publishing (each a no-op while unconfigured) --------------------------------------------------------
    def _publish_status(self) -> None:
        if self._out is not None:
            self._out.status()

    def _publish_diagnostics(self) -> None:
        if self._out is not None:
            self._out.diagnostics()

    def _publish_lease_if_changed(self) -> None:
        if self._out is not None:
            self._out.lease_if_changed()
        self._stop_on_lease_loss()

    def _stop_on_lease_loss(self) -> None:
        """Latch a stop when a held lease is lost, on hardware that asks for it (real arms).

        Lost: it expired (its holder went silent) or was revoked with nobody taking over.

        A release is the holder's own end of control (an episode done), and a takeover (a higher-priority claim of
        the same station, an operator) hands control to someone who commands at once: neither is a loss.
        """
        core = self._core
        if core is None or not core.stops_on_lease_loss:
            return
        snap = self._leases.state()
        holder = self._lease_held
        self._lease_held = snap.holder if snap.state == STATE_HELD else ""
        if not holder or not self._active:
            return
        if snap.state in (STATE_EXPIRED, STATE_REVOKED):
            why = f"lease of {holder!r} {snap.state}"
        else:
            return
        if core.stop(why):
            self._publish_safety_if_changed()

    def _stop_on_cancel(self, holder: str, reason: str) -> None:
        """Latch a stop when a holder released the lease on a cancel, on hardware that asks for it (real arms).

        Runs in the release's callback, in the command group: no command applies between the release and the stop.
        """
        core = self._core
        if core is None or not self._active:
            return
        if not core.stops_on_cancel:
            self.get_logger().info(f"lease of {holder!r} released on a cancel ({reason}); the arms keep their "
                                   "last targets on this hardware")
        elif core.cancel(holder, reason):
            self._publish_safety_if_changed()

    def _publish_safety_if_changed(self) -> None:
        if self._out is not None:
            self._out.safety_if_changed()

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds


# -- entry point --------------------------------------------------------------------------------------------------
def main(args: Optional[List[str]] = None) -> int:
    """Run the driver on the executor ``STRANDS_ROBOTS_EXECUTOR`` picks (:mod:`.executor_choice`) until SIGINT/SIGTERM.

    Exit 0 on a clean shutdown, 1 when autostart failed, 2 for a refused parameter at start, and
    ``process.EXIT_EXECUTOR_DIED`` when the executor thread died (a callback error alone never ends it).

    ``--autostart`` (or the ``autostart`` parameter) configures and activates the node at start.
    """
    argv = list(sys.argv if args is None else args)
    from rclpy.utilities import remove_ros_args

    parser = argparse.ArgumentParser(prog="arm_driver_node", description="strands_robots arm driver")
    parser.add_argument("--autostart", action="store_true", help="configure and activate at start")
    options = parser.parse_args(remove_ros_args(args=argv)[1:])

    try:  # first, decided (taken once the node is built: ros/realtime_priority.py)
        realtime = decide_realtime()
    except ValueError as exc:
        print(f"arm_driver_node: {exc}", file=sys.stderr)
        return 2
    import_threads = process_threads()  # made by the imports: they stay time-shared
    signals = StopSignals.install()
    stop = signals.event
    init_without_signal_handlers(argv)
    node: Optional[ArmDriverNode] = None
    executor: Optional[Any] = None
    spin: Optional[SpinThread] = None
    guard = None
    code = 0
    try:
        executor, executor_name = make_executor()
        node = ArmDriverNode()
        node.get_logger().info(f"executor: {executor_name}")
        executor.add_node(node)
        spin = SpinThread(executor, node.get_logger()).start()
        if options.autostart or node.get_parameter("autostart").value:
            code = autostart(node)
        # Start-up done: every thread now (the physics thread too) and every later one runs real-time.
        guard = start_realtime(take_realtime(realtime, import_threads), node.get_logger())
        while code == 0 and not stop.wait(0.2):
            if not spin.is_alive():
                break
        if spin.died or (not spin.is_alive() and not stop.is_set() and code == 0):
            node.get_logger().fatal("the executor thread ended: the driver stops and exits non-zero")
            code = getattr(process, "EXIT_EXECUTOR_DIED", 1)
    except (ValueError, ParameterException) as exc:  # refused parameters at start: a reason, no traceback
        print(f"arm_driver_node: {exc}", file=sys.stderr)
        code = 2
    finally:
        if node is not None:
            node._stop_running()  # the arms held first, while everything else still runs
        if spin is not None:
            spin.stop(2.0)
        elif executor is not None:
            executor.shutdown(timeout_sec=2.0)
        if guard is not None:
            guard.stop()
        if node is not None:
            # The shutdown transition destroys the start-pose action server and the services: only once the
            # executor stopped (under a spinning executor: "action server pointer is invalid" at every Ctrl-C).
            try:
                node.trigger_shutdown()
            except Exception:  # already finalized, or the context is gone: destroy_node still stops the runner
                pass
            node.destroy_node()
        rclpy.try_shutdown()
        signals.restore()
    return code


if __name__ == "__main__":
    sys.exit(main())
