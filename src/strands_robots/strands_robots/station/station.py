"""The station: its jobs, run one at a time on a worker thread — the one core the station node adapts.

- :meth:`Station.submit` validates a job (it must be addressed to this station; its id must be new), persists
  it CREATED **before it answers** and queues it: from that answer on the job is visible (CREATED, its message
  naming its place in the queue), cancellable, and survives a station death;
- :meth:`Station.take` is how a job the relay sends arrives: a job the station already holds is matched by id
  (never restarted, never queued twice; an ended one is reported again so the relay learns its end); a new
  one is submitted;
- :meth:`Station.refuse` records a job the relay sent that cannot even be read as a job: FAILED, persisted,
  with the reason;
- jobs run one at a time (one set of arms), in :class:`~strands_robots.station.job_queue.JobQueue` order —
  resumed jobs first, then round-robin across teams (``client_id``) — each through a
  :class:`~strands_robots.station.episodes.JobRunner`; a job that cannot start is FAILED with the reason and
  the station goes on with the next;
- a job waiting for its policy does not hold the station (:mod:`~strands_robots.station.policy_wait`): after one
  turn (``policy_turn_s``) it steps aside for a job that would run before it and is queued again at the head of
  its team's jobs, its attach deadline kept; when that deadline passes while it waits in the queue, a last look
  (on a thread of its own, even while another job runs) runs it next if its policy attached, else FAILs it;
- :meth:`Station.cancel` cancels a queued job at once (CANCELLED, persisted), or the running one
  cooperatively;
- operator actions go to the running job's console (:meth:`Station.operator`): refused with a reason when no
  job runs;
- :meth:`Station.recover` (at start-up, before :meth:`start`) loads every readable saved job, resumes the
  non-terminal ones as ``persistence.recover`` says and queues them ahead of new ones; a job whose files do not
  load is moved aside (``JobStore.load_every``) and becomes FAILED with that reason (persisted under its id,
  so a relay that sends it again is told it failed), and recovery goes on with the others.

Every snapshot of a job carries the job's next ``sequence``, persisted with the job before it is published.
``publish`` must not block (it is called under the station's lock, to keep each job's snapshots in order).

No rclpy: the node adapts services and publishers onto this class.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from strands_robots.station.episodes import JobRunner
from strands_robots.station.procedure_settings import ProcedureSettings
from strands_robots.station.ports import OperatorPort, RobotPort
from strands_robots.station.job import JobSpec, JobSpecError, validate_job_spec
from strands_robots.station.job_queue import JobQueue
from strands_robots.station.limits import CANCEL_REASON_MAX, JOB_MESSAGE_MAX, cut
from strands_robots.station.model import TERMINAL_STATES, AnswerType, JobState, JobStatus, ScoringItemDefinition, \
    ScoringSheet, Task
from strands_robots.station.operator import OperatorConsole, OperatorReply
from strands_robots.station.durable_files import PersistenceError
from strands_robots.station.persistence import JobStore, SetAside, recover
from strands_robots.station.policy_wait import LAST_LOOK_S, AttachDeadlines, Turns, attach_timeout_s
from strands_robots.station.record import JobRecord
from strands_robots.station.status import UnixMsClock, snapshot_of, unix_ms_now
from strands_robots.station.summary import load_statistics

__all__ = ["Station", "SubmitReply", "MAX_QUEUED", "PLACES_SHOWN", "SET_ASIDE_SEQUENCE"]

MAX_QUEUED = 1000  # jobs waiting at one station; past it a submit is refused with the reason
#: A queued job's message names its exact place up to this many jobs ahead, then "this many or more": so a change
#: of the queue re-saves at most this many queued jobs (each snapshot is persisted), not the whole queue.
PLACES_SHOWN = 10
#: The sequence of the FAILED snapshot of a job whose files were unreadable: its last sequence cannot be read, and
#: this one is beyond any a job reaches, so the relay takes it as the newest (it is terminal: nothing follows).
SET_ASIDE_SEQUENCE = 2 ** 53 - 1


@dataclass(frozen=True)
class SubmitReply:
    """The answer to :meth:`Station.submit`: accepted with the job id, or why not."""

    accepted: bool
    job_id: str
    message: str


class Station:
    """Jobs of one station (thread-safe).

    :param station_id: jobs must be addressed to it.
    :param robot: the :class:`RobotPort` every job runs on.
    :param operator: the :class:`OperatorPort` (a person through services, or a ``ScriptedOperator``); its
        ``close()``, if it has one, is called after each job (pending timers end with the job).
    :param store: the job store (None: nothing persisted, nothing recovered).
    :param publish: called with every job's every snapshot; must not block.
    :param prepare_job: called with each job's id on the worker thread before the job runs (the robot side's
        per-job set-up); an exception FAILs that job with the reason.
    :param max_queued: how many jobs may wait; a submit past it is refused.
    """

    def __init__(
        self,
        station_id: str,
        robot: RobotPort,
        operator: OperatorPort,
        *,
        store: Optional[JobStore] = None,
        publish: Optional[Callable[[JobStatus], None]] = None,
        clock_ms: UnixMsClock = unix_ms_now,
        settings: ProcedureSettings = ProcedureSettings(),
        prepare_job: Optional[Callable[[str], None]] = None,
        max_queued: int = MAX_QUEUED,
    ) -> None:
        if not isinstance(station_id, str) or not station_id.strip():
            raise ValueError("station_id must be a non-empty string")
        if isinstance(max_queued, bool) or not isinstance(max_queued, int) or max_queued < 1:
            raise ValueError(f"max_queued must be an integer >= 1, got {max_queued!r}")
        self.station_id = station_id
        self._robot = robot
        self._operator = operator
        self._store = store
        self._publish = publish
        self._clock_ms = clock_ms
        self._settings = settings
        self._prepare_job = prepare_job
        self._max_queued = max_queued
        self._lock = threading.Condition()
        self._statuses: "OrderedDict[str, JobStatus]" = OrderedDict()
        self._specs: Dict[str, JobSpec] = {}
        self._waiting: Dict[str, JobRecord] = {}  # every queued job's newest record
        self._queue = JobQueue()
        self._places: Dict[str, int] = {}  # job id -> the place its last snapshot named
        self._runner: Optional[JobRunner] = None
        self._starting: Optional[JobRecord] = None  # taken from the queue, its runner not made yet
        self._starting_cancel: Optional[str] = None  # a cancel that came for it meanwhile
        self._worker: Optional[threading.Thread] = None
        self._numbered: Optional["_Numbered"] = None  # the running job's snapshot numbers
        self._deadlines = AttachDeadlines()
        self._turns = Turns(self._deadlines, settings.policy_turn_s, self._others_waiting)
        # job id -> [record, look event, cancel reason]: queued jobs past their attach deadline, being looked at
        self._looking: Dict[str, list] = {}
        self._seen_attached: set = set()  # queued jobs whose last look found their policy attached: they run next
        self._keeper: Optional[threading.Thread] = None
        self._stopping = False
        self.set_aside: Tuple[SetAside, ...] = ()  # jobs whose files did not load at the last recover()

    # -- jobs -----------------------------------------------------------------------------------------------
    def submit(self, spec: JobSpec) -> SubmitReply:
        """Validate, persist (CREATED) and queue a job; the answer comes after the job is on disk."""
        job_id = getattr(spec, "job_id", "")
        try:
            validate_job_spec(spec)
        except JobSpecError as exc:
            return SubmitReply(False, job_id if isinstance(job_id, str) else "", f"job refused: {exc}")
        if spec.station_id != self.station_id:
            return SubmitReply(False, spec.job_id, f"job refused: station_id: addressed to {spec.station_id!r}, "
                                                   f"this is {self.station_id!r}")
        if spec.record and not self._settings.team_recordings:
            from strands_robots.job_model.team_job import RECORDINGS_REFUSED

            return SubmitReply(False, spec.job_id, f"job refused: record: "
                                                   f"{RECORDINGS_REFUSED.format(station=self.station_id)}")
        facts = self._settings.station_facts
        refusal = facts.job_refusal(spec) if facts is not None else ""
        if refusal:  # what this station can never serve is refused now, never blamed on the station at run time
            return SubmitReply(False, spec.job_id, f"job refused: {refusal}")
        with self._lock:
            if spec.job_id in self._statuses:
                return SubmitReply(False, spec.job_id, f"job refused: job_id: {spec.job_id!r} already exists")
            if len(self._queue) >= self._max_queued:
                return SubmitReply(False, spec.job_id, f"job refused: {len(self._queue)} jobs already wait at "
                                                       f"station {self.station_id} (max_queued {self._max_queued})")
            self._queue.add(spec.job_id, spec.client_id)
            place = min(self._queue.places()[spec.job_id] + self._running_count(), PLACES_SHOWN)
            try:
                self._commit(JobRecord(spec, message=self._queued_text(place)))
            except PersistenceError as exc:
                self._queue.remove(spec.job_id)
                return SubmitReply(False, spec.job_id, f"job refused: could not persist it: {exc}")
            self._places[spec.job_id] = place
            self._renumber()
            self._lock.notify_all()
            self._nudge()
            return SubmitReply(True, spec.job_id, f"job {spec.job_id} accepted: {self._queued_text(place)}")

    def take(self, spec: JobSpec) -> SubmitReply:
        """Take a job the relay sent: one this station holds is matched by id, never restarted; else submit it.

        A held job that has ended has its final snapshot published again (the relay may have missed it).
        """
        with self._lock:
            status = self._statuses.get(getattr(spec, "job_id", None))
            if status is not None:
                if status.state in TERMINAL_STATES:
                    self._emit(status)
                return SubmitReply(True, status.job_id, f"job {status.job_id} is already held "
                                                        f"({status.state.value}): {status.message}")
        return self.submit(spec)

    def refuse(self, job_id: str, client_id: str, episodes_total: int, reason: str) -> Optional[JobStatus]:
        """Record a relay's job that is not a valid job as FAILED with ``reason`` (persisted).

        A job this station already holds is matched by id instead, as :meth:`take` does (None is returned).
        """
        with self._lock:
            held = self._statuses.get(job_id)
            if held is not None:
                if held.state in TERMINAL_STATES:
                    self._emit(held)
                return None
            record = JobRecord(_placeholder_spec(job_id, client_id, self.station_id, episodes_total),
                               state=JobState.FAILED, message=cut(f"refused by the station: {reason}",
                                                                  JOB_MESSAGE_MAX))
            return self._commit(record, tolerate_store_errors=True)

    def cancel(self, job_id: str, reason: str = "") -> OperatorReply:
        """Cancel a queued job at once (persisted CANCELLED), or the running one cooperatively."""
        why = reason.strip() if isinstance(reason, str) and reason.strip() else "cancelled"
        why = cut(why, CANCEL_REASON_MAX)
        with self._lock:
            runner = self._runner
            starting = self._starting
            if starting is not None and starting.job_id == job_id:
                if self._starting_cancel is not None:
                    return OperatorReply(False, f"job {job_id} is already being cancelled")
                self._starting_cancel = why  # applied the moment its runner exists
                return OperatorReply(True, f"job {job_id} cancelling")
            looking = self._looking.get(job_id)
            if looking is not None:
                if looking[2] is not None:
                    return OperatorReply(False, f"job {job_id} is already being cancelled")
                looking[2] = why
                looking[1].set()  # the last look ends at once; the job is CANCELLED then
                return OperatorReply(True, f"job {job_id} cancelling")
            if runner is None or runner.spec.job_id != job_id:
                runner = None
                record = self._waiting.get(job_id)
                if record is None:
                    status = self._statuses.get(job_id)
                    if status is None:
                        return OperatorReply(False, f"no job {job_id!r} at this station")
                    return OperatorReply(False, f"job {job_id} already ended ({status.state.value})")
                before = "before it started" if record.state is JobState.CREATED else "while it waited for its policy"
                done = record.replace(state=JobState.CANCELLED, running=None,
                                      message=cut(f"cancelled {before}: {why}", JOB_MESSAGE_MAX))
                try:
                    self._commit(done)
                except PersistenceError as exc:
                    return OperatorReply(False, f"job {job_id} could not be cancelled: {exc}")
                self._queue.remove(job_id)
                self._waiting.pop(job_id, None)
                self._places.pop(job_id, None)
                self._deadlines.clear(job_id)
                self._seen_attached.discard(job_id)
                self._renumber()
                self._lock.notify_all()
                return OperatorReply(True, f"job {job_id} cancelled")
        return runner.cancel(why)  # outside the station's lock: the runner publishes through it

    def status(self, job_id: str) -> Optional[JobStatus]:
        """Return the job's latest snapshot; None for an unknown job."""
        with self._lock:
            return self._statuses.get(job_id)

    def statuses(self) -> Tuple[JobStatus, ...]:
        """Every job's latest snapshot, in the order the station first held them."""
        with self._lock:
            return tuple(self._statuses.values())

    def spec(self, job_id: str) -> Optional[JobSpec]:
        """Return the job's spec as the station holds it; None for an unknown job."""
        with self._lock:
            return self._specs.get(job_id)

    def queued(self) -> Tuple[str, ...]:
        """Return the waiting jobs' ids in the order they would run."""
        with self._lock:
            return self._queue.order()

    def operator(self) -> Tuple[Optional[OperatorConsole], str]:
        """Return the running job's console, or ``(None, why not)``."""
        with self._lock:
            runner = self._runner
        if runner is None:
            return None, "no job is running at this station"
        return runner.console, ""

    @property
    def running_job(self) -> str:
        """The running job's id ("" when none runs)."""
        with self._lock:
            return "" if self._runner is None else self._runner.spec.job_id

    # -- start-up -------------------------------------------------------------------------------------------
    def recover(self) -> Tuple[str, ...]:
        """Load saved jobs; queue the non-terminal ones, resumed. Returns a line per job saying what happened.

        Every readable job is loaded; a job whose files do not load is moved aside and FAILED with the reason
        (its line says so and names the files; :attr:`set_aside` lists them).
        """
        if self._store is None:
            return ()
        records, aside = self._store.load_every()
        lines: List[str] = []
        with self._lock:
            for saved in records:
                if saved.job_id in self._statuses:
                    continue
                record = recover(saved)
                if record.state in TERMINAL_STATES:
                    status = snapshot_of(record, self._clock_ms) if record is saved else \
                        self._commit(record, tolerate_store_errors=True)
                    self._statuses[record.job_id] = status
                    self._specs[record.job_id] = record.spec
                    self._emit(status)
                    if record is not saved:
                        lines.append(f"{record.job_id}: {record.state.value}: {record.message}")
                    continue
                resumed = record.state is not JobState.CREATED
                self._queue.add(record.job_id, record.spec.client_id, resumed=resumed)
                self._waiting[record.job_id] = record
                if resumed:
                    self._commit(record, tolerate_store_errors=True)
                    lines.append(f"{record.job_id}: resumed ({record.state.value}): {record.message}")
                else:
                    self._waiting[record.job_id] = record  # its queued snapshot comes from _renumber below
                    lines.append(f"{record.job_id}: queued again (CREATED)")
            for bad in aside:
                status = self._fail_set_aside(bad)
                if status is not None:
                    lines.append(f"{bad.job_id}: FAILED: {status.message}")
            self.set_aside = tuple(aside)
            self._renumber(force=True)
            self._lock.notify_all()
        return tuple(lines)

    def start(self) -> None:
        """Run queued jobs on a worker thread until :meth:`stop` (the statistics libraries loaded first)."""
        load_statistics()  # before any job: their import would hold the interpreter in the middle of an episode
        with self._lock:
            if self._worker is not None:
                return
            self._stopping = False
            self._worker = threading.Thread(target=self._work, name=f"station-{self.station_id}", daemon=True)
            self._worker.start()
            self._keeper = threading.Thread(target=self._keep_deadlines, name=f"station-{self.station_id}-deadlines",
                                            daemon=True)
            self._keeper.start()

    def stop(self, timeout_s: float = 10.0, reason: str = "station shutting down") -> bool:
        """Stop taking jobs and suspend the running one (a restarted station resumes it); True once stopped."""
        with self._lock:
            self._stopping = True
            runner = self._runner
            worker, keeper = self._worker, self._keeper
            for looking in self._looking.values():
                looking[1].set()
            self._lock.notify_all()
        if runner is not None:
            runner.suspend(reason)
        if worker is None:
            return True
        worker.join(timeout_s)
        if keeper is not None:
            keeper.join(max(0.1, timeout_s))
        return not worker.is_alive() and (keeper is None or not keeper.is_alive())

    def wait_idle(self, timeout_s: Optional[float] = None) -> bool:
        """Block until no job is queued or running (tests, demos). True when idle."""
        with self._lock:
            # a job taken from the queue whose runner is not made yet (_starting) is not idle either
            return self._lock.wait_for(lambda: not len(self._queue) and self._runner is None and self._starting is None
                                       and not self._looking, timeout_s)

    # -- internals ------------------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: len(self._queue) or self._stopping)
                if self._stopping:
                    return
                job_id = self._queue.pop()
                record = self._waiting.pop(job_id)
                self._seen_attached.discard(job_id)
                self._places.pop(job_id, None)
                self._starting, self._starting_cancel = record, None
            runner, cancel = self._start_runner(record)
            if runner is None:
                continue
            if cancel is not None:
                runner.cancel(cancel)
            try:
                runner.run()
            finally:
                self._close_operator()
                with self._lock:
                    numbered, self._numbered = self._numbered, None
                    self._runner = None
                    if runner.stepped_aside and not self._stopping and numbered is not None:
                        # queued again at the head of its team's jobs, numbered on from its last snapshot
                        self._queue.park(record.job_id, record.spec.client_id)
                        self._waiting[record.job_id] = runner.record.replace(sequence=numbered.sequence)
                    self._renumber()
                    self._lock.notify_all()

    def _start_runner(self, record: JobRecord) -> Tuple[Optional[JobRunner], Optional[str]]:
        """Make the job's runner the running one; return it with a cancel that came meanwhile (to apply).

        A job that cannot start is FAILED with the reason and ``(None, None)`` returned.
        """
        try:
            if self._prepare_job is not None:
                self._prepare_job(record.job_id)
            with self._lock:
                if self._stopping:  # stays as persisted: the next start resumes it
                    self._starting = None
                    self._lock.notify_all()
                    return None, None
                numbered = _Numbered(self, record.sequence)
                runner = JobRunner(record, self._robot, self._operator, store=numbered,
                                   publish=numbered.publish, clock_ms=self._clock_ms, settings=self._settings,
                                   turns=self._turns)
                self._runner, self._numbered = runner, numbered
                cancel, self._starting, self._starting_cancel = self._starting_cancel, None, None
                self._renumber()
                return runner, cancel
        except Exception as exc:  # a job that cannot even start must not take the station down, nor vanish
            message = cut(f"the station could not run the job: {type(exc).__name__}: {exc}", JOB_MESSAGE_MAX)
            with self._lock:
                self._starting, self._starting_cancel = None, None
                self._commit(record.replace(state=JobState.FAILED, running=None, message=message),
                             tolerate_store_errors=True)
                self._renumber()
                self._lock.notify_all()
            self._close_operator()
            return None, None

    def _others_waiting(self) -> bool:
        """Whether a queued job would run before the running one if it stepped aside now (``Turns``)."""
        with self._lock:
            runner = self._runner
            return runner is not None and self._queue.others_ahead_of(runner.spec.client_id)

    def _nudge(self) -> None:
        """Tell the running job a job was queued: past its turn, a wait for its policy steps aside (lock held)."""
        if self._runner is not None:
            self._runner.nudge()

    def _keep_deadlines(self) -> None:
        """Give each queued job whose attach deadline passed its last look; run it next, or FAIL it."""
        while True:
            with self._lock:
                while True:
                    if self._stopping:
                        return
                    waiting = {job_id for job_id, r in self._waiting.items()
                               if r.state is JobState.WAITING_POLICY and job_id not in self._seen_attached}
                    job_id, left = self._deadlines.next_due(waiting)
                    if job_id is not None and left <= 0:
                        break
                    self._lock.wait(None if math.isinf(left) else left)
                record = self._waiting.pop(job_id)
                self._queue.remove(job_id)
                self._places.pop(job_id, None)
                look = threading.Event()
                self._looking[job_id] = [record, look, None]
                self._renumber()
            timer = threading.Timer(LAST_LOOK_S, look.set)
            timer.daemon = True
            timer.start()
            try:
                ready, _ = self._robot.wait_for_policy(record.spec, look)
            except Exception as exc:  # noqa: BLE001 - a port failure: the job is not served, and says why
                ready = False
                record = record.replace(message=cut(f"{record.message} (last look: {type(exc).__name__}: {exc})",
                                                    JOB_MESSAGE_MAX))
            finally:
                timer.cancel()
            with self._lock:
                _, _, why = self._looking.pop(job_id)
                self._settle_look(record, ready, why)
                self._renumber()
                self._lock.notify_all()

    def _settle_look(self, record: JobRecord, ready: bool, why: Optional[str]) -> None:
        """Act on a last look's outcome (caller holds the lock)."""
        job_id = record.job_id
        if why is not None:
            self._deadlines.clear(job_id)
            self._commit(record.replace(state=JobState.CANCELLED, running=None,
                                        message=cut(f"cancelled while it waited for its policy: {why}",
                                                    JOB_MESSAGE_MAX)), tolerate_store_errors=True)
            return
        if ready or self._stopping:  # a stopping station leaves it as persisted: the next start resumes it
            self._queue.add(job_id, record.spec.client_id, resumed=True)
            self._waiting[job_id] = record
            if ready and not self._stopping:
                self._seen_attached.add(job_id)
                self._commit(record.replace(message=f"its policy attached (seen at its attach deadline): the job "
                                                    f"runs next at station {self.station_id}"),
                             tolerate_store_errors=True)
                self._nudge()
            return
        timeout_s = self._deadlines.timeout_of(job_id) or attach_timeout_s(record.spec, self._settings)
        self._deadlines.clear(job_id)
        self._commit(record.replace(state=JobState.FAILED, running=None,
                                    message=f"no policy client attached within {timeout_s:g} s "
                                            f"(policy_attach_timeout_s); the station moved on"),
                     tolerate_store_errors=True)

    def _close_operator(self) -> None:
        close = getattr(self._operator, "close", None)
        if close is not None:
            close()

    def _on_status(self, status: JobStatus) -> None:
        with self._lock:
            self._statuses[status.job_id] = status
            self._emit(status)

    def _emit(self, status: JobStatus) -> None:
        if self._publish is not None:
            self._publish(status)

    def _commit(self, record: JobRecord, *, tolerate_store_errors: bool = False) -> JobStatus:
        """Persist, hold and publish the record's next snapshot, numbered (caller holds the lock).

        :raises PersistenceError: the save failed (nothing held or published), unless ``tolerate_store_errors``
            (a failure, a recovery: the snapshot still tells the team, with the store's error appended).
        """
        record = record.next_snapshot()
        try:
            self._save(record)
        except PersistenceError as exc:
            if not tolerate_store_errors:
                raise
            record = record.replace(message=cut(f"{record.message} (not persisted: {exc})", JOB_MESSAGE_MAX))
        if record.state not in TERMINAL_STATES and record.job_id in self._queue:
            self._waiting[record.job_id] = record
        status = snapshot_of(record, self._clock_ms)
        self._statuses[record.job_id] = status
        self._specs[record.job_id] = record.spec
        self._emit(status)
        return status

    def _fail_set_aside(self, bad: SetAside) -> Optional[JobStatus]:
        if bad.job_id in self._statuses:
            return None
        moved = ", ".join(bad.moved_to) or "nothing moved"
        message = cut(f"the station could not read this job's saved state after a restart ({bad.reason}); its "
                      f"files were kept aside as {moved}", JOB_MESSAGE_MAX)
        record = JobRecord(_placeholder_spec(bad.job_id, bad.client_id, self.station_id, bad.episodes_total),
                           state=JobState.FAILED, message=message, sequence=SET_ASIDE_SEQUENCE - 1)
        return self._commit(record, tolerate_store_errors=True)

    def _running_count(self) -> int:
        return 0 if self._runner is None else 1

    def _renumber(self, force: bool = False) -> None:
        """Publish a new snapshot for every queued job whose place changed (caller holds the lock)."""
        running = self._running_count()
        for job_id, place in self._queue.places().items():
            place = min(place + running, PLACES_SHOWN)
            record = self._waiting.get(job_id)
            if record is None or record.state is not JobState.CREATED:
                continue  # a resumed job keeps the message saying how it was resumed
            if not force and self._places.get(job_id) == place:
                continue
            self._places[job_id] = place
            self._commit(record.replace(message=self._queued_text(place)), tolerate_store_errors=True)

    def _queued_text(self, place: int) -> str:
        more = " or more" if place >= PLACES_SHOWN else ""
        return f"queued at station {self.station_id} behind {place}{more} job(s)"

    def _save(self, record: JobRecord) -> None:
        if self._store is not None:
            self._store.save(record)



