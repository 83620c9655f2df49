"""The protobuf side of the station's model: ``station/model.py`` <-> ``strands_robots.wire.proto``.

Beside the relay that speaks it, so the relay depends on its proto and the core model only (never on the ROS
conversions in ``strands_robots.conversions``). The generated modules are imported on first use, so this module
imports without protobuf or grpc.
"""

from __future__ import annotations

from typing import Any

_PB_ANSWER_TYPES = {"yes_no": "ANSWER_TYPE_YES_NO", "count": "ANSWER_TYPE_COUNT", "choice": "ANSWER_TYPE_CHOICE"}
_PB_ANSWER_FIELD = {"yes_no": "yes_no", "count": "count", "choice": "choice_index"}


def _pb_eval() -> Any:
    from strands_robots.wire.proto import evaluation_pb2

    return evaluation_pb2


def answer_type_to_pb(answer_type: Any) -> int:
    """``AnswerType.YES_NO`` (or ``"yes_no"``) -> ``pb.ANSWER_TYPE_YES_NO``; ValueError names the value."""
    value = getattr(answer_type, "value", answer_type)
    name = _PB_ANSWER_TYPES.get(value)
    if name is None:
        raise ValueError(f"unknown answer type {answer_type!r}; expected one of {', '.join(_PB_ANSWER_TYPES)}")
    return getattr(_pb_eval(), name)


def answer_type_from_pb(value: int) -> Any:
    """``pb.ANSWER_TYPE_COUNT`` -> ``AnswerType.COUNT``; ValueError for UNSPECIFIED or an unknown int."""
    from strands_robots.station.model import AnswerType

    pb = _pb_eval()
    for text, name in _PB_ANSWER_TYPES.items():
        if getattr(pb, name) == value:
            return AnswerType(text)
    raise ValueError(f"answer type {value} is not one of yes_no, count, choice")


def task_to_pb(task: Any) -> Any:
    """``station.model.Task`` -> ``pb.Task`` (the score sheet with it)."""
    pb = _pb_eval()
    msg = pb.Task(task_id=task.task_id, instruction=task.instruction, layout=task.layout)
    msg.parameters.update(dict(task.parameters))
    for item in task.scoring.items:
        msg.scoring.items.add(
            name=item.name, question=item.question, answer_type=answer_type_to_pb(item.answer_type),
            max_points=float(item.max_points), choices=list(item.choices),
            choice_points=[float(p) for p in item.choice_points], points_per_unit=float(item.points_per_unit),
            success_answer=item.success_answer,
        )
    return msg


def task_from_pb(msg: Any) -> Any:
    """``pb.Task`` -> ``station.model.Task``. ValueError names the item of an unknown answer type."""
    from strands_robots.station.model import ScoringItemDefinition, ScoringSheet, Task

    items = []
    for index, item in enumerate(msg.scoring.items):
        try:
            answer_type = answer_type_from_pb(item.answer_type)
        except ValueError as exc:
            raise ValueError(f"scoring.items[{index}] ({item.name!r}): {exc}") from None
        items.append(ScoringItemDefinition(
            name=item.name, question=item.question, answer_type=answer_type, max_points=item.max_points,
            choices=tuple(item.choices), choice_points=tuple(item.choice_points),
            points_per_unit=item.points_per_unit, success_answer=item.success_answer,
        ))
    return Task(task_id=msg.task_id, instruction=msg.instruction, layout=msg.layout,
                parameters=dict(msg.parameters), scoring=ScoringSheet(tuple(items)))


def scored_item_to_pb(item: Any) -> Any:
    """``station.model.ScoredItem`` -> ``pb.ScoredItem`` with the answer in its ``oneof``."""
    pb = _pb_eval()
    answer_type = getattr(item.answer_type, "value", item.answer_type)
    msg = pb.ScoredItem(name=item.name, question=item.question, answer_type=answer_type_to_pb(answer_type),
                        points=float(item.points), max_points=float(item.max_points),
                        is_success_item=bool(item.is_success_item))
    field_name = _PB_ANSWER_FIELD[answer_type]
    setattr(msg, field_name, bool(item.answer) if field_name == "yes_no" else int(item.answer))
    return msg


