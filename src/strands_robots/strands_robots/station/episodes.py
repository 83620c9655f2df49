"""The episode procedure: one job driven to a terminal state over injected ports (no ROS here).

Per episode (DESIGN.md §9; the steps of one: :mod:`~strands_robots.station.episode_steps`)::

    next id (ep_0000, ep_0001, ... in execution order; persisted as running before anything moves)
    acquire the lease          held by another -> wait (station.arms, bounded), then FAILED; never an episode
    a safety stop in force     wait until an operator clears it (station.safety_gate); the station never does
    move to the start pose     not reached -> start_pose_unreached, no rollout
    rollout                    the operator may take over / resume / claim the arms meanwhile
    release the lease
    score sheet                the operator scores it, keeps it unscored, or discards a taken-over one
    next

How a rollout's outcome becomes the episode's result (its end condition, ``end_detail``, a station fault kept
unscored and run again): :mod:`~strands_robots.station.episode_results`.

What does not become an episode: a discarded one (its id is spent, its task runs again), one interrupted by a
cancel (the job is CANCELLED), and a rollout that ended in an error before any rollout ran (its goal refused:
the job is FAILED with the reason). Waiting for the policy has a deadline (``policy_attach_timeout_s``: the
job's own when it has one, else the station's): past it the job is FAILED with that reason. Given the station's
:class:`~strands_robots.station.policy_wait.Turns`, a job waiting for its policy holds the station for at most one
turn while another job could run: it then steps aside (:attr:`JobRunner.stepped_aside`; :meth:`JobRunner.run`
returns its WAITING_POLICY snapshot) and the station queues it again, its deadline kept
(:mod:`~strands_robots.station.policy_wait`).
A port that raises mid-episode never leaves the arms or the rollout node busy: the
rollout is stopped and the lease released before the job is FAILED with the error.
The job's state is persisted after every change (``persistence.JobStore``) and published as a
``JobStatus`` snapshot.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Optional, Tuple

from strands_robots.station.job import EpisodePlan, JobSpec, JobStateMachine, JobTransitionError, plan_episode, \
    validate_job_spec
from strands_robots.station.model import TERMINAL_STATES, JobState, JobStatus
from strands_robots.station.operator import OperatorConsole, OperatorReply
from strands_robots.station.limits import EPISODES_LISTED_MAX, JOB_MESSAGE_MAX, cut
from strands_robots.station.persistence import JobStore
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.ports import OperatorPort, RobotPort
from strands_robots.station.compatibility import check, gate_message
from strands_robots.station.preflight import answer_refusals, camera_refusals
from strands_robots.station.episode_results import kept_count, trailing_faults
from strands_robots.station.episode_steps import run_episode
from strands_robots.station.policy_wait import LAST_LOOK_S, AttachDeadlines, Turns, attach_timeout_s, deadline_text
from strands_robots.station.record import JobRecord, RunningEpisode, episode_id_for
from strands_robots.station.status import UnixMsClock, aggregate, snapshot_of, unix_ms_now
from strands_robots.station.summary import JobSummary, RunningSummary, summary_of
from strands_robots.station.comparison import (
    Comparison,
    ComparisonProgress,
    comparison_of,
    outcome_of,
    progress_of,
    stop_state,
)

__all__ = ["JobRunner"]


class _Cancelled(Exception):
    pass


class _Failed(Exception):
    pass


class _Suspended(Exception):
    pass


class _SteppedAside(Exception):
    pass


class JobRunner:
    """Runs one job to a terminal state: state machine, episodes, persistence, snapshots.

    :param record: the job (``JobRecord(spec)`` for a new job, or ``persistence.recover(store.load(id))``
        after a restart).
    :param robot: the :class:`RobotPort`.
    :param operator: the :class:`OperatorPort`.
    :param store: where the state is persisted after every change (None: not persisted).
    :param publish: called with each new :class:`JobStatus` snapshot (None: not published).
    :param clock_ms: the snapshot clock (ms since the Unix epoch).
    :param turns: the station's turns (``station.policy_wait``); None: the job waits for its policy until its
        deadline, holding whatever runs it.
    """

    def __init__(
        self,
        record: JobRecord,
        robot: RobotPort,
        operator: OperatorPort,
        *,
        store: Optional[JobStore] = None,
        publish: Optional[Callable[[JobStatus], None]] = None,
        clock_ms: UnixMsClock = unix_ms_now,
        settings: ProcedureSettings = ProcedureSettings(),
        turns: Optional[Turns] = None,
    ) -> None:
        validate_job_spec(record.spec)
        self._robot = robot
        self._operator = operator
        self._store = store
        self._publish = publish
        self._clock_ms = clock_ms
        self._settings = settings
        self._lock = threading.RLock()
        self._record = record
        self._machine = JobStateMachine(record.state, record.message, clock_ms=clock_ms)
        self._cancel = threading.Event()
        self._cancel_reason = ""
        self._suspended = threading.Event()
        self._waits: set = set()  # the events a wait for the policy ends on (cancel, suspend, its deadline)
        self._turns = turns
        self._deadlines = turns.deadlines if turns is not None else AttachDeadlines()
        # the running wait's events: its turn is over, it stepped aside, it gives up, its deadline passed
        self._turn: Optional[Tuple[threading.Event, ...]] = None
        self._stepped_aside = False
        self.console = OperatorConsole(robot, on_action=self._operator_action, supervisors=settings.supervisors)
        self._last_status: Optional[JobStatus] = None
        self._running_summary = RunningSummary(record.spec.intervals)
        self._summary: Optional[Tuple[Tuple[Any, ...], JobSummary]] = None  # (what it was computed from, it)
        self._progress: Optional[Tuple[Any, ComparisonProgress]] = None  # (the episodes it folded, it)
        self._comparison: Optional[Tuple[Any, bool, Comparison]] = None  # (episodes, ended, the result)
        self._commit()

    # -- queries --------------------------------------------------------------------------------------------
    @property
    def record(self) -> JobRecord:
        with self._lock:
            return self._record

    @property
    def spec(self) -> JobSpec:
        return self._record.spec

    @property
    def cancel_requested(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancel.is_set()

    def status(self) -> JobStatus:
        """Return the latest snapshot (the one last persisted and published)."""
        with self._lock:
            assert self._last_status is not None
            return self._last_status

    # -- control --------------------------------------------------------------------------------------------
    def cancel(self, reason: str = "") -> OperatorReply:
        """Cancel the job: the running rollout is stopped cooperatively; the job ends CANCELLED."""
        with self._lock:
            if self._machine.terminal:
                return OperatorReply(False, f"job {self.spec.job_id} already ended ({self._machine.state.value})")
            if self._suspended.is_set():
                return OperatorReply(False, f"job {self.spec.job_id} is suspended (the station is shutting down)")
            if self._cancel.is_set():
                return OperatorReply(False, f"job {self.spec.job_id} is already being cancelled")
            self._cancel_reason = reason.strip() if isinstance(reason, str) and reason.strip() else "cancelled"
            self._cancel.set()
            for wait in self._waits:
                wait.set()
            running = self._record.running
        self.console.cancel()
        if running is not None:
            self._robot.stop_rollout("cancelled")
        return OperatorReply(True, f"job {self.spec.job_id} cancelling")

    def suspend(self, reason: str = "station shutting down") -> None:
        """Stop running this job without ending it (the station is shutting down).

        The rollout is stopped, any wait ends, and nothing more is persisted or published: the saved state stays
        what it was, with the running episode still marked running, so a restarted station resumes the job
        (``persistence.recover`` re-runs that episode under a new id). :meth:`run` then returns the last
        snapshot, which is not terminal.
        """
        with self._lock:
            if self._machine.terminal or self._suspended.is_set():
                return
            self._suspended.set()
            self._cancel.set()  # ends waits for the policy; _check_cancel sees the suspension first
            for wait in self._waits:
                wait.set()
            self._cancel_reason = reason
            running = self._record.running
        self.console.cancel()
        if running is not None:
            self._robot.stop_rollout(reason or "suspended")

    @property
    def suspended(self) -> bool:
        """Whether :meth:`suspend` was called."""
        return self._suspended.is_set()

    @property
    def stepped_aside(self) -> bool:
        """Whether the job stepped aside while waiting for its policy (its turn ended; the station queues it again)."""
        return self._stepped_aside

    def nudge(self) -> None:
        """Tell the runner a job was queued: a wait whose turn is over steps aside now if that job runs first.

        Never blocks (the station calls it under its lock).
        """
        self._step_aside_if_due()

    def run(self) -> JobStatus:
        """Drive the job to a terminal state (blocking) and return the final snapshot.

        After :meth:`suspend` it returns the last snapshot before the suspension instead (not terminal); after
        the job stepped aside (:attr:`stepped_aside`) its WAITING_POLICY snapshot.
        """
        try:
            self._drive()
        except _Suspended:
            pass
        except _SteppedAside:
            self._stepped_aside = True
        except _Cancelled:
            self._terminal(JobState.CANCELLED, self._cancel_message())
        except _Failed as exc:
            self._terminal(JobState.FAILED, str(exc))
        except Exception as exc:  # a bug or a port failure: the job must not vanish silently
            self._terminal(JobState.FAILED, f"station error: {type(exc).__name__}: {exc}")
        if self._machine.terminal:
            self._deadlines.clear(self.spec.job_id)
        return self.status()

    # -- the job --------------------------------------------------------------------------------------------
    def _drive(self) -> None:
        while True:
            state = self._machine.state
            if state in TERMINAL_STATES:
                return
            self._check_cancel()
            if state is JobState.CREATED:
                self._transition(JobState.WAITING_POLICY, f"waiting for the policy ({self.spec.policy_provider}) "
                                                          f"until {self._deadline_text()}")
            elif state is JobState.WAITING_POLICY:
                self._check_slots_served()
                ready, detail = self._wait_for_policy()
                self._gate()
                self._transition(JobState.RUNNING, f"policy ready: {detail}" if detail else "policy ready")
            elif state is JobState.RUNNING:
                if self.spec.comparison is not None and self._comparison_progress().finished:
                    self._transition(JobState.FINALIZING, self._finished_text("finishing"))
                elif self.spec.comparison is None and kept_count(self.record.episodes) >= self.spec.episodes_total:
                    self._transition(JobState.FINALIZING, self._finished_text("finishing"))
                else:
                    self._next_episode()
            elif state is JobState.FINALIZING:
                self._transition(JobState.SUCCEEDED, self._finished_text("completed"))

    def _check_slots_served(self) -> None:
        """FAIL a comparison job on a robot side that cannot give each slot its own policy; nothing moved.

        A port serves slots when it says so (``serves_slots``): it runs each episode with the policy of the plan's
        ``compare_slot``. Any other would run one policy under every slot name: a comparison of a policy with itself.
        """
        if self.spec.comparison is not None and not getattr(self._robot, "serves_slots", False):
            raise _Failed(f"this station cannot serve a comparison's slots ({', '.join(self.spec.comparison.slots)}) "
                          f"each with its own policy; no arm moved")

    def _deadline_text(self) -> str:
        """Start (or keep) the job's attach deadline; return it as the team reads it, with its timeout."""
        timeout_s = attach_timeout_s(self.spec, self._settings)
        self._deadlines.start(self.spec.job_id, timeout_s)
        left = self._deadlines.left_s(self.spec.job_id) or 0.0
        return (f"{deadline_text(self._clock_ms() + int(left * 1000))} (policy_attach_timeout_s "
                f"{self._deadlines.timeout_of(self.spec.job_id) or timeout_s:g} s)")

    def _wait_for_policy(self) -> Tuple[bool, str]:
        """Wait for the job's policy: until it is ready, the job is cancelled, its deadline passes, or its turn ends.

        The deadline is the job's (kept across its turns); a job whose deadline already passed gets a last look of
        at most ``LAST_LOOK_S``. Its turn over while a job that would run first is queued, it steps aside.
        """
        job_id = self.spec.job_id
        timeout_s = attach_timeout_s(self.spec, self._settings)
        self._deadlines.start(job_id, timeout_s)
        timeout_s = self._deadlines.timeout_of(job_id) or timeout_s
        left = self._deadlines.left_s(job_id) or 0.0
        give_up = threading.Event()
        expired = threading.Event()
        over = threading.Event()
        aside = threading.Event()

        def expire() -> None:
            expired.set()
            give_up.set()

        def turn_over() -> None:
            over.set()
            self._step_aside_if_due()

        timer = threading.Timer(max(left, min(LAST_LOOK_S, timeout_s)), expire)
        timer.daemon = True
        turn_timer = None
        if self._turns is not None:
            turn_timer = threading.Timer(self._turns.turn_s, turn_over)
            turn_timer.daemon = True
        with self._lock:
            self._waits.add(give_up)
            if self._cancel.is_set():
                give_up.set()
            self._turn = (over, aside, give_up, expired)
        timer.start()
        if turn_timer is not None:
            turn_timer.start()
        try:
            ready, detail = self._robot.wait_for_policy(self.spec, give_up)
        finally:
            timer.cancel()
            if turn_timer is not None:
                turn_timer.cancel()
            with self._lock:
                self._waits.discard(give_up)
                self._turn = None
        self._check_cancel()
        if ready:
            self._deadlines.clear(job_id)
            return ready, detail
        if expired.is_set():
            raise _Failed(f"no policy client attached within {timeout_s:g} s (policy_attach_timeout_s); the "
                          f"station moved on")
        if aside.is_set():
            self._update(message=f"waiting for the policy ({self.spec.policy_provider}) until "
                                 f"{self._deadline_text()}; meanwhile the station runs other jobs and looks again "
                                 f"at this job's next turn")
            raise _SteppedAside()
        raise _Failed(f"the policy could not start: {detail}")

    def _step_aside_if_due(self) -> None:
        """End the running wait for the policy when its turn is over and a job that would run first is queued."""
        turn, turns = self._turn, self._turns
        if turn is None or turns is None:
            return
        over, aside, give_up, expired = turn
        if over.is_set() and not expired.is_set() and not give_up.is_set() and turns.others_waiting():
            aside.set()
            give_up.set()

    def _gate(self) -> None:
        """Run the compatibility gate and the preflight, before any lease: nothing has moved, nothing moves here.

        Sets the job's provenance (the station's facts and the declared spec). The declared spec is compared
        with the station's own (``station.compatibility``; a policy that declared nothing is not compared), every
        camera the job's tasks ask for must be one of the station's, and the robot port's ``preflight`` (when it
        has one: the relay's policies) sends the policy one observation of the arms as they stand and the answer
        is checked (``station.preflight``). Any reason FAILs the job at WAITING_POLICY with every reason named
        and "no arm moved"; no episode is charged.
        """
        facts = self._settings.station_facts
        read = getattr(self._robot, "attached_policy_spec", None)
        try:
            declared = read(self.spec) if callable(read) else None
        except ValueError as exc:  # a spec that does not parse (PolicySpecError)
            raise _Failed(f"the policy's declared spec is refused: {exc}") from None
        if facts is None:
            return
        by_slot = self._declared_by_slot(declared)
        slot_specs = by_slot if self.spec.comparison is not None else None  # every slot's, by name
        with self._lock:  # persisted and published with the next change (the transition that follows)
            self._record = self._record.replace(provenance=facts.provenance(self.spec, declared, slot_specs))
        observed = getattr(self._robot, "observed_cameras", None)  # what the rollouts really observe, when known
        cameras = observed() if callable(observed) else None
        station = facts.station_spec(self.spec, cameras)
        mismatches = [_of_slot(slot, m) for slot, spec in by_slot.items() if spec is not None
                      for m in check(spec, station)]
        mismatches += camera_refusals(self.spec.tasks, station.cameras)
        preflight = getattr(self._robot, "preflight", None)
        if callable(preflight):
            plan = plan_episode(self.spec, "", kept_count(self.record.episodes), self.record.slot_attempts)
            answer = preflight(self.spec, plan)
            answers = () if answer is None else tuple(answer) if isinstance(answer, (list, tuple)) else (answer,)
            for one in answers:  # each slot's answer against its own slot's declared spec
                slot = one.slot if one.slot in by_slot else next(iter(by_slot))
                mismatches += [_of_slot(one.slot, m) for m in answer_refusals(one, station, by_slot[slot])]
        if mismatches:
            sources = [s.source for s in by_slot.values() if s is not None and s.source]
            raise _Failed(gate_message(mismatches, sources[0] if len(sources) == 1 else ""))

    def _declared_by_slot(self, declared: Any) -> dict:
        """Return each slot's declared spec (``{"": declared}`` for a job of one policy) for the gate.

        A comparison's every slot is checked: a port that reads each slot's spec says so through
        ``attached_slot_specs`` (``{slot: PolicySpec or None}``); one that does not has only the one spec, the
        first slot's.
        """
        compare = self.spec.comparison
        if compare is None:
            return {"": declared}
        read = getattr(self._robot, "attached_slot_specs", None)
        specs = read(self.spec) if callable(read) else None
        if not specs:
            return {compare.slots[0]: declared}
        return {slot: specs.get(slot) for slot in compare.slots}

    def _next_episode(self) -> None:
        record = self.record
        if len(record.episodes) >= EPISODES_LISTED_MAX:
            raise _Failed(f"the job has listed {len(record.episodes)} finished episodes, the most one job's status "
                          f"carries (EPISODES_LISTED_MAX); {kept_count(record.episodes)} of "
                          f"{self.spec.episodes_total} were kept")
        if len(record.discarded) > self.spec.max_discards:
            raise _Failed(f"{len(record.discarded)} episodes were discarded (max_discards "
                          f"{self.spec.max_discards}); the job is failed rather than re-run without end")
        run = None
        if self.spec.comparison is not None:
            run = self._comparison_progress().next_run()
            assert run is not None  # the job finalizes once its comparison is finished
            slot = run.block.index * len(self.spec.comparison.slots) + run.position
            task_slot = run.block.index
            # the operator sees the blind label, never the slot, until the job ends
            what = (f"block {run.block.block_id}, {run.block.index + 1} of at most {len(self.spec.tasks)}, policy "
                    f"{run.label}")
        else:
            slot = task_slot = kept_count(record.episodes)
            what = f"episode {slot + 1} of {self.spec.episodes_total}"
        if record.slot_attempts >= self._settings.max_attempts_per_episode:
            raise _Failed(f"task {self.spec.task_for(task_slot).task_id!r} ({what}) was attempted "
                          f"{record.slot_attempts} times without {'an outcome' if run else 'a result'} "
                          f"(max_attempts_per_episode {self._settings.max_attempts_per_episode})")
        episode_id = episode_id_for(record.next_episode_number)
        plan = plan_episode(self.spec, episode_id, task_slot, record.slot_attempts)
        if run is not None:
            plan = dataclasses.replace(plan, slot=slot, compare_slot=run.slot, blind_label=run.label,
                                       block_id=run.block.block_id, block_position=run.position)
        self._update(running=RunningEpisode(episode_id, slot, plan.attempt, plan.task.task_id),
                     next_episode_number=record.next_episode_number + 1,
                     message=f"{episode_id} running (task {plan.task.task_id!r}, {what})")
        kind, value = self._episode(plan)
        self._check_suspended()
        record = self.record
        if kind == "kept":
            value = _placed(value, plan)
            attempts = 0
            again = ""
            if run is not None and outcome_of(value) is None:
                attempts = record.slot_attempts + 1
                again = f"; not an outcome: policy {run.label} runs block {run.block.block_id} again"
            self._update(running=None, episodes=record.episodes + (value,), slot_attempts=attempts,
                         restarts_without_progress=0,
                         message=f"{episode_id} finished: {value.end_condition}{again}")
        elif kind == "discarded":
            self._update(running=None, discarded=record.discarded + (episode_id,),
                         unlisted_tasks=record.unlisted_tasks + ((episode_id, plan.task.task_id),),
                         slot_attempts=record.slot_attempts + 1,
                         message=f"{episode_id} discarded by the operator; task {plan.task.task_id!r} runs "
                                 "again as a new episode")
        elif kind == "fault":
            result, policy_lost = value
            result = _placed(result, plan)
            faults = trailing_faults(record.episodes) + 1
            retries = self._settings.max_infrastructure_retries
            if faults > retries:
                self._update(running=None, episodes=record.episodes + (result,),
                             slot_attempts=record.slot_attempts + 1,
                             message=f"{episode_id} ended by a station fault: {result.end_detail}")
                raise _Failed(cut(f"task {plan.task.task_id!r} ({what}) was "
                                  f"ended by a station fault {faults} times (max_infrastructure_retries {retries}); "
                                  f"last, {episode_id}: {result.end_detail}", JOB_MESSAGE_MAX))
            pause = self._settings.infrastructure_backoff_s * min(2 ** (faults - 1), 8)
            again = f"runs again as a new episode in {pause:g} s" if pause else "runs again as a new episode"
            message = f"{episode_id} ended by a station fault ({result.end_detail}); task {plan.task.task_id!r} {again}"
            if policy_lost:
                message = (f"the policy session was lost during {episode_id} ({result.end_detail}); waiting for it "
                           f"again, then the task {again}")
            self._update(running=None, episodes=record.episodes + (result,), slot_attempts=record.slot_attempts + 1,
                         message=cut(message, JOB_MESSAGE_MAX))
            if pause:
                self._cancel.wait(pause)  # a cancel or a suspension ends the pause at once
                self._check_cancel()
            if policy_lost:
                self._transition(JobState.WAITING_POLICY, cut(message, JOB_MESSAGE_MAX))
        elif kind == "cancelled":
            raise _Cancelled()
        else:
            raise _Failed(value)

    def _comparison_progress(self) -> ComparisonProgress:
        """Return a comparison job's state after its listed episodes (folded on from the last call's)."""
        episodes = self.record.episodes
        cached = self._progress
        if cached is not None and cached[0] is episodes:
            return cached[1]
        if cached is not None and len(cached[0]) <= len(episodes) and all(
                a is b for a, b in zip(cached[0], episodes)):
            progress = cached[1]
            for episode in episodes[len(cached[0]):]:
                progress = progress.after(episode)
        else:
            progress = progress_of(self.spec, episodes)
        self._progress = (episodes, progress)
        return progress

    def _episode(self, plan: EpisodePlan) -> Tuple[str, Any]:
        """Run one episode (:func:`~strands_robots.station.episode_steps.run_episode`)."""
        return run_episode(plan, self._robot, self._operator, self.console, self._settings, self.spec.station_id,
                           self._cancel, say=self._operator_action, note=lambda m: self._update(message=m))

    # -- bookkeeping ----------------------------------------------------------------------------------------
    def _operator_action(self, message: str) -> None:
        """Make an accepted operator action the job's progress message (a takeover is news to a remote team)."""
        try:
            self._update(message=message)
        except _Suspended:
            pass

    def _check_cancel(self) -> None:
        if self._suspended.is_set():
            raise _Suspended()
        if self._cancel.is_set():
            raise _Cancelled()

    def _check_suspended(self) -> None:
        if self._suspended.is_set():
            raise _Suspended()

    def _cancel_message(self) -> str:
        running = self.record.running
        during = f" during {running.episode_id} (not recorded: it did not finish)" if running else ""
        return f"cancelled: {self._cancel_reason or 'cancelled'}{during}"

    def _finished_text(self, verb: str) -> str:
        if self.spec.comparison is not None:
            return self._compared_text(verb)
        agg = aggregate(self.record.episodes)
        rate = "n/a" if agg.success_rate is None else f"{agg.success_rate:.0%}"
        mean = "n/a" if agg.mean_score is None else f"{agg.mean_score:.2f}"
        faults = agg.finished - kept_count(self.record.episodes)
        again = f"; {faults} more ended by station faults and ran again" if faults else ""
        return (f"{verb}: {agg.finished - faults} episodes ({agg.scored} scored, {agg.taken_over} taken over){again}; "
                f"success rate {rate} and mean score {mean} over {agg.counted} scored episodes not taken over")

    def _compared_text(self, verb: str) -> str:
        """Word a comparison job's end: the verdict with the slot names (revealed only once it completed)."""
        progress = self._comparison_progress()
        if verb != "completed":  # the slots' names are revealed with the job's end, not before
            return f"{verb}: comparison of {len(progress.complete)} complete blocks"
        rates = ", ".join(f"{slot} {sum(r.success for b in progress.complete for r in b.results if r.slot == slot)}/"
                          f"{len(progress.complete)}" for slot in progress.slots)
        stop = stop_state(progress)
        if stop is None:
            decided = f"every block ran (no stop rule asked); {rates}"
        else:
            decided = f"{stop.verdict}: {stop.text}; {rates}"
        return f"{verb}: comparison of {len(progress.complete)} complete blocks: {decided}"

    def _transition(self, target: JobState, message: str) -> None:
        message = cut(message, JOB_MESSAGE_MAX)
        with self._lock:
            self._check_suspended()
            self._machine.transition(target, message)
            self._record = self._record.replace(state=target, message=message)
            self._commit()

    def _terminal(self, target: JobState, message: str) -> None:
        message = cut(message, JOB_MESSAGE_MAX)
        with self._lock:
            if self._machine.terminal or self._suspended.is_set():
                return
            try:
                self._machine.transition(target, message)
            except JobTransitionError as exc:  # cannot happen from a non-terminal state; say so if it does
                message = f"{message} ({exc.reason})"
                target = JobState.FAILED
            self._record = self._record.replace(state=target, message=message, running=None,
                                                interrupted=self._record.interrupted + (
                                                    (self._record.running.episode_id,)
                                                    if self._record.running else ()),
                                                unlisted_tasks=self._record.without_result(self._record.running))
            self._commit()

    def _update(self, **changes: Any) -> None:
        with self._lock:
            self._check_suspended()
            if "message" in changes:
                changes["message"] = cut(changes["message"], JOB_MESSAGE_MAX)
                self._machine.set_message(changes["message"])
            self._record = self._record.replace(**changes)
            self._commit()

    def _commit(self) -> None:
        """Persist the record, then publish its snapshot (caller holds the lock or is the constructor)."""
        record = self._record
        if self._store is not None:
            self._store.save(record)
        # The summary changes only when an episode is listed, discarded or interrupted: one per episode, not one
        # per message (the record's tuples are replaced, never changed, so identity says "the same").
        basis = (record.episodes, record.discarded, record.interrupted, record.unlisted_tasks)
        if self._summary is None or any(a is not b for a, b in zip(basis, self._summary[0])):
            self._summary = (basis, summary_of(record, self._running_summary))
        comparison = None
        if self.spec.comparison is not None:  # changes when an episode is listed, and once as the job ends
            ended = record.state in TERMINAL_STATES
            if self._comparison is None or self._comparison[0] is not record.episodes or self._comparison[1] != ended:
                self._comparison = (record.episodes, ended, comparison_of(
                    self._comparison_progress(), suite=self.spec.comparison.suite, method=self.spec.intervals,
                    revealed=ended))
            comparison = self._comparison[2]
        status = snapshot_of(record, self._clock_ms, sequence=0, summary=self._summary[1], comparison=comparison)
        self._last_status = status
        if self._publish is not None:
            self._publish(status)


def _of_slot(slot: str, reason: str) -> str:
    """Name a comparison slot's gate reason by its slot (a job of one policy: the reason as it is)."""
    return f"slot {slot}: {reason}" if slot else reason


def _placed(result: Any, plan: EpisodePlan) -> Any:
    """Return a comparison job's episode with its place: slot, block, position in the block, seed."""
    if not plan.compare_slot:
        return result
    return dataclasses.replace(result, slot=plan.compare_slot, block_id=plan.block_id,
                               block_position=plan.block_position, seed=plan.seed)
