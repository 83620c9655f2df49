"""Where the status page reads jobs: the relay's store, through the same rules the relay's services keep.

- A client sees only its own jobs, by its own name for each (``client_job_id``), and the comparisons other teams
  invited it to, by the relay's id (``relay.job_teams``); any other team's job and a missing one are the same None,
  so the page answers both with one 404. In a comparison between teams each team reaches only its own slots'
  recordings.
- A station sees the jobs addressed to it, by the relay's id (what it was sent): its queue is the ones not ended.
- A comparison held for another team's accept shows whom it waits for and until when, read by the same rule the
  relay's gRPC status reads (``job_teams.held``, the relay's ``invitation_timeout_s``); one whose invitation passed
  that bound is ended on read, as the relay's own reads end it, so the page and the relay never disagree.
- An episode's recording (``recording_store``, uploaded by the station) is reachable only through a job the
  principal may see, and only once complete (its size and SHA-256 checked by the relay on upload).

Every call is synchronous (the store's); the web server runs them on its own small thread pool.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Tuple

from strands_robots.relay import comparison_blocks, recording_store
from strands_robots.relay.auth import KIND_CLIENT, Principal
from strands_robots.relay.core import RelayCore
from strands_robots.relay.recording_store import RecordingRow
from strands_robots.relay.store import JobRecord, JobView, Snapshot, Store
from strands_robots.relay.web.leaderboard_view import LeaderboardPage, leaderboard_page
from strands_robots.relay.web.thumbnails import ThumbnailCache, first_frame
from strands_robots.relay.web.view_model import JobPage, job_page

#: jobs one list page shows (newest first)
MAX_LISTED_JOBS = 50

# The listed jobs with their snapshots and stations' last-heard times in one query (not one per job).
_LIST = ("SELECT j.job_id, j.client_id, j.station_id, j.request, j.submitted_unix_ms, j.cancel_requested, "
         "j.cancel_reason, j.episodes_total, j.client_job_id, s.updated_unix_ms, s.state, s.payload, s.episodes_done, "
         "s.sequence, st.last_heard_unix_ms FROM jobs j LEFT JOIN snapshots s ON s.job_id = j.job_id "
         "LEFT JOIN stations st ON st.station_id = j.station_id WHERE {where} "
         "ORDER BY {order} LIMIT {p}")
# What a listed job's row may change with, for the list's live view: one query, no snapshot decoded.
_FINGERPRINT = ("SELECT j.job_id, COALESCE(s.sequence, -1), COALESCE(s.updated_unix_ms, -1), j.cancel_requested "
                "FROM jobs j LEFT JOIN snapshots s ON s.job_id = j.job_id WHERE {where} "
                "ORDER BY {order} LIMIT {p}")
_NEWEST_FIRST = "j.submitted_unix_ms DESC, j.job_id DESC"   # a team's jobs
_QUEUE_ORDER = "j.submitted_unix_ms, j.job_id"                # a station's queue, in the order it runs them
# a team's own jobs and the comparisons other teams invited it to (relay.job_teams)
_CLIENT_ROWS = "(j.client_id = {p} OR j.job_id IN (SELECT t.job_id FROM job_teams t WHERE t.team = {p}))"
_STATION_ROWS = "j.station_id = {p} AND (s.state IS NULL OR s.state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED'))"


def _view_of(row: tuple) -> JobView:
    job = JobRecord(job_id=row[0], client_id=row[1], station_id=row[2], request=bytes(row[3]),
                    submitted_unix_ms=int(row[4]), cancel_requested=bool(row[5]), cancel_reason=row[6] or "",
                    episodes_total=int(row[7]), client_job_id=row[8] or "")
    snapshot = None if row[10] is None else Snapshot(job_id=row[0], updated_unix_ms=int(row[9]), state=row[10],
                                                     payload=bytes(row[11]), episodes_done=int(row[12]),
                                                     sequence=int(row[13]))
    return JobView(job=job, snapshot=snapshot, station_last_heard=None if row[14] is None else int(row[14]))


class JobSource:
    """Read the jobs a principal may see from ``store``, as :class:`JobPage` values."""

    def __init__(self, store: Store, invitation_timeout_s: Optional[float] = None,
                 clock_ms: Optional[Callable[[], int]] = None) -> None:
        """Read ``store``; a held comparison's deadline by the relay's settings and clock.

        :param invitation_timeout_s: the relay's (``RelaySettings``); None: a held job's deadline is unknown here
            and the page neither shows one nor ends a job past it.
        :param clock_ms: the relay's clock (Unix ms); the wall clock by default.
        """
        self._store = store
        self._timeout_s = invitation_timeout_s
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._thumbnails = ThumbnailCache()
        recording_store.ensure_tables(store)  # a page opened on a store no relay has prepared yet
        comparison_blocks.ensure_tables(store)

    def view(self, principal: Principal, job_id: str) -> Optional[JobView]:
        """Return the job ``principal`` knows as ``job_id``, or None (missing and another's are the same)."""
        if not job_id:
            return None
        if principal.kind == KIND_CLIENT:
            from strands_robots.relay.job_teams import invited_view

            view = self._store.view_for_client(principal.name, job_id)
            if view is not None and view.job.client_id == principal.name:
                return view
            return invited_view(self._store, principal.name, job_id)
        view = self._store.view(job_id)
        return view if view is not None and view.job.station_id == principal.name else None

    @staticmethod
    def shown_id(principal: Principal, view: JobView) -> str:
        """Return the id ``principal`` knows the job by: a client's own name for it, else the relay's id."""
        from strands_robots.relay.core import shown_id

        return shown_id(principal, view)

    def page(self, principal: Principal, job_id: str) -> Optional[JobPage]:
        """Return the page of the job ``principal`` knows as ``job_id``, or None (see :meth:`view`)."""
        view = self.view(principal, job_id)
        if view is None:
            return None
        from strands_robots.relay import job_teams

        now_ms = self._clock_ms()
        if view.snapshot is None and self._timeout_s is not None and \
                job_teams.settle(self._store, view.job, now_ms, self._timeout_s):
            view = self._store.view(view.job.job_id) or view  # ended on read, as the relay's status ends it
        return self._page_of(principal, view, now_ms)

    def _page_of(self, principal: Principal, view: JobView, now_ms: int) -> JobPage:
        from strands_robots.relay import job_teams

        status = RelayCore.status_of_view(view)
        held = job_teams.held(self._store, view.job, self._timeout_s) if view.snapshot is None else None
        if held is not None:  # a comparison held for another team's accept: whom it waits for, until when
            status.message = held.message
        return job_page(view, status, self.shown_id(principal, view), held=held, now_ms=now_ms)

    def _settle_due(self, now_ms: int) -> None:
        """End every held job whose invitation passed its bound (what the relay's ``ListJobs`` does first)."""
        if self._timeout_s is not None:
            from strands_robots.relay import job_teams

            job_teams.settle_due(self._store, now_ms, self._timeout_s)

    def recordings(self, principal: Principal, job_id: str) -> Dict[str, RecordingRow]:
        """Return the recordings the relay holds of the job's episodes, complete ones only, by episode id."""
        view = self.view(principal, job_id)
        if view is None:
            return {}
        rows = {r.episode_id: r for r in recording_store.infos(self._store, view.job.job_id) if r.complete}
        mine = set(self._own_episodes(principal, view, list(rows)))
        return {e: r for e, r in rows.items() if e in mine}

    @staticmethod
    def _own_episodes(principal: Principal, view: JobView, episode_ids: List[str]) -> List[str]:
        """In a comparison between teams, a team's own slots' episodes only (``relay.job_teams``)."""
        from strands_robots.relay import job_teams
        from strands_robots.wire.proto import evaluation_pb2 as ev

        if principal.kind != KIND_CLIENT:
            return episode_ids
        status = ev.JobStatus.FromString(view.snapshot.payload) if view.snapshot is not None else None
        return job_teams.visible_episodes(job_teams.slot_teams(view.job), principal.name, status, episode_ids)

    def recording(self, principal: Principal, job_id: str, episode_id: str) -> Optional[RecordingRow]:
        """Return one episode's complete recording of a job ``principal`` may see; None otherwise."""
        view = self.view(principal, job_id)
        if view is None:
            return None
        row = recording_store.info(self._store, view.job.job_id, episode_id)
        if row is None or not row.complete or not self._own_episodes(principal, view, [episode_id]):
            return None
        return row

    def chunk(self, row: RecordingRow, seq: int) -> Optional[bytes]:
        return recording_store.chunk(self._store, row.job_id, row.episode_id, seq)

    def thumbnail_of(self, row: RecordingRow) -> Optional[Tuple[str, bytes]]:
        """Return a recording's first camera frame (content type, bytes), or None; cached per recording."""
        return self._thumbnails.get((row.job_id, row.episode_id, row.sha256),
                                    lambda: first_frame(lambda seq: self.chunk(row, seq), row.chunks))

    def fingerprint(self, principal: Principal) -> tuple:
        """Return a value that changes whenever :meth:`pages` may (a job in or out, a new snapshot, a cancel)."""
        now_ms = self._clock_ms()
        self._settle_due(now_ms)
        rows = tuple(tuple(r) for r in self._store.read_sql(self._sql(_FINGERPRINT, principal),
                                                            self._params(principal)))
        # a held job (no snapshot) shows how long its invitation has left: the list re-renders as that moves
        held_minute = now_ms // 60_000 if any(r[1] == -1 for r in rows) else None
        return rows, held_minute

    @staticmethod
    def _params(principal: Principal) -> tuple:
        if principal.kind == KIND_CLIENT:
            return principal.name, principal.name, MAX_LISTED_JOBS
        return principal.name, MAX_LISTED_JOBS

    @staticmethod
    def _sql(template: str, principal: Principal) -> str:
        if principal.kind == KIND_CLIENT:
            return template.replace("{where}", _CLIENT_ROWS).replace("{order}", _NEWEST_FIRST)
        return template.replace("{where}", _STATION_ROWS).replace("{order}", _QUEUE_ORDER)

    def pages(self, principal: Principal) -> List[JobPage]:
        """Return a client's newest jobs (at most :data:`MAX_LISTED_JOBS`), or a station's queue (jobs not ended)."""
        now_ms = self._clock_ms()
        self._settle_due(now_ms)
        rows = self._store.read_sql(self._sql(_LIST, principal), self._params(principal))
        return [self._page_of(principal, _view_of(row), now_ms) for row in rows]

    def leaderboard_suites(self, principal: Principal) -> List[Tuple[str, int]]:
        """Return the suites a team has ranked policies on, with their block counts; none for a station."""
        if principal.kind != KIND_CLIENT:
            return []
        return comparison_blocks.suites_of(self._store, principal.name)

    def leaderboard(self, principal: Principal, suite: str) -> Optional[LeaderboardPage]:
        """Return a team's ranking on ``suite`` (the ``Leaderboard`` RPC's fit); None for a station."""
        if principal.kind != KIND_CLIENT:
            return None
        from strands_robots.relay.leaderboard import leaderboard_of

        return leaderboard_page(leaderboard_of(suite, comparison_blocks.blocks_of(self._store, principal.name, suite),
                                               principal.name))