def scored_item_from_pb(msg: Any) -> Any:
    """``pb.ScoredItem`` -> ``station.model.ScoredItem``; ValueError when the answer is missing or mistyped."""
    from strands_robots.station.model import ScoredItem

    answer_type = answer_type_from_pb(msg.answer_type)
    which = msg.WhichOneof("answer")
    if which != _PB_ANSWER_FIELD[answer_type.value]:
        raise ValueError(f"scored item {msg.name!r}: a {answer_type.value} item needs its answer in "
                         f"{_PB_ANSWER_FIELD[answer_type.value]!r}, got {which or 'no answer'}")
    return ScoredItem(name=msg.name, question=msg.question, answer_type=answer_type,
                      answer=getattr(msg, which), points=msg.points, max_points=msg.max_points,
                      is_success_item=msg.is_success_item)


def episode_result_to_pb(result: Any) -> Any:
    """``station.model.EpisodeResult`` -> ``pb.EpisodeResult``."""
    pb = _pb_eval()
    msg = pb.EpisodeResult(
        episode_id=result.episode_id, end_condition=result.end_condition, scored=bool(result.scored),
        success=bool(result.success), score=float(result.score), taken_over=bool(result.taken_over),
        end_detail=result.end_detail or "", run_id=result.run_id or "",
        recording_sha256=getattr(result, "recording_sha256", "") or "",
    )
    from strands_robots.station.model import COMPARISON_PLACE, EPISODE_FIGURES

    for name, _kind in EPISODE_FIGURES + COMPARISON_PLACE:
        value = getattr(result, name, None)
        if value is not None:
            setattr(msg, name, value)
    msg.items.extend(scored_item_to_pb(i) for i in result.items)
    msg.task.CopyFrom(task_to_pb(result.task))
    return msg


def episode_result_from_pb(msg: Any) -> Any:
    """``pb.EpisodeResult`` -> ``station.model.EpisodeResult``."""
    from strands_robots.station.model import COMPARISON_PLACE, EPISODE_FIGURES, EpisodeResult

    figures = {name: getattr(msg, name) for name, _kind in EPISODE_FIGURES + COMPARISON_PLACE if msg.HasField(name)}
    return EpisodeResult(
        episode_id=msg.episode_id, end_condition=msg.end_condition, scored=msg.scored, success=msg.success,
        score=msg.score, items=tuple(scored_item_from_pb(i) for i in msg.items), task=task_from_pb(msg.task),
        taken_over=msg.taken_over, end_detail=msg.end_detail, run_id=msg.run_id,
        recording_sha256=msg.recording_sha256, **figures,
    )


def job_status_to_pb(status: Any) -> Any:
    """``station.model.JobStatus`` -> ``pb.JobStatus`` (``station_last_heard_unix_ms`` left absent: the relay's)."""
    pb = _pb_eval()
    msg = pb.JobStatus(
        job_id=status.job_id, station_id=status.station_id, state=getattr(status.state, "value", status.state),
        episodes_total=int(status.episodes_total), updated_unix_ms=int(status.updated_unix_ms),
        message=status.message or "", sequence=int(status.sequence),
    )
    msg.episodes.extend(episode_result_to_pb(e) for e in status.episodes)
    provenance = getattr(status, "provenance", None)
    if provenance is not None:
        msg.provenance.CopyFrom(provenance_to_pb(provenance))
    summary = getattr(status, "summary", None)
    if summary is not None:
        msg.summary.CopyFrom(summary_to_pb(summary))
    comparison = getattr(status, "comparison", None)
    if comparison is not None:
        msg.comparison.CopyFrom(comparison_to_pb(comparison))
    return msg


