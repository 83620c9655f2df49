"""The station's durable job state, written after every change.

Two files per job, so a change costs the same at episode 1 and episode 10 000:

- ``<job_id>.job.json``: the job (spec, state, message, counters, the running episode) and how many episodes
  the log holds (``episodes_logged``). Rewritten atomically: a temp file in the same directory, flush + fsync,
  ``os.replace`` over the old one, fsync the directory. A crash leaves the old or the new file, never a torn
  one.
- ``<job_id>.episodes.jsonl``: one line per finished episode, appended (flush + fsync) *before* the job file
  that counts it is replaced. Lines past ``episodes_logged`` (a crash between the two writes) are ignored on
  load and cut off by the next write; a log shorter than its count is refused.

A record with fewer episodes than the log holds is refused: a log is never truncated below its committed
count (only a torn tail past it is cut).

What the files hold is :mod:`~strands_robots.station.job_codec`'s mapping (an episode's task as ``task_index``
into the job's tasks; ``format_version``): a file of another version, or one that does not parse, is refused with
the reason (never silently skipped). At start-up the station loads every readable
job (:meth:`JobStore.load_every`) and moves the files of a job that does not load aside, renamed
``<name>.unreadable-<UTC time>`` (kept, never deleted), so one bad file never stops the recovery of the others.

The job file also keeps ``sequence``, the number of the job's newest snapshot, so a restarted station numbers
the job's next snapshot after every one it reported before.

After a restart (:func:`recover`) the station **resumes** every job that had started (a CREATED job, which
never started, waits again as it was):

- the episode that was running when the station died has no result: its id goes to ``interrupted``, it is not
  listed, and its task runs again under the next episode id (ids are never reused);
- a job that was RUNNING waits for its policy again (RUNNING -> WAITING_POLICY): the policy session did not
  survive the restart;
- a crash loop fails the job: once the station has restarted more than ``MAX_RESTARTS`` times since the job last
  kept an episode (``restarts_without_progress``), the job is FAILED with that reason instead, so a station that
  keeps dying on one episode (or before its first) does not loop forever. Restarts with kept episodes between
  them never add up: a long job survives any number of restarts spread over its life.

Either way the job's message says what happened; a terminal job is loaded as it was.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Tuple

from strands_robots.station.durable_files import PersistenceError, fsync_directory
from strands_robots.station.job_codec import episode_to_mapping, record_from_mapping, record_to_mapping
from strands_robots.station.model import TERMINAL_STATES, JobState
from strands_robots.station.record import JobRecord

__all__ = [
    "MAX_RESTARTS",
    "JobStore",
    "SetAside",
    "recover",
]

MAX_RESTARTS = 3  # restarts in a row without a kept episode between them; the next one fails the job
_SUFFIX = ".job.json"
_LOG_SUFFIX = ".episodes.jsonl"
_ASIDE = ".unreadable-"



# -- the store --------------------------------------------------------------------------------------------------
class JobStore:
    """Job files in one directory (created if missing). Writes are atomic; one writer per job at a time.

    :param directory: where ``<job_id>.job.json`` and ``<job_id>.episodes.jsonl`` live.
    :param fsync: flush to the disk on every write (disable only in benchmarks).
    """

    def __init__(self, directory: str, *, fsync: bool = True) -> None:
        self.directory = os.fspath(directory)
        self._fsync = bool(fsync)
        self._logged: dict = {}  # job_id -> (episodes in the log, its valid length in bytes)
        os.makedirs(self.directory, exist_ok=True)

    def path_of(self, job_id: str) -> str:
        """Return the job file's path."""
        return os.path.join(self.directory, job_id + _SUFFIX)

    def log_path_of(self, job_id: str) -> str:
        """Return the episode log's path."""
        return os.path.join(self.directory, job_id + _LOG_SUFFIX)

    # -- writing --------------------------------------------------------------------------------------------
    def save(self, record: JobRecord) -> None:
        """Persist ``record``: new episodes appended to the log, then the job file replaced atomically.

        :raises PersistenceError: a write failed (what was on disk before still loads).
        """
        job_id = record.job_id
        count, size = self._logged_state(job_id)
        episodes = record.episodes
        if len(episodes) < count:  # episodes only grow: a record with fewer would lose finished episodes
            raise PersistenceError(f"{self.log_path_of(job_id)} holds {count} finished episodes of job {job_id!r}; "
                                   f"a record with {len(episodes)} is refused (a log is never truncated)")
        if len(episodes) > count or self._log_size(job_id) != size:
            count, size = self._append(job_id, size, episodes[count:], record.spec.tasks, count)
        text = json.dumps(record_to_mapping(record, with_episodes=False), indent=1, sort_keys=True,
                          allow_nan=False)
        self._replace(self.path_of(job_id), text)
        self._logged[job_id] = (count, size)

    def _logged_state(self, job_id: str) -> tuple:
        known = self._logged.get(job_id)
        if known is not None:
            return known
        try:
            with open(self.path_of(job_id), encoding="utf-8") as handle:
                count = int(json.load(handle).get("episodes_logged", 0))
        except FileNotFoundError:
            return 0, 0
        except (OSError, ValueError, AttributeError) as exc:
            raise PersistenceError(f"{self.path_of(job_id)}: unreadable job state: {type(exc).__name__}: {exc}") \
                from exc
        lines, size = self._read_log(job_id, count)
        return len(lines), size

    def _log_size(self, job_id: str) -> int:
        try:
            return os.path.getsize(self.log_path_of(job_id))
        except FileNotFoundError:
            return 0

    def _append(self, job_id: str, size: int, new: tuple, tasks: tuple, count: int) -> tuple:
        path = self.log_path_of(job_id)
        payload = "".join(json.dumps(episode_to_mapping(e, tasks), sort_keys=True, allow_nan=False) + "\n"
                          for e in new).encode("utf-8")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, size)  # drop lines a crash left past the last committed count
                os.lseek(fd, size, os.SEEK_SET)
                written = 0
                while written < len(payload):
                    written += os.write(fd, payload[written:])
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise PersistenceError(f"could not append to {path}: {type(exc).__name__}: {exc}") from exc
        if size == 0 and self._fsync:
            self._fsync_directory()
        return count + len(new), size + len(payload)

    def _replace(self, target: str, text: str) -> None:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".", suffix=".tmp",
                                   dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                if self._fsync:
                    os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if isinstance(exc, Exception):
                raise PersistenceError(f"could not write {target}: {type(exc).__name__}: {exc}") from exc
            raise
        if self._fsync:
            self._fsync_directory()

    def _fsync_directory(self) -> None:
        fsync_directory(self.directory)

    # -- reading --------------------------------------------------------------------------------------------
    def _read_log(self, job_id: str, count: int) -> tuple:
        """Return the first ``count`` episode mappings of the log and their length in bytes.

        :raises PersistenceError: the log holds fewer than ``count`` whole, parsable lines.
        """
        path = self.log_path_of(job_id)
        if count == 0:
            return [], 0
        lines = []
        size = 0
        try:
            with open(path, "rb") as handle:
                for raw in handle:
                    if len(lines) == count:
                        break
                    if not raw.endswith(b"\n"):
                        break  # torn last line
                    try:
                        lines.append(json.loads(raw))
                    except ValueError as exc:
                        raise PersistenceError(f"{path}: line {len(lines) + 1} does not parse: {exc}") from exc
                    size += len(raw)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise PersistenceError(f"{path}: unreadable episode log: {type(exc).__name__}: {exc}") from exc
        if len(lines) < count:
            raise PersistenceError(f"{path}: the job file counts {count} episodes but the log holds {len(lines)}")
        return lines, size

    def load(self, job_id: str) -> JobRecord:
        """Load a job's record.

        :raises PersistenceError: no such job, or its files do not parse (the reason names the file).
        """
        path = self.path_of(job_id)
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise PersistenceError(f"no saved state for job {job_id!r} ({path})") from None
        except (OSError, ValueError) as exc:
            raise PersistenceError(f"{path}: unreadable job state: {type(exc).__name__}: {exc}") from exc
        if not isinstance(data, Mapping):
            raise PersistenceError(f"{path}: a job file holds a JSON object, got {type(data).__name__}")
        try:
            count = int(data.get("episodes_logged", 0))
        except (TypeError, ValueError):
            raise PersistenceError(f"{path}: episodes_logged must be an integer") from None
        lines, size = self._read_log(job_id, count)
        try:
            record = record_from_mapping(data, lines)
        except PersistenceError as exc:
            raise PersistenceError(f"{path}: {exc}") from exc
        self._logged[job_id] = (count, size)
        return record

    def job_ids(self) -> tuple:
        """Return every job with a file here, sorted (temp files of an interrupted write are ignored)."""
        names = []
        for name in os.listdir(self.directory):
            if name.endswith(_SUFFIX) and not name.startswith("."):
                names.append(name[: -len(_SUFFIX)])
        return tuple(sorted(names))

    def load_all(self) -> Iterator[JobRecord]:
        """Yield every saved job; a file that does not load raises (it is never skipped silently)."""
        for job_id in self.job_ids():
            yield self.load(job_id)

    def load_every(self) -> Tuple[Tuple[JobRecord, ...], Tuple["SetAside", ...]]:
        """Load every readable job; move each job whose files do not load aside (:meth:`set_aside`).

        One bad file never keeps the others from loading. Returns ``(records, set_aside)``.
        """
        records, aside = [], []
        for job_id in self.job_ids():
            try:
                records.append(self.load(job_id))
            except PersistenceError as exc:
                aside.append(self.set_aside(job_id, str(exc)))
        return tuple(records), tuple(aside)

    def set_aside(self, job_id: str, reason: str) -> "SetAside":
        """Rename a job's files to ``<name>.unreadable-<UTC time>`` (kept for a person to look at, never deleted).

        Nothing here raises: a file that cannot be renamed is named in the returned reason.
        """
        job = _peek_job(self.path_of(job_id))
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        moved = []
        problems = []
        for path in (self.path_of(job_id), self.log_path_of(job_id)):
            if not os.path.exists(path):
                continue
            target = f"{path}{_ASIDE}{stamp}"
            number = 1
            while os.path.exists(target):
                target = f"{path}{_ASIDE}{stamp}-{number}"
                number += 1
            try:
                os.replace(path, target)
            except OSError as exc:
                problems.append(f"{path} could not be moved aside: {type(exc).__name__}: {exc}")
                continue
            moved.append(target)
        self._logged.pop(job_id, None)
        if moved and self._fsync:
            self._fsync_directory()
        why = reason if not problems else f"{reason}; {'; '.join(problems)}"
        return SetAside(job_id=job_id, reason=why, moved_to=tuple(moved),
                        client_id=str(job.get("client_id", "") or ""), episodes_total=_int_or_zero(
                            job.get("episodes_total")))


