"""Where the status page reads jobs: the relay's store, through the same rules the relay's services keep.

- A client sees only its own jobs, by its own name for each (``client_job_id``); another team's job and a
  missing one are the same None, so the page answers both with one 404.
- A station sees the jobs addressed to it, by the relay's id (what it was sent): its queue is the ones not ended.

Every call is synchronous (the store's); the web server runs them on its own small thread pool.
"""

from __future__ import annotations

from typing import List, Optional

from strands_robots.relay.auth import KIND_CLIENT, Principal
from strands_robots.relay.core import RelayCore
from strands_robots.relay.store import Store
from strands_robots.relay.web.view_model import JobPage, job_page

#: jobs one list page shows (newest first)
MAX_LISTED_JOBS = 50

_CLIENT_JOB_IDS = ("SELECT client_job_id FROM jobs WHERE client_id = {p} "
                   "ORDER BY submitted_unix_ms DESC, job_id DESC LIMIT {p}")


class JobSource:
    """Read the jobs a principal may see from ``store``, as :class:`JobPage` values."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def page(self, principal: Principal, job_id: str) -> Optional[JobPage]:
        """Return the job ``principal`` knows as ``job_id``, or None (missing and another's are the same)."""
        if not job_id:
            return None
        if principal.kind == KIND_CLIENT:
            view = self._store.view_for_client(principal.name, job_id)
            if view is None or view.job.client_id != principal.name:
                return None
            return job_page(view, RelayCore.status_of_view(view), view.job.client_job_id)
        view = self._store.view(job_id)
        if view is None or view.job.station_id != principal.name:
            return None
        return job_page(view, RelayCore.status_of_view(view), view.job.job_id)

    def pages(self, principal: Principal) -> List[JobPage]:
        """Return a client's newest jobs (at most :data:`MAX_LISTED_JOBS`), or a station's queue (jobs not ended)."""
        if principal.kind == KIND_CLIENT:
            ids = [row[0] for row in self._store.read_sql(_CLIENT_JOB_IDS, (principal.name, MAX_LISTED_JOBS))]
        else:
            ids = [job.job_id for job in self._store.open_jobs_for_station(principal.name)][:MAX_LISTED_JOBS]
        found = (self.page(principal, job_id) for job_id in ids)
        return [p for p in found if p is not None]