def comparison_to_pb(comparison: Any) -> Any:
    """``station.comparison.Comparison`` -> ``pb.Comparison``."""
    pb = _pb_eval()
    msg = pb.Comparison(suite=comparison.suite, slots=list(comparison.slots),
                        labels_revealed=bool(comparison.labels_revealed))
    for figures in comparison.figures:
        msg.figures.add(slot=figures.slot, success=rate_to_pb(figures.success), score=mean_score_to_pb(figures.score))
    for pair in comparison.pairs:
        paired = pair.paired
        table, difference, detectable = paired.table, paired.difference, paired.detectable
        entry = msg.pairs.add(a=pair.a, b=pair.b, both=table.both_succeeded, only_a=table.only_a,
                              only_b=table.only_b, neither=table.both_failed, confidence=difference.confidence,
                              interval_method=difference.method, test=paired.test.test,
                              note="; ".join(n for n in (difference.note, detectable.note) if n))
        for name, value in (("difference", difference.difference), ("low", difference.low),
                            ("high", difference.high), ("detectable_difference", detectable.difference)):
            if value is not None:
                setattr(entry, name, float(value))
        if table.blocks:
            entry.p_value = float(paired.test.p_value)
    for block in comparison.blocks:
        entry = msg.blocks.add(block_id=block.block_id, task_id=block.task_id, seed=int(block.seed or 0))
        for result in block.results:
            entry.outcomes.add(slot=result.slot, success=result.success, episode_id=result.episode_id,
                               blind_label=result.blind_label)
    stop = comparison.stop
    if stop is not None:
        msg.stop.CopyFrom(pb.SequentialStop(test=stop.test, alpha=stop.alpha, max_blocks=stop.max_blocks,
                                            stop_when_out_of_reach=stop.stop_when_out_of_reach,
                                            e_value=min(float(stop.e_value), 1.7e308), verdict=stop.verdict,
                                            text=stop.text))
        if stop.stopped_at_block is not None:
            msg.stop.stopped_at_block = int(stop.stopped_at_block)
    return msg


