"""The station-facing service (``Heartbeat``, ``ReportStatus``, ``TakeJobs``, ``PolicySession``), as coroutines."""

from __future__ import annotations

import grpc

from strands_robots.relay import comparison_blocks, job_teams
from strands_robots.relay.auth import KIND_STATION, Principal
from strands_robots.relay.core import Refused, RelayCore, checked_text
from strands_robots.wire.pb_model import job_options_from_pb
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.wire.proto import evaluation_service_pb2 as es
from strands_robots.wire.proto import station_service_pb2 as ss
from strands_robots.relay.session_slots import checked_slot
from strands_robots.relay.session_streams import serve_station
from strands_robots.relay.store import (
    TERMINAL_STATES,
    Snapshot,
    StoreError,
    Verdict,
)
from strands_robots.relay.text_limits import (
    check_id,
    snapshot_refusal,
)


class StationServicer:
    """The station-facing service (``Heartbeat``, ``ReportStatus``, ``TakeJobs``, ``PolicySession``)."""

    def __init__(self, core: RelayCore) -> None:
        self._core = core

    @staticmethod
    def _check_station_id(principal: Principal, station_id: str) -> None:
        checked_text(check_id, station_id, "station_id")
        if station_id and station_id != principal.name:
            raise Refused(grpc.StatusCode.PERMISSION_DENIED,
                          f"this token is station {principal.name!r}'s, not {station_id!r}'s")

    async def Heartbeat(self, request, context):
        principal = await self._core.principal(context, KIND_STATION)
        self._check_station_id(principal, request.station_id)
        return ss.HeartbeatResponse(relay_unix_ms=self._core.clock_ms())

    async def ReportStatus(self, request, context):
        core = self._core
        principal = await core.principal(context, KIND_STATION)
        self._check_station_id(principal, request.station_id)
        for index, snapshot in enumerate(request.snapshots):  # the whole report, before anything is stored
            reason = snapshot_refusal(snapshot)
            if reason:
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                              f"snapshots[{index}] (job {snapshot.job_id[:128]!r}): {reason}; nothing of this "
                              f"report was stored")
        response = ss.ReportStatusResponse()
        for snapshot in request.snapshots:
            job = await core.run(core.store.get_job, snapshot.job_id) if snapshot.job_id else None
            if job is None or job.station_id != principal.name:
                response.refused.append(f"{snapshot.job_id}: no such job for station {principal.name!r}")
                continue
            if snapshot.station_id and snapshot.station_id != principal.name:
                response.refused.append(f"{snapshot.job_id}: station_id {snapshot.station_id!r} is not this "
                                        f"token's station")
                continue
            if snapshot.state not in ("CREATED", "WAITING_POLICY", "RUNNING", "FINALIZING", *TERMINAL_STATES):
                response.refused.append(f"{snapshot.job_id}: unknown state {snapshot.state!r}")
                continue
            clean = ev.JobStatus()
            clean.CopyFrom(snapshot)
            clean.station_id = principal.name
            clean.ClearField("station_last_heard_unix_ms")  # the relay's to set, on every GetStatus
            try:
                verdict = await core.run(core.store.put_snapshot, Snapshot(
                    job_id=clean.job_id, updated_unix_ms=clean.updated_unix_ms, state=clean.state,
                    payload=clean.SerializeToString(deterministic=True), episodes_done=len(clean.episodes),
                    sequence=clean.sequence))
            except StoreError as exc:
                response.refused.append(f"{snapshot.job_id}: {exc}")
                continue
            if clean.state in TERMINAL_STATES and clean.HasField("comparison") and \
                    verdict in (Verdict.STORED, Verdict.FINAL):
                # before the report is answered: a failure here fails the report, and the station reports again
                await core.run(comparison_blocks.keep_ended, core.store, job)
            if verdict is Verdict.STORED:
                response.stored += 1
                if clean.state in TERMINAL_STATES:
                    teams = job_teams.slot_teams(job)  # each team reads only its own slots' declared specs
                    core.broker.job_ended(clean.job_id, await core.status_of(job),
                                          lambda status, team: job_teams.scoped_status(status, teams, team))
            elif verdict is Verdict.FEWER_EPISODES:
                response.refused.append(
                    f"{snapshot.job_id}: snapshot (sequence {clean.sequence}) has {len(clean.episodes)} finished "
                    f"episode(s), fewer than the stored one: the relay never accepts a snapshot that removes "
                    f"finished episodes")
            else:  # STALE, or FINAL: a stored terminal state is never replaced
                response.stale += 1
        return response

    async def TakeJobs(self, request, context):
        core = self._core
        principal = await core.principal(context, KIND_STATION)
        self._check_station_id(principal, request.station_id)
        if request.HasField("offer"):
            from strands_robots.relay.suite_offers import store_offer

            await store_offer(core, principal.name, request.offer)
        with core.stream_slot(principal):
            await context.send_initial_metadata(())
            sent, cancels_sent = set(), set()
            seen = core.generation
            while True:
                await core.run(job_teams.settle_due, core.store, core.clock_ms(), core.settings.invitation_timeout_s)
                for job in await core.run(core.store.open_jobs_for_station, principal.name):
                    if job.job_id not in sent:
                        if await core.run(job_teams.waiting_for, core.store, job):
                            continue  # held until every invited team accepted: no arm moves before
                        submit = es.SubmitJobRequest.FromString(job.request)
                        assigned = ss.Job(
                            job_id=job.job_id, client_id=job.client_id, station_id=job.station_id,
                            tasks=list(submit.tasks), episodes_total=submit.episodes,
                            submitted_unix_ms=job.submitted_unix_ms, **job_options_from_pb(submit))
                        if submit.HasField("suite_job"):
                            assigned.suite_job.CopyFrom(submit.suite_job)
                        yield ss.JobAssignment(job=assigned)
                        sent.add(job.job_id)
                    if job.cancel_requested and job.job_id not in cancels_sent:
                        yield ss.JobAssignment(cancel=ss.JobCancel(job_id=job.job_id, reason=job.cancel_reason))
                        cancels_sent.add(job.job_id)
                seen = await core.wait_change(seen, core.poll_s)

    async def PolicySession(self, requests, context):
        core = self._core
        principal = await core.principal(context, KIND_STATION)
        forwarded = core.cluster is not None and core.cluster.forwarded_by_peer(context)
        with core.stream_slot(principal, counted=not forwarded):  # a forwarded stream counts where it came in
            await context.send_initial_metadata(())
            first = await core.first_message(requests, "PolicySession", "open")
            job = await core.own_job(principal, checked_text(check_id, first.open.job_id, "open.job_id"))
            checked_slot(job, first.open.slot, "open.slot")
            async for item in serve_station(core, context, principal, job, first, requests):
                yield item

