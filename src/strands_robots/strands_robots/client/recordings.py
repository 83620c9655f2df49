"""Take episodes home: download a job's recordings (MCAP) from the relay, checked byte for byte.

A download is the relay's header (the size and SHA-256 the station computed from its file) and then the bytes.
They are written to ``<path>.part`` while a SHA-256 runs over them; the file gets its name only when the size
and the hash match the header, and, when the job's status reports the episode's ``recording_sha256`` (the
station's own word, not the relay's), that too. A mismatch raises :class:`RecordingCorrupt` and leaves no file.

Used by :meth:`EvaluationClient.download_recording` and ``strands-robots job recordings``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import grpc

from strands_robots.client import errors
from strands_robots.wire.proto import recording_pb2 as rp


@dataclass(frozen=True)
class Downloaded:
    """A recording written to ``path``: its size and SHA-256, checked."""

    episode_id: str
    path: Path
    size_bytes: int
    sha256: str


def target_path(path: "str | Path", episode_id: str) -> Path:
    """Return where a recording goes: ``path`` itself, or ``<path>/<episode_id>.mcap`` when it is a directory."""
    path = Path(path)
    return path / f"{episode_id}.mcap" if path.is_dir() else path


def download(stub: Any, metadata: Sequence, job_id: str, episode_id: str, path: "str | Path", *,
             expected_sha256: str = "", max_bytes: Optional[int] = None,
             timeout_s: Optional[float] = None) -> Downloaded:
    """Download one episode's recording to ``path`` (a file, or a directory for ``<episode_id>.mcap``).

    :param expected_sha256: the SHA-256 the station reported for the episode (``EpisodeResult.recording_sha256``);
        checked too when given.
    :param max_bytes: refuse (before writing anything) a recording larger than this.
    :raises RecordingCorrupt: the bytes do not match the size or a SHA-256; nothing is left on disk.
    :raises RecordingRefused: the relay holds no usable recording (or it is larger than ``max_bytes``).
    :raises NotFound: no such job for this client (another team's reads the same), or no recording of it.
    """
    final = target_path(path, episode_id)
    part = final.with_name(final.name + ".part")
    call = stub.DownloadRecording(rp.DownloadRecordingRequest(job_id=job_id, episode_id=episode_id),
                                  metadata=metadata, timeout=timeout_s)
    digest, received = hashlib.sha256(), 0
    try:
        try:
            first = next(call)
        except StopIteration:
            raise errors.RecordingCorrupt(f"the relay sent nothing for episode {episode_id!r} of job {job_id!r}") \
                from None
        if first.WhichOneof("kind") != "header":
            raise errors.RecordingCorrupt(f"the relay's answer for episode {episode_id!r} did not start with a "
                                          f"header")
        header = first.header
        if max_bytes is not None and header.size_bytes > max_bytes:
            raise errors.RecordingRefused(f"the recording of episode {episode_id!r} is {header.size_bytes} bytes, "
                                          f"larger than max_bytes ({max_bytes}); nothing was written")
        with open(part, "wb") as out:
            for message in call:
                data = message.data
                received += len(data)
                if received > header.size_bytes:
                    raise errors.RecordingCorrupt(f"the recording of episode {episode_id!r} has more bytes than "
                                                  f"its header's {header.size_bytes}")
                digest.update(data)
                out.write(data)
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if received != header.size_bytes:
            raise errors.RecordingCorrupt(f"the recording of episode {episode_id!r} was cut short: {received} of "
                                          f"{header.size_bytes} bytes arrived")
        if got != header.sha256:
            raise errors.RecordingCorrupt(f"the recording of episode {episode_id!r} is corrupt: its SHA-256 is "
                                          f"{got}, the station's is {header.sha256}")
        if expected_sha256 and got != expected_sha256:
            raise errors.RecordingCorrupt(f"the recording of episode {episode_id!r} is not the one the station "
                                          f"reported: SHA-256 {got}, the job's status says {expected_sha256}")
        os.replace(part, final)
    except grpc.RpcError as exc:
        _remove(part)
        raise errors.from_rpc_error(exc) from None
    except BaseException:
        call.cancel()
        _remove(part)
        raise
    return Downloaded(episode_id=episode_id, path=final, size_bytes=received, sha256=got)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def list_recordings(stub: Any, metadata: Sequence, job_id: str, timeout_s: Optional[float] = None) -> list:
    """Return the job's ``RecordingInfo`` list (``refused`` non-empty for one that cannot be downloaded)."""
    try:
        response = stub.ListRecordings(rp.ListRecordingsRequest(job_id=job_id), metadata=metadata, timeout=timeout_s)
    except grpc.RpcError as exc:
        raise errors.from_rpc_error(exc) from None
    return list(response.recordings)
