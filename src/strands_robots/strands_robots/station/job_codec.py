"""The JSON mapping of a job's saved state: the record, its finished episodes, its provenance.

:func:`record_to_mapping` / :func:`record_from_mapping` are the job file's codec (``with_episodes=False``: the
job file counts its episodes as ``episodes_logged`` and :func:`episode_to_mapping` writes each as one line of the
episode log). An episode's task is stored as ``task_index`` into the job's tasks when it is one of them (always,
for the station's own episodes). The mapping carries ``format_version``; one of another version, or a field
missing or malformed, is refused with a :class:`~strands_robots.station.durable_files.PersistenceError` saying
why. Used by :class:`~strands_robots.station.persistence.JobStore`.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from strands_robots.station.durable_files import PersistenceError
from strands_robots.station.job_file import job_spec_from_mapping, job_spec_to_mapping, task_from_mapping, \
    task_to_mapping
from strands_robots.station.model import (
    COMPARISON_PLACE,
    EPISODE_FIGURES,
    AnswerType,
    ConfigHash,
    EpisodeResult,
    JobState,
    Provenance,
    ScoredItem,
    SlotPolicySpec,
    comparison_place,
    episode_figures,
)
from strands_robots.station.record import JobRecord, RunningEpisode

__all__ = [
    "FORMAT_VERSION",
    "episode_from_mapping",
    "episode_to_mapping",
    "provenance_from_mapping",
    "provenance_to_mapping",
    "record_from_mapping",
    "record_to_mapping",
]

FORMAT_VERSION = 1


def episode_to_mapping(episode: EpisodeResult, tasks: tuple = ()) -> dict:
    """Return the JSON mapping of an episode; its task as ``task_index`` when it is one of ``tasks``."""
    data = {
        "episode_id": episode.episode_id,
        "end_condition": episode.end_condition,
        "scored": episode.scored,
        "success": episode.success,
        "score": episode.score,
        "items": [{"name": i.name, "question": i.question, "answer_type": i.answer_type.value,
                   "answer": i.answer, "points": i.points, "max_points": i.max_points,
                   "is_success_item": i.is_success_item} for i in episode.items],
        "taken_over": episode.taken_over,
        "end_detail": episode.end_detail,
        "run_id": episode.run_id,
        "recording_sha256": episode.recording_sha256,
    }
    data.update(episode_figures({name: getattr(episode, name) for name, _kind in EPISODE_FIGURES}))
    data.update(comparison_place({name: getattr(episode, name) for name, _kind in COMPARISON_PLACE}))
    index = next((i for i, task in enumerate(tasks) if task == episode.task), None)
    if index is None:
        data["task"] = task_to_mapping(episode.task)
    else:
        data["task_index"] = index
    return data


def episode_from_mapping(data: Mapping[str, Any], tasks: tuple = ()) -> EpisodeResult:
    """Read an episode from its mapping (``task_index`` refers into ``tasks``)."""
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
        task=tasks[int(data["task_index"])] if "task_index" in data else task_from_mapping(data["task"], 0),
        taken_over=bool(data["taken_over"]),
        end_detail=data["end_detail"], run_id=data.get("run_id", ""),
        recording_sha256=str(data.get("recording_sha256", "")), **episode_figures(data), **comparison_place(data))


def provenance_to_mapping(provenance: Provenance) -> dict:
    """Return the JSON mapping of a job's provenance."""
    return {"software_version": provenance.software_version, "git_revision": provenance.git_revision,
            "config_files": [{"name": f.name, "path": f.path, "sha256": f.sha256} for f in provenance.config_files],
            "policy_spec_json": provenance.policy_spec_json,
            "slot_specs": [{"slot": s.slot, "policy_spec_json": s.policy_spec_json} for s in provenance.slot_specs]}


def provenance_from_mapping(data: Any) -> Optional[Provenance]:
    """Read a job's provenance (None: the job has none yet, or a file written before provenance existed).

    A file written before the provenance kept every slot's spec reads with none (``slot_specs`` empty).
    """
    if data is None:
        return None
    return Provenance(software_version=str(data["software_version"]), git_revision=str(data["git_revision"]),
                      config_files=tuple(ConfigHash(str(f["name"]), str(f["path"]), str(f["sha256"]))
                                         for f in data["config_files"]),
                      policy_spec_json=str(data.get("policy_spec_json", "")),
                      slot_specs=tuple(SlotPolicySpec(str(s["slot"]), str(s.get("policy_spec_json", "")))
                                       for s in data.get("slot_specs", ())))


def record_to_mapping(record: JobRecord, *, with_episodes: bool = True) -> dict:
    """Return the JSON mapping of a record (``with_episodes=False``: the job file's, counting them instead)."""
    running = record.running
    data = {
        "format_version": FORMAT_VERSION,
        "job": job_spec_to_mapping(record.spec),
        "state": record.state.value,
        "message": record.message,
        "next_episode_number": record.next_episode_number,
        "discarded": list(record.discarded),
        "interrupted": list(record.interrupted),
        "running": None if running is None else {"episode_id": running.episode_id, "slot": running.slot,
                                                 "attempt": running.attempt, "task_id": running.task_id},
        "unlisted_tasks": [[episode_id, task_id] for episode_id, task_id in record.unlisted_tasks],
        "restarts": record.restarts,
        "restarts_without_progress": record.restarts_without_progress,
        "slot_attempts": record.slot_attempts,
        "sequence": record.sequence,
        "provenance": None if record.provenance is None else provenance_to_mapping(record.provenance),
    }
    if with_episodes:
        data["episodes"] = [episode_to_mapping(e, record.spec.tasks) for e in record.episodes]
    else:
        data["episodes_logged"] = len(record.episodes)
    return data


def record_from_mapping(data: Mapping[str, Any], episode_mappings: "Sequence[Mapping] | None" = None) -> JobRecord:
    """Read a record from its mapping (``episode_mappings``: the logged episodes, for a job file's mapping).

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
        spec = job_spec_from_mapping(data["job"])
        if episode_mappings is None:
            episode_mappings = data["episodes"]
        episodes = tuple(episode_from_mapping(e, spec.tasks) for e in episode_mappings)
        return JobRecord(
            spec=spec,
            state=JobState(data["state"]),
            message=str(data["message"]),
            episodes=tuple(episodes),
            next_episode_number=int(data["next_episode_number"]),
            discarded=tuple(str(x) for x in data["discarded"]),
            interrupted=tuple(str(x) for x in data["interrupted"]),
            running=None if running is None else RunningEpisode(str(running["episode_id"]), int(running["slot"]),
                                                                int(running["attempt"]),
                                                                str(running.get("task_id", ""))),
            # a file without them: those episodes are in the job's coverage only
            unlisted_tasks=tuple((str(e), str(t)) for e, t in data.get("unlisted_tasks", ())),
            restarts=int(data["restarts"]),
            # a file without it counts the crash loop from its next restart on
            restarts_without_progress=int(data.get("restarts_without_progress", 0)),
            slot_attempts=int(data.get("slot_attempts", 0)),
            sequence=int(data.get("sequence", 0)),
            provenance=provenance_from_mapping(data.get("provenance")),
        )
    except PersistenceError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise PersistenceError(f"malformed job state: {type(exc).__name__}: {exc}") from exc
