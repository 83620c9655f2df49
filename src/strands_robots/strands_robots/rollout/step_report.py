"""The last phase of a rollout step, once its verdict is known: classify, legacy hook, record, dispatch.

:func:`classify_verdict` says how much of an action the robot applied; :class:`StepReporter` turns one step and
its verdict into the ``RunPolicyStep`` (running the legacy hook first, recording the event before it is
dispatched) and tells when the first steps show the policy speaks another robot's keys (:meth:`fail_fast`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from strands_robots.arm.verdict import REASON_UNKNOWN_KEY, ActionVerdict
from strands_robots.cameras.frames import event_fields
from strands_robots.rollout.episode_state import EpisodeState, HookAbort, RecordingFailed, Sent, write_event
from strands_robots.simulation.observers import (
    HOOK_ABSENT,
    HOOK_CANCELLED,
    HOOK_ERROR,
    HOOK_OK,
    HOOK_RECORDING_ERROR,
    RESOLUTION_FULL,
    RESOLUTION_NONE,
    RESOLUTION_PARTIAL,
    RESOLUTION_UNKNOWN,
    CooperativeStop,
    ObserverLane,
    RunPolicyStep,
)

# Stop with an error when each of the first min(FAIL_FAST_STEPS, budget) steps applied nothing because every
# emitted key was unknown: the policy speaks another robot's key names.
FAIL_FAST_STEPS = 3

_NO_CAMERAS: tuple = ((), (), ())


class UnknownActionKeys(ValueError):
    """Fail fast: the first steps applied nothing because every emitted key was unknown to the robot."""


def classify_verdict(action: Mapping[str, Any], verdict: Any) -> tuple:
    """``(resolution, applied, unresolved, reasons, error)`` of one ``send_action``.

    ``partial`` and ``none`` need a complete breakdown: no duplicates, applied and unresolved disjoint, their
    union equal to the emitted keys, one reason per unresolved key. Anything else (a coarse error, a malformed
    or incomplete verdict) is ``unknown`` with empty key tuples and the error text.
    """
    if not isinstance(verdict, ActionVerdict):
        return RESOLUTION_UNKNOWN, (), (), (), f"backend returned {type(verdict).__name__}, not an ActionVerdict"
    if verdict.error:
        return RESOLUTION_UNKNOWN, (), (), (), verdict.error
    applied = verdict.applied_keys
    unresolved = verdict.unresolved_keys
    reasons = verdict.unresolved_reasons
    n = len(action)
    if len(applied) + len(unresolved) == n and len(reasons) == len(unresolved):
        keys = set(applied)
        keys.update(unresolved)
        if len(keys) == n and action.keys() == keys:
            if not unresolved and n:
                return RESOLUTION_FULL, tuple(applied), (), (), ""
            if applied:
                return RESOLUTION_PARTIAL, tuple(applied), tuple(unresolved), tuple(reasons), ""
            return RESOLUTION_NONE, (), tuple(unresolved), tuple(reasons), ""
    return (RESOLUTION_UNKNOWN, (), (), (),
            f"incomplete per-key verdict: applied {list(applied)}, unresolved {list(unresolved)} "
            f"({len(reasons)} reasons) for emitted {list(action.keys())}")


class StepReporter:
    """Completes the steps of one episode, in step order.

    :param settings: the run's validated settings (``runner._Settings``: hook, limits, period, keys).
    :param lane: the observer lane of the episode's run.
    :param recorder: the episode's recorder, or None.
    :param state: the episode's tallies, updated per step.
    :param stop: the cooperative stop token the hook checks.
    :param camera_names: the backend's cameras (each event carries their stamps and ages, never pixels).
    """

    __slots__ = ("_lane", "_recorder", "_st", "_stop", "_on_frame", "_hook_present", "_max_onframe", "_period",
                 "_camera_names", "_actuator_keys", "fail_fast_n")

    def __init__(self, settings: Any, lane: ObserverLane, recorder: Any, state: EpisodeState, stop: Any,
                 camera_names: tuple) -> None:
        self._lane = lane
        self._recorder = recorder
        self._st = state
        self._stop = stop
        self._on_frame = settings.on_frame
        self._hook_present = settings.hook_present
        self._max_onframe = settings.max_onframe_failures
        self._period = settings.period_s
        self._camera_names = camera_names
        self._actuator_keys = settings.actuator_keys
        self.fail_fast_n = min(FAIL_FAST_STEPS, settings.total_steps)

    def complete(self, sent: Sent, verdict: Any, forced_outcome: str = "",
                 check_stop: bool = True) -> "BaseException | None":
        """Classify, run the legacy hook, record and dispatch one step's event; return the hook's abort, if any.

        ``forced_outcome``: the hook is not run (an earlier step's hook aborted the episode) and the step
        reports that outcome. ``check_stop``: False while draining, when the episode has already ended.
        """
        st = self._st
        planned = sent.planned
        resolution, applied, unresolved, reasons, error = classify_verdict(planned.action, verdict)
        self._count(sent.index, resolution, error)
        abort: "BaseException | None" = None
        if forced_outcome:
            outcome = forced_outcome
        elif self._hook_present:
            outcome, abort = self._hook(sent, verdict, check_stop)
        else:
            outcome = HOOK_ABSENT
            st.legacy_steps_used = sent.index + 1
        event = self._event(sent, resolution, applied, unresolved, reasons, error, outcome)
        st.sim_time_s = event.sim_time_s
        if self._recorder is not None:
            event, abort = self._record(event, abort, forced_outcome)
        self._lane.dispatch(event)
        if sent.index < self.fail_fast_n and resolution is RESOLUTION_NONE and all(
                r == REASON_UNKNOWN_KEY for r in reasons):
            st.unknown_key_steps += 1
        return abort

    def fail_fast(self, sent: Sent) -> "UnknownActionKeys | None":
        """Return the error that ends the episode when each of the first steps emitted only unknown keys."""
        n = self.fail_fast_n
        if sent.index + 1 == n and self._st.unknown_key_steps == n:
            return UnknownActionKeys(
                f"the policy's keys match no actuator: the first {n} steps applied nothing "
                f"(emitted {', '.join(map(str, sent.planned.action.keys()))}); valid keys: "
                f"{', '.join(self._actuator_keys)}")
        return None

    def _count(self, index: int, resolution: str, error: str) -> None:
        st = self._st
        if resolution is RESOLUTION_FULL:
            st.full += 1
        elif resolution is RESOLUTION_PARTIAL:
            st.partial += 1
        elif resolution is RESOLUTION_NONE:
            st.none += 1
        else:
            st.unknown += 1
            st.action_errors.append(f"step {index}: {error}")

    def _hook(self, sent: Sent, verdict: Any, check_stop: bool) -> "tuple[str, BaseException | None]":
        """Run the legacy hook (recording, on_frame, cancellation check): return its outcome and abort."""
        st = self._st
        index = sent.index
        observation, action = sent.planned.observation, sent.planned.action
        outcome = HOOK_OK
        abort: "BaseException | None" = None
        try:
            if self._recorder is not None:
                try:
                    self._recorder.write_step(index, self._lane.utc_of(sent.mono_ns), observation, action, verdict)
                except Exception as exc:  # never silent: this step's frame is lost, the episode ends
                    raise RecordingFailed(exc, f"recording failed at step {index}: "
                                               f"{type(exc).__name__}: {exc}") from exc
                st.recorded_frames += 1
            if self._on_frame is not None:
                try:
                    self._on_frame(index, observation, action)
                except Exception as exc:
                    st.onframe_failures += 1
                    outcome = HOOK_ERROR
                    if st.onframe_failures > self._max_onframe:
                        raise HookAbort(exc, f"on_frame failed {st.onframe_failures} times "
                                             f"(max_onframe_failures={self._max_onframe}); last: "
                                             f"{type(exc).__name__}: {exc}") from exc
            if check_stop:
                self._stop.check()
        except CooperativeStop as exc:
            outcome, abort = HOOK_CANCELLED, exc
        except RecordingFailed as exc:
            outcome, abort = HOOK_RECORDING_ERROR, exc
        except HookAbort as exc:
            outcome, abort = HOOK_ERROR, exc
        if abort is None:
            st.legacy_steps_used = index + 1
        return outcome, abort

    def _event(self, sent: Sent, resolution: str, applied: tuple, unresolved: tuple, reasons: tuple, error: str,
               outcome: str) -> RunPolicyStep:
        planned = sent.planned
        observation = planned.observation
        cams = (event_fields(observation, self._camera_names, planned.age_steps, self._period)
                if self._camera_names else _NO_CAMERAS)
        seq, mono, utc = self._lane.stamp()
        return RunPolicyStep(
            run_id=self._lane.run_id, event_seq=seq, monotonic_ns=mono, utc_ns=utc,
            applied_action_index=sent.index, legacy_step_index=sent.index, action_resolution=resolution,
            applied_action_keys=applied, unresolved_action_keys=unresolved, unresolved_action_reasons=reasons,
            action_error=error, observation_is_chunk_reused=planned.is_chunk_reused,
            observation_age_steps=planned.age_steps, legacy_hook_outcome=outcome, chunk_index=planned.chunk_index,
            elapsed_s=sent.elapsed_s, sim_time_s=float(observation.get("sim_time_s", 0.0)),
            deadline_missed=sent.deadline_missed, camera_names=cams[0], camera_stamp_ns=cams[1],
            camera_age_steps=cams[2], observation=observation, action=planned.action)

    def _record(self, event: RunPolicyStep, abort: "BaseException | None",
                forced_outcome: str) -> "tuple[RunPolicyStep, BaseException | None]":
        """Record the event before it is dispatched, so every event dispatched reaches the recording.

        The aborting step's too, and one whose observer raises Ctrl-C. A failing write (the disk is full) is this
        step's recording_error: the event says so before anyone sees it.
        """
        try:
            write_event(self._recorder, event)
        except RecordingFailed as exc:
            if abort is None and not forced_outcome:
                abort = exc
                self._st.legacy_steps_used = event.applied_action_index
                event = dataclasses.replace(event, legacy_hook_outcome=HOOK_RECORDING_ERROR)
                try:
                    write_event(self._recorder, event)  # attempted; the recorder has failed
                except RecordingFailed:
                    pass
        return event, abort
