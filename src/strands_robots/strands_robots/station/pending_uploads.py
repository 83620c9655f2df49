"""The station's recordings still to be sent to their job's team, kept on disk until the relay holds them.

One file per recording, ``<run_id>.upload.json`` in the station's state directory (``<state_dir>/uploads``):
the job, the episode, the rollout's run id, the MCAP's path and its SHA-256. The station writes it when the
rollout's result names the recording, *before* the episode is persisted as finished (so before any snapshot
or acknowledgement shows the episode), atomically (a temp file, flush + fsync, ``os.replace``, fsync of the
directory). It is removed once the relay answered "stored" (or "already stored", a retry of a whole one);
one the relay refuses for the recording itself (too large, not matching, unreadable file) is renamed
``<run_id>.upload.json.refused`` with the reason added and never sent again; one not sent before the station
stopped (the relay away, the process killed) stays and is sent again at the next start.

:func:`sort_pending` is the restart rule: a pending recording is sent again when its job is on the station and
lists the episode as finished with that run id and SHA-256; otherwise (the episode was interrupted or
discarded, so it has no result, or the job is unknown) its entry is dropped with the reason. The recording
file itself is never deleted here.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from typing import Callable, Optional, Sequence, Tuple

from strands_robots.station.durable_files import PersistenceError, fsync_directory

__all__ = ["PendingUpload", "PendingUploads", "sort_pending", "settle", "REFUSED_CODES"]

_SUFFIX = ".upload.json"
_REFUSED = ".refused"
#: an upload that ended with one of these was refused for the recording itself (too large, not matching, not
#: this station's job, the file unreadable): sending it again cannot help. Any other failure (the relay away or
#: slow, the station stopping, a token the relay does not know yet) keeps the recording pending.
REFUSED_CODES = frozenset({"RESOURCE_EXHAUSTED", "DATA_LOSS", "INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION",
                           "OUT_OF_RANGE", "FILE"})


@dataclass(frozen=True)
class PendingUpload:
    """One recording the team does not have yet."""

    job_id: str
    episode_id: str
    run_id: str
    path: str
    sha256: str


class PendingUploads:
    """The pending recordings of one station (a directory, created if missing); see the module docstring.

    :param directory: where ``<run_id>.upload.json`` files live.
    :param fsync: flush to the disk on every write (disable only in benchmarks).
    """

    def __init__(self, directory: str, *, fsync: bool = True) -> None:
        self.directory = os.fspath(directory)
        self._fsync = bool(fsync)
        os.makedirs(self.directory, exist_ok=True)

    def path_of(self, run_id: str) -> str:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise PersistenceError(f"run id {run_id!r} cannot name a pending upload file")
        return os.path.join(self.directory, run_id + _SUFFIX)

    def add(self, upload: PendingUpload) -> None:
        """Persist ``upload`` (atomic; on the disk when this returns).

        :raises PersistenceError: the write failed (nothing half-written is left).
        """
        target = self.path_of(upload.run_id)
        fd, tmp = tempfile.mkstemp(prefix="." + upload.run_id + ".", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(asdict(upload), handle, sort_keys=True)
                handle.flush()
                if self._fsync:
                    os.fsync(handle.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise PersistenceError(f"could not write {target}: {type(exc).__name__}: {exc}") from exc
        self._fsync_directory()

    def remove(self, run_id: str) -> bool:
        """Forget a recording the relay holds; False when it was not pending."""
        try:
            os.unlink(self.path_of(run_id))
        except FileNotFoundError:
            return False
        self._fsync_directory()
        return True

    def refuse(self, run_id: str, reason: str) -> Optional[str]:
        """Keep a refused recording's entry aside with the reason (never sent again); its new path, or None."""
        path = self.path_of(run_id)
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return None
        data["refused"] = reason
        target = path + _REFUSED
        try:
            with open(target, "w", encoding="utf-8") as handle:
                json.dump(data, handle, sort_keys=True)
            os.unlink(path)
        except OSError:
            return None
        self._fsync_directory()
        return target

    def load(self) -> Tuple[Tuple[PendingUpload, ...], Tuple[str, ...]]:
        """Return every pending recording (by run id) and one reason per entry that does not parse (kept)."""
        pending, problems = [], []
        for name in sorted(os.listdir(self.directory)):
            if not name.endswith(_SUFFIX) or name.startswith("."):
                continue
            path = os.path.join(self.directory, name)
            try:
                with open(path, encoding="utf-8") as handle:
                    data = json.load(handle)
                pending.append(PendingUpload(**{k: str(data[k]) for k in
                                                ("job_id", "episode_id", "run_id", "path", "sha256")}))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                problems.append(f"{path}: unreadable pending upload: {type(exc).__name__}: {exc}")
        return tuple(pending), tuple(problems)

    def _fsync_directory(self) -> None:
        if self._fsync:
            fsync_directory(self.directory)


def settle(ok: bool, code: str) -> str:
    """Return what an upload's end means for its entry: ``"sent"``, ``"refused"`` (kept aside) or ``"pending"``."""
    if ok:
        return "sent"
    return "refused" if code in REFUSED_CODES else "pending"


def sort_pending(pending: Sequence[PendingUpload], episodes_of: Callable[[str], Optional[Sequence]]) \
        -> Tuple[Tuple[PendingUpload, ...], Tuple[Tuple[PendingUpload, str], ...]]:
    """Split pending recordings into ``(to send again, (dropped, why) pairs)`` after a restart.

    :param episodes_of: a job's finished episodes (``EpisodeResult``s), None when the station has no such job.
    """
    resend, dropped = [], []
    for upload in pending:
        episodes = episodes_of(upload.job_id)
        if episodes is None:
            dropped.append((upload, f"job {upload.job_id!r} is not on this station"))
            continue
        episode = next((e for e in episodes if e.episode_id == upload.episode_id), None)
        if episode is None:
            dropped.append((upload, f"episode {upload.episode_id!r} of job {upload.job_id!r} has no result "
                                    "(interrupted or discarded)"))
        elif episode.run_id != upload.run_id:
            dropped.append((upload, f"episode {upload.episode_id!r} of job {upload.job_id!r} finished as run "
                                    f"{episode.run_id!r}, not {upload.run_id!r}"))
        elif episode.recording_sha256 != upload.sha256:
            dropped.append((upload, f"episode {upload.episode_id!r} of job {upload.job_id!r} reported recording "
                                    f"SHA-256 {episode.recording_sha256[:12]!r}, the pending file has "
                                    f"{upload.sha256[:12]!r}"))
        else:
            resend.append(upload)
    return tuple(resend), tuple(dropped)