def _optional(msg: Any, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


def rate_to_pb(rate: Any) -> Any:
    """``stats.proportion.Proportion`` -> ``pb.Rate`` (rate and bounds absent when there are no trials)."""
    msg = _pb_eval().Rate(successes=int(rate.successes), trials=int(rate.trials),
                          method=getattr(rate.method, "value", rate.method), confidence=float(rate.confidence),
                          note=rate.note or "")
    for name in ("rate", "low", "high"):
        if getattr(rate, name) is not None:
            setattr(msg, name, float(getattr(rate, name)))
    return msg


def rate_from_pb(msg: Any) -> Any:
    """``pb.Rate`` -> ``stats.proportion.Proportion``; ValueError for an unknown method or inconsistent bounds."""
    from strands_robots.stats.proportion import IntervalMethod, Proportion

    return Proportion(successes=msg.successes, trials=msg.trials, rate=_optional(msg, "rate"),
                      low=_optional(msg, "low"), high=_optional(msg, "high"), confidence=msg.confidence,
                      method=IntervalMethod(msg.method), note=msg.note)


def mean_score_to_pb(score: Any) -> Any:
    """``stats.mean_score.MeanScore`` -> ``pb.MeanScore``."""
    msg = _pb_eval().MeanScore(n=int(score.n), method=getattr(score.method, "value", score.method) or "",
                               confidence=float(score.confidence), n_resamples=int(score.n_resamples),
                               seed=int(score.seed), note=score.note or "")
    for name in ("mean", "low", "high"):
        if getattr(score, name) is not None:
            setattr(msg, name, float(getattr(score, name)))
    return msg


def mean_score_from_pb(msg: Any) -> Any:
    """``pb.MeanScore`` -> ``stats.mean_score.MeanScore``."""
    from strands_robots.stats.mean_score import BootstrapMethod, MeanScore

    return MeanScore(n=msg.n, mean=_optional(msg, "mean"), low=_optional(msg, "low"), high=_optional(msg, "high"),
                     confidence=msg.confidence, method=BootstrapMethod(msg.method) if msg.method else None,
                     n_resamples=msg.n_resamples, seed=msg.seed, note=msg.note)


def coverage_to_pb(coverage: Any) -> Any:
    """``stats.coverage.Coverage`` (or ``station.summary.CoverageCounts``) -> ``pb.Coverage``: each bucket's count."""
    return _pb_eval().Coverage(**{d.value: int(n) for d, n in coverage.counts().items()})


def coverage_from_pb(msg: Any) -> Any:
    """``pb.Coverage`` -> ``station.summary.CoverageCounts``."""
    from strands_robots.station.summary import CoverageCounts
    from strands_robots.stats.coverage import Disposition

    return CoverageCounts.of({d: getattr(msg, d.value) for d in Disposition})


def summary_to_pb(summary: Any) -> Any:
    """``station.summary.JobSummary`` -> ``pb.JobFigures``."""
    pb = _pb_eval()
    msg = pb.JobFigures(success=rate_to_pb(summary.success), score=mean_score_to_pb(summary.score),
                        coverage=coverage_to_pb(summary.coverage))
    msg.tasks.extend(pb.TaskFigures(task_id=t.task_id, success=rate_to_pb(t.success), score=mean_score_to_pb(t.score),
                                    coverage=coverage_to_pb(t.coverage)) for t in summary.tasks)
    return msg


def summary_from_pb(msg: Any) -> Any:
    """``pb.JobFigures`` -> ``station.summary.JobSummary``; ValueError for figures that do not hold together."""
    from strands_robots.station.summary import JobSummary, TaskSummary

    return JobSummary(success=rate_from_pb(msg.success), score=mean_score_from_pb(msg.score),
                      coverage=coverage_from_pb(msg.coverage),
                      tasks=tuple(TaskSummary(t.task_id, rate_from_pb(t.success), mean_score_from_pb(t.score),
                                              coverage_from_pb(t.coverage)) for t in msg.tasks))


def provenance_to_pb(provenance: Any) -> Any:
    """``station.model.Provenance`` -> ``pb.Provenance``."""
    pb = _pb_eval()
    return pb.Provenance(
        software_version=provenance.software_version, git_revision=provenance.git_revision,
        config_files=[pb.ConfigHash(name=f.name, path=f.path, sha256=f.sha256) for f in provenance.config_files],
        policy_spec_json=provenance.policy_spec_json,
        slot_specs=[pb.SlotPolicySpec(slot=s.slot, policy_spec_json=s.policy_spec_json)
                    for s in getattr(provenance, "slot_specs", ())])


def provenance_from_pb(msg: Any) -> Any:
    """``pb.Provenance`` -> ``station.model.Provenance``."""
    from strands_robots.station.model import ConfigHash, Provenance, SlotPolicySpec

    return Provenance(software_version=msg.software_version, git_revision=msg.git_revision,
                      config_files=tuple(ConfigHash(f.name, f.path, f.sha256) for f in msg.config_files),
                      policy_spec_json=msg.policy_spec_json,
                      slot_specs=tuple(SlotPolicySpec(s.slot, s.policy_spec_json) for s in msg.slot_specs))


def job_status_from_pb(msg: Any) -> Any:
    """``pb.JobStatus`` -> ``station.model.JobStatus``.

    :raises ValueError: a state the model does not know, or a summary whose figures do not hold together.
    """
    from strands_robots.station.model import JobState, JobStatus

    try:
        state = JobState(msg.state)
    except ValueError:
        raise ValueError(f"job {msg.job_id!r}: unknown state {msg.state!r}") from None
    return JobStatus(
        job_id=msg.job_id, station_id=msg.station_id, state=state, episodes_total=msg.episodes_total,
        episodes=tuple(episode_result_from_pb(e) for e in msg.episodes), updated_unix_ms=msg.updated_unix_ms,
        message=msg.message, sequence=msg.sequence,
        provenance=provenance_from_pb(msg.provenance) if msg.HasField("provenance") else None,
        summary=_summary_or_none(msg),
    )


def _summary_or_none(msg: Any) -> Any:
    """Return the snapshot's summary (None when absent); ValueError naming the job when it does not hold together."""
    if not msg.HasField("summary"):
        return None
    try:
        return summary_from_pb(msg.summary)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"job {msg.job_id!r}: summary refused: {exc}") from None


