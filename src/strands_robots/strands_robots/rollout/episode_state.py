"""One episode's tallies and the internal signals that end it, shared by the runner and its step phases.

Internal to ``strands_robots.rollout``: :class:`EpisodeState` counts what the ``RunPolicyEnded`` reports,
:class:`Sent` is a step whose action went out, and the exceptions carry why an episode ended to the runner's
handlers (``runner.py``), which turn them into the Ended's outcome.
"""

from __future__ import annotations

import statistics
from typing import Any

from strands_robots.rollout.chunks import ChunkTelemetry, percentile_99
from strands_robots.simulation.observers import OUTCOME_ERROR, STOPPED_ERROR

# RunPolicyEnded.error_type when the backend reports a driver fault (gone, silent, stale observations).
DRIVER_FAULT = "DriverFault"


class HookAbort(Exception):
    """The legacy hook aborted the episode (recording failure, on_frame watchdog)."""

    def __init__(self, error: BaseException, message: str) -> None:
        super().__init__(message)
        self.error = error


class RecordingFailed(HookAbort):
    """The recorder failed outside the hook (writing an event, finishing the file)."""


class StepFailed(Exception):
    """Observing or inferring failed before the step's action was sent (nothing was sent)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class SetupFailed(Exception):
    """The episode could not start (reset, recorder, pacer): no lifecycle was opened for it."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def write_event(recorder: Any, event: Any) -> None:
    """Record an event (the recorder encodes it); its failure is a recording error."""
    try:
        recorder.write_event(event)
    except Exception as exc:
        raise RecordingFailed(exc, f"recording failed writing {type(event).__name__}: "
                                   f"{type(exc).__name__}: {exc}") from exc


class Sent:
    """A step whose action went out: what its event needs once its verdict is known.

    ``hook_outcome`` / ``aborted``: what its legacy hook did, run right after the send ("" until it ran).
    """

    __slots__ = ("index", "planned", "mono_ns", "deadline_missed", "elapsed_s", "hook_outcome", "aborted")

    def __init__(self, index: int, planned: Any, mono_ns: int, deadline_missed: bool) -> None:
        self.index = index
        self.planned = planned
        self.mono_ns = mono_ns
        self.deadline_missed = deadline_missed
        self.elapsed_s = 0.0
        self.hook_outcome = ""
        self.aborted = False


class EpisodeState:
    """The counts and the end of one episode, as ``RunPolicyEnded`` reports them."""

    __slots__ = ("applied_actions", "legacy_steps_used", "action_errors", "full", "partial", "none", "unknown",
                 "onframe_failures", "unknown_key_steps", "recorded_frames", "sim_time_s", "stopped_reason",
                 "outcome", "end_detail", "error_type", "error_message", "age_steps_sum", "reported_steps",
                 "success_watch")

    def __init__(self) -> None:
        self.applied_actions = 0
        self.legacy_steps_used = 0
        self.action_errors: list = []
        self.full = self.partial = self.none = self.unknown = 0
        self.onframe_failures = 0
        self.unknown_key_steps = 0
        self.recorded_frames = 0
        self.sim_time_s = 0.0
        self.stopped_reason = ""
        self.outcome = ""
        self.end_detail = ""
        self.error_type = ""
        self.error_message = ""
        self.age_steps_sum = 0  # the reported steps' observation ages (control steps), for their mean
        self.reported_steps = 0
        self.success_watch: Any = None  # the task's success predicate judged per step (station.success_judgement)

    @property
    def mean_observation_age_steps(self) -> float:
        """The mean age (control steps) of the observations the reported steps' actions were inferred from."""
        return self.age_steps_sum / self.reported_steps if self.reported_steps else 0.0

    def finish(self, reason: str, outcome: str, detail: str = "", error: "BaseException | None" = None) -> None:
        """Set how the episode ended (``error``: its type and text become the Ended's error fields)."""
        self.stopped_reason = reason
        self.outcome = outcome
        self.end_detail = detail
        if error is not None:
            self.error_type = type(error).__name__
            self.error_message = str(error)

    def driver_fault(self, detail: Any) -> bool:
        """End the episode as an error on a non-empty ``fault_detail()`` (the driver is gone or silent)."""
        if not detail:
            return False
        detail = str(detail)
        self.finish(STOPPED_ERROR, OUTCOME_ERROR, detail)
        self.error_type = DRIVER_FAULT
        self.error_message = detail
        return True


def merge_telemetry(pipelines: list) -> ChunkTelemetry:
    """One episode's chunk figures; a takeover restarts the pipeline, so sum counts and combine latencies."""
    parts = []
    for p in pipelines:
        try:
            parts.append(p.telemetry)
        except Exception:
            pass
    if not parts:
        return ChunkTelemetry(0, 0, 0, 0.0, 0.0)
    if len(parts) == 1:
        return parts[0]
    every = [seconds for t in parts for seconds in t.latencies_s]
    if every:  # each call's latency is known: the episode's figures over all of them
        p50, p99 = statistics.median(every), percentile_99(every)
    else:
        inferred = [t.latency_p50_s for t in parts if t.chunks_inferred]
        p50 = statistics.median(inferred) if inferred else 0.0
        p99 = max(t.latency_p99_s for t in parts)
    return ChunkTelemetry(
        chunks_inferred=sum(t.chunks_inferred for t in parts),
        prefetch_hits=sum(t.prefetch_hits for t in parts),
        prefetch_blocks=sum(t.prefetch_blocks for t in parts),
        latency_p50_s=p50,
        latency_max_s=max(t.latency_max_s for t in parts),
        latency_p99_s=p99,
        latencies_s=tuple(every),
    )
