"""A station robot side in one process, over a simulation and a real lease.

The :class:`~strands_robots.station.ports.RobotPort` over a :class:`~strands_robots.simulation.Simulation`
robot (MuJoCo arms, ``PolicyRunner``), with a real :class:`~strands_robots.arm.lease.LeaseManager` the driver
core enforces.

What it does per episode, as the station node does over ROS:

- the lease: the driver core validates every action's token against the lease manager; while the rollout
  runs, the lease is renewed every control step (the heartbeat) and watched: a token that stopped being
  valid stops the rollout at once, ``authority_lost`` when a higher-priority claim revoked it, ``lease_lost``
  otherwise (expired without renewal, revoked by the driver);
- the start pose: the scene is reset (simulation: the model's home pose), then ``DriverCore.move_to_start_pose``
  with the plan's tolerance and timeout; the rollout starts from there (its backend does not reset again, like
  the driver node's). A safety stop is never cleared here: the procedure waits for an operator's clear
  (``station.safety_gate``), and :meth:`InProcessRobot.clear_safety_stop` then restores the simulated scene and
  resets the stop with the station's lease;
- an operator's claim is named ``operator:<name>@<station>`` after the station whose lease it revokes
  (``arm.lease``: only a claim of the same station preempts);
- takeover: ``PolicyRunner.pause()`` / ``resume()`` (the budget clock stands still; on resume the policy's
  ``resume()`` runs with a fresh observation).

Lease time runs on a step clock: each control step advances it by one control period, so leases expire after
the same number of steps however fast the simulation runs (``fast_mode``). Fault injection for tests and the
demo: the task parameter ``fault.stop_heartbeat_at_s`` stops the heartbeat at that rollout time (the episode
then ends ``lease_lost``), and :meth:`InProcessRobot.stop_heartbeat` does it at once; ``fault.policy_lost_at_s``
ends the first attempt of an episode at that rollout time as if the policy session had dropped (the outcome is
``policy_lost``, as the relay provider reports a disconnected client).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Optional, Tuple

from strands_robots.arm.backend import InProcessBackend
from strands_robots.arm.lease import LeaseManager, operator_holder, station_of
from strands_robots.policies.registry import make_policy
from strands_robots.rollout.end_condition import END_AUTHORITY_LOST, END_LEASE_LOST
from strands_robots.simulation.observers import CooperativeStop, RunPolicyStep
from strands_robots.station.ports import RolloutOutcome, ended_report
from strands_robots.station.job import EpisodePlan, JobSpec

__all__ = ["InProcessRobot", "StepClock", "PARAM_STOP_HEARTBEAT_AT_S", "PARAM_POLICY_LOST_AT_S",
           "OPERATOR_CLAIM_PRIORITY"]

PARAM_STOP_HEARTBEAT_AT_S = "fault.stop_heartbeat_at_s"
PARAM_POLICY_LOST_AT_S = "fault.policy_lost_at_s"
OPERATOR_CLAIM_PRIORITY = 100
_STOP_CANCELLED = "cancelled"


class StepClock:
    """Seconds that advance only when told to (one control period per rollout step). Thread-safe."""

    def __init__(self) -> None:
        self._t = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._t

    def advance(self, dt: float) -> None:
        with self._lock:
            self._t += dt


class _StationBackend:
    """The rollout's view of the arms: the in-process backend, except that ``reset`` does nothing.

    The station reset the scene and moved to the start pose before the rollout; the rollout starts from there.
    """

    def __init__(self, inner: InProcessBackend) -> None:
        self._inner = inner
        self.core = inner.core

    def action_keys(self):
        return self._inner.action_keys()

    def observe(self):
        return self._inner.observe()

    def send_action(self, action):
        return self._inner.send_action(action)

    def reset(self, seed=None) -> None:
        return None

    def advance(self, dt: float) -> None:
        self._inner.advance(dt)

    def safety_stop_detail(self) -> str:
        return self._inner.safety_stop_detail()


class InProcessRobot:
    """The robot port of an in-process simulated station.

    :param robot_name: the simulation robot's name (``RunPolicyStarted.robot_name``).
    :param fast_mode: run rollouts unpaced (robot time still advances one period per step).
    :param config: the driver configuration (default: ``DriverConfig.default()``).
    :param known_policies: providers this station can run in process (``relay`` needs the station node).
    """

    def __init__(self, robot_name: str = "sim_arms", *, fast_mode: bool = True, config: Any = None) -> None:
        from strands_robots.arm.driver import DriverCore
        from strands_robots.simulation.simulation import Simulation

        self.clock = StepClock()
        self.lease = LeaseManager(clock=self.clock.now)
        self.core = DriverCore.simulated(config, lease_validator=self.lease.validate,
                                         lease_refusal=self.lease.refusal)
        self._backend = InProcessBackend(self.core)
        self.simulation = Simulation()
        self._robot = self.simulation.add_robot(robot_name, backend=_StationBackend(self._backend))
        self.runner = self._robot.runner
        self.fast_mode = bool(fast_mode)
        self._lock = threading.Lock()
        self._token = ""
        self._holder = ""
        self._heartbeat = True
        self._running = False
        self._pending_stop = ""
        self._lease_end = ("", "")  # (end condition, detail) seen by the lease watch
        self._taken_over = False
        self.claims: list = []  # grants of operator claims, newest last
        self.last_ended: Optional[dict] = None  # the last rollout's RunPolicyEnded result (for logs and tests)
        self._declared: dict = {}  # job id -> the spec its policy declared (None: none), read once by the gate

    # -- RobotPort ------------------------------------------------------------------------------------------
    def wait_for_policy(self, spec: JobSpec, cancelled: threading.Event) -> Tuple[bool, str]:
        from strands_robots.client.policy_spec import spec_of

        self._declared.pop(spec.job_id, None)
        try:  # an in-process policy's spec is read from it directly
            self._declared[spec.job_id] = spec_of(make_policy(spec.policy_provider, dict(spec.policy_config)))
        except (ValueError, TypeError) as exc:
            return False, f"{spec.policy_provider!r} cannot run in this in-process station: {exc}"
        return True, f"{spec.policy_provider} policy in process"

    def attached_policy_spec(self, spec: JobSpec) -> Any:
        """Return (once) the declared ``PolicySpec`` of the policy the job's last wait built (None: none)."""
        return self._declared.pop(spec.job_id, None)

    def acquire_lease(self, holder: str, priority: int, duration_s: float) -> Tuple[bool, str]:
        grant = self.lease.acquire(holder, priority, duration_s)
        with self._lock:
            self._pending_stop = ""  # a new episode: a stop meant for the previous one does not carry over
            if grant.granted:
                self._token = grant.token
                self._holder = holder
                self._backend.lease_token = grant.token
                self._heartbeat = True
                self._lease_end = ("", "")
        return grant.granted, grant.message

    def release_lease(self, stop_reason: str = "") -> None:
        with self._lock:
            token, holder, self._token = self._token, self._holder, ""
        if not token:
            return
        released = self.lease.release(token)  # refused when already expired or revoked: nothing to give up
        if released.ok and stop_reason:
            self.core.cancel(holder, stop_reason)

    def move_to_start_pose(self, plan: EpisodePlan) -> Tuple[bool, str]:
        with self._lock:
            token = self._token
        self.core.reset(plan.seed)
        report = self.core.move_to_start_pose(
            tolerance=plan.start_pose_tolerance_rad or None, timeout_s=plan.start_pose_timeout_s or None,
            lease_token=token)
        if report.reached:
            return True, f"start pose reached (max error {report.max_error:.4f} rad in {report.elapsed_s:.2f} s)"
        return False, report.detail

    def safety_stop_detail(self) -> str:
        if not self.core.stopped:
            return ""
        return self.core.safety_stop_detail() or "the driver stopped the arms without naming a check"

    def clear_safety_stop(self, operator_name: str) -> Tuple[bool, str]:
        with self._lock:
            token = self._token
        self.core.reset()  # the operator restored the simulated scene; the arms are back inside the envelope
        cleared = self.core.reset_safety(lease_token=token)
        return cleared.ok, f"{cleared.message} (by {operator_name})"

    def run_rollout(self, plan: EpisodePlan, progress: Callable[[float], None]) -> RolloutOutcome:
        with self._lock:
            if self._pending_stop:
                reason, self._pending_stop = self._pending_stop, ""
                return RolloutOutcome(stopped_reason="cancelled", end_detail=reason)
            self._running = True
            self._taken_over = False
            self.last_ended = None
            token = self._token
        period = 1.0 / plan.control_frequency
        stop_heartbeat_at = _seconds_param(plan.task.parameters, PARAM_STOP_HEARTBEAT_AT_S)
        policy_lost_at = _seconds_param(plan.task.parameters, PARAM_POLICY_LOST_AT_S) if plan.attempt == 0 else None
        policy_lost = []

        def on_frame(step: int, observation: Mapping[str, Any], action: Mapping[str, float]) -> None:
            self.clock.advance(period)
            rollout_time = (step + 1) * period
            if policy_lost_at is not None and rollout_time >= policy_lost_at:
                policy_lost.append(rollout_time)
                raise CooperativeStop("policy session lost")
            if stop_heartbeat_at is not None and rollout_time >= stop_heartbeat_at:
                with self._lock:
                    self._heartbeat = False
            with self._lock:
                heartbeat = self._heartbeat
            if heartbeat:
                self.lease.renew(token)
            refusal = self.lease.refusal(token)
            if refusal:
                condition = END_AUTHORITY_LOST if "revoked by" in refusal else END_LEASE_LOST
                with self._lock:
                    self._lease_end = (condition, refusal)
                raise CooperativeStop(condition)

        def observer(event: Any) -> None:
            if isinstance(event, RunPolicyStep):
                progress((event.applied_action_index + 1) * period)

        try:
            result = self.runner.run(
                plan.policy_provider, policy_config=dict(plan.policy_config), instruction=plan.task.instruction,
                duration=plan.duration_s, control_frequency=plan.control_frequency, fast_mode=self.fast_mode,
                seed=plan.seed, observer=observer, on_frame=on_frame,
                task={"task_id": plan.task.task_id, "layout": plan.task.layout,
                      "parameters": dict(plan.task.parameters), "episode_id": plan.episode_id})
        finally:
            self._robot.stop_token.clear()
            with self._lock:
                self._running = False
        final = self._backend.observe()
        if not result["episodes"]:
            return RolloutOutcome(stopped_reason="error", final_observation=final,
                                  end_detail=f"rollout refused: {result.get('error_message', 'no episode ran')}")
        ended = result["episodes"][0]
        self.last_ended = ended
        with self._lock:
            lease_condition, lease_detail = self._lease_end
            taken_over = self._taken_over
        stopped = ended["stopped_reason"]
        if policy_lost:
            return RolloutOutcome(stopped_reason=stopped, end_detail=f"policy session lost at {policy_lost[0]:.2f} s "
                                  "(fault injection)", run_id=ended["run_id"], taken_over=taken_over,
                                  final_observation=final, policy_lost=True)
        report = ended_report(ended)
        if stopped == "cancelled" and lease_condition:
            return RolloutOutcome(stopped_reason=stopped, end_condition=lease_condition, end_detail=lease_detail,
                                  run_id=ended["run_id"], taken_over=taken_over, final_observation=final, **report)
        detail = ended.get("end_detail", "")
        if stopped == "error" and ended.get("error_message"):
            detail = f"{ended.get('error_type', 'Error')}: {ended['error_message']}"
        return RolloutOutcome(stopped_reason=stopped, end_detail=detail, run_id=ended["run_id"],
                              taken_over=taken_over, final_observation=final, **report)

    def pause_rollout(self) -> Tuple[bool, str]:
        with self._lock:
            if not self._running:
                return False, "no rollout is running"
            self._taken_over = True
        self.runner.pause()
        return True, "paused"

    def resume_rollout(self) -> Tuple[bool, str]:
        with self._lock:
            if not self._running:
                return False, "no rollout is running"
        self.runner.resume()
        return True, "resumed"

    def stop_rollout(self, reason: str) -> None:
        with self._lock:
            if not self._running:
                self._pending_stop = reason or _STOP_CANCELLED
                return
        self.runner.request_stop(reason or _STOP_CANCELLED)

    def claim_arms(self, holder: str) -> Tuple[bool, str]:
        with self._lock:
            station = station_of(self._holder)
        grant = self.lease.acquire(operator_holder(holder, station) if station else holder, OPERATOR_CLAIM_PRIORITY,
                                   60.0)
        if grant.granted:
            self.claims.append(grant)
            self.lease.release(grant.token)  # the claim is the point; the arms are free for the next episode
        return grant.granted, grant.message

    # -- fault injection ------------------------------------------------------------------------------------
    def stop_heartbeat(self) -> None:
        """Stop renewing the rollout's lease: it expires after its duration and the episode ends lease_lost."""
        with self._lock:
            self._heartbeat = False


def _seconds_param(params: Mapping[str, str], name: str) -> Optional[float]:
    if name not in params:
        return None
    try:
        value = float(params[name])
    except ValueError:
        raise ValueError(f"task parameter {name} must be a number, got {params[name]!r}") from None
    return value