#: The job settings a ``SubmitJobRequest`` and a relay ``Job`` carry beside the tasks (proto3 ``optional``: absent
#: means the station's default), by their ``JobSpec`` field names.
JOB_OPTIONS = ("duration_s", "control_frequency", "max_discards", "intervals", "record")


def job_options_from_pb(msg: Any) -> dict:
    """Return the :data:`JOB_OPTIONS` present in ``msg`` (a ``SubmitJobRequest`` or ``Job``) as JobSpec keywords."""
    return {name: getattr(msg, name) for name in JOB_OPTIONS if msg.HasField(name)}


def job_spec_from_pb(job: Any, *, policy_provider: str = "relay", suites: Any = None, profile: str = "hardware",
                     allow_free_form_tasks: bool = False, **options: Any) -> Any:
    """Convert a relay ``Job`` (what ``StationLink``'s ``on_job`` receives) to a validated ``JobSpec``.

    :param suites: the station's suites (``station.suite_file.Suite`` by id): a job naming a suite
        (``suite_job``) is filled in from them, its own tasks are free-form tasks (only where
        ``allow_free_form_tasks``; a station key in their parameters is refused; the scripted operator keeps them
        unscored). None: the job's tasks as they are (a caller that is not a station enforcing its suites).
    :param options: the other ``JobSpec`` fields (policy_config); the job's own :data:`JOB_OPTIONS` come with it.
    :raises station.job.JobSpecError: naming the task index, the field and the reason.
    """
    from strands_robots.station.job import JobSpec, JobSpecError, validate_job_spec

    tasks = []
    for index, task in enumerate(job.tasks):
        try:
            tasks.append(task_from_pb(task))
        except ValueError as exc:
            raise JobSpecError("scoring", str(exc), index) from None
    fields = dict(job_id=job.job_id, client_id=job.client_id, station_id=job.station_id,
                  policy_provider=policy_provider, **{**job_options_from_pb(job), **options})
    if suites is None:
        return validate_job_spec(JobSpec(tasks=tuple(tasks), episodes_total=int(job.episodes_total), **fields))
    from strands_robots.station.suite_job import free_form_job_spec, job_spec_for

    if not job.HasField("suite_job"):
        return free_form_job_spec(tasks, episodes_total=int(job.episodes_total),
                                  allow_free_form_tasks=allow_free_form_tasks, **fields)
    from strands_robots.job_model.team_job import TeamJobRefused

    try:
        team = team_job_from_pb(job.suite_job, station_id=job.station_id)
    except TeamJobRefused as exc:
        raise JobSpecError(f"suite_job.{exc.field}", exc.reason) from None
    spec = job_spec_for(team, suites, station_id=job.station_id, profile=profile,
                        allow_free_form_tasks=allow_free_form_tasks, job_id=job.job_id, client_id=job.client_id,
                        policy_provider=policy_provider, policy_config=fields.get("policy_config", {}),
                        free_form_tasks=tasks, options=job_options_from_pb(job))
    if spec.episodes_total != int(job.episodes_total):
        raise JobSpecError("episodes_total", f"{job.episodes_total} refused: the suite tasks' trials and the job's "
                                             f"own tasks make {spec.episodes_total} episode(s)")
    return spec


# -- suites (suites.proto) ⇄ job_model ----------------------------------------------------------------------------
def _pb_suites() -> Any:
    from strands_robots.wire.proto import suites_pb2

    return suites_pb2


