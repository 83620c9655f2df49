"""The arm driver core: adapter + per-key resolution + safety envelope + start pose, without ROS.

The arm driver node (and the in-process backend) call this; it holds every rule. One lock guards adapter
access, because the node calls ``send_action`` from a service thread while physics steps on another.

How a torque limit trips in simulation (the bundled MJCF with ``config/arms.yaml``; joint 4's envelope
limit is 4.5 N*m = 5.0 N*m rating less a 10 % margin, while its servo can push 15 N*m):

- Into a stiff obstacle (sustained): from the start pose (``right.joint_4`` = 0.9), ramp ``right.joint_4``
  toward its upper limit 2.0 (e.g. over 50 actions at 50 Hz, as the scripted ``torque_ramp`` policy does).
  Near 1.4 rad the gripper folds onto the rigid cable bracket on its own forearm (a self-collision that
  does not depend on the other joints); the servo keeps pushing toward the target and the envelope trips
  with ``right: joint 4 reads +4.5 N*m`` (the first reading past the 4.5 N*m limit).
- A far jump (transient): the single command ``{"right.joint_4": -1.5}`` (2.4 rad away, kp 40 N*m/rad)
  trips on the first physics step with ``right: joint 4 reads -6.3 N*m``.

Either way both arms are held and stay stopped until ``reset_safety()``.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from strands_robots.arm.adapter import HardwareAdapter, JointReadings
from strands_robots.arm.command_stream import CommandSequencer, StreamCommand, refuse_every_key
from strands_robots.arm.config import ConfigError, DriverConfig
from strands_robots.arm.lookahead import LookaheadError, LookaheadPlan, plan_lookahead, split_points
from strands_robots.arm.model import JointSpec
from strands_robots.arm.resolution import resolve_action
from strands_robots.arm.safety import SafetyCheck, SafetyEnvelope, format_checks
from strands_robots.arm.start_pose import (
    StartPoseAborted,
    StartPoseProgress,
    StartPoseReport,
    StartPoseSettings,
    run_start_pose,
)
from strands_robots.arm.verdict import REASON_ARM_STOPPED, REASON_OUT_OF_ORDER, REASON_STALE, ActionVerdict

__all__ = ["ConfigError", "DriverConfig", "DriverCore", "DriverStatus", "SafetyReset", "REFUSED_NOT_LEASE_HOLDER"]

# How a clear by someone who does not hold the lease is refused (the station re-claims its lease on it).
REFUSED_NOT_LEASE_HOLDER = "refused: not the lease holder"
# How much of a cancel's reason a stop keeps (free text from the lease holder: bounded where it enters).
CANCEL_REASON_MAX_CHARS = 200


def cancel_stop_reason(holder: str, reason: str) -> str:
    """Return the stop a cancel latches, named: ``cancelled by 'station:s1': the job was cancelled`` (one line).

    The reason is cut, never refused: a cancel stops the arms whatever its holder wrote.
    """
    text = " ".join(str(reason or "").split()) or "cancelled"
    if len(text) > CANCEL_REASON_MAX_CHARS:
        text = text[:CANCEL_REASON_MAX_CHARS - 1] + "\u2026"
    return f"cancelled by {holder!r}: {text}" if holder else f"cancelled: {text}"


@dataclass(frozen=True)
class SafetyReset:
    """The answer to :meth:`DriverCore.reset_safety`: ``ok`` when no stop is in force afterwards."""

    ok: bool
    message: str
    refused: bool = False  # refused before anything was touched (not the lease holder)


@dataclass(frozen=True)
class DriverStatus:
    """A snapshot of the driver.

    ``actions_applied`` counts actions whose every key was applied; ``actions_refused`` those with at least
    one unresolved key or a coarse error; the ``keys_*`` counters count single keys.
    """

    stopped: bool
    stopped_arms: tuple[str, ...]
    checks: tuple[SafetyCheck, ...]
    sim_time_s: float
    actions_received: int
    actions_applied: int
    actions_refused: int
    keys_applied: int
    keys_unresolved: int
    coarse_errors: int
    safety_trips: int
    commands_stale: int = 0  # streamed commands refused for arriving past their deadline
    commands_out_of_order: int = 0  # streamed commands refused for an older step than one applied

    @property
    def stop_detail(self) -> str:
        return format_checks(self.checks)


class DriverCore:
    """Runs two arms through a :class:`HardwareAdapter`.

    :param adapter: the arms (``MujocoArms`` in simulation).
    :param config: ratings, margins, start pose (default: :meth:`DriverConfig.default`).
    :param lease_validator: ``token -> bool``; when it returns False every key of the action is
        ``not_lease_holder``. None disables lease enforcement.
    :param clock_ns: now in nanoseconds, on the time base of streamed commands' ``apply_by`` (the node passes
        its ROS clock); see :mod:`strands_robots.arm.command_stream`.
    :param lease_refusal: ``token -> why it is not the current lease's`` (empty when it is; the node passes
        :meth:`LeaseManager.refusal`). Clearing a safety stop needs it to be empty, and refusals quote it.
        None lets any caller reset (in process, where the caller owns the driver).
    :param command_proof_validator: ``(message, proof) -> bool``, whether a streamed command's ``lease_proof``
        is the current lease's (the node passes :meth:`LeaseManager.verify`). Without it, a streamed command
        applies only when there is no ``lease_validator`` either (no lease enforced).
    """

    def __init__(
        self,
        adapter: HardwareAdapter,
        config: "DriverConfig | None" = None,
        lease_validator: "Callable[[str], bool] | None" = None,
        clock_ns: "Callable[[], int] | None" = None,
        lease_refusal: "Callable[[str], str] | None" = None,
        command_proof_validator: "Callable[[bytes, str], bool] | None" = None,
    ) -> None:
        self._adapter = adapter
        self._config = config or DriverConfig.default()
        self._lease_validator = lease_validator
        self._lease_refusal = lease_refusal
        self._proof_validator = command_proof_validator
        self._sequencer = CommandSequencer(clock_ns) if clock_ns is not None else CommandSequencer()
        self._lock = threading.RLock()
        self._keys = tuple(adapter.keys())
        specs = self._config.joint_specs()
        if set(specs) != set(self._keys):
            missing = sorted(set(self._keys) - set(specs))
            extra = sorted(set(specs) - set(self._keys))
            raise ConfigError(f"config does not match the adapter's joints: missing {missing}, unknown {extra}")
        self._specs: Mapping[str, JointSpec] = {k: specs[k] for k in self._keys}
        self._envelope = SafetyEnvelope(self._config.arms, self._config.margins, keys=self._keys,
                                        stop_scope=self._config.stop_scope)
        self._timestep = float(adapter.timestep_s)
        self._check_every = max(1, int(round(self._config.safety_check_period_s / self._timestep)))
        self._debt_s = 0.0
        self._obs_names = tuple((k + ".pos", k + ".vel", k + ".effort") for k in self._keys)
        self._pos_names = tuple(n[0] for n in self._obs_names)
        self._vel_names = tuple(n[1] for n in self._obs_names)
        self._eff_names = tuple(n[2] for n in self._obs_names)
        self._zero_counters()

    @classmethod
    def simulated(
        cls,
        config: "DriverConfig | None" = None,
        lease_validator: "Callable[[str], bool] | None" = None,
        model_path: "str | None" = None,
        **kwargs: Any,
    ) -> "DriverCore":
        """Build a driver on the bundled MuJoCo model (imports MuJoCo only here); ``kwargs`` as the constructor's."""
        from strands_robots.arm.mujoco_sim import make_arms

        config = config or DriverConfig.default()
        return cls(make_arms(config, model_path), config, lease_validator, **kwargs)

    def _zero_counters(self) -> None:
        self._actions_received = 0
        self._actions_applied = 0
        self._actions_refused = 0
        self._keys_applied = 0
        self._keys_unresolved = 0
        self._coarse_errors = 0
        self._safety_trips = 0
        self._refused_by_rule = {REASON_STALE: 0, REASON_OUT_OF_ORDER: 0}
        self._lookahead_points = 0
        self._lookahead_cuts = 0
        self._last_lookahead_cut = ""

    # -- what the driver is ---------------------------------------------------------------------------------
    @property
    def adapter(self) -> HardwareAdapter:
        return self._adapter

    @property
    def config(self) -> DriverConfig:
        return self._config

    @property
    def envelope(self) -> SafetyEnvelope:
        return self._envelope

    def action_keys(self) -> tuple[str, ...]:
        """Every actuator key, ``left.joint_1`` … ``right.gripper``."""
        return self._keys

    def joint_specs(self) -> Mapping[str, JointSpec]:
        return dict(self._specs)

    # -- observing and acting -------------------------------------------------------------------------------
    def read(self) -> JointReadings:
        with self._lock:
            return self._adapter.read()

    def observe(self) -> dict[str, float]:
        """``{"left.joint_1.pos": …, ".vel", ".effort" for every key, "sim_time_s": …}``."""
        with self._lock:
            r = self._adapter.read()
        obs = dict(zip(self._pos_names, r.positions.tolist()))
        obs.update(zip(self._vel_names, r.velocities.tolist()))
        obs.update(zip(self._eff_names, r.efforts.tolist()))
        obs["sim_time_s"] = r.time_s
        return obs

    def execute(self, keys: Sequence[str], values: Sequence[float], lease_token: str = "") -> ActionVerdict:
        """Apply one command as it arrives over ROS (``SendAction`` request or ``ActionCommand``).

        Keys and values are parallel lists. Mismatched lengths or a repeated key are a coarse error (no per-key
        breakdown can be complete); otherwise exactly :meth:`send_action`.
        """
        if len(keys) != len(values):
            return ActionVerdict.coarse(f"send_action has {len(keys)} keys but {len(values)} values")
        action = dict(zip(keys, values))
        if len(action) != len(keys):
            seen: set = set()
            dupes = sorted({k for k in keys if k in seen or seen.add(k)})
            return ActionVerdict.coarse(f"send_action repeats keys {dupes}")
        return self.send_action(action, lease_token)

    def apply_command(self, command: StreamCommand, now_ns: "int | None" = None) -> ActionVerdict:
        """Apply a command from the stream: the stale and out-of-order rules, then exactly :meth:`execute`.

        The lease is checked by the command's ``lease_proof`` (an HMAC keyed by the token, which the stream never
        carries): a wrong or missing proof makes every key ``not_lease_holder``, as a foreign token does on
        ``SendAction``. A stale or out-of-order command applies nothing and every key is unresolved with that
        reason (the arms hold their current targets); see :mod:`strands_robots.arm.command_stream`.

        :param now_ns: the time the command is judged at (default: the core's clock now); the node passes the
            time it received the command, so one clock read serves the verdict's ``received`` and the rule.
        """
        keys, values = command.keys, command.values
        if len(keys) != len(values) or len(set(keys)) != len(keys):
            return self.execute(keys, values)  # the coarse error, before any proof is computed
        try:
            ahead = split_points(keys, command.lookahead, command.lookahead_period_ns)
        except LookaheadError as exc:
            with self._lock:
                self._count_coarse()
            return ActionVerdict.coarse(f"lookahead refused: {exc}")
        with self._lock:
            refusal = self._sequencer.refusal(command, now_ns)
            if refusal:
                self._actions_received += 1
                self._actions_refused += 1
                self._keys_unresolved += len(keys)
                self._refused_by_rule[refusal] += 1
                return refuse_every_key(keys, refusal)
            lease_valid, error = self._check_proof(command)
            ahead_spec = (keys, ahead, command.lookahead_period_ns / 1e9) if ahead else None
            verdict = self._send_checked(dict(zip(keys, values)), lease_valid, error, ahead_spec)
            if verdict.applied_keys:
                self._sequencer.record_applied(command)
            return verdict

    def send_action(self, action: Any, lease_token: str = "") -> ActionVerdict:
        """Resolve every key, command the applied ones, then evaluate the safety envelope.

        :param action: ``{"left.joint_1": 0.1, …}`` position targets in rad.
        :param lease_token: checked with the lease validator (if any); a stale or foreign token applies
            nothing (every key ``not_lease_holder``, unless the key or value is itself invalid).
        """
        lease_valid, error = self._check_lease(lease_token)
        return self._send_checked(action, lease_valid, error)

    def _send_checked(self, action: Any, lease_valid: bool, error: str, ahead: Any = None) -> ActionVerdict:
        if error:
            with self._lock:
                self._count_coarse()
            return ActionVerdict.coarse(error)
        return self._resolve_and_command(action, lease_valid, count=True, ahead=ahead)

    def _check_proof(self, command: StreamCommand) -> tuple[bool, str]:
        """Check a streamed command's lease proof against the current lease (the token never travels)."""
        if self._lease_validator is None:
            return True, ""
        validator = self._proof_validator
        if validator is None:
            return False, ""
        try:
            return bool(validator(command.message(), command.lease_proof)), ""
        except Exception as exc:  # the lease check failed: we know nothing, apply nothing
            return False, f"lease check failed: {type(exc).__name__}: {exc}"

    def _check_lease(self, lease_token: str) -> tuple[bool, str]:
        validator = self._lease_validator
        if validator is None:
            return True, ""
        try:
            return bool(validator(lease_token)), ""
        except Exception as exc:  # the lease service failed: we know nothing, apply nothing
            return False, f"lease check failed: {type(exc).__name__}: {exc}"

    def _resolve_and_command(self, action: Any, lease_valid: bool, count: bool, ahead: Any = None) -> ActionVerdict:
        """Run the per-key rules, command the applied keys and check the envelope.

        ``count``: update the action counters (the start-pose ramp's own commands are not actions).
        ``ahead``: a streamed command's ``(keys, lookahead points, period_s)``; on hardware that takes trajectories
        a step whose every key was applied goes out with the lookahead points :meth:`_plan_lookahead` accepts.
        """
        with self._lock:
            resolution = resolve_action(action, self._specs, lease_valid=lease_valid,
                                        stopped_arms=self._envelope.stopped_arms)
            verdict = resolution.verdict
            if verdict.is_coarse_error:
                if count:
                    self._count_coarse()
                return verdict
            if resolution.targets:
                try:
                    plan = self._plan_lookahead(resolution.targets, verdict, ahead)
                    if plan is not None:
                        self._adapter.command_trajectory([resolution.targets, *plan.points], ahead[2])
                    else:
                        self._adapter.command(resolution.targets)
                except Exception as exc:  # partial actuation may have happened: say nothing per key
                    if count:
                        self._count_coarse()
                    return ActionVerdict.coarse(f"adapter command failed: {type(exc).__name__}: {exc}")
            if not count:
                self._check_safety()
                return verdict
            self._actions_received += 1
            self._keys_applied += len(verdict.applied_keys)
            self._keys_unresolved += len(verdict.unresolved_keys)
            if verdict.unresolved_keys:
                self._actions_refused += 1
            else:
                self._actions_applied += 1
            self._check_safety()
            return verdict

    @property
    def takes_trajectories(self) -> bool:
        """Whether the hardware takes a step and its lookahead as one trajectory (``command_trajectory``)."""
        return bool(getattr(self._adapter, "takes_trajectories", False))

    def _plan_lookahead(self, targets: Mapping[str, float], verdict: ActionVerdict,
                        ahead: Any) -> "LookaheadPlan | None":
        """Return the lookahead points to send after a step (None: send the step alone, as other hardware does).

        Only a step whose every key was applied carries its lookahead on; each point then passes the per-key rules,
        the envelope's speed limits and the hardware's silence bound
        (:func:`~strands_robots.arm.lookahead.plan_lookahead`). Caller holds the lock.
        """
        if ahead is None or verdict.unresolved_keys or not self.takes_trajectories:
            return None
        keys, points, period_s = ahead
        speeds = {k: self._envelope.limits(k).velocity for k in keys if k in self._specs}
        plan = plan_lookahead(targets, keys, points, period_s, self._specs, speeds, self._envelope.stopped_arms,
                              float(getattr(self._adapter, "trajectory_horizon_s", 0.0)))
        if plan.cut:
            self._lookahead_cuts += 1
            self._last_lookahead_cut = plan.cut
        self._lookahead_points += len(plan.points)
        return plan

    @property
    def lookahead_counts(self) -> tuple[int, int, str]:
        """``(points sent after their step, lookaheads cut short, why the last one was cut)`` since the start."""
        with self._lock:
            return self._lookahead_points, self._lookahead_cuts, self._last_lookahead_cut

    def _count_coarse(self) -> None:
        self._actions_received += 1
        self._actions_refused += 1
        self._coarse_errors += 1

    def _check_safety(self) -> None:
        """Evaluate the envelope on a fresh read; a new trip holds the stopped arms. Caller holds the lock."""
        if self._envelope.stopped:
            return
        if self._envelope.check(self._adapter.read()):
            self._latched()

    def _latched(self) -> None:
        """Hold the arms a stop just latched, then tell hardware that latches stops of its own."""
        self._safety_trips += 1
        self._adapter.hold(self._envelope.stopped_arms)
        latch = getattr(self._adapter, "latch_stop", None)
        if latch is not None:
            latch(format_checks(self._envelope.tripped))

    def stop(self, reason: str) -> bool:
        """Latch a stop of every arm that no reading caused (a lost lease): held, refused, until ``reset_safety``.

        Returns whether this call stopped the arms (False: a stop was already in force).
        """
        with self._lock:
            if not self._envelope.trip(reason):
                return False
            self._latched()
            return True

    def cancel(self, holder: str, reason: str) -> bool:
        """Stop the arms a lease holder gave back on a cancel (its job cancelled, its rollout stopped).

        On hardware that stops on a cancel (real arms, see :class:`HardwareAdapter`) this latches a stop as a lost
        lease does: the arms hold at their measured position, the hardware takes its command path down, and it
        stays until ``reset_safety``. Elsewhere (simulation) a cancel is a release: the arms keep their last
        targets. Returns whether this call stopped the arms.
        """
        if not self.stops_on_cancel:
            return False
        return self.stop(cancel_stop_reason(holder, reason))

    @property
    def stops_on_cancel(self) -> bool:
        """Whether the hardware asks for a latched stop when a holder releases the lease on a cancel."""
        return bool(getattr(self._adapter, "stops_on_cancel", False))

    @property
    def stops_on_lease_loss(self) -> bool:
        """Whether the hardware asks for a latched stop when the lease is lost (see :class:`HardwareAdapter`)."""
        return bool(getattr(self._adapter, "stops_on_lease_loss", False))

    def hardware_fault(self) -> str:
        """Return the hardware's own fault, named (empty while it can be commanded, or when it reports none)."""
        fault = getattr(self._adapter, "fault", None)
        return fault() if fault is not None else ""

    def step(self, dt: float) -> None:
        """Advance by ``dt`` in whole adapter timesteps, evaluating the envelope every check period.

        A remainder below one timestep is carried to the next call, so time advances at the requested rate
        on average (e.g. 1 kHz control on a 500 Hz physics step advances one step every other call).
        """
        if not (isinstance(dt, (int, float)) and math.isfinite(dt)) or dt < 0:
            raise ValueError(f"dt must be a finite number >= 0, got {dt!r}")
        self._debt_s += dt
        n = int(math.floor(self._debt_s / self._timestep + 1e-9))
        if n <= 0:
            return
        self._debt_s = max(0.0, self._debt_s - n * self._timestep)
        chunk = self._check_every
        ts = self._timestep
        while n > 0:
            k = chunk if n >= chunk else n
            with self._lock:
                self._adapter.step(k * ts)
                self._check_safety()
            n -= k

    def hold(self) -> None:
        """Freeze every arm where it is (targets := current positions): deactivation, an aborted move."""
        with self._lock:
            self._adapter.hold()

    # -- safety ---------------------------------------------------------------------------------------------
    @property
    def stopped(self) -> bool:
        return self._envelope.stopped

    @property
    def stopped_arms(self) -> tuple[str, ...]:
        return self._envelope.stopped_arms

    def safety_checks(self) -> tuple[SafetyCheck, ...]:
        """Every check of the trip that stopped the arms (empty while not stopped)."""
        return self._envelope.tripped

    def safety_stop_detail(self) -> str:
        return format_checks(self._envelope.tripped)

    def reset_safety(self, lease_token: str = "") -> SafetyReset:
        """Release a safety stop (explicit operator action). Still outside the envelope: trips again at once.

        :param lease_token: with a ``lease_refusal`` (the node: the lease manager), only the current lease
            holder may clear a stop; an operator claims the lease at a higher priority first. Refused
            otherwise, and nothing is touched.
        """
        authority = self._lease_refusal
        if authority is not None:
            refusal = authority(lease_token)
            if refusal:
                return SafetyReset(False, f"{REFUSED_NOT_LEASE_HOLDER}: {refusal}", refused=True)
        with self._lock:
            was = format_checks(self._envelope.tripped)
            checks = self._envelope.tripped
            self._envelope.reset()
            self._check_safety()
            if self._envelope.stopped:
                return SafetyReset(False, f"still outside the safety envelope: {format_checks(self._envelope.tripped)}")
            resume = getattr(self._adapter, "resume", None)
            if resume is not None:
                why = resume()
                if why:  # the hardware cannot take commands again: the stop stays as it was
                    if checks:
                        self._envelope.restore(checks)
                    return SafetyReset(False, f"safety stop not cleared: {why}")
        return SafetyReset(True, f"safety stop cleared (was: {was})" if was else "no safety stop in force")

    # -- lifecycle ------------------------------------------------------------------------------------------
    def reset(self, seed: "int | None" = None) -> None:
        """Reset the adapter (simulation: home pose, time 0). A safety stop stays until ``reset_safety()``."""
        with self._lock:
            self._adapter.reset(seed)
            self._debt_s = 0.0
            if self._envelope.stopped:
                self._adapter.hold(self._envelope.stopped_arms)

    def move_to_start_pose(
        self,
        pose: "Mapping[str, float] | None" = None,
        tolerance: "float | None" = None,
        timeout_s: "float | None" = None,
        *,
        lease_token: str = "",
        advance: "Callable[[float], None] | None" = None,
        should_stop: "Callable[[], str] | None" = None,
        on_progress: "Callable[[StartPoseProgress], None] | None" = None,
    ) -> StartPoseReport:
        """Ramp to the start pose and check every joint settles within ``tolerance`` by ``timeout_s``.

        Everything is validated before anything moves: the pose (actuator keys, values inside the joint
        limits), the tolerance and timeout (finite, > 0; 0 or None: configured) and the lease. Every ramp
        step then goes through the per-key rules with ``lease_token``, so a lease lost mid-move (an operator
        took over) or a safety stop ends the move at once, not reached; the arms hold.

        :param pose: targets per key (default: the configured start pose).
        :param tolerance: position tolerance in rad (default: configured).
        :param timeout_s: adapter-time budget for ramp plus settling (default: configured).
        :param lease_token: checked with the lease validator (if any), before and during the move.
        :param advance: lets ``dt`` seconds of adapter time pass (default: :meth:`step`, in process; the node
            waits for its real-time runner); may raise :class:`StartPoseAborted`.
        :param should_stop: a non-empty answer (e.g. "cancelled") ends the move, not reached, arms held.
        :param on_progress: per-joint errors every control period (the action's feedback).
        """
        base = self._config.start_pose
        target = dict(base.pose if pose is None else pose)
        for key, value in target.items():
            spec = self._specs.get(key)
            if spec is None:
                return StartPoseReport(False, math.inf, 0.0, f"unknown key in start pose: {key!r}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not spec.contains(value):
                return StartPoseReport(False, math.inf, 0.0,
                                       f"start pose {key} = {value!r} is outside [{spec.lower}, {spec.upper}]")
        try:
            settings = StartPoseSettings(
                pose=target,
                position_tolerance_rad=base.position_tolerance_rad if not tolerance else tolerance,
                velocity_tolerance_rad_s=base.velocity_tolerance_rad_s,
                timeout_s=base.timeout_s if not timeout_s else timeout_s,
                max_speed_rad_s=base.max_speed_rad_s,
                control_period_s=base.control_period_s,
            )
        except ValueError as exc:
            return StartPoseReport(False, math.inf, 0.0, str(exc))
        lease_valid, error = self._check_lease(lease_token)
        if error or not lease_valid:
            why = self._lease_refusal(lease_token) if self._lease_refusal is not None else ""
            refusal = error or ("not the lease holder" + (f": {why}" if why else ""))
            return StartPoseReport(False, math.inf, 0.0, refusal)

        def command(targets: Mapping[str, float]) -> None:
            valid, err = self._check_lease(lease_token)
            if err or not valid:
                raise StartPoseAborted(err or "lease lost during the move")
            verdict = self._resolve_and_command(targets, True, count=False)
            if verdict.is_coarse_error:
                raise StartPoseAborted(verdict.error)
            reasons = set(verdict.unresolved_reasons) - {REASON_ARM_STOPPED}  # a stop: run_start_pose says so
            if reasons:
                raise StartPoseAborted(f"start pose command refused: {', '.join(sorted(reasons))}")

        report = run_start_pose(read=self.read, command=command, step=advance or self.step,
                                stop_detail=self.safety_stop_detail, settings=settings,
                                should_stop=should_stop, on_progress=on_progress)
        if not report.reached:
            with self._lock:  # not reached: never leave the arms ramping toward a half-way target
                self._adapter.hold()
        return report

    def status(self) -> DriverStatus:
        with self._lock:
            return DriverStatus(
                stopped=self._envelope.stopped,
                stopped_arms=self._envelope.stopped_arms,
                checks=self._envelope.tripped,
                sim_time_s=self._adapter.time_s(),
                actions_received=self._actions_received,
                actions_applied=self._actions_applied,
                actions_refused=self._actions_refused,
                keys_applied=self._keys_applied,
                keys_unresolved=self._keys_unresolved,
                coarse_errors=self._coarse_errors,
                safety_trips=self._safety_trips,
                commands_stale=self._refused_by_rule[REASON_STALE],
                commands_out_of_order=self._refused_by_rule[REASON_OUT_OF_ORDER],
            )
