"""The station's side of recordings to the team: each episode's MCAP sent to the relay, in chunks, hashed.

:class:`RecordingUploader` takes ``(job_id, episode_id, path)`` from the station (``StationLink.upload_recording``
after each episode that recorded) and sends it from a thread of its own, one at a time, in the order given:
first the file's SHA-256 and size (one read of the file), then a header with them and the file's bytes in
chunks of :data:`CHUNK_BYTES` (a second read), so the relay can check what arrived against what the station has.
A relay that cannot be reached (UNAVAILABLE, DEADLINE_EXCEEDED), or another upload of the episode under way
through another relay (ABORTED), is tried again with a doubling pause, up to ``attempts``; a refusal for the
recording itself (too large, not matching, not this station's job) is logged once and not retried. Nothing here
blocks the station: :meth:`submit` only queues; its ``on_done`` hears how each upload ended (the station keeps
a recording pending on disk until then, ``station/pending_uploads.py``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Sequence

import grpc

from strands_robots.wire.proto import recording_pb2 as rp

_log = logging.getLogger("strands_robots.station_link.recording_upload")

CHUNK_BYTES = 1024 * 1024
#: tried again: the relay unreachable or slow, or another upload of the episode under way (ABORTED)
_RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED})
_STOP = object()


def file_digest(path: "str | Path") -> "tuple[int, str]":
    """Return the file's size and SHA-256 (hex), read in chunks."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK_BYTES)
            if not block:
                break
            size += len(block)
            digest.update(block)
    return size, digest.hexdigest()


def chunks(job_id: str, episode_id: str, path: "str | Path", size: int, sha256: str) -> Iterator[Any]:
    """Yield the upload's messages: the header, then the file's bytes."""
    yield rp.RecordingChunk(header=rp.RecordingHeader(job_id=job_id, episode_id=episode_id, size_bytes=size,
                                                      sha256=sha256, file_name=os.path.basename(str(path))))
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK_BYTES)
            if not block:
                return
            yield rp.RecordingChunk(data=block)


@dataclass
class UploadResult:
    """How one upload ended: ``ok`` (stored, or already held) or the last error's code and reason."""

    job_id: str
    episode_id: str
    path: str
    ok: bool
    already_stored: bool = False
    code: str = ""
    reason: str = ""
    attempts: int = 0


def upload(stub: Any, metadata: Sequence, job_id: str, episode_id: str, path: "str | Path",
           timeout_s: Optional[float] = None) -> Any:
    """Send one recording now (raises ``grpc.RpcError`` with the relay's refusal); the relay's response."""
    size, sha256 = file_digest(path)
    return stub.UploadRecording(chunks(job_id, episode_id, path, size, sha256), metadata=metadata, timeout=timeout_s)


class RecordingUploader:
    """Uploads queued recordings one at a time from a thread of its own; see the module docstring.

    :param stub: a ``StationStub`` on the station's channel to the relay.
    :param metadata: the station's call metadata (its bearer token).
    """

    def __init__(self, stub: Any, metadata: Sequence, *, attempts: int = 6, retry_s: "tuple[float, float]" = (0.5, 8.0),
                 timeout_s: float = 600.0) -> None:
        self._stub = stub
        self._metadata = tuple(metadata)
        self._attempts = attempts
        self._retry_s = retry_s
        self._timeout_s = timeout_s
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._pending = 0
        self.results: List[UploadResult] = []
        self._thread = threading.Thread(target=self._run, name="station-recordings", daemon=True)
        self._thread.start()

    def submit(self, job_id: str, episode_id: str, path: "str | Path",
               on_done: "Optional[Callable[[UploadResult], None]]" = None) -> None:
        """Queue one recording; ``on_done`` is called with its :class:`UploadResult` (on the uploader's thread)."""
        with self._idle:
            self._pending += 1
        self._queue.put((job_id, episode_id, str(path), on_done))

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until every submitted recording was sent or given up; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout_s)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            *item, on_done = item
            try:
                result = self._send(*item)
            except Exception as exc:  # noqa: BLE001 - one recording's failure never ends the uploader
                result = UploadResult(*item, ok=False, code="ERROR", reason=f"{type(exc).__name__}: {exc}")
                _log.error("recording of job %s episode %s not sent: %s", item[0], item[1], result.reason)
            if on_done is not None:
                try:
                    on_done(result)
                except Exception:  # noqa: BLE001 - the caller's bookkeeping never ends the uploader
                    _log.exception("recording of job %s episode %s: on_done failed", item[0], item[1])
            with self._idle:
                self.results.append(result)
                self._pending -= 1
                self._idle.notify_all()

    def _send(self, job_id: str, episode_id: str, path: str) -> UploadResult:
        pause = self._retry_s[0]
        result = UploadResult(job_id, episode_id, path, ok=False)
        for attempt in range(1, self._attempts + 1):
            result.attempts = attempt
            try:
                response = upload(self._stub, self._metadata, job_id, episode_id, path, self._timeout_s)
            except OSError as exc:
                result.code, result.reason = "FILE", f"cannot read {path}: {exc.strerror or exc}"
                _log.error("recording of job %s episode %s not sent: %s", job_id, episode_id, result.reason)
                return result
            except grpc.RpcError as exc:
                result.code = exc.code().name if exc.code() is not None else "UNKNOWN"
                result.reason = exc.details() or str(exc)
                if exc.code() not in _RETRIED:
                    _log.error("recording of job %s episode %s refused by the relay: %s: %s", job_id, episode_id,
                               result.code, result.reason)
                    return result
                if self._stop.wait(pause):
                    return result
                pause = min(pause * 2, self._retry_s[1])
                continue
            result.ok, result.already_stored, result.code, result.reason = True, response.already_stored, "OK", ""
            _log.info("recording of job %s episode %s sent (%s)", job_id, episode_id,
                      "already held" if response.already_stored else path)
            return result
        _log.error("recording of job %s episode %s not sent after %d attempts: %s", job_id, episode_id,
                   self._attempts, result.reason)
        return result

    def close(self, timeout_s: float = 0.0) -> None:
        """Stop: wait at most ``timeout_s`` for what is queued to be sent; a pause before a retry ends at once."""
        if timeout_s > 0:
            self.wait_idle(timeout_s)
        self._stop.set()
        self._queue.put(_STOP)
        self._thread.join(timeout=max(timeout_s, 5.0))