def station_offer_to_pb(offer: Any) -> Any:
    """Return a ``job_model.offer.StationOffer`` as the ``StationOffer`` a station sends when it connects."""
    sp = _pb_suites()
    msg = sp.StationOffer(profile=offer.profile, allow_free_form_tasks=offer.allow_free_form_tasks,
                          refuses_recordings=offer.refuses_recordings)
    for suite in offer.suites:
        entry = msg.suites.add(suite=suite.suite, title=suite.title, headline=suite.headline)
        for task in suite.tasks:
            entry.tasks.add(task_id=task.task_id, instruction=task.instruction, layout=task.layout,
                            trials=task.trials, budget_s=task.budget_s, questions=list(task.questions))
        for rule in suite.team_may_choose:
            choice = entry.team_may_choose.add(key=rule.key)
            if rule.minimum is not None:
                choice.min = rule.minimum
            if rule.maximum is not None:
                choice.max = rule.maximum
    return msg


def station_offer_from_pb(station_id: str, msg: Any) -> Any:
    """Return the ``job_model.offer.StationOffer`` of station ``station_id`` from its ``StationOffer`` message."""
    from strands_robots.job_model.offer import StationOffer

    return StationOffer.from_pb(station_id, msg)


def suite_job_to_pb(job: Any) -> Any:
    """Return the ``SuiteJob`` of a ``job_model.team_job.TeamJob``: its suite, tasks and trials, choices."""
    sp = _pb_suites()
    msg = sp.SuiteJob(suite=job.suite)
    for asked in job.tasks:
        msg.tasks.add(task=asked.task, trials=asked.trials)
    for key, value in job.choose.items():
        msg.choose[key] = value
    compare = getattr(job, "compare", None)
    if compare is not None:
        msg.compare.slots.extend(compare.slots)
        if compare.teams:
            msg.compare.slot_teams.extend(compare.teams)
        if compare.stop is not None:
            msg.compare.stop.when = compare.stop.when
            msg.compare.stop.alpha = compare.stop.alpha
            msg.compare.stop.or_out_of_reach = compare.stop.or_out_of_reach
            if compare.stop.max_blocks is not None:
                msg.compare.stop.max_blocks = compare.stop.max_blocks
    return msg


def _compare_mapping(msg: Any) -> dict:
    """Return a ``Compare`` message as the job file's ``compare`` mapping (checked by the job model's rules)."""
    teams = list(msg.slot_teams)
    if teams and len(teams) != len(msg.slots):  # refused by the reader, naming the key
        data: dict = {"slots": list(msg.slots), "slot_teams": teams}
    else:
        data = {"slots": [{"name": slot, "team": team} if team else slot
                          for slot, team in zip(msg.slots, teams or [""] * len(msg.slots))]}
    if msg.HasField("stop"):
        stop = msg.stop
        data["stop"] = {"when": stop.when or "separated", "alpha": stop.alpha, "or_out_of_reach": stop.or_out_of_reach}
        if stop.HasField("max_blocks"):
            data["stop"]["max_blocks"] = int(stop.max_blocks)
    return data


def team_job_from_pb(msg: Any, *, station_id: str, max_discards: Any = None) -> Any:
    """Return the ``TeamJob`` of a ``SuiteJob`` (its suite part), checked by the job model's rules.

    :raises job_model.team_keys.TeamJobRefused: naming the key (``choose.<key>``, ``tasks[i].trials`` ...).
    """
    from strands_robots.job_model.team_job import team_job_from_mapping

    data: dict = {"station_id": station_id, "suite": msg.suite,
                  "tasks": [{"task": t.task, "trials": int(t.trials)} for t in msg.tasks],
                  "choose": dict(msg.choose)}
    if max_discards is not None:
        data["max_discards"] = int(max_discards)
    if msg.HasField("compare"):
        data["compare"] = _compare_mapping(msg.compare)
    return team_job_from_mapping(data)
