"""The station's recordings on their way to the team: pending on disk until the relay holds them.

:class:`RecordingSender` joins the link's uploader (``StationLink.upload_recording``: one thread, retries while
the relay is away) to the durable list of pending recordings (:mod:`station.pending_uploads`):

- :meth:`keep` — the rollout named its recording (job thread, before the episode is persisted as finished):
  a relay job's recording is written pending;
- :meth:`send` — the episode is persisted and reported: the upload is queued; its end removes the entry
  (stored), keeps it aside (refused for the recording itself) or leaves it pending;
- :meth:`resend_pending` — at start, before any job runs: every pending recording whose episode the station
  holds as finished (same run, same SHA-256) is sent again; the others' entries are dropped with the reason;
- :meth:`retry_given_up` — called periodically: an upload the uploader gave up on (the relay away longer than
  its retries) is queued again, so a long outage delays a recording but never loses it.

Nothing here waits for the relay; the callbacks run on the uploader's thread.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional, Sequence

from strands_robots.station.pending_uploads import PendingUpload, PendingUploads, settle, sort_pending
from strands_robots.station.durable_files import PersistenceError

__all__ = ["RecordingSender"]


class RecordingSender:
    """See the module docstring.

    :param uploads: the station's pending recordings.
    :param link: has ``upload_recording(job_id, episode_id, path, on_done=...)`` (``StationLink``).
    :param episodes_of: a job's finished episodes, None when the station has no such job.
    :param info, warning, error: where the outcomes are logged (one line each).
    """

    def __init__(self, uploads: PendingUploads, link: Any, episodes_of: Callable[[str], Optional[Sequence]], *,
                 info: Callable[[str], None], warning: Callable[[str], None],
                 error: Callable[[str], None]) -> None:
        self.uploads = uploads
        self._link = link
        self._episodes_of = episodes_of
        self._info, self._warning, self._error = info, warning, error
        self._lock = threading.Lock()
        self._given_up: Dict[str, PendingUpload] = {}
        self._closed = False

    def keep(self, job_id: str, episode_id: str, run_id: str, path: str, sha256: str) -> None:
        """Write a recording pending (before its episode is persisted as finished)."""
        try:
            self.uploads.add(PendingUpload(job_id, episode_id, run_id, path, sha256))
        except PersistenceError as exc:
            self._error(f"recording of {job_id} {episode_id} is not kept pending ({exc}); it is sent, but not "
                        "again if the station stops first")

    def send(self, job_id: str, episode_id: str, run_id: str, path: str) -> None:
        """Queue a persisted episode's recording for its team."""
        upload = PendingUpload(job_id, episode_id, run_id, path, "")
        self._link.upload_recording(job_id, episode_id, path, on_done=lambda result: self._done(upload, result))

    def resend_pending(self) -> int:
        """At start: send again every pending recording of a finished episode; how many were queued."""
        pending, problems = self.uploads.load()
        for problem in problems:
            self._error(problem)
        resend, dropped = sort_pending(pending, self._episodes_of)
        for upload, why in dropped:
            self._warning(f"pending recording {upload.path} not sent: {why}")
            self.uploads.remove(upload.run_id)
        for upload in resend:
            self._info(f"recording of {upload.job_id} {upload.episode_id} sent again after a restart")
            self.send(upload.job_id, upload.episode_id, upload.run_id, upload.path)
        return len(resend)

    def retry_given_up(self) -> int:
        """Queue again every upload given up while the relay was away; how many were queued."""
        with self._lock:
            again, self._given_up = list(self._given_up.values()), {}
        for upload in again:
            self.send(upload.job_id, upload.episode_id, upload.run_id, upload.path)
        return len(again)

    def close(self) -> None:
        """Stop retrying (what is still pending stays on disk for the next start)."""
        with self._lock:
            self._closed = True

    def _done(self, upload: PendingUpload, result: Any) -> None:
        what = settle(result.ok, result.code)
        if what == "sent":
            self.uploads.remove(upload.run_id)
        elif what == "refused":
            kept = self.uploads.refuse(upload.run_id, f"{result.code}: {result.reason}")
            self._error(f"recording of {upload.job_id} {upload.episode_id} refused by the relay ({result.code}: "
                        f"{result.reason}); kept as {kept}, not sent again")
        else:
            with self._lock:
                if not self._closed:
                    self._given_up[upload.run_id] = upload
            self._warning(f"recording of {upload.job_id} {upload.episode_id} not sent yet ({result.code}: "
                          f"{result.reason}); pending on disk, tried again later")