@dataclass(frozen=True)
class SetAside:
    """A job whose saved files do not load, moved aside so recovery goes on with every other job.

    :param reason: why it did not load (the file and the error).
    :param moved_to: the files' new paths (``<name>.unreadable-<UTC time>``).
    :param client_id: the job's team, when the file was readable that far ("" otherwise).
    :param episodes_total: the job's episode count, when readable that far (0 otherwise).
    """

    job_id: str
    reason: str
    moved_to: Tuple[str, ...]
    client_id: str = ""
    episodes_total: int = 0


def _peek_job(path: str) -> Mapping[str, Any]:
    """Return what can be read of a job file's ``job`` mapping ({} when nothing can)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    job = data.get("job") if isinstance(data, Mapping) else None
    return job if isinstance(job, Mapping) else {}


def _int_or_zero(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


# -- restart ----------------------------------------------------------------------------------------------------
def recover(record: JobRecord) -> JobRecord:
    """Return the record a restarted station continues from (see the module docstring); terminal ones as is.

    The state stays a legal one for the state machine: a RUNNING job becomes WAITING_POLICY, FAILED after a
    crash loop (see the module docstring); WAITING_POLICY and FINALIZING are kept. A CREATED job (it never
    started) is returned as it is.
    """
    if record.state in TERMINAL_STATES or record.state is JobState.CREATED:
        return record  # a job that never started waits again as it was
    restarts = record.restarts + 1
    in_a_row = record.restarts_without_progress + 1
    lost = record.running
    interrupted = record.interrupted + ((lost.episode_id,) if lost is not None else ())
    unlisted_tasks = record.without_result(lost)
    slot_attempts = record.slot_attempts + (1 if lost is not None else 0)
    if lost is not None:
        what = f"station restarted while {lost.episode_id} ran; it has no result and its task runs again as a " \
               "new episode"
    else:
        what = f"station restarted with the job {record.state.value}"
    if in_a_row > MAX_RESTARTS:
        return record.replace(state=JobState.FAILED, running=None, interrupted=interrupted,
                              unlisted_tasks=unlisted_tasks, restarts=restarts,
                              restarts_without_progress=in_a_row, slot_attempts=slot_attempts,
                              message=f"{what}; the station restarted {in_a_row} times in a row without keeping "
                                      f"an episode (limit {MAX_RESTARTS}): a crash loop, so the job is failed")
    state = JobState.WAITING_POLICY if record.state is JobState.RUNNING else record.state
    return record.replace(state=state, running=None, interrupted=interrupted, unlisted_tasks=unlisted_tasks,
                          restarts=restarts,
                          restarts_without_progress=in_a_row, slot_attempts=slot_attempts, message=what)
