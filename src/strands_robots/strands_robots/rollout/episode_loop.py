"""The steps of one episode, phase by phase (``runner.py`` opens and closes the episode around them).

One step of :meth:`EpisodeLoop.run`::

    pace      (_await_slot)  complete the steps whose verdicts came; hold while the command window is full or a
                             verdict is overdue; wait for the deadline; after a takeover restart the chunks;
                             hand over the verdicts that came during the wait (hold again if the window filled)
    observe + infer (_plan)  the chunk pipeline's next action (prefetching the next chunk); a failure ends the
                             episode as an error, nothing sent
    act       (_act)         submit to the command window (the verdict comes later), or send_action; then the
                             step's legacy hook (record its frame, on_frame, the cancellation check)
    complete  (StepReporter) once the verdict is known: classify, record and dispatch RunPolicyStep
                             (step_report.py)
    after     (_after_step)  advance; safety stop? driver fault? stop_when? budget?

With a backend that offers ``command_window()`` (the command stream), a step's command is sent and the loop
goes on; its event is dispatched when its verdict arrives, in step order (:mod:`strands_robots.rollout.pipeline`),
and every step sent is reported before the Ended, on every exit (:meth:`EpisodeLoop._drain`). Otherwise
``send_action`` answers at once and the step completes there.

The hook runs right after the send, before anything else is sent: a hook that aborts (a cancel, a failed
recording, the on_frame watchdog) ends the episode with nothing sent after its step, so ``applied_actions``
exceeds ``legacy_steps_used`` by one at most (spec/observer-lane.txt), whatever the commands in flight. The
commands sent before it were sent before the abort: their verdicts are awaited and their events reported with
their own hooks' outcomes.

Between the deadline and the send the loop does only what the send needs: it takes the verdicts that came
during the wait (a full window still holds), observes, plans and submits. Completing the steps those verdicts
resolved (the record of the event, the observer event) waits for the top of the next step's pace, after the
command has gone: it took ~40 % of the control thread's work per step, and a verdict usually arrives during the
wait that follows its command. A fail-fast error or an event that cannot be recorded found there ends the
episode before the next command.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from strands_robots.arm.verdict import ActionVerdict
from strands_robots.policies.base import EndEpisode
from strands_robots.rollout.chunks import ChunkPipeline
from strands_robots.rollout.episode_state import EpisodeState, HookAbort, Sent, StepFailed
from strands_robots.rollout.pacing import DeadlinePacer
from strands_robots.rollout.pipeline import InFlight
from strands_robots.rollout.step_report import StepReporter
from strands_robots.simulation.observers import (
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_OK,
    STOPPED_BUDGET,
    STOPPED_CANCELLED,
    STOPPED_PREDICATE,
    STOPPED_SAFETY_STOP,
    CooperativeStop,
    ObserverLane,
)

# While the loop holds (rollout/pipeline.py rule 4), look for verdicts, a stop and a silent driver this often.
HOLD_POLL_S = 0.005


class EpisodeLoop:
    """Runs the steps of one episode on a backend; :meth:`run` returns when the episode has ended.

    :param pause_lock: the runner's takeover lock (the pacer's pause and resume happen under it).
    :param takeover_requested: whether an operator takeover is in force (then a hold never resumes the pacer).
    :param pipelines: every chunk pipeline the episode made is appended (the runner closes them and sums them).
    :param make_pipeline: makes the episode's chunk pipelines (one per takeover), with ChunkPipeline's arguments.
    """

    def __init__(self, backend: Any, s: Any, lane: ObserverLane, pacer: DeadlinePacer, recorder: Any,
                 st: EpisodeState, pipelines: list, *, stop: Any, clock_ns: Callable[[], int], pause_lock: Any,
                 takeover_requested: Callable[[], bool],
                 make_pipeline: "Callable[..., ChunkPipeline]" = ChunkPipeline) -> None:
        self._backend = backend
        self._s = s
        self._pacer = pacer
        self._recorder = recorder
        self._st = st
        self._pipelines = pipelines
        self._stop = stop
        self._clock = clock_ns
        self._pause_lock = pause_lock
        self._takeover_requested = takeover_requested
        self._make_pipeline = make_pipeline
        fault_detail = getattr(backend, "fault_detail", None)
        self._fault_detail = fault_detail if callable(fault_detail) else None
        self._period = s.period_s
        self._period_ns = max(1, int(round(s.period_s * 1e9)))
        self._reporter = StepReporter(s, lane, recorder, st, stop, tuple(getattr(backend, "camera_names", None) or ()))
        window_factory = getattr(backend, "command_window", None)
        # One window per episode; None: this backend answers send_action at once.
        self._window = window_factory() if callable(window_factory) else None
        self._inflight: "InFlight | None" = None
        if self._window is not None:
            w = self._window
            self._inflight = InFlight(w.max_outstanding, w.overdue_ns, w.verdict_bound_ns)
        self._pipeline: "ChunkPipeline | None" = None

    def run(self) -> None:
        """Run the steps until the episode ends; the steps still in flight are reported on every exit."""
        inflight = self._inflight
        try:
            self._steps()
        except BaseException as exc:
            if inflight is not None and len(inflight):
                self._drain(exc)
            raise
        if inflight is not None and len(inflight):
            self._drain(None)

    # -- one step, phase by phase -------------------------------------------------------------------------------
    def _steps(self) -> None:
        self._pipeline = self._new_pipeline()
        index = 0
        last_start = 0
        while True:
            slot = self._await_slot()
            if slot is None:
                return
            deadline_missed, dropped = slot
            step_start = self._clock()
            if index > 0:
                # The interval since the previous step's start (the period, or more after dropped deadlines):
                # what the adaptive prefetch point needs, not this step's own work time.
                self._pipeline.note_step_interval(self._period * (1 + dropped) if not self._s.fast_mode
                                                  else (step_start - last_start) / 1e9)
            last_start = step_start
            if self._driver_fault():
                return
            self._act(Sent(index, self._plan(), time.monotonic_ns(), deadline_missed))
            index += 1
            if self._after_step(index):
                return

    def _await_slot(self) -> "tuple[bool, int] | None":
        """Pace: wait for this step's deadline with room to send; None when the episode ended meanwhile.

        :returns: whether a deadline before this step was missed, and the periods dropped before it.
        """
        pacer, inflight = self._pacer, self._inflight
        held = 0  # periods the loop held before this step (rollout/pipeline.py rule 4)
        late = False  # a deadline before this step was missed (the wait came back to a full window)
        while True:
            if inflight is not None:
                self._complete_ready()
                if inflight.hold_reason(self._clock()):
                    periods = self._hold()
                    if periods < 0:
                        return None
                    held += periods
            if not pacer.wait():
                self._st.finish(STOPPED_CANCELLED, OUTCOME_CANCELLED, self._stop.reason or "cancelled")
                return None
            if pacer.take_resumed():  # after a takeover: continue from the arm's current state
                self._pipeline.close()  # first: no inference of the old chunk runs beside resume()
                self._s.policy.resume(self._backend.observe())
                self._pipeline = self._new_pipeline()
            dropped = pacer.last_dropped
            if held > dropped:  # held periods are missed deadlines, reported (those the pacer did not count)
                pacer.missed_deadlines += held - dropped
                dropped = held
            held = 0
            if inflight is not None:
                # The verdicts that came during the wait, for the hold check only: their steps are reported
                # (recorded, events dispatched, hook run) after this step's command has gone, at the top of
                # the next _await_slot, not between the deadline and the send (module docstring).
                self._take_verdicts(0.0)
                if inflight.hold_reason(self._clock()):
                    late = late or dropped > 0
                    continue  # the window filled during the wait: hold before sending
            return dropped > 0 or late, dropped

    def _plan(self) -> Any:
        """Observe and infer: the chunk pipeline's next action; a failure ends the episode (nothing was sent)."""
        try:
            return self._pipeline.next_action(self._backend.observe)
        except (CooperativeStop, EndEpisode, HookAbort):
            raise
        except Exception as exc:  # a stale or failed observation (or a failed inference) ends the episode
            raise StepFailed(exc) from exc

    def _act(self, sent: Sent) -> None:
        """Send the step's action (into the command window, or by ``send_action``), then run its legacy hook.

        An abort of the hook is raised after the step is registered, so nothing more is sent and the step is
        reported with the steps still in flight.
        """
        action = sent.planned.action
        reporter = self._reporter
        if self._inflight is not None:
            try:
                ticket = self._window.submit(action, sent.planned.lookahead)
            except Exception as exc:  # a coarse error: nothing known about what reached the arms
                ticket = ActionVerdict.coarse(f"{type(exc).__name__}: {exc}")
            sent.elapsed_s = self._pacer.elapsed_s
            self._st.applied_actions = sent.index + 1
            self._inflight.add(ticket, sent, self._clock())
            abort = reporter.hook(sent)
            if abort is not None:
                raise abort
            return
        try:
            verdict = self._backend.send_action(action)
        except Exception as exc:  # a coarse error: nothing known about what reached the arms
            verdict = ActionVerdict.coarse(f"{type(exc).__name__}: {exc}")
        sent.elapsed_s = self._pacer.elapsed_s
        self._st.applied_actions = sent.index + 1
        abort = reporter.hook(sent, verdict)
        failure = reporter.report(sent, verdict)
        if abort is not None:
            raise abort
        self._completed(sent, failure)

    def _after_step(self, steps_done: int) -> bool:
        """Advance the robot and check what ends the episode after a step; True when it ended."""
        st = self._st
        self._backend.advance(self._period)
        detail = self._backend.safety_stop_detail()
        if detail:
            st.finish(STOPPED_SAFETY_STOP, OUTCOME_ERROR, detail)
            st.error_type = "SafetyStop"
            st.error_message = detail
            return True
        if self._driver_fault():
            return True
        stop_when = self._s.stop_when
        if stop_when is not None and stop_when(self._backend.observe()):
            st.finish(STOPPED_PREDICATE, OUTCOME_OK, "stop_when returned true")
            return True
        if steps_done >= self._s.total_steps:
            st.finish(STOPPED_BUDGET, OUTCOME_OK, f"{self._s.total_steps} steps")
            return True
        return False

    # -- completing steps -------------------------------------------------------------------------------------
    def _complete(self, sent: Sent, verdict: Any) -> None:
        """Report one step whose verdict came (its hook ran at the send); raise what ends the episode."""
        self._completed(sent, self._reporter.report(sent, verdict))

    def _completed(self, sent: Sent, failure: "BaseException | None") -> None:
        """Raise the event-write failure or the fail-fast error a reported step ends the episode with."""
        if failure is not None:
            raise failure
        error = self._reporter.fail_fast(sent)
        if error is not None:
            raise error

    def _take_verdicts(self, timeout_s: float) -> None:
        """Hand the verdicts arrived (waiting at most ``timeout_s`` for one) to the steps in flight."""
        for ticket, verdict in self._window.collect(timeout_s):
            self._inflight.resolve(ticket, verdict)
        if self._inflight.open_count:
            self._inflight.expire(self._clock(), self._window.describe_silence())

    def _complete_ready(self, timeout_s: float = 0.0) -> None:
        """Complete the steps whose verdicts (and every earlier step's) are known; raise what ends the run."""
        self._take_verdicts(timeout_s)
        while True:
            ready = self._inflight.pop_one()
            if ready is None:
                return
            self._complete(ready.step, ready.verdict)

    def _hold(self) -> int:
        """Rule 4 of the pipeline: send nothing until the driver answers.

        :returns: the control periods held (missed deadlines), or -1 when the episode ended.
        """
        pacer, clock = self._pacer, self._clock
        with self._pause_lock:
            mine = not pacer.paused
            if mine:
                pacer.pause()  # the budget clock stands still, as in a takeover
        start = clock()
        poll = min(self._period, HOLD_POLL_S)
        try:
            while True:
                self._complete_ready(poll)
                if not self._inflight.hold_reason(clock()):
                    return 0 if self._s.fast_mode else int((clock() - start) // self._period_ns)
                if self._stop.requested:
                    self._st.finish(STOPPED_CANCELLED, OUTCOME_CANCELLED, self._stop.reason or "cancelled")
                    return -1
                if self._driver_fault():
                    return -1
        finally:
            with self._pause_lock:
                if mine and pacer.paused and not self._takeover_requested():
                    pacer.resume()
                    pacer.take_resumed()  # not a takeover: the policy goes on with its chunk

    def _drain(self, ending: "BaseException | None") -> None:
        """Report every step still in flight, in order, before the Ended (module pipeline, all exits).

        After a normal end, an Exception or a cooperative stop the verdicts are awaited (at most the verdict
        bound, or until the driver is found silent); after KeyboardInterrupt & co. nothing is awaited: what has
        arrived is used, the rest is unknown. Each step reports its own hook's outcome (the hooks ran at the
        sends); an event that cannot be recorded ends an episode that ended well as a recording error.
        """
        inflight, st = self._inflight, self._st
        # The four that propagate (Ctrl-C & co.) wait for nothing; a cooperative stop is a normal end.
        interrupted = ending is not None and not isinstance(ending, (Exception, CooperativeStop))
        late_failure: "BaseException | None" = None
        poll = min(self._period, HOLD_POLL_S)
        while len(inflight):
            if interrupted:
                self._take_verdicts(0.0)
                inflight.abandon(f"the rollout was interrupted by {type(ending).__name__}")
            else:
                self._take_verdicts(poll if inflight.open_count and not inflight.head_resolved else 0.0)
                if inflight.open_count and self._fault_detail is not None:
                    detail = self._fault_detail()
                    if detail:
                        inflight.abandon(detail)
                        if ending is None and st.outcome == OUTCOME_OK:
                            st.driver_fault(detail)
            while True:
                ready = inflight.pop_one()
                if ready is None:
                    break
                failure = self._reporter.report(ready.step, ready.verdict)
                late_failure = late_failure or failure
        if late_failure is not None and ending is None:
            raise late_failure

    # -- helpers --------------------------------------------------------------------------------------------
    def _driver_fault(self) -> bool:
        """End the episode on a non-empty ``fault_detail()`` (the driver is gone or silent); True when ended."""
        return self._fault_detail is not None and self._st.driver_fault(self._fault_detail())

    def _new_pipeline(self) -> ChunkPipeline:
        s = self._s
        p = self._make_pipeline(s.policy, action_horizon=s.action_horizon, async_prefetch=s.async_rtc,
                                inference_timeout_s=s.inference_timeout_s,
                                refresh_every_step=self._recorder is not None, stop=self._stop,
                                period_s=None if s.fast_mode else s.period_s)
        self._pipelines.append(p)
        return p
