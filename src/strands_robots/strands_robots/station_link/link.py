"""The station's link to the relay: reports, jobs, and the station's side of policy sessions (no ROS).

The station connects **outbound** (no inbound port). One :class:`StationLink` per station process::

    link = StationLink("relay.example:50051", "sim_station", token, on_job=jobs.put, on_cancel=cancel)
    link.start()                       # reporter thread (snapshots + heartbeat) and job-stream thread
    link.report(status)                # every change: station.model.JobStatus or pb.JobStatus; never blocks
    session = link.open_session(job_id)
    session.wait_attached(timeout_s=60)            # a policy client is serving the job
    session.start_episode("ep_0000", task, action_keys=[...], control_frequency=50, action_horizon=8)
    chunk = session.act(observation)   # list of {key: value}; raises EndEpisode (policy_completed)
    session.resume(observation)        # after an operator takeover
    session.end_episode("ep_0000", "timeout")
    session.close(); link.close()

Reporting: :meth:`StationLink.report` appends to an in-memory **backlog** (oldest first) and returns; the
reporter thread sends the backlog in order (batches bounded in count and bytes) and removes exactly the
snapshots the relay answered for. While the relay is unreachable the backlog grows (and the link reads as not
connected); after a reconnect the whole backlog is re-reported, so a relay restarted mid-job loses no snapshot
(the relay keeps the newest of each job by its ``sequence``, so re-reporting is harmless). Snapshots go as
they are, ``sequence`` included.

- **Heartbeats** go from a thread of their own every ``heartbeat_s``, whatever the backlog holds: a refused,
  slow or wedged report never makes the station look gone.
- **Every snapshot fits one message** (``max_message_bytes``, the relay's): one that would not is trimmed as
  :mod:`~strands_robots.station_link.snapshot_fit` says before it is sent (on the reporter thread: ``report`` stays
  cheap; its message says what was left out), so a job's snapshots, its terminal one above all, are never
  refused for their size.
- **A snapshot the relay refuses is never sent again as it is.** A whole call refused for its content
  (INVALID_ARGUMENT, RESOURCE_EXHAUSTED: e.g. too large) is sent again one snapshot at a time to find which;
  a refused snapshot (so, or listed in the answer's ``refused``) is replaced by its job's newer snapshot when
  the backlog holds one; else one refused for its size (a relay whose ``max_message_bytes`` is below the
  link's) is trimmed to half its size and sent again, as often as that makes it smaller; one refused for its
  texts is cut once (the job's ``message`` and each episode's ``end_detail`` to their limits in
  :mod:`strands_robots.station.limits`, with a marker); refused again, it is dropped with one log line.
- **Past** ``max_backlog`` the backlog is coalesced to the newest snapshot of each job (a job's terminal
  snapshot is kept over any other); a snapshot in flight is removed only by its own answer, so nothing not
  yet sent is ever lost. With more jobs than ``max_backlog`` every job's newest is kept.

Jobs: ``on_job(pb.Job)`` is called once per job id for each job addressed to this station that has not
ended (after a reconnect, only new ones), and ``on_cancel(job_id, reason)`` once per cancel request. They run
on the link's thread: hand the work over, don't block in them.

Policy sessions: :meth:`StationLink.open_session` opens the station's side of one
(:class:`~strands_robots.station_link.session.PolicySession`).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Deque, List, Optional, Sequence

import grpc

from strands_robots.client.credential_files import read_trusted_file
from strands_robots.client.relay_targets import channel_target
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.wire.proto import station_service_pb2 as ss
from strands_robots.wire.proto import station_service_pb2_grpc as ss_grpc
from strands_robots.station_link.snapshot_fit import cut_snapshot, fit_snapshot
from strands_robots.station_link.session import PolicySession
from strands_robots.wire.message_size import MAX_MESSAGE_BYTES

_log = logging.getLogger("strands_robots.station_link.link")

_BATCH = 64
_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
# A ReportStatus call refused for what it carries (not for where the relay is): never sent again as it is.
_CONTENT_REFUSED = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED})
_REQUEST_OVERHEAD_BYTES = 4096  # the request's own fields, beside its snapshots


def _now_ms() -> int:
    return int(time.time() * 1000)


def _to_pb_status(status: Any) -> Any:
    if isinstance(status, ev.JobStatus):
        return status
    from strands_robots.wire.pb_model import job_status_to_pb

    return job_status_to_pb(status)


def _describe(status: Any) -> str:
    sequence = getattr(status, "sequence", 0)
    return (f"job {status.job_id!r}'s {status.state} snapshot"
            + (f" #{sequence}" if sequence else "") + f" ({status.ByteSize()} bytes)")


class _Entry:
    """One snapshot in the backlog; ``cut``: already cut once after a refusal; ``fitted``: made to fit a message."""

    __slots__ = ("msg", "cut", "fitted")

    def __init__(self, msg: Any, was_cut: bool = False, fitted: bool = False) -> None:
        self.msg = msg
        self.cut = was_cut
        self.fitted = fitted


def _smaller(entry: _Entry, reason: str) -> Optional[_Entry]:
    """Return what to send instead of a refused snapshot (never the same again), or None: drop it.

    Refused for its size: trimmed to half its size (``station_link.snapshot_fit``), while that makes it smaller. Refused
    for its texts: cut to the text limits, once.
    """
    if grpc.StatusCode.RESOURCE_EXHAUSTED.name in reason:
        size = entry.msg.ByteSize()
        fitted = fit_snapshot(entry.msg, size // 2)
        if fitted is None or fitted.ByteSize() >= size:
            return None
        _log.warning("relay refused %s: %s; sending it again trimmed to %d bytes", _describe(entry.msg), reason,
                     fitted.ByteSize())
        return _Entry(fitted, entry.cut, fitted=True)
    if entry.cut:
        return None
    short = cut_snapshot(entry.msg)
    if short == entry.msg:
        return None
    _log.warning("relay refused %s: %s; sending it again cut to the text limits", _describe(entry.msg), reason)
    return _Entry(short, was_cut=True)


class StationLink:
    """Reports, heartbeats and the job stream of one station (threads started by :meth:`start`).

    :param target: ``host:port`` of the relay, or several (a list, or one string separated by commas): the
        relays of a cluster; the link uses the first that answers and moves to the next when it dies.
    :param root_certificates: PEM bytes or a path for TLS; None for a plain channel.
    :param retry_s: ``(first, longest)`` wait between attempts while the relay is unreachable (doubling).
    :param offer: what this station offers (a ``StationOffer`` message: its suites), sent on every ``TakeJobs``
        so the relay lists it and checks jobs against it.
    """

    def __init__(self, target: "str | Sequence[str]", station_id: str, token: str, *,
                 on_job: Optional[Callable[[Any], None]] = None,
                 on_cancel: Optional[Callable[[str, str], None]] = None,
                 root_certificates: "bytes | str | Path | None" = None, heartbeat_s: float = 2.0,
                 retry_s: "tuple[float, float]" = (0.1, 2.0), call_timeout_s: float = 10.0,
                 max_backlog: int = 10000, max_message_bytes: int = MAX_MESSAGE_BYTES,
                 clock_ms: Callable[[], int] = _now_ms, offer: Any = None) -> None:
        if not station_id or not token:
            raise ValueError("StationLink needs a station_id and a token")
        self.station_id = station_id
        self.target = target if isinstance(target, str) else ",".join(target)
        channel_to, extra = channel_target(target)  # several relays: the link fails over between them
        self._metadata = (("authorization", f"Bearer {token}"),)
        opts = [("grpc.max_send_message_length", max_message_bytes),
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.keepalive_time_ms", 20000),
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", int(retry_s[1] * 1000)), *extra]
        if root_certificates is not None:
            if isinstance(root_certificates, (str, Path)):  # yours or root's, others may not write it, bounded
                root_certificates = read_trusted_file(root_certificates, "root_certificates")
            self._channel = grpc.secure_channel(channel_to, grpc.ssl_channel_credentials(root_certificates), opts)
        else:
            self._channel = grpc.insecure_channel(channel_to, opts)
        self._stub = ss_grpc.StationStub(self._channel)
        self._on_job = on_job
        self._on_cancel = on_cancel
        self._offer = offer  # the station's StationOffer (its suites), sent with every TakeJobs
        self._heartbeat_s = heartbeat_s
        self._retry_s = retry_s
        self._timeout_s = call_timeout_s
        self._max_backlog = max_backlog
        self._max_batch_bytes = max(1, max_message_bytes - _REQUEST_OVERHEAD_BYTES)
        self._clock_ms = clock_ms
        self._cond = threading.Condition()
        self._backlog: Deque[_Entry] = deque()
        self._in_flight: List[_Entry] = []
        self._solo = 0  # snapshots still to send one at a time (a batch was refused as a whole)
        self._closed = False
        self._connected = False
        self._threads: List[threading.Thread] = []
        self._jobs_call: Any = None
        self._delivered_jobs: set = set()
        self._delivered_cancels: set = set()
        self.reports_sent = 0
        self.heartbeats_sent = 0
        self.dropped = 0  # snapshots refused even cut (each logged once)
        self.uploader: Any = None  # recording_upload.RecordingUploader, made on the first recording
        self.last_error = ""

    # -- lifetime ------------------------------------------------------------------------------------------
    def start(self) -> "StationLink":
        targets = [self._report_loop, self._heartbeat_loop] + (
            [self._jobs_loop] if self._on_job or self._on_cancel else [])
        for target in targets:
            t = threading.Thread(target=target, name=f"station-link-{target.__name__}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def close(self, flush_timeout_s: float = 0.0) -> None:
        """Stop the threads (after trying to send the backlog for up to ``flush_timeout_s``)."""
        if flush_timeout_s > 0:
            self.flush(flush_timeout_s)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        call = self._jobs_call
        if call is not None:
            call.cancel()
        for t in self._threads:
            t.join(timeout=5.0)
        if self.uploader is not None:
            self.uploader.close(flush_timeout_s)
        self._channel.close()

    def upload_recording(self, job_id: str, episode_id: str, path: "str | Path", on_done: Any = None) -> None:
        """Queue the episode's recording for its job's team (sent from a thread of its own; never blocks).

        ``on_done`` (optional) is called with the upload's ``UploadResult`` once it is stored or given up.
        """
        from strands_robots.station_link.recording_upload import RecordingUploader

        with self._cond:
            if self.uploader is None:
                self.uploader = RecordingUploader(self._stub, self._metadata)
        self.uploader.submit(job_id, episode_id, path, on_done)

    def __enter__(self) -> "StationLink":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- reporting -------------------------------------------------------------------------------------------
    def report(self, status: Any) -> None:
        """Queue a snapshot (``station.model.JobStatus`` or ``pb.JobStatus``) for the relay. Never blocks.

        A snapshot larger than one message is trimmed to fit before it is sent (``station_link.snapshot_fit``).
        """
        msg = _to_pb_status(status)
        with self._cond:
            self._backlog.append(_Entry(msg))
            if len(self._backlog) > self._max_backlog:
                self._coalesce_locked()
            self._cond.notify_all()

    def _coalesce_locked(self) -> None:
        """Keep only the newest snapshot of each job (its terminal one, if it has one), in report order."""
        keep: dict = {}
        for entry in self._backlog:
            held = keep.get(entry.msg.job_id)
            if held is None or held.msg.state not in _TERMINAL or entry.msg.state in _TERMINAL:
                keep[entry.msg.job_id] = entry
        kept = {id(entry) for entry in keep.values()}
        self._backlog = deque(entry for entry in self._backlog if id(entry) in kept)

    @property
    def backlog(self) -> int:
        """Snapshots not yet acknowledged by the relay."""
        with self._cond:
            return len(self._backlog)

    @property
    def in_flight(self) -> int:
        """Snapshots of the ReportStatus call under way (0 when none is)."""
        with self._cond:
            return len(self._in_flight)

    def pending(self) -> List[Any]:
        """Return a copy of the backlog, oldest first (``pb.JobStatus``)."""
        with self._cond:
            return [entry.msg for entry in self._backlog]

    @property
    def connected(self) -> bool:
        """Whether the last call to the relay succeeded."""
        return self._connected

    def flush(self, timeout_s: float) -> bool:
        """Wait until the backlog is empty (True) or ``timeout_s`` passed (False)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._backlog and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
            return not self._backlog

    def _take_batch_locked(self) -> List[_Entry]:
        """Return the head of the backlog: one snapshot while hunting a refused one, else up to a full batch."""
        if self._solo > 0:
            self._solo -= 1
            return [self._backlog[0]]
        batch: List[_Entry] = []
        size = 0
        for entry in itertools.islice(self._backlog, _BATCH):
            size += entry.msg.ByteSize()
            if batch and size > self._max_batch_bytes:
                break
            batch.append(entry)
        return batch

    def _report_loop(self) -> None:
        delay = self._retry_s[0]
        while True:
            with self._cond:
                while not self._closed and not self._backlog:
                    self._cond.wait(0.5)
                if self._closed:
                    return
                batch = self._take_batch_locked()
                self._in_flight = batch
            for entry in batch:
                self._fit(entry)
            try:
                response = self._stub.ReportStatus(
                    ss.ReportStatusRequest(station_id=self.station_id, snapshots=[e.msg for e in batch]),
                    metadata=self._metadata, timeout=self._timeout_s)
            except grpc.RpcError as exc:
                with self._cond:
                    self._in_flight = []
                if hasattr(exc, "code") and exc.code() in _CONTENT_REFUSED:
                    self._heard()
                    self._refused_call(batch, f"{exc.code().name}: {exc.details()}")
                    continue
                self._failed(exc)
                with self._cond:
                    if self._closed:
                        return
                    self._cond.wait(delay)
                delay = min(delay * 2, self._retry_s[1])
                continue
            self._heard()
            delay = self._retry_s[0]
            self._answered(batch, response)

    def _fit(self, entry: _Entry) -> None:
        """Make the entry's snapshot fit one message (``snapshot_fit.py``), once; say so when it was trimmed."""
        if entry.fitted:
            return
        msg = entry.msg
        fitted = fit_snapshot(msg, self._max_batch_bytes)
        if fitted is None:
            _log.warning("%s does not fit one relay message of %d bytes even trimmed; sent as it is", _describe(msg),
                         self._max_batch_bytes)
        elif fitted is not msg:
            _log.info("%s trimmed to %d bytes to fit one relay message", _describe(msg), fitted.ByteSize())
            entry.msg = fitted
        entry.fitted = True

    def _answered(self, batch: List[_Entry], response: Any) -> None:
        """Remove exactly the snapshots the relay answered for; a refused one is cut once and sent again."""
        refused_jobs = {}
        for refused in response.refused:
            job_id = refused.split(": ", 1)[0]
            refused_jobs[job_id] = refused
        with self._cond:
            self._in_flight = []
            sent = {id(entry) for entry in batch}
            self._backlog = deque(entry for entry in self._backlog if id(entry) not in sent)
            self.reports_sent += len(batch)
            resend: List[_Entry] = []
            for job_id, reason in refused_jobs.items():
                last = [entry for entry in batch if entry.msg.job_id == job_id][-1:]
                if not last:
                    _log.warning("relay refused a snapshot: %s", reason)
                    continue
                entry = last[0]
                if any(e.msg.job_id == job_id for e in self._backlog):
                    _log.warning("relay refused %s: %s; its newer snapshot replaces it", _describe(entry.msg), reason)
                    continue
                smaller = _smaller(entry, reason)
                if smaller is not None:
                    resend.append(smaller)
                else:
                    self.dropped += 1
                    _log.warning("relay refused %s: %s; dropped", _describe(entry.msg), reason)
            self._backlog.extendleft(reversed(resend))
            self._cond.notify_all()

    def _refused_call(self, batch: List[_Entry], reason: str) -> None:
        """Find the snapshot of a call refused for its content, then replace, cut or drop it."""
        with self._cond:
            if len(batch) > 1:
                self._solo = len(batch)
                _log.warning("relay refused a report of %d snapshots (%s); sending them one at a time",
                             len(batch), reason)
                return
            entry = batch[0]
            if not any(e is entry for e in self._backlog):
                return  # coalesced away meanwhile: a newer snapshot of its job is queued
            if any(e is not entry and e.msg.job_id == entry.msg.job_id for e in self._backlog):
                self._backlog.remove(entry)
                _log.warning("relay refused %s: %s; its newer snapshot replaces it", _describe(entry.msg), reason)
                self._cond.notify_all()
                return
            smaller = _smaller(entry, reason)
            if smaller is not None:
                entry.msg, entry.cut, entry.fitted = smaller.msg, smaller.cut, smaller.fitted
            else:
                self._backlog.remove(entry)
                self.dropped += 1
                _log.warning("relay refused %s: %s; dropped", _describe(entry.msg), reason)
            self._cond.notify_all()

    def _heartbeat_loop(self) -> None:
        """Tell the relay the station is there every ``heartbeat_s``, whatever the reports are doing."""
        next_beat = time.monotonic()
        while True:
            with self._cond:
                while not self._closed and time.monotonic() < next_beat:
                    self._cond.wait(max(0.0, min(next_beat - time.monotonic(), 0.5)))
                if self._closed:
                    return
            try:
                self._stub.Heartbeat(ss.HeartbeatRequest(station_id=self.station_id, unix_ms=self._clock_ms()),
                                     metadata=self._metadata, timeout=min(self._timeout_s, max(1.0, self._heartbeat_s)))
                self.heartbeats_sent += 1
                self._heard()
                next_beat = time.monotonic() + self._heartbeat_s
            except grpc.RpcError as exc:
                self._failed(exc)
                next_beat = time.monotonic() + min(self._heartbeat_s, self._retry_s[1])

    def _heard(self) -> None:
        if not self._connected:
            _log.info("relay %s reachable", self.target)
        self._connected = True

    def _failed(self, exc: grpc.RpcError) -> None:
        reason = f"{exc.code().name}: {exc.details()}" if hasattr(exc, "code") else str(exc)
        if self._connected or reason != self.last_error:
            _log.warning("relay %s: %s (%d snapshot(s) kept for later)", self.target, reason, self.backlog)
        self.last_error = reason
        self._connected = False

    # -- jobs --------------------------------------------------------------------------------------------------
    def _jobs_loop(self) -> None:
        delay = self._retry_s[0]
        while not self._closed:
            try:
                request = ss.TakeJobsRequest(station_id=self.station_id)
                if self._offer is not None:
                    request.offer.CopyFrom(self._offer)
                call = self._stub.TakeJobs(request, metadata=self._metadata)
                self._jobs_call = call
                if self._closed:
                    call.cancel()
                for assignment in call:
                    delay = self._retry_s[0]
                    self._deliver(assignment)
            except grpc.RpcError as exc:
                if self._closed or exc.code() == grpc.StatusCode.CANCELLED:
                    if self._closed:
                        return
                else:
                    self.last_error = f"{exc.code().name}: {exc.details()}"
            with self._cond:
                if self._closed:
                    return
                self._cond.wait(delay)
            delay = min(delay * 2, self._retry_s[1])

    def _deliver(self, assignment: Any) -> None:
        kind = assignment.WhichOneof("kind")
        try:
            if kind == "job" and assignment.job.job_id not in self._delivered_jobs:
                self._delivered_jobs.add(assignment.job.job_id)
                if self._on_job:
                    self._on_job(assignment.job)
            elif kind == "cancel" and assignment.cancel.job_id not in self._delivered_cancels:
                self._delivered_cancels.add(assignment.cancel.job_id)
                if self._on_cancel:
                    self._on_cancel(assignment.cancel.job_id, assignment.cancel.reason)
        except Exception:
            _log.exception("station callback for %s failed", kind)

    # -- policy sessions --------------------------------------------------------------------------------------
    def open_session(self, job_id: str, *, slot: str = "", reply_timeout_s: float = 30.0) -> "PolicySession":
        """Open the station's side of the job's policy session (returns at once; see ``wait_attached``).

        :param slot: a comparison job's slot: its own session, reaching the policy served for that slot.
        """
        return PolicySession(self._stub, self._metadata, job_id, reply_timeout_s, slot)
