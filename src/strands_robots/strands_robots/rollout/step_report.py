"""The last phases of a rollout step: the legacy hook once its action is sent, its event once its verdict is known.

:func:`classify_verdict` says how much of an action the robot applied; :class:`StepReporter` runs a step's
legacy hook (recording its frame, ``on_frame``, the cancellation check) as soon as its action has gone
(:meth:`StepReporter.hook`), and turns the step and its verdict into the ``RunPolicyStep`` once the verdict is
known (:meth:`StepReporter.report`: recording the event before it is dispatched); :meth:`StepReporter.fail_fast`
tells when the first steps show the policy speaks another robot's keys.

Why the hook runs at the send, not with the verdict: the hook is what may abort the episode (a cancel, a
failed recording, the ``on_frame`` watchdog), and the spec's rule is that nothing is sent after the step whose
hook aborted (``applied_actions`` exceeds ``legacy_steps_used`` by one at most). Over the command stream a
verdict comes back a period or more after its send; a hook run then would abort after the commands sent
meanwhile had reached the arms. The hook needs nothing of the verdict (the recording keeps the verdict in the
step's event), so it runs between the send and the next step, as the peer's does after ``send_action``.

One recording failure is found only with the verdict: writing the step's event. Over the stream later steps
may have been sent by then (their hooks ran); the episode ends at once, nothing more is sent, and the last step
sent is the one reported as ``recording_error`` and left out of ``legacy_steps_used`` (in process that is the
step whose event failed), so the rule holds on this path too. The episode's error names the step whose event
failed; no later event is written.
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
_NO_SUCCESS: tuple = ((), (), False)


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
    """Runs the hook of each step as it is sent and reports the steps in step order.

    :param settings: the run's validated settings (``runner._Settings``: hook, limits, period, keys).
    :param lane: the observer lane of the episode's run.
    :param recorder: the episode's recorder, or None.
    :param state: the episode's tallies, updated per step.
    :param stop: the cooperative stop token the hook checks.
    :param camera_names: the backend's cameras (each event carries their stamps and ages, never pixels).
    """

    __slots__ = ("_lane", "_recorder", "_st", "_stop", "_on_frame", "_hook_present", "_max_onframe", "_period",
                 "_camera_names", "_actuator_keys", "fail_fast_n", "_event_failure")

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
        self._event_failure: "RecordingFailed | None" = None  # the first event that could not be recorded

    def complete(self, sent: Sent, verdict: Any) -> "BaseException | None":
        """:meth:`hook`, then :meth:`report`: a step whose verdict came with its send; the abort, if any."""
        abort = self.hook(sent, verdict)
        failure = self.report(sent, verdict)
        return abort if abort is not None else failure

    def hook(self, sent: Sent, verdict: Any = None) -> "BaseException | None":
        """Run the legacy hook of a step whose action was just sent; return its abort, if any.

        Sets the step's ``hook_outcome``; the step counts in ``legacy_steps_used`` unless the hook aborted.
        ``verdict``: the step's, when already known (the recording takes it from the step's event anyway).
        """
        if not self._hook_present:
            sent.hook_outcome = HOOK_ABSENT
            self._st.legacy_steps_used = sent.index + 1
            return None
        try:
            outcome, abort = self._hook(sent, verdict)
        except BaseException:  # the four that propagate: the step, reported on the way out, says its hook failed
            sent.hook_outcome = HOOK_ERROR
            sent.aborted = True
            raise
        sent.hook_outcome = outcome
        sent.aborted = abort is not None
        return abort

    def report(self, sent: Sent, verdict: Any) -> "RecordingFailed | None":
        """Classify, record and dispatch one step's event (its hook has run); the first event-write failure.

        After a failed event write no later event is written (the recorder has failed); the last step sent
        reports ``recording_error`` unless its hook aborted (module docstring).
        """
        st = self._st
        planned = sent.planned
        resolution, applied, unresolved, reasons, error = classify_verdict(planned.action, verdict)
        self._count(sent.index, resolution, error)
        outcome = sent.hook_outcome or HOOK_ABSENT
        if self._event_failure is not None and self._is_last_sent(sent):
            outcome = HOOK_RECORDING_ERROR
        event = self._event(sent, resolution, applied, unresolved, reasons, error, outcome)
        st.sim_time_s = event.sim_time_s
        st.age_steps_sum += event.observation_age_steps
        st.reported_steps += 1
        failure: "RecordingFailed | None" = None
        if self._recorder is not None and self._event_failure is None:
            event, failure = self._record(sent, event)
        self._lane.dispatch(event)
        if sent.index < self.fail_fast_n and resolution is RESOLUTION_NONE and all(
                r == REASON_UNKNOWN_KEY for r in reasons):
            st.unknown_key_steps += 1
        return failure

    def _is_last_sent(self, sent: Sent) -> bool:
        return sent.index == self._st.applied_actions - 1 and not sent.aborted

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

    def _hook(self, sent: Sent, verdict: Any) -> "tuple[str, BaseException | None]":
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
        watch = self._st.success_watch
        success = watch.step(sent.index, observation) if watch is not None else _NO_SUCCESS
        seq, mono, utc = self._lane.stamp()
        return RunPolicyStep(
            run_id=self._lane.run_id, event_seq=seq, monotonic_ns=mono, utc_ns=utc,
            applied_action_index=sent.index, legacy_step_index=sent.index, action_resolution=resolution,
            applied_action_keys=applied, unresolved_action_keys=unresolved, unresolved_action_reasons=reasons,
            action_error=error, observation_is_chunk_reused=planned.is_chunk_reused,
            observation_age_steps=planned.age_steps, legacy_hook_outcome=outcome, chunk_index=planned.chunk_index,
            elapsed_s=sent.elapsed_s, sim_time_s=float(observation.get("sim_time_s", 0.0)),
            deadline_missed=sent.deadline_missed, camera_names=cams[0], camera_stamp_ns=cams[1],
            camera_age_steps=cams[2], success_input_keys=success[0], success_input_values=success[1],
            success_holds=success[2], observation=observation, action=planned.action)

    def _record(self, sent: Sent, event: RunPolicyStep) -> "tuple[RunPolicyStep, RecordingFailed | None]":
        """Record the event before it is dispatched, so every event dispatched reaches the recording.

        The aborting step's too, and one whose observer raises Ctrl-C. A failing write (the disk is full) ends the
        episode: the last step sent is its ``recording_error`` step (this one, when no step was sent after it),
        and the event says so before anyone sees it.
        """
        try:
            write_event(self._recorder, event)
        except RecordingFailed as failed:
            st = self._st
            exc = RecordingFailed(failed.error, f"{failed} (the event of step {sent.index})")
            self._event_failure = exc
            # The last step sent is the one whose use the failure ends: the steps before it ran their hooks.
            st.legacy_steps_used = min(st.legacy_steps_used, st.applied_actions - 1)
            if self._is_last_sent(sent):
                event = dataclasses.replace(event, legacy_hook_outcome=HOOK_RECORDING_ERROR)
                try:
                    write_event(self._recorder, event)  # attempted; the recorder has failed
                except RecordingFailed:
                    pass
            return event, exc
        return event, None
