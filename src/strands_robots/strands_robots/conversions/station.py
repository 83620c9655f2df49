"""The station model (``station/model.py``) <-> ``strands_robots_msgs``.

Tasks, episode results, job status and score-sheet answers (the station node's services and topics), and the
rollout node's unscored ``EpisodeResult``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from strands_robots.conversions.messages import PACKAGE, message_class


def rollout_episode_result_msg(ended: "Mapping[str, Any] | None", end_condition: str, end_detail: str,
                               task: Any = None) -> Any:
    """Build the ``EpisodeResult`` the rollout node publishes on ``episode_results``.

    Not scored: the station adds the score sheet and the episode id.

    :param ended: the episode's Ended event as a dict (``run_id`` read from it); None when no rollout ran.
    :param task: the goal's ``Task`` message, or None for an empty one.
    """
    msg = message_class(f"{PACKAGE}/msg/EpisodeResult")()
    msg.end_condition = end_condition
    msg.end_detail = end_detail or ""
    if task is not None:
        msg.task = task
    msg.scored = False
    msg.run_id = str(ended.get("run_id", "")) if ended else ""
    return msg


# -- the station node's services and topics -------------------------------------------------------------------
def station_task_to_msg(task: Any) -> Any:
    """``station.model.Task`` -> ``strands_robots_msgs/Task`` (parameters as KeyValue pairs, the sheet with it)."""
    from diagnostic_msgs.msg import KeyValue
    from strands_robots_msgs.msg import ScoringItemDefinition, ScoringSheetDefinition, Task

    msg = Task(task_id=task.task_id, instruction=task.instruction, layout=task.layout)
    msg.parameters = [KeyValue(key=str(k), value=str(v)) for k, v in dict(task.parameters).items()]
    sheet = ScoringSheetDefinition()
    sheet.items = [ScoringItemDefinition(
        name=i.name, question=i.question, answer_type=getattr(i.answer_type, "value", i.answer_type),
        max_points=float(i.max_points), choices=list(i.choices), choice_points=[float(p) for p in i.choice_points],
        points_per_unit=float(i.points_per_unit), success_answer=i.success_answer) for i in task.scoring.items]
    msg.scoring = sheet
    return msg


def station_task_from_msg(msg: Any) -> Any:
    """``strands_robots_msgs/Task`` -> ``station.model.Task``; ValueError names the item of a bad answer type."""
    from strands_robots.station.model import AnswerType, ScoringItemDefinition, ScoringSheet, Task

    items = []
    for index, item in enumerate(msg.scoring.items):
        try:
            answer_type = AnswerType(item.answer_type)
        except ValueError:
            raise ValueError(f"scoring.items[{index}] ({item.name!r}): unknown answer_type {item.answer_type!r}; "
                             "expected yes_no, count or choice") from None
        items.append(ScoringItemDefinition(
            name=item.name, question=item.question, answer_type=answer_type, max_points=float(item.max_points),
            choices=tuple(item.choices), choice_points=tuple(float(p) for p in item.choice_points),
            points_per_unit=float(item.points_per_unit), success_answer=item.success_answer))
    return Task(task_id=msg.task_id, instruction=msg.instruction, layout=msg.layout,
                parameters={kv.key: kv.value for kv in msg.parameters}, scoring=ScoringSheet(tuple(items)))


def station_episode_to_msg(result: Any) -> Any:
    """``station.model.EpisodeResult`` -> ``strands_robots_msgs/EpisodeResult`` (answers as text)."""
    from strands_robots.station.model import EPISODE_FIGURES, AnswerType
    from strands_robots_msgs.msg import EpisodeResult, ScoredItem

    msg = EpisodeResult(episode_id=result.episode_id, end_condition=result.end_condition, scored=bool(result.scored),
                        success=bool(result.success), score=float(result.score), taken_over=bool(result.taken_over),
                        end_detail=result.end_detail or "", run_id=result.run_id or "",
                        recording_sha256=getattr(result, "recording_sha256", "") or "")
    for name, kind in EPISODE_FIGURES:  # each a bounded sequence: [] absent, [value] present
        value = getattr(result, name, None)
        setattr(msg, name, [] if value is None else [kind(value)])
    by_name = {i.name: i for i in result.task.scoring.items}
    items = []
    for item in result.items:
        kind = AnswerType(getattr(item.answer_type, "value", item.answer_type))
        if kind is AnswerType.YES_NO:
            text = "yes" if item.answer else "no"
        elif kind is AnswerType.COUNT:
            text = str(int(item.answer))
        else:
            choices = by_name[item.name].choices if item.name in by_name else ()
            text = choices[int(item.answer)] if 0 <= int(item.answer) < len(choices) else str(int(item.answer))
        items.append(ScoredItem(name=item.name, question=item.question, answer_type=kind.value, answer=text,
                                points=float(item.points), max_points=float(item.max_points),
                                is_success_item=bool(item.is_success_item)))
    msg.items = items
    msg.task = station_task_to_msg(result.task)
    return msg


def station_status_to_msg(status: Any) -> Any:
    """``station.model.JobStatus`` -> ``strands_robots_msgs/JobStatus``."""
    from strands_robots_msgs.msg import JobStatus

    msg = JobStatus(job_id=status.job_id, station_id=status.station_id,
                    state=getattr(status.state, "value", status.state), episodes_total=int(status.episodes_total),
                    updated_unix_ms=int(status.updated_unix_ms), message=status.message or "")
    msg.episodes = [station_episode_to_msg(e) for e in status.episodes]
    provenance = getattr(status, "provenance", None)
    if provenance is not None:
        msg.provenance = station_provenance_to_msg(provenance)
    return msg


def station_provenance_to_msg(provenance: Any) -> Any:
    """``station.model.Provenance`` -> ``strands_robots_msgs/Provenance``."""
    from strands_robots_msgs.msg import ConfigHash, Provenance

    return Provenance(software_version=provenance.software_version, git_revision=provenance.git_revision,
                      config_files=[ConfigHash(name=f.name, path=f.path, sha256=f.sha256)
                                    for f in provenance.config_files],
                      policy_spec_json=provenance.policy_spec_json)


def station_answers_from_msg(items: Iterable[Any]) -> list:
    """SubmitScoreSheet answers -> ``[(name, text answer)]`` for ``OperatorConsole.submit_score_sheet``."""
    return [(item.name, item.answer) for item in items]
