"""The station: its jobs, run one at a time on a worker thread — what the station node's services call.

- :meth:`Station.submit` validates a job (it must be addressed to this station; its id must be new), persists
  it CREATED and queues it;
- jobs run in submission order, one at a time (one set of arms); each through a
  :class:`~strands_robots.station.episodes.JobRunner`;
- :meth:`Station.cancel` cancels a queued job at once, or the running one cooperatively;
- operator actions go to the running job's console (:meth:`Station.operator`): refused with a reason when no
  job runs;
- :meth:`Station.recover` (at start-up, before :meth:`start`) loads every saved job, resumes the non-terminal
  ones as ``persistence.recover`` says and queues them ahead of new ones (in job id order); a saved file that
  does not load is reported, never skipped silently.

No rclpy: the node adapts services and publishers onto this class.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from strands_robots.station.episodes import JobRunner, OperatorPort, ProcedureSettings, RobotPort
from strands_robots.station.job import JobSpec, JobSpecError, validate_job_spec
from strands_robots.station.model import TERMINAL_STATES, JobState, JobStatus
from strands_robots.station.operator import OperatorConsole, OperatorReply
from strands_robots.station.persistence import JobStore, PersistenceError, recover
from strands_robots.station.record import JobRecord
from strands_robots.station.status import UnixMsClock, make_snapshot, unix_ms_now

__all__ = ["Station", "SubmitReply"]


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
    :param operator: the :class:`OperatorPort` (a person through services, or a ``ScriptedOperator``).
    :param store: the job store (None: nothing persisted, nothing recovered).
    :param publish: called with every job's every snapshot.
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
    ) -> None:
        if not isinstance(station_id, str) or not station_id.strip():
            raise ValueError("station_id must be a non-empty string")
        self.station_id = station_id
        self._robot = robot
        self._operator = operator
        self._store = store
        self._publish = publish
        self._clock_ms = clock_ms
        self._settings = settings
        self._lock = threading.Condition()
        self._statuses: "OrderedDict[str, JobStatus]" = OrderedDict()
        self._queue: deque = deque()  # JobRecords waiting to run
        self._runner: Optional[JobRunner] = None
        self._worker: Optional[threading.Thread] = None
        self._stopping = False

    # -- jobs -----------------------------------------------------------------------------------------------
    def submit(self, spec: JobSpec) -> SubmitReply:
        """Validate, persist (CREATED) and queue a job."""
        job_id = getattr(spec, "job_id", "")
        try:
            validate_job_spec(spec)
        except JobSpecError as exc:
            return SubmitReply(False, job_id if isinstance(job_id, str) else "", f"job refused: {exc}")
        if spec.station_id != self.station_id:
            return SubmitReply(False, spec.job_id, f"job refused: station_id: addressed to {spec.station_id!r}, "
                                                   f"this is {self.station_id!r}")
        record = JobRecord(spec, message="queued")
        with self._lock:
            if spec.job_id in self._statuses:
                return SubmitReply(False, spec.job_id, f"job refused: job_id: {spec.job_id!r} already exists")
            try:
                self._save(record)
            except PersistenceError as exc:
                return SubmitReply(False, spec.job_id, f"job refused: could not persist it: {exc}")
            self._statuses[spec.job_id] = self._snapshot(record)
            self._queue.append(record)
            self._lock.notify_all()
        self._emit(self._statuses[spec.job_id])
        return SubmitReply(True, spec.job_id, f"accepted; {len(self._queue)} job(s) queued")

    def cancel(self, job_id: str, reason: str = "") -> OperatorReply:
        """Cancel a queued job at once, or the running one cooperatively."""
        why = reason.strip() if isinstance(reason, str) and reason.strip() else "cancelled"
        with self._lock:
            runner = self._runner
            if runner is not None and runner.spec.job_id == job_id:
                pass
            else:
                runner = None
                for record in list(self._queue):
                    if record.job_id == job_id:
                        self._queue.remove(record)
                        done = record.replace(state=JobState.CANCELLED, running=None,
                                              message=f"cancelled before it started: {why}")
                        self._save(done)
                        status = self._snapshot(done)
                        self._statuses[job_id] = status
                        break
                else:
                    status = self._statuses.get(job_id)
                    if status is None:
                        return OperatorReply(False, f"no job {job_id!r} at this station")
                    return OperatorReply(False, f"job {job_id} already ended ({status.state.value})")
        if runner is not None:
            return runner.cancel(why)
        self._emit(status)
        return OperatorReply(True, f"job {job_id} cancelled")

    def status(self, job_id: str) -> Optional[JobStatus]:
        """Return the job's latest snapshot; None for an unknown job."""
        with self._lock:
            return self._statuses.get(job_id)

    def statuses(self) -> Tuple[JobStatus, ...]:
        """Every job's latest snapshot, in submission order."""
        with self._lock:
            return tuple(self._statuses.values())

    def operator(self) -> Tuple[Optional[OperatorConsole], str]:
        """Return the running job's console, or ``(None, why not)``."""
        with self._lock:
            runner = self._runner
        if runner is None:
            return None, "no job is running at this station"
        return runner.console, ""

    # -- start-up -------------------------------------------------------------------------------------------
    def recover(self) -> Tuple[str, ...]:
        """Load saved jobs; queue the non-terminal ones, resumed. Returns a line per job saying what happened.

        :raises PersistenceError: a saved job does not load (the reason names the file).
        """
        if self._store is None:
            return ()
        lines = []
        for saved in self._store.load_all():
            record = recover(saved)
            with self._lock:
                if record.job_id in self._statuses:
                    continue
                if record is not saved:
                    self._save(record)
                self._statuses[record.job_id] = self._snapshot(record)
                if record.state not in TERMINAL_STATES:
                    self._queue.append(record)
                    lines.append(f"{record.job_id}: resumed ({record.state.value}): {record.message}")
                elif record is not saved:
                    lines.append(f"{record.job_id}: {record.state.value}: {record.message}")
                self._lock.notify_all()
            self._emit(self._statuses[record.job_id])
        return tuple(lines)

    def start(self) -> None:
        """Run queued jobs on a worker thread until :meth:`stop`."""
        with self._lock:
            if self._worker is not None:
                return
            self._stopping = False
            self._worker = threading.Thread(target=self._work, name=f"station-{self.station_id}", daemon=True)
            self._worker.start()

    def stop(self, timeout_s: float = 10.0, reason: str = "station shutting down") -> bool:
        """Stop taking jobs and suspend the running one (a restarted station resumes it); True once stopped."""
        with self._lock:
            self._stopping = True
            runner = self._runner
            worker = self._worker
            self._lock.notify_all()
        if runner is not None:
            runner.suspend(reason)
        if worker is None:
            return True
        worker.join(timeout_s)
        return not worker.is_alive()

    def wait_idle(self, timeout_s: Optional[float] = None) -> bool:
        """Block until no job is queued or running (tests, demos). True when idle."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._queue and self._runner is None, timeout_s)

    # -- internals ------------------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._queue or self._stopping)
                if self._stopping:
                    return
                record = self._queue.popleft()
                runner = JobRunner(record, self._robot, self._operator, store=self._store,
                                   publish=self._on_status, clock_ms=self._clock_ms, settings=self._settings)
                self._runner = runner
            try:
                runner.run()
            finally:
                with self._lock:
                    self._runner = None
                    self._lock.notify_all()

    def _on_status(self, status: JobStatus) -> None:
        with self._lock:
            self._statuses[status.job_id] = status
        self._emit(status)

    def _emit(self, status: JobStatus) -> None:
        if self._publish is not None:
            self._publish(status)

    def _save(self, record: JobRecord) -> None:
        if self._store is not None:
            self._store.save(record)

    def _snapshot(self, record: JobRecord) -> JobStatus:
        return make_snapshot(job_id=record.job_id, station_id=record.spec.station_id, state=record.state,
                             episodes_total=record.spec.episodes_total, episodes=record.episodes,
                             message=record.message, clock_ms=self._clock_ms)
