"""The client-facing service (``SubmitJob``, ``GetStatus``, ``CancelJob``, ``ServePolicy``), as coroutines."""

from __future__ import annotations

import logging

import grpc

from strands_robots.client.policy_spec import spec_refusal
from strands_robots.relay import job_request, job_teams
from strands_robots.relay.auth import KIND_CLIENT, Principal
from strands_robots.relay.core import Refused, RelayCore, checked_text
from strands_robots.wire.proto import evaluation_service_pb2 as es
from strands_robots.wire.proto import policy_session_pb2 as ps
from strands_robots.relay.session_slots import checked_slot
from strands_robots.relay.session_streams import serve_client
from strands_robots.relay.store import (
    ClientLoad,
    JobExists,
    JobRecord,
)
from strands_robots.relay.text_limits import (
    check_cancel_reason,
    check_id,
)

_log = logging.getLogger("strands_robots.relay")


class EvaluationServicer:
    """The client-facing service (``SubmitJob``, ``GetStatus``, ``CancelJob``, ``ServePolicy``), as coroutines."""

    def __init__(self, core: RelayCore) -> None:
        self._core = core

    async def SubmitJob(self, request, context):
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        checked_text(check_id, request.station_id, "station_id")
        if request.HasField("job_id"):
            checked_text(check_id, request.job_id, "job_id")
        from strands_robots.relay.suite_offers import offer_of

        offer = await offer_of(core, request.station_id) if request.station_id in core.tokens.stations else None
        try:
            job_id = job_request.check_submit(request, principal.name, core.tokens.stations,
                                              core.settings.max_message_bytes, offer)
        except job_request.InvalidJob as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        self._check_teams(request, principal)
        stored = es.SubmitJobRequest()
        stored.CopyFrom(request)
        stored.job_id = job_id
        content = stored.SerializeToString(deterministic=True)
        async with core.submit_lock(principal.name):
            if await self._same_job(principal, job_id, content):
                return es.SubmitJobResponse(job_id=job_id)  # a retried submit
            limits = core.settings

            def admit(load: ClientLoad) -> None:  # in the store's lock of this client, shared by every relay
                if load.open_jobs + 1 > limits.max_open_jobs_per_token:
                    raise Refused(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  f"max_open_jobs_per_token ({limits.max_open_jobs_per_token}) reached: client "
                                  f"{principal.name!r} has {load.open_jobs} job(s) not ended")
                if load.queued_episodes + int(request.episodes) > limits.max_queued_episodes_per_token:
                    raise Refused(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  f"max_queued_episodes_per_token ({limits.max_queued_episodes_per_token}) would "
                                  f"be passed: client {principal.name!r} has {load.queued_episodes} episode(s) "
                                  f"still to run and this job adds {request.episodes}")

            relay_id = job_id  # the station-side id: the client's, unless another job holds it
            for _ in range(3):
                record = JobRecord(job_id=relay_id, client_id=principal.name, station_id=request.station_id,
                                   request=content, submitted_unix_ms=core.clock_ms(),
                                   episodes_total=int(request.episodes), client_job_id=job_id)
                try:
                    await core.run(core.store.create_job, record, admit)
                    break
                except JobExists:
                    if await self._same_job(principal, job_id, content):  # a retry another relay stored
                        return es.SubmitJobResponse(job_id=job_id)
                    # another team's job holds the id on the station side: ours gets a relay id, silently
                    relay_id = job_request.new_job_id()
            else:
                raise Refused(grpc.StatusCode.UNAVAILABLE, f"could not store job {job_id!r}; submit it again")
        await core.run(job_teams.invite, core.store, record)
        core.notify()
        _log.info("job %s (%s's %r) submitted for station %s (%d task(s), %d episode(s))", relay_id, principal.name,
                  job_id, request.station_id, len(request.tasks), request.episodes)
        return es.SubmitJobResponse(job_id=job_id)

    def _check_teams(self, request, principal: Principal) -> None:
        """Refuse a comparison slot naming a team this relay does not know (naming the slot's key)."""
        if not request.HasField("suite_job") or not request.suite_job.HasField("compare"):
            return
        known = set(self._core.tokens.clients)
        for index, team in enumerate(request.suite_job.compare.slot_teams):
            if team and team != principal.name and team not in known:
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"compare.slots[{index}].team: {team[:128]!r} is "
                                                                f"not a team of this relay (a client name in its "
                                                                f"tokens file)")

    async def _same_job(self, principal: Principal, job_id: str, content: bytes) -> bool:
        """Return True when the client already holds ``job_id`` with this content; refuse other content."""
        existing = await self._core.run(self._core.store.view_for_client, principal.name, job_id)
        if existing is None:
            return False
        if existing.job.request == content:
            await self._core.run(job_teams.invite, self._core.store, existing.job)  # a retry completes the invites
            return True
        raise Refused(grpc.StatusCode.ALREADY_EXISTS,
                      f"job id {job_id!r} is taken by another of your jobs (with other tasks or episodes); "
                      f"choose another")

    def GetStatus(self, request, context):
        """Answer a poll on a pool thread (kind ``in_thread``): the hot call makes one thread hop, not two."""
        core = self._core
        result = core.tokens.authenticate(context.invocation_metadata(), KIND_CLIENT)
        if result.principal is None:
            raise Refused(grpc.StatusCode.UNAUTHENTICATED, result.reason)
        checked_text(check_id, request.job_id, "job_id")
        view = core.visible_view_now(result.principal, request.job_id)  # its own job, or one it is invited to
        return core.client_status_now(result.principal, view)

    async def CancelJob(self, request, context):
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        checked_text(check_id, request.job_id, "job_id")
        checked_text(check_cancel_reason, request.reason)
        view = await core.visible_view(principal, request.job_id)
        job = view.job
        if await core.terminal_status(job) is not None:
            return es.CancelJobResponse(already_terminal=True)
        teams = job_teams.slot_teams(job)
        if job.client_id == principal.name:
            reason = request.reason or f"cancelled by {principal.name}"
        else:  # an invited team withdraws its slots: the comparison cannot run without them
            why = f": {request.reason}" if request.reason else ""
            reason = (f"team {principal.name!r} withdrew slot(s) {', '.join(teams.slots_of(principal.name))} from the "
                      f"comparison{why}")
        if await core.run(job_teams.waiting_for, core.store, job):  # held: the station never had it
            await core.run(job_teams.end_held, core.store, job, core.clock_ms(),
                           f"{reason}; the job never ran, no arm moved")
        else:
            await core.run(core.store.request_cancel, job.job_id, reason)
        core.notify()
        return es.CancelJobResponse(already_terminal=False)

    async def RespondInvitation(self, request, context):
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        checked_text(check_id, request.job_id, "job_id")
        checked_text(check_cancel_reason, request.reason)
        view = await core.run(job_teams.invited_view, core.store, principal.name, request.job_id) \
            if request.job_id else None
        if view is None:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"no invitation to job {request.job_id!r} for this client")
        try:
            message = await core.run(job_teams.respond, core.store, view.job, principal.name, request.accept,
                                     request.reason, core.clock_ms(), core.settings.invitation_timeout_s)
        except job_teams.AnswerRefused as exc:
            raise Refused(grpc.StatusCode.FAILED_PRECONDITION, str(exc), log=False) from None
        core.notify()
        _log.info("job %s: team %s %s", view.job.job_id, principal.name, message)
        return es.RespondInvitationResponse(message=message)

    async def ServePolicy(self, requests, context):
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        forwarded = core.cluster is not None and core.cluster.forwarded_by_peer(context)
        with core.stream_slot(principal, counted=not forwarded):  # a forwarded stream counts where it came in
            await context.send_initial_metadata(())  # the relay holds the stream: the peer may wait on this
            first = await core.first_message(requests, "ServePolicy", "attach")
            view = await core.visible_view(principal, checked_text(check_id, first.attach.job_id, "attach.job_id"))
            job = view.job
            checked_slot(job, first.attach.slot, "attach.slot")
            await self._check_slot_team(principal, job, first.attach.slot)
            if first.attach.HasField("spec"):  # copied into the job's every snapshot: bounded here, where it enters
                reason = spec_refusal(first.attach.spec)
                if reason:
                    raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"attach.spec: {reason}")
            final = await core.terminal_status(job, principal.name)
            if final is not None:
                yield ps.PolicyRequest(job_ended=ps.JobEnded(status=final))
                return
            async for item in serve_client(core, context, principal, job, first, requests):
                yield item

    async def _check_slot_team(self, principal: Principal, job: JobRecord, slot: str) -> None:
        """Refuse a token that is not the slot's team's; an invited team serves only once it accepted."""
        teams = job_teams.slot_teams(job)
        if job.client_id != principal.name and not slot:
            raise Refused(grpc.StatusCode.PERMISSION_DENIED, f"job {job.job_id!r} is team {job.client_id!r}'s: "
                                                             f"serve your slot with --slot", log=False)
        owner = teams.team_of(slot) if slot else job.client_id
        if owner != principal.name:
            raise Refused(grpc.StatusCode.PERMISSION_DENIED,
                          f"attach.slot: slot {slot!r} of job {job.job_id!r} is served by team {owner!r}'s token, "
                          f"not {principal.name!r}'s", log=False)
        if job.client_id != principal.name:
            answer = (await self._core.run(job_teams.answers, self._core.store, job)).get(principal.name)
            if answer is None or answer[0] != job_teams.ACCEPTED:
                raise Refused(grpc.StatusCode.FAILED_PRECONDITION,
                              f"team {principal.name!r} has not accepted the invitation to job {job.job_id!r}: "
                              f"accept it first (strands-eval accept {job.job_id})", log=False)