class _Numbered:
    """The store and publisher a job's runner sees: each snapshot takes the job's next ``sequence``.

    The runner saves a record, then publishes its snapshot; the save gets the next number (persisted with the
    record) and the snapshot carries it. A snapshot published without a save first gets a number of its own.
    """

    def __init__(self, station: "Station", sequence: int) -> None:
        self._station = station
        self._sequence = sequence
        self._saved = False  # a number was saved and its snapshot is not published yet
        self._lock = threading.Lock()

    @property
    def sequence(self) -> int:
        """The number of the job's newest snapshot."""
        with self._lock:
            return self._sequence

    def save(self, record: JobRecord) -> None:
        with self._lock:
            self._sequence += 1
            self._saved = True
            number = self._sequence
        self._station._save(record.replace(sequence=number))

    def publish(self, status: JobStatus) -> None:
        with self._lock:
            if not self._saved:
                self._sequence += 1
            self._saved = False
            number = self._sequence
        self._station._on_status(dataclasses.replace(status, sequence=number))


def _placeholder_spec(job_id: str, client_id: str, station_id: str, episodes_total: int) -> JobSpec:
    """Return a spec to persist a job under whose own spec could not be read or validated (it is FAILED)."""
    sheet = ScoringSheet((ScoringItemDefinition("refused", "refused", AnswerType.YES_NO, 1.0, success_answer="yes"),))
    return JobSpec(job_id=job_id, client_id=client_id or "unknown", station_id=station_id,
                   tasks=(Task("refused", "refused", "", {}, sheet),), episodes_total=max(1, int(episodes_total)),
                   policy_provider="relay")
