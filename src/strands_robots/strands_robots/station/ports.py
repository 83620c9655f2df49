"""The episode procedure's ports (the robot side, the operator) and what a rollout reports back through them.

:class:`~strands_robots.station.episodes.JobRunner` drives a job over a :class:`RobotPort` (the station node's
over ROS, ``station.inprocess``'s on a Simulation) and an :class:`OperatorPort` (a person through the console,
or the scripted operator); a rollout's end comes back as a :class:`RolloutOutcome`, and :func:`fault_of` says
whose fault an error was.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Protocol, Tuple

from strands_robots.station.job import EpisodePlan, JobSpec
from strands_robots.station.operator import OperatorConsole, PendingEpisode

__all__ = ["RolloutOutcome", "ended_report", "InfrastructureFault", "INFRASTRUCTURE_ERRORS", "FAULT_INFRASTRUCTURE",
           "FAULT_POLICY", "fault_of", "RobotPort", "OperatorPort"]


@dataclass(frozen=True)
class RolloutOutcome:
    """How one rollout ended, as the robot side reports it.

    :param stopped_reason: the rollout loop's (budget, predicate, policy_completed, safety_stop, cancelled,
        error).
    :param end_condition: the station end condition when the robot side knows it (``lease_lost`` /
        ``authority_lost`` from its lease watch); empty to derive it from ``stopped_reason``.
    :param end_detail: the rollout's detail (every tripped check for a safety stop, the lease refusal, the
        policy's EndEpisode message, the error).
    :param taken_over: the robot side saw a takeover (the console's record counts too).
    :param final_observation: the arms' state when the rollout ended (for the operator's judgement).
    :param policy_lost: the policy session went away mid-episode (the relay provider): an infrastructure fault
        whose task runs again once the policy is back.
    :param error_type: the rollout's ``error_type`` when it ended in an error (``DriverFault``,
        ``InferenceTimeout``, the policy's exception class, ...).
    :param infrastructure: why the station's own infrastructure ended the rollout, when only the robot side knows
        (the rollout node died under the goal); empty otherwise.
    :param recording_sha256: SHA-256 (hex) of the rollout's MCAP recording as the station holds it; empty when
        not recorded.
    :param success_ever: the task's success predicate held on some step's observation (the rollout judged it).
    :param end_inputs: the predicate's inputs on the rollout's final observation (the end judgement reads them).
    :param inference_latency_p50_ms: what the score should be read against (:func:`ended_report`); None when
        no rollout ran.
    """

    stopped_reason: str
    end_condition: str = ""
    end_detail: str = ""
    run_id: str = ""
    taken_over: bool = False
    final_observation: Mapping[str, Any] = field(default_factory=dict)
    policy_lost: bool = False
    error_type: str = ""
    infrastructure: str = ""
    recording_sha256: str = ""
    success_ever: bool = False
    end_inputs: Mapping[str, float] = field(default_factory=dict)
    inference_latency_p50_ms: Optional[float] = None
    inference_latency_p99_ms: Optional[float] = None
    mean_observation_age_steps: Optional[float] = None
    missed_deadlines: Optional[int] = None


def ended_report(ended: Any) -> dict:
    """Return what a rollout's Ended event tells the station beyond how it ended, as :class:`RolloutOutcome` fields.

    The predicate's per-step verdict and final inputs, and the figures the score should be read against:
    inference latency p50/p99 (ms; none when no policy call was timed), mean observation age (steps; none when
    no step ran) and missed deadlines.

    :param ended: the Ended event as a mapping (``run_policy``'s result) or a ``RunPolicyEnded`` message.
    """
    def get(name: str, default: Any) -> Any:
        value = ended.get(name, default) if isinstance(ended, Mapping) else getattr(ended, name, default)
        return default if value is None else value

    keys, values = list(get("end_input_keys", ())), list(get("end_input_values", ()))
    timed = int(get("chunks_inferred", 0)) > 0 or float(get("inference_latency_max_s", 0.0)) > 0.0
    stepped = int(get("applied_actions", 0)) > 0
    return {
        "success_ever": bool(get("success_ever", False)),
        "end_inputs": {str(k): float(v) for k, v in zip(keys, values)},
        "inference_latency_p50_ms": float(get("inference_latency_p50_s", 0.0)) * 1e3 if timed else None,
        "inference_latency_p99_ms": float(get("inference_latency_p99_s", 0.0)) * 1e3 if timed else None,
        "mean_observation_age_steps": float(get("mean_observation_age_steps", 0.0)) if stepped else None,
        "missed_deadlines": int(get("missed_deadlines", 0)),
    }


class InfrastructureFault(RuntimeError):
    """Raised by a robot port when the station's own infrastructure fails a call (the driver is not there).

    The episode becomes an ``infrastructure_fault`` one and its task runs again (bounded).
    """


#: ``error_type`` values of a rollout error that is the station's, not the policy's: the arm driver gone or silent
#: (``rollout/runner.py`` DRIVER_FAULT, ``driver_link/client.py`` DriverSilent), the policy silent past its
#: inference deadline (``rollout/chunks.py``), a recording that could not be written, a camera whose frames stopped
#: or went stale (``cameras/frames.py`` CameraStale: never given to a policy) or that could not lay out the task's
#: scene (``nodes/rollout/camera_frames.py`` CameraSceneError).
INFRASTRUCTURE_ERRORS = frozenset({"DriverFault", "DriverSilent", "InferenceTimeout", "RecordingError", "CameraStale",
                                   "CameraSceneError"})
FAULT_INFRASTRUCTURE = "infrastructure"
FAULT_POLICY = "policy"


def fault_of(outcome: RolloutOutcome) -> str:
    """Say whose fault an outcome with no end condition of its own is.

    :returns: ``"infrastructure"`` (the robot side says so, a lost policy session, or an error type in
        :data:`INFRASTRUCTURE_ERRORS`); ``"policy"`` (any other error of a rollout that ran: the policy raised
        or sent what no actuator takes); ``""`` otherwise (no rollout ran: the goal was refused).
    """
    if outcome.infrastructure or outcome.policy_lost:
        return FAULT_INFRASTRUCTURE
    if outcome.stopped_reason != "error":
        return ""
    if outcome.error_type in INFRASTRUCTURE_ERRORS:
        return FAULT_INFRASTRUCTURE
    return FAULT_POLICY if outcome.run_id else ""


class RobotPort(Protocol):
    """The station's robot side; the station node implements it over ROS, ``inprocess`` on a Simulation.

    A port that runs each episode of a comparison job with the policy of its slot (``EpisodePlan.compare_slot``)
    says so with a true ``serves_slots`` attribute; a comparison job on any other port FAILs before anything moves.
    """

    def wait_for_policy(self, spec: JobSpec, cancelled: threading.Event) -> Tuple[bool, str]:
        """Block until the job's policy can run (a relay session connected) or ``cancelled`` is set.

        Called for one job while another job runs, too (a queued job's last look at its attach deadline,
        ``station.policy_wait``): what it learns is kept per job.

        :returns: ``(ready, detail)``.
        """

    def acquire_lease(self, holder: str, priority: int, duration_s: float) -> Tuple[bool, str]:
        """Claim the arms for the rollout (the robot side renews it while the rollout runs)."""

    def release_lease(self, stop_reason: str = "") -> None:
        """Give the arms up after the rollout; ``stop_reason`` when the job was cancelled (real arms then stop)."""

    def move_to_start_pose(self, plan: EpisodePlan) -> Tuple[bool, str]:
        """Ready the arms and move them to the start pose; ``(reached, detail)``. Never clears a safety stop."""

    def safety_stop_detail(self) -> str:
        """Return every tripped check of the safety stop in force (empty when none is)."""

    def clear_safety_stop(self, operator_name: str) -> Tuple[bool, str]:
        """Relay an operator's clear to the driver (``reset_safety`` with the station's lease, naming them)."""

    def run_rollout(self, plan: EpisodePlan, progress: Callable[[float], None]) -> RolloutOutcome:
        """Run the rollout of ``plan``, calling ``progress(rollout_time_s)`` after each step."""

    def pause_rollout(self) -> Tuple[bool, str]:
        """Takeover: the loop holds, its budget clock stands still."""

    def resume_rollout(self) -> Tuple[bool, str]:
        """End of takeover: the policy's ``resume()``, control from the current state."""

    def stop_rollout(self, reason: str) -> None:
        """Stop the episode's rollout cooperatively (job cancelled, discarded during a takeover).

        Also when it has not started yet: it then ends at once. A stop never carries over to the next episode
        (the next :meth:`acquire_lease` starts a new one).
        """

    def claim_arms(self, holder: str) -> Tuple[bool, str]:
        """Let an operator take the arms with a higher-priority lease (the rollout ends ``authority_lost``)."""

    # Optional: ``preflight(spec, plan) -> Optional[PreflightAnswer]`` (``station.preflight``), called once the
    # policy is ready and before any lease, with the plan of the job's next episode: send the policy one observation of
    # the arms as they stand and the cameras the plan's task asks for, and return its answer (never applied);
    # None when the policy is not one that is preflown (the station's own providers). A comparison's port asks
    # every slot and returns a tuple of answers, each naming its ``slot``.
    # Optional: ``attached_slot_specs(spec) -> Mapping[str, Optional[PolicySpec]]``: a comparison's declared spec of
    # each slot (read once, after ``wait_for_policy``); the compatibility gate checks every slot's and names it.


class OperatorPort(Protocol):
    """The person (or :class:`~strands_robots.station.scripted_operator.ScriptedOperator`) at the station.

    Each hook may act through the console; a human operator's actions arrive through services instead.
    """

    def episode_started(self, plan: EpisodePlan, console: OperatorConsole) -> None:
        """Prepare for an episode (before the lease); raise ValueError to refuse the task's operator settings."""

    def rollout_progress(self, plan: EpisodePlan, rollout_time_s: float, console: OperatorConsole) -> None:
        """Watch the rollout after each step (called on the rollout's thread: return quickly)."""

    def rollout_ended(self, pending: PendingEpisode, final_observation: Mapping[str, Any],
                      console: OperatorConsole) -> None:
        """Judge the finished rollout: its sheet is awaited."""

    # Optional: ``safety_stop_waiting(plan, detail, console)``, called when the next episode waits on a safety
    # stop (the scripted operator clears it there through ``console.clear_safety_stop``; a person uses the
    # station's clear_safety_stop service). Only an operator's clear lets the episode go on.
