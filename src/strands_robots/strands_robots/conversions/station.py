"""The station model (``station/model.py``) <-> ``strands_robots_msgs``.

Tasks, episode results, job status and score-sheet answers (the station node's services and topics), and the
rollout node's unscored ``EpisodeResult``. A status's figures and comparison are converted from the wire's messages
(``wire.pb_model.summary_to_pb`` of the station's summary, ``pb.Comparison``), so the ROS topic and the relay carry
the same numbers from the same module.
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
    summary = getattr(status, "summary", None)
    if summary is not None:  # the figures the wire carries, from the same module (station/summary.py)
        from strands_robots.wire.pb_model import summary_to_pb

        msg.summary = [job_figures_to_msg(summary_to_pb(summary))]
    comparison = getattr(status, "comparison", None)
    if comparison is not None:  # the station's topic is the operator's view: blind labels until the job ends
        if not hasattr(comparison, "HasField"):
            from strands_robots.station.comparison import operator_view
            from strands_robots.wire.pb_model import comparison_to_pb

            comparison = comparison_to_pb(operator_view(comparison))
        msg.comparison = [comparison_to_msg(comparison)]
    return msg


def _optional(pb_msg: Any, name: str) -> list:
    """Return a protobuf optional field as a ROS ``[<=1]`` sequence: ``[value]`` when present, else ``[]``."""
    return [getattr(pb_msg, name)] if pb_msg.HasField(name) else []


def rate_to_msg(rate: Any) -> Any:
    """``pb.Rate`` -> ``strands_robots_msgs/Rate``."""
    from strands_robots_msgs.msg import Rate

    return Rate(successes=rate.successes, trials=rate.trials, rate=_optional(rate, "rate"),
                low=_optional(rate, "low"), high=_optional(rate, "high"), method=rate.method,
                confidence=rate.confidence, note=rate.note)


def mean_score_to_msg(score: Any) -> Any:
    """``pb.MeanScore`` -> ``strands_robots_msgs/MeanScore``."""
    from strands_robots_msgs.msg import MeanScore

    return MeanScore(n=score.n, mean=_optional(score, "mean"), low=_optional(score, "low"),
                     high=_optional(score, "high"), method=score.method, confidence=score.confidence,
                     n_resamples=score.n_resamples, seed=score.seed, note=score.note)


def coverage_to_msg(coverage: Any) -> Any:
    """``pb.Coverage`` -> ``strands_robots_msgs/Coverage``."""
    from strands_robots_msgs.msg import Coverage

    return Coverage(scored=coverage.scored, faulted=coverage.faulted, safety_stopped=coverage.safety_stopped,
                    discarded=coverage.discarded, taken_over=coverage.taken_over, unscored=coverage.unscored,
                    interrupted=coverage.interrupted)


def job_figures_to_msg(figures: Any) -> Any:
    """``pb.JobFigures`` (what ``JobStatus.summary`` carries on the wire) -> ``strands_robots_msgs/JobFigures``."""
    from strands_robots_msgs.msg import JobFigures, TaskFigures

    return JobFigures(success=rate_to_msg(figures.success), score=mean_score_to_msg(figures.score),
                      coverage=coverage_to_msg(figures.coverage),
                      tasks=[TaskFigures(task_id=t.task_id, success=rate_to_msg(t.success),
                                         score=mean_score_to_msg(t.score), coverage=coverage_to_msg(t.coverage))
                             for t in figures.tasks])


def pb_from_msg(msg: Any, out: Any) -> Any:
    """Fill the protobuf message ``out`` from the ROS message ``msg`` that mirrors it field by field; return ``out``.

    The inverse of :func:`job_figures_to_msg` / :func:`comparison_to_msg`: a field the proto marks optional (explicit
    presence) is a ``[<=1]`` sequence on ROS, set only when it holds a value; a ROS field the proto lacks is skipped.
    """
    for name in msg.get_fields_and_field_types():
        field = out.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            continue
        value = getattr(msg, name)
        repeated = getattr(field, "is_repeated", None)
        repeated = field.label == field.LABEL_REPEATED if repeated is None else repeated
        if field.message_type is not None:
            if repeated:
                for item in value:
                    pb_from_msg(item, getattr(out, name).add())
            else:
                for item in (value if isinstance(value, (list, tuple)) else [value])[:1]:
                    pb_from_msg(item, getattr(out, name))
        elif repeated:
            getattr(out, name).extend(value)
        elif field.has_presence and not isinstance(value, (str, bytes, bool, int, float)):
            if len(value):
                setattr(out, name, value[0])
        else:
            setattr(out, name, value)
    return out


def comparison_to_msg(comparison: Any) -> Any:
    """``pb.Comparison`` (``JobStatus.comparison``) -> ``strands_robots_msgs/Comparison``."""
    from strands_robots_msgs.msg import (Comparison, ComparisonBlock, PairDifference, SequentialStop, SlotFigures,
                                         SlotOutcome)

    msg = Comparison(suite=comparison.suite, slots=list(comparison.slots),
                     labels_revealed=bool(comparison.labels_revealed))
    msg.figures = [SlotFigures(slot=f.slot, success=rate_to_msg(f.success), score=mean_score_to_msg(f.score))
                   for f in comparison.figures]
    msg.pairs = [PairDifference(a=p.a, b=p.b, both=p.both, only_a=p.only_a, only_b=p.only_b, neither=p.neither,
                                difference=_optional(p, "difference"), low=_optional(p, "low"),
                                high=_optional(p, "high"), confidence=p.confidence,
                                interval_method=p.interval_method, p_value=_optional(p, "p_value"), test=p.test,
                                detectable_difference=_optional(p, "detectable_difference"), note=p.note)
                 for p in comparison.pairs]
    msg.blocks = [ComparisonBlock(block_id=b.block_id, task_id=b.task_id, seed=b.seed,
                                  outcomes=[SlotOutcome(slot=o.slot, success=o.success, episode_id=o.episode_id,
                                                        blind_label=o.blind_label) for o in b.outcomes])
                  for b in comparison.blocks]
    if comparison.HasField("stop"):
        s = comparison.stop
        msg.stop = [SequentialStop(test=s.test, alpha=s.alpha, max_blocks=s.max_blocks,
                                   stop_when_out_of_reach=s.stop_when_out_of_reach, e_value=s.e_value,
                                   stopped_at_block=_optional(s, "stopped_at_block"), verdict=s.verdict,
                                   text=s.text)]
    return msg


def station_provenance_to_msg(provenance: Any) -> Any:
    """``station.model.Provenance`` -> ``strands_robots_msgs/Provenance``."""
    from strands_robots_msgs.msg import ConfigHash, Provenance, SlotPolicySpec

    return Provenance(software_version=provenance.software_version, git_revision=provenance.git_revision,
                      config_files=[ConfigHash(name=f.name, path=f.path, sha256=f.sha256)
                                    for f in provenance.config_files],
                      policy_spec_json=provenance.policy_spec_json,
                      slot_specs=[SlotPolicySpec(slot=s.slot, policy_spec_json=s.policy_spec_json)
                                  for s in getattr(provenance, "slot_specs", ())])


def station_answers_from_msg(items: Iterable[Any]) -> list:
    """SubmitScoreSheet answers -> ``[(name, text answer)]`` for ``OperatorConsole.submit_score_sheet``."""
    return [(item.name, item.answer) for item in items]
