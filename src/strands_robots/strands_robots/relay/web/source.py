"""Where the status page reads jobs: the relay's store, through the same rules the relay's services keep.

- A client sees only its own jobs, by its own name for each (``client_job_id``); another team's job and a
  missing one are the same None, so the page answers both with one 404.
- A station sees the jobs addressed to it, by the relay's id (what it was sent): its queue is the ones not ended.
- An episode's recording (``recording_store``, uploaded by the station) is reachable only through a job the
  principal may see, and only once complete (its size and SHA-256 checked by the relay on upload).

Every call is synchronous (the store's); the web server runs them on its own small thread pool.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from strands_robots.relay import recording_store
from strands_robots.relay.auth import KIND_CLIENT, Principal
from strands_robots.relay.core import RelayCore
from strands_robots.relay.recording_store import RecordingRow
from strands_robots.relay.store import JobView, Store
from strands_robots.relay.web.thumbnails import ThumbnailCache, first_frame
from strands_robots.relay.web.view_model import JobPage, job_page

#: jobs one list page shows (newest first)
MAX_LISTED_JOBS = 50

_CLIENT_JOB_IDS = ("SELECT client_job_id FROM jobs WHERE client_id = {p} "
                   "ORDER BY submitted_unix_ms DESC, job_id DESC LIMIT {p}")
# What a listed job's row may change with, for the list's live view: one query, no snapshot decoded.
_FINGERPRINT = ("SELECT j.job_id, COALESCE(s.sequence, -1), COALESCE(s.updated_unix_ms, -1), j.cancel_requested "
                "FROM jobs j LEFT JOIN snapshots s ON s.job_id = j.job_id WHERE {where} "
                "ORDER BY j.submitted_unix_ms DESC, j.job_id DESC LIMIT {p}")
_CLIENT_ROWS = "j.client_id = {p}"
_STATION_ROWS = "j.station_id = {p} AND (s.state IS NULL OR s.state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED'))"


class JobSource:
    """Read the jobs a principal may see from ``store``, as :class:`JobPage` values."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._thumbnails = ThumbnailCache()
        recording_store.ensure_tables(store)  # a page opened on a store no relay has prepared yet

    def view(self, principal: Principal, job_id: str) -> Optional[JobView]:
        """Return the job ``principal`` knows as ``job_id``, or None (missing and another's are the same)."""
        if not job_id:
            return None
        if principal.kind == KIND_CLIENT:
            view = self._store.view_for_client(principal.name, job_id)
            return view if view is not None and view.job.client_id == principal.name else None
        view = self._store.view(job_id)
        return view if view is not None and view.job.station_id == principal.name else None

    @staticmethod
    def shown_id(principal: Principal, view: JobView) -> str:
        """Return the id ``principal`` knows the job by: a client's own name for it, a station's relay id."""
        return view.job.client_job_id if principal.kind == KIND_CLIENT else view.job.job_id

    def page(self, principal: Principal, job_id: str) -> Optional[JobPage]:
        """Return the page of the job ``principal`` knows as ``job_id``, or None (see :meth:`view`)."""
        view = self.view(principal, job_id)
        if view is None:
            return None
        return job_page(view, RelayCore.status_of_view(view), self.shown_id(principal, view))

    def recordings(self, principal: Principal, job_id: str) -> Dict[str, RecordingRow]:
        """Return the recordings the relay holds of the job's episodes, complete ones only, by episode id."""
        view = self.view(principal, job_id)
        if view is None:
            return {}
        return {r.episode_id: r for r in recording_store.infos(self._store, view.job.job_id) if r.complete}

    def recording(self, principal: Principal, job_id: str, episode_id: str) -> Optional[RecordingRow]:
        """Return one episode's complete recording of a job ``principal`` may see; None otherwise."""
        view = self.view(principal, job_id)
        if view is None:
            return None
        row = recording_store.info(self._store, view.job.job_id, episode_id)
        return row if row is not None and row.complete else None

    def chunk(self, row: RecordingRow, seq: int) -> Optional[bytes]:
        return recording_store.chunk(self._store, row.job_id, row.episode_id, seq)

    def thumbnail_of(self, row: RecordingRow) -> Optional[Tuple[str, bytes]]:
        """Return a recording's first camera frame (content type, bytes), or None; cached per recording."""
        return self._thumbnails.get((row.job_id, row.episode_id, row.sha256),
                                    lambda: first_frame(lambda seq: self.chunk(row, seq), row.chunks))

    def fingerprint(self, principal: Principal) -> tuple:
        """Return a value that changes whenever :meth:`pages` may (a job in or out, a new snapshot, a cancel)."""
        where = _CLIENT_ROWS if principal.kind == KIND_CLIENT else _STATION_ROWS
        sql = _FINGERPRINT.replace("{where}", where)
        return tuple(tuple(r) for r in self._store.read_sql(sql, (principal.name, MAX_LISTED_JOBS)))

    def pages(self, principal: Principal) -> List[JobPage]:
        """Return a client's newest jobs (at most :data:`MAX_LISTED_JOBS`), or a station's queue (jobs not ended)."""
        if principal.kind == KIND_CLIENT:
            ids = [row[0] for row in self._store.read_sql(_CLIENT_JOB_IDS, (principal.name, MAX_LISTED_JOBS))]
        else:
            ids = [job.job_id for job in self._store.open_jobs_for_station(principal.name)][:MAX_LISTED_JOBS]
        found = (self.page(principal, job_id) for job_id in ids)
        return [p for p in found if p is not None]
