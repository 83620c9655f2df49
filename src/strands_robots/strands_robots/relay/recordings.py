"""Episode recordings through the relay: a station uploads each episode's MCAP, its job's team downloads it.

- ``Station.UploadRecording`` (station token): header first (job, episode, size, SHA-256, file name), then the
  bytes in order. The job must be the station's own. A size past ``max_recording_bytes`` is RESOURCE_EXHAUSTED
  naming both; bytes past the header's size, fewer, or a SHA-256 that does not match the header's are
  DATA_LOSS, and nothing of that upload is kept but the reason. A retry of a recording the relay holds
  complete with the same SHA-256 (its stored bytes hashed again) is answered ``already_stored`` without rewriting
  it; a stored copy that no longer matches is replaced.
- ``Evaluation.ListRecordings`` / ``DownloadRecording`` (client token): only the job's own team, and in a
  comparison between teams each team only its own slots' episodes (``relay.job_teams``); another team's job or
  episode, or an unknown one, is NOT_FOUND with the same words (no job id leaks). A download is the header (the
  station's size and SHA-256) and then the stored chunks; the client checks both on what it received.

The bytes live in the store (:mod:`strands_robots.relay.recording_store`), so every relay on one PostgreSQL
serves every recording.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any, AsyncIterator

import grpc

from strands_robots.relay import recording_store as rs
from strands_robots.relay.auth import KIND_CLIENT, KIND_STATION
from strands_robots.relay.core import Refused, RelayCore, checked_text
from strands_robots.wire.proto import recording_pb2 as rp
from strands_robots.relay.text_limits import check_id

_log = logging.getLogger("strands_robots.relay")

#: the largest data chunk either way (bytes); the station and the relay both send at most this
CHUNK_BYTES = 1024 * 1024
#: file names longer than this are refused (a name, not a path)
FILE_NAME_MAX = 255


def _check_header(header: Any) -> None:
    checked_text(check_id, header.job_id, "header.job_id")
    checked_text(check_id, header.episode_id, "header.episode_id")
    if not header.job_id or not header.episode_id:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "UploadRecording: header.job_id and header.episode_id are "
                                                        "required")
    if not rs.SHA256_HEX.fullmatch(header.sha256):
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"UploadRecording: header.sha256 must be 64 lowercase hex "
                                                        f"digits, got {header.sha256[:80]!r}")
    name = header.file_name
    if len(name) > FILE_NAME_MAX or "/" in name or "\\" in name or name in (".", "..") or "\x00" in name:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"UploadRecording: header.file_name must be a file name "
                                                        f"(no directory, at most {FILE_NAME_MAX} characters)")


class RecordingService:
    """The recording RPCs of both services; the method table (``handlers.py``) binds them."""

    def __init__(self, core: RelayCore) -> None:
        self._core = core
        self._uploading: dict = {}  # (job, episode) -> asyncio.Lock: one upload of an episode at a time here
        rs.ensure_tables(core.store)

    # -- station ---------------------------------------------------------------------------------------------
    async def UploadRecording(self, requests: AsyncIterator[Any], context: Any) -> Any:
        core = self._core
        principal = await core.principal(context, KIND_STATION)
        with core.stream_slot(principal):
            first = await core.first_message(requests, "UploadRecording", "header")
            header = first.header
            _check_header(header)
            job = await core.own_job(principal, header.job_id)
            key = (job.job_id, header.episode_id)
            lock = self._uploading.setdefault(key, asyncio.Lock())
            try:
                async with lock:  # a station's retry waits for its first attempt, then finds it stored
                    return await self._upload(requests, header, key)
            finally:
                if not lock.locked():
                    self._uploading.pop(key, None)

    async def _upload(self, requests: AsyncIterator[Any], header: Any, key: tuple) -> Any:
        core = self._core
        meta = (header.size_bytes, header.sha256, header.file_name)
        limit = core.settings.max_recording_bytes
        if header.size_bytes > limit:
            reason = (f"the recording of episode {header.episode_id!r} ({header.size_bytes} bytes) is larger "
                      f"than this relay's max_recording_bytes ({limit}); it was not stored")
            await core.run(rs.refuse, core.store, *key, *meta, reason)
            raise Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, reason)
        held = await core.run(rs.info, core.store, *key)
        if held is not None and held.complete and held.sha256 == header.sha256:
            stored = await core.run(rs.stored_digest, core.store, *key, held.chunks)
            if stored == (header.size_bytes, header.sha256):  # a retry: the relay's copy is whole
                return rp.UploadRecordingResponse(already_stored=True)
            _log.warning("recording of job %s episode %s: the stored copy no longer matches its SHA-256; "
                         "replaced by the station's upload", *key)
        await core.run(rs.begin, core.store, *key, *meta)
        digest, received, seq = hashlib.sha256(), 0, 0
        async for message in requests:
            if message.WhichOneof("kind") != "data":
                await self._lose(key, meta, "a second header in one upload")
            data = message.data
            if len(data) > CHUNK_BYTES:
                await self._lose(key, meta, f"a data chunk of {len(data)} bytes (at most {CHUNK_BYTES})")
            received += len(data)
            if received > header.size_bytes:
                await self._lose(key, meta, f"more bytes than the header's size_bytes ({header.size_bytes})")
            digest.update(data)
            try:
                await core.run(rs.put_chunk, core.store, *key, seq, data)
            except rs.ConcurrentUpload as exc:  # through another relay: the station tries again later
                raise Refused(grpc.StatusCode.ABORTED, f"{exc}; try again") from None
            seq += 1
        if received != header.size_bytes:
            await self._lose(key, meta, f"{received} bytes received, the header said {header.size_bytes} "
                                        f"(the upload was cut short)")
        if digest.hexdigest() != header.sha256:
            await self._lose(key, meta, f"the bytes' SHA-256 {digest.hexdigest()} is not the header's "
                                        f"{header.sha256}")
        if await core.run(rs.chunk_count, core.store, *key) != seq:  # another relay's upload began under it
            raise Refused(grpc.StatusCode.ABORTED, f"another upload of episode {key[1]!r} of job {key[0]!r} "
                                                   f"began under this one; try again")
        await core.run(rs.finish, core.store, *key, seq)
        _log.info("recording of job %s episode %s stored (%d bytes, sha256 %s)", key[0], header.episode_id,
                  received, header.sha256[:12])
        return rp.UploadRecordingResponse(already_stored=False)

    async def _lose(self, key: tuple, meta: tuple, what: str) -> None:
        reason = f"recording of episode {key[1]!r} not stored: {what}"
        await self._core.run(rs.refuse, self._core.store, *key, *meta, reason)
        raise Refused(grpc.StatusCode.DATA_LOSS, reason)

    # -- client ----------------------------------------------------------------------------------------------
    async def ListRecordings(self, request: Any, context: Any) -> Any:
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        checked_text(check_id, request.job_id, "job_id")
        view = await core.visible_view(principal, request.job_id)
        rows = await core.run(rs.infos, core.store, view.job.job_id)
        mine = set(_own_episodes(principal.name, view, [r.episode_id for r in rows]))
        rows = [r for r in rows if r.episode_id in mine]
        return rp.ListRecordingsResponse(recordings=[rp.RecordingInfo(
            episode_id=r.episode_id, size_bytes=r.size_bytes, sha256=r.sha256, file_name=r.file_name,
            refused=r.refused if r.refused else ("" if r.complete else "the station is still uploading it"))
            for r in rows])

    async def DownloadRecording(self, request: Any, context: Any) -> AsyncIterator[Any]:
        core = self._core
        principal = await core.principal(context, KIND_CLIENT)
        checked_text(check_id, request.job_id, "job_id")
        checked_text(check_id, request.episode_id, "episode_id")
        with core.stream_slot(principal):
            view = await core.visible_view(principal, request.job_id)  # another team's job: NOT_FOUND, same words
            job_id = view.job.job_id
            row = await core.run(rs.info, core.store, job_id, request.episode_id)
            if row is not None and not _own_episodes(principal.name, view, [row.episode_id]):
                row = None  # another team's slot's episode: as if the relay had none, with the same words
            if row is None:
                raise Refused(grpc.StatusCode.NOT_FOUND,
                              f"job {request.job_id!r} has no recording of episode {request.episode_id!r} on the "
                              f"relay (the station sends each after its episode, when it records)", log=False)
            if row.refused:
                raise Refused(grpc.StatusCode.FAILED_PRECONDITION, row.refused, log=False)
            if not row.complete:
                raise Refused(grpc.StatusCode.UNAVAILABLE,
                              f"the recording of episode {request.episode_id!r} is still being uploaded by the "
                              f"station; try again", log=False)
            yield rp.RecordingChunk(header=rp.RecordingHeader(
                job_id=request.job_id, episode_id=row.episode_id, size_bytes=row.size_bytes, sha256=row.sha256,
                file_name=row.file_name))
            for seq in range(row.chunks):
                data = await core.run(rs.chunk, core.store, job_id, row.episode_id, seq)
                if data is None:  # the store lost a chunk: the stream ends short and the client's check says so
                    _log.warning("recording of job %s episode %s: chunk %d missing in the store", job_id,
                                 row.episode_id, seq)
                    return
                yield rp.RecordingChunk(data=data)


def _own_episodes(team: str, view: Any, episode_ids: list) -> list:
    """Return the episodes of ``episode_ids`` that ``team`` may take home.

    In a comparison between teams only its own slots' (by the slot each episode's status lists; an episode not
    listed yet is not shown yet).
    """
    from strands_robots.relay import job_teams
    from strands_robots.wire.proto import evaluation_pb2 as ev

    teams = job_teams.slot_teams(view.job)
    status = ev.JobStatus.FromString(view.snapshot.payload) if view.snapshot is not None else None
    return job_teams.visible_episodes(teams, team, status, episode_ids)
