"""The station's durable job state: one JSON file per job, rewritten atomically after every change.

Write: serialise, write a temp file in the same directory, flush + fsync it, ``os.replace`` it over the job's
file, fsync the directory. A crash at any point leaves either the old or the new file, never a torn one.
Each file carries ``format_version``; a file of another version, or one that does not parse, is refused with
the reason (never silently skipped).

After a restart (:func:`recover`) the station **resumes** every non-terminal job:

- the episode that was running when the station died has no result: its id goes to ``interrupted``, it is not
  listed, and its task runs again under the next episode id (ids are never reused);
- a job that was RUNNING waits for its policy again (RUNNING -> WAITING_POLICY): the policy session did not
  survive the restart;
- after ``MAX_RESTARTS`` resumptions of one job the job is FAILED with that reason instead, so a station that
  keeps dying on one episode does not loop forever.

Either way the job's message says what happened; a terminal job is loaded as it was.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Iterator, Mapping

from strands_robots.station.job_file import job_spec_from_mapping, job_spec_to_mapping, task_from_mapping, \
    task_to_mapping
from strands_robots.station.model import (
    TERMINAL_STATES,
    AnswerType,
    EpisodeResult,
    JobState,
    ScoredItem,
)
from strands_robots.station.record import JobRecord, RunningEpisode

__all__ = [
    "FORMAT_VERSION",
    "MAX_RESTARTS",
    "PersistenceError",
    "JobStore",
    "record_to_mapping",
    "record_from_mapping",
    "episode_to_mapping",
    "episode_from_mapping",
    "recover",
]

FORMAT_VERSION = 1
MAX_RESTARTS = 3
_SUFFIX = ".job.json"


class PersistenceError(RuntimeError):
    """A job file could not be written or read; the message says which file and why."""


# -- codec ------------------------------------------------------------------------------------------------------
def episode_to_mapping(episode: EpisodeResult) -> dict:
    return {
        "episode_id": episode.episode_id,
        "end_condition": episode.end_condition,
        "scored": episode.scored,
        "success": episode.success,
        "score": episode.score,
        "items": [{"name": i.name, "question": i.question, "answer_type": i.answer_type.value,
                   "answer": i.answer, "points": i.points, "max_points": i.max_points,
                   "is_success_item": i.is_success_item} for i in episode.items],
        "task": task_to_mapping(episode.task),
        "taken_over": episode.taken_over,
        "end_detail": episode.end_detail,
        "run_id": episode.run_id,
    }


def episode_from_mapping(data: Mapping[str, Any]) -> EpisodeResult:
    items = []
    for raw in data["items"]:
        kind = AnswerType(raw["answer_type"])
        answer = raw["answer"]
        answer = bool(answer) if kind is AnswerType.YES_NO else int(answer)
        items.append(ScoredItem(name=raw["name"], question=raw["question"], answer_type=kind, answer=answer,
                                points=float(raw["points"]), max_points=float(raw["max_points"]),
                                is_success_item=bool(raw["is_success_item"])))
    return EpisodeResult(
        episode_id=data["episode_id"], end_condition=data["end_condition"], scored=bool(data["scored"]),
        success=bool(data["success"]), score=float(data["score"]), items=tuple(items),
        task=task_from_mapping(data["task"], 0), taken_over=bool(data["taken_over"]),
        end_detail=data["end_detail"], run_id=data.get("run_id", ""))


def record_to_mapping(record: JobRecord) -> dict:
    running = record.running
    return {
        "format_version": FORMAT_VERSION,
        "job": job_spec_to_mapping(record.spec),
        "state": record.state.value,
        "message": record.message,
        "episodes": [episode_to_mapping(e) for e in record.episodes],
        "next_episode_number": record.next_episode_number,
        "discarded": list(record.discarded),
        "interrupted": list(record.interrupted),
        "running": None if running is None else {"episode_id": running.episode_id, "slot": running.slot,
                                                 "attempt": running.attempt},
        "restarts": record.restarts,
        "slot_attempts": record.slot_attempts,
    }


def record_from_mapping(data: Mapping[str, Any]) -> JobRecord:
    """Read a record from its mapping.

    :raises PersistenceError: another format version, or a field missing or malformed.
    """
    if not isinstance(data, Mapping):
        raise PersistenceError(f"a job file holds a JSON object, got {type(data).__name__}")
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise PersistenceError(f"format_version {version!r} is not {FORMAT_VERSION}, the version this station "
                               "reads")
    try:
        running = data["running"]
        return JobRecord(
            spec=job_spec_from_mapping(data["job"]),
            state=JobState(data["state"]),
            message=str(data["message"]),
            episodes=tuple(episode_from_mapping(e) for e in data["episodes"]),
            next_episode_number=int(data["next_episode_number"]),
            discarded=tuple(str(x) for x in data["discarded"]),
            interrupted=tuple(str(x) for x in data["interrupted"]),
            running=None if running is None else RunningEpisode(str(running["episode_id"]), int(running["slot"]),
                                                                int(running["attempt"])),
            restarts=int(data["restarts"]),
            slot_attempts=int(data.get("slot_attempts", 0)),
        )
    except PersistenceError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise PersistenceError(f"malformed job state: {type(exc).__name__}: {exc}") from exc


# -- the store --------------------------------------------------------------------------------------------------
class JobStore:
    """Job files in one directory (created if missing). Writes are atomic; one writer per job at a time.

    :param directory: where ``<job_id>.job.json`` files live.
    :param fsync: flush to the disk on every write (disable only in benchmarks).
    """

    def __init__(self, directory: str, *, fsync: bool = True) -> None:
        self.directory = os.fspath(directory)
        self._fsync = bool(fsync)
        os.makedirs(self.directory, exist_ok=True)

    def path_of(self, job_id: str) -> str:
        return os.path.join(self.directory, job_id + _SUFFIX)

    def save(self, record: JobRecord) -> None:
        """Replace the job's file with ``record`` atomically.

        :raises PersistenceError: the write failed (the previous file is intact).
        """
        text = json.dumps(record_to_mapping(record), indent=1, sort_keys=True, allow_nan=False)
        target = self.path_of(record.job_id)
        fd, tmp = tempfile.mkstemp(prefix="." + record.job_id + ".", suffix=".tmp", dir=self.directory)
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
        try:
            fd = os.open(self.directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def load(self, job_id: str) -> JobRecord:
        """Load a job's record.

        :raises PersistenceError: no such job, or its file does not parse (the reason names the file).
        """
        path = self.path_of(job_id)
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise PersistenceError(f"no saved state for job {job_id!r} ({path})") from None
        except (OSError, ValueError) as exc:
            raise PersistenceError(f"{path}: unreadable job state: {type(exc).__name__}: {exc}") from exc
        try:
            return record_from_mapping(data)
        except PersistenceError as exc:
            raise PersistenceError(f"{path}: {exc}") from exc

    def job_ids(self) -> tuple:
        """Every job with a file here, sorted (temp files of an interrupted write are ignored)."""
        names = []
        for name in os.listdir(self.directory):
            if name.endswith(_SUFFIX) and not name.startswith("."):
                names.append(name[: -len(_SUFFIX)])
        return tuple(sorted(names))

    def load_all(self) -> Iterator[JobRecord]:
        """Every saved job; a file that does not load raises (it is never skipped silently)."""
        for job_id in self.job_ids():
            yield self.load(job_id)


# -- restart ----------------------------------------------------------------------------------------------------
def recover(record: JobRecord) -> JobRecord:
    """Return the record a restarted station continues from (see the module docstring); terminal ones as is.

    The state stays a legal one for the state machine: a RUNNING job becomes WAITING_POLICY, FAILED after
    too many restarts; CREATED, WAITING_POLICY and FINALIZING are kept.
    """
    if record.state in TERMINAL_STATES:
        return record
    restarts = record.restarts + 1
    lost = record.running
    interrupted = record.interrupted + ((lost.episode_id,) if lost is not None else ())
    slot_attempts = record.slot_attempts + (1 if lost is not None else 0)
    if lost is not None:
        what = f"station restarted while {lost.episode_id} ran; it has no result and its task runs again as a " \
               "new episode"
    else:
        what = f"station restarted with the job {record.state.value}"
    if restarts > MAX_RESTARTS:
        return record.replace(state=JobState.FAILED, running=None, interrupted=interrupted, restarts=restarts,
                              slot_attempts=slot_attempts,
                              message=f"{what}; the station restarted {restarts} times during this job "
                                      f"(limit {MAX_RESTARTS}), so the job is failed")
    state = JobState.WAITING_POLICY if record.state is JobState.RUNNING else record.state
    return record.replace(state=state, running=None, interrupted=interrupted, restarts=restarts,
                          slot_attempts=slot_attempts, message=what)
