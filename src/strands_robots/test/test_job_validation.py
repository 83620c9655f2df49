"""Every job value's range, stated once in strands_robots/validation.py: fast, no ROS.

Each range is pinned at its edges (the bound itself, just past it, non-finite), each task parameter key by its
reader, each text by its limit; the station's ``validate_job_spec`` and the rollout's ``validate_run`` refuse by
these rules (the relay process is in test_job_validation_relay.py).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from strands_robots import validation as rules
from strands_robots.rollout.run_spec import FIELD_LIMITS, RunRefused, validate_run
from strands_robots.station import inprocess, job, scripted_operator
from strands_robots.station import task_parameters as tp
from strands_robots.station.job import JobSpec, JobSpecError, validate_job_spec
from strands_robots.station.limits import IDENTIFIER_MAX, INSTRUCTION_MAX, TASK_TEXT_MAX
from strands_robots.station.model import AnswerType, ScoringItemDefinition, ScoringSheet, Task
from strands_robots.station.score_sheet import ScoreSheetError, validate_sheet

PACKAGE = Path(__file__).resolve().parents[1]
SHEET = ScoringSheet((
    ScoringItemDefinition("done", "Done?", AnswerType.YES_NO, 1.0, success_answer="yes"),
    ScoringItemDefinition("blocks", "Blocks stacked?", AnswerType.COUNT, 3.0, points_per_unit=1.0),
    ScoringItemDefinition("grip", "Grip?", AnswerType.CHOICE, 2.0, choices=("none", "firm"), choice_points=(0.0, 2.0)),
))


def make_task(parameters=None, **kw) -> Task:
    kw.setdefault("scoring", SHEET)
    return Task(kw.pop("task_id", "pick"), kw.pop("instruction", "pick up the cube"), parameters=parameters or {},
                **kw)


def make_spec(*tasks: Task, **kw) -> JobSpec:
    kw.setdefault("episodes_total", 2)
    kw.setdefault("policy_provider", "relay")
    return JobSpec(job_id="job-1", client_id="team", station_id="sim", tasks=tasks or (make_task(),), **kw)


def refusal(parameters) -> JobSpecError:
    with pytest.raises(JobSpecError) as info:
        validate_job_spec(make_spec(make_task(make_task().parameters | parameters)))
    return info.value


def _edge_values(limit: rules.FieldLimit):
    """Return the accepted and the refused values at the edges of ``limit``."""
    step = 1 if limit.integer else max(1e-9, abs(limit.maximum) * 1e-9)
    accepted = [limit.maximum]
    refused = [limit.maximum + step]
    if limit.exclusive_minimum:
        refused.append(limit.minimum)
        accepted.append(limit.minimum + (1 if limit.integer else 1e-6))
    else:
        accepted.append(limit.minimum)
        refused.append(limit.minimum - step)
    if not limit.integer:
        refused += [math.nan, math.inf, -math.inf]
    return accepted, refused


ALL_LIMITS = [(f"RUN_LIMITS[{k!r}]", k, v) for k, v in rules.RUN_LIMITS.items()] + \
             [(f"JOB_LIMITS[{k!r}]", k, v) for k, v in rules.JOB_LIMITS.items()] + \
             [(f"SHEET_LIMITS[{k!r}]", k, v) for k, v in rules.SHEET_LIMITS.items()] + \
             [(f"TASK_PARAMETERS[{k!r}]", k, p.limit) for k, p in tp.TASK_PARAMETERS.items() if p.limit]


@pytest.mark.parametrize("where, name, limit", ALL_LIMITS, ids=[w for w, _, _ in ALL_LIMITS])
def test_every_range_accepts_its_bounds_and_refuses_past_them_naming_value_and_range(where, name, limit):
    accepted, refused = _edge_values(limit)
    for value in accepted:
        assert rules.check_number(name, value, limit) == value, (where, value)
    for value in refused:
        with pytest.raises(rules.ValueRefused) as info:
            rules.check_number(name, value, limit)
        err = info.value
        assert err.field == name and err.value == value or math.isnan(value)
        assert f"{name}={value!r} refused: allowed range {limit.text()}" in err.reason, err.reason
        assert limit.words() in err.reason and limit.description in err.reason
    assert limit.description and limit.minimum < limit.maximum


@pytest.mark.parametrize("name, limit", [(k, v) for k, v in rules.RUN_LIMITS.items() if v.integer])
def test_integer_ranges_refuse_fractions_and_bools(name, limit):
    for value in (1.5, True, "3"):
        with pytest.raises(rules.ValueRefused) as info:
            rules.check_number(name, value, limit)
        assert "must be an integer" in info.value.reason and limit.text() in info.value.reason
    assert rules.check_number(name, float(limit.maximum), limit) == int(limit.maximum)


def test_the_ranges_read_as_written():
    assert rules.RUN_LIMITS["control_frequency"].text() == "(0, 2000] Hz"
    assert rules.RUN_LIMITS["duration_s"].words() == "a number > 0 and <= 86400"
    assert rules.RUN_LIMITS["seed"].text() == "[0, 4294967295]"  # the RunEpisode goal's int64 holds every one
    assert rules.JOB_LIMITS["episodes_total"].text() == "[1, 100000]"
    assert tp.TASK_PARAMETERS["start_pose_tolerance_rad"].limit.text() == "(0, 0.5] rad"
    assert tp.TASK_PARAMETERS["operator_takeover_at_s"].limit.text() == "[0, 86400] s"
    # the rollout's table is this module's: one statement of each range
    assert FIELD_LIMITS is rules.RUN_LIMITS
    assert tp.TASK_PARAMETERS["duration_s"].limit is rules.RUN_LIMITS["duration_s"]
    assert tp.TASK_PARAMETERS["control_frequency"].limit is rules.RUN_LIMITS["control_frequency"]
    assert tp.TASK_PARAMETERS["seed"].limit is rules.RUN_LIMITS["seed"]


# -- task parameters --------------------------------------------------------------------------------------------
def test_every_parameter_key_a_reader_reads_is_in_the_table():
    read = {value for module in (job, scripted_operator, inprocess) for name, value in vars(module).items()
            if name.startswith("PARAM_") and isinstance(value, str)}
    assert read  # job.PARAM_DURATION_S, scripted_operator.PARAM_TAKEOVER_AT_S, inprocess.PARAM_STOP_HEARTBEAT_AT_S
    prefixes = tuple(tp.TASK_PARAMETER_PREFIXES) + (job.POLICY_PARAM_PREFIX,)
    missing = sorted(k for k in read if k not in tp.TASK_PARAMETERS and not k.endswith(".")
                     and not k.startswith(prefixes))
    assert missing == []
    assert scripted_operator.PARAM_ANSWER_PREFIX in tp.TASK_PARAMETER_PREFIXES
    assert job.POLICY_PARAM_PREFIX in tp.TASK_PARAMETER_PREFIXES


@pytest.mark.parametrize("key, limit", [(k, p.limit) for k, p in tp.TASK_PARAMETERS.items() if p.limit])
def test_numeric_task_parameter_text_is_refused_outside_its_range(key, limit):
    big = f"{limit.maximum * 10 + 1:g}" if not limit.integer else str(int(limit.maximum) + 1)
    for text in (big, "-1", "soon", "nan", "inf", ""):
        err = refusal({key: text})
        assert err.task_index == 0 and err.field == f"parameters[{key!r}]"
        assert str(err).startswith(f"tasks[0].parameters[{key!r}]: {key}={text!r} refused: ")
        assert limit.text() in err.reason
    good = f"{limit.maximum:g}" if not limit.integer else str(int(limit.maximum))
    validate_job_spec(make_spec(make_task({key: good})))


def test_the_late_limit_values_of_the_issue_are_refused_at_validation():
    for key, text, allowed in (("duration_s", "1e9", "(0, 86400] s"), ("control_frequency", "5000", "(0, 2000] Hz"),
                               ("operator_takeover_at_s", "-1", "[0, 86400] s"),
                               ("start_pose_tolerance_rad", "1e9", "(0, 0.5] rad"),
                               ("seed", "12345678901234567890", "[0, 4294967295]")):
        err = refusal({key: text})
        assert str(err).startswith(f"tasks[0].parameters[{key!r}]: {key}={text!r} refused: allowed range {allowed}")


def test_an_unknown_parameter_key_is_refused_listing_the_known_ones_and_the_nearest():
    err = refusal({"duraton_s": "3"})
    assert err.field == "parameters['duraton_s']"
    assert err.reason.startswith("duraton_s='3' refused: unknown task parameter 'duraton_s' (did you mean "
                                 "'duration_s'?); known: ")
    for known in list(tp.TASK_PARAMETERS) + ["policy.<option>", "answer.<item>"]:
        assert known in err.reason
    assert "did you mean" not in refusal({"colour": "red"}).reason


@pytest.mark.parametrize("key", [k for k, p in tp.TASK_PARAMETERS.items() if p.kind == tp.FLAG])
def test_flag_parameters_take_true_or_false_only(key):
    for text in ("true", "False", "yes", "no", "1", "0"):
        validate_job_spec(make_spec(make_task({key: text})))
    err = refusal({key: "maybe"})
    assert f"{key}='maybe' refused: allowed: true or false" in err.reason


def test_success_when_must_parse_as_a_predicate():
    validate_job_spec(make_spec(make_task({"success_when": "end_condition == timeout"})))
    validate_job_spec(make_spec(make_task({"success_when": "right.joint_4.pos > 0.95"})))
    err = refusal({"success_when": "__import__('os')"})
    assert err.field == "parameters['success_when']" and "success_when=\"__import__('os')\" refused" in err.reason
    assert "end_condition ==" in err.reason


def test_policy_options_pass_through_but_their_common_options_keep_the_rollouts_range():
    validate_job_spec(make_spec(make_task({"policy.end_after_steps": "20", "policy.mode": "hold"})))
    assert "names no policy option" in refusal({"policy.": "1"}).reason
    err = refusal({"policy.action_horizon": "5000"})
    assert "policy.action_horizon='5000' refused: allowed range [1, 1000] actions" in err.reason
    assert "[0, 4294967295]" in refusal({"policy.seed": "-3"}).reason


def test_answer_parameters_name_a_non_success_item_with_a_valid_answer():
    validate_job_spec(make_spec(make_task({"answer.blocks": "2", "answer.grip": "firm"})))
    assert "answer.colour names no item of the sheet (items: done, blocks, grip)" in \
        refusal({"answer.colour": "x"}).reason
    assert "answered from success_when" in refusal({"answer.done": "yes"}).reason
    assert "answer.blocks='many' refused: a count must be a decimal integer" in \
        refusal({"answer.blocks": "many"}).reason
    assert "is not one of the choices" in refusal({"answer.grip": "loose"}).reason


def test_a_task_carries_a_bounded_number_of_parameters():
    params = {f"policy.o{i}": "1" for i in range(tp.MAX_TASK_PARAMETERS + 1)}
    err = refusal(params)
    assert err.field == "parameters" and f"at most {tp.MAX_TASK_PARAMETERS} parameters, got 101" in err.reason


# -- free text --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, limit, build", [
    ("instruction", INSTRUCTION_MAX, lambda n: make_task(instruction="x" * n)),
    ("task_id", IDENTIFIER_MAX, lambda n: make_task(task_id="t" * n)),
    ("layout", TASK_TEXT_MAX, lambda n: make_task(layout="l" * n)),
])
def test_task_text_over_its_limit_is_refused_naming_the_limit(field, limit, build):
    validate_job_spec(make_spec(build(limit)))
    with pytest.raises(JobSpecError) as info:
        validate_job_spec(make_spec(build(limit + 1)))
    err = info.value
    assert err.task_index == 0 and err.field == field
    assert f"{field} is {limit + 1} characters long; at most {limit} are allowed" in err.reason


def test_a_16_kib_instruction_is_refused_naming_the_limit():
    with pytest.raises(JobSpecError) as info:
        validate_job_spec(make_spec(make_task(instruction="a" * 16384)))
    assert str(info.value) == "tasks[0].instruction: instruction is 16384 characters long; at most 4096 are allowed"


def test_parameter_keys_and_values_over_the_task_text_limit_are_refused():
    err = refusal({"policy.note": "v" * (TASK_TEXT_MAX + 1)})
    assert err.field == "parameters['policy.note']" and f"at most {TASK_TEXT_MAX}" in err.reason
    err = refusal({"policy." + "k" * TASK_TEXT_MAX: "1"})
    assert err.field == "parameters" and f"{TASK_TEXT_MAX + 7} characters long; at most {TASK_TEXT_MAX}" in err.reason


# -- score sheets -----------------------------------------------------------------------------------------------
def _sheet_refusal(sheet: ScoringSheet) -> str:
    with pytest.raises(ScoreSheetError) as info:
        validate_sheet(sheet)
    with pytest.raises(JobSpecError) as job_info:  # the same refusal at submit, as tasks[0].scoring
        validate_job_spec(make_spec(make_task(scoring=sheet)))
    assert job_info.value.field == "scoring" and job_info.value.task_index == 0
    assert str(info.value) in job_info.value.reason
    return str(info.value)


def test_malformed_sheets_are_refused_at_submit_with_a_reason():
    first = SHEET.items[0]
    yes_no = dataclasses.replace(first, name="more", success_answer="")
    assert "at most 100 items, got 101" in _sheet_refusal(
        ScoringSheet((first,) + tuple(dataclasses.replace(yes_no, name=f"i{i}") for i in range(100))))
    many = tuple(f"c{i}" for i in range(101))
    choice = ScoringItemDefinition("pick", "Which?", AnswerType.CHOICE, 1.0, choices=many, choice_points=(0.0,) * 101)
    assert "item 'pick': choices=101 refused: allowed range [0, 100]" in _sheet_refusal(ScoringSheet((first, choice)))
    assert "max_points=10000000.0 refused: allowed range [0, 1e+06]" in _sheet_refusal(
        ScoringSheet((dataclasses.replace(first, max_points=1e7),)))
    count = ScoringItemDefinition("n", "How many?", AnswerType.COUNT, 1.0, points_per_unit=2e6, success_answer="1")
    assert "points_per_unit=2000000.0 refused" in _sheet_refusal(ScoringSheet((count,)))
    count = dataclasses.replace(count, points_per_unit=1.0, success_answer="99999999999")
    assert "success_answer=99999999999 refused: allowed range [0, 1000000000]" in _sheet_refusal(ScoringSheet((count,)))
    assert f"question is {TASK_TEXT_MAX + 1} characters long" in _sheet_refusal(
        ScoringSheet((dataclasses.replace(first, question="q" * (TASK_TEXT_MAX + 1)),)))
    assert "name is" in _sheet_refusal(ScoringSheet((dataclasses.replace(first, name="n" * (TASK_TEXT_MAX + 1)),)))
    long_choice = dataclasses.replace(choice, choices=("a", "b" * (TASK_TEXT_MAX + 1)), choice_points=(0.0, 1.0))
    assert "a choice is" in _sheet_refusal(ScoringSheet((first, long_choice)))
    assert "success item first" in _sheet_refusal(ScoringSheet(()))  # the structure rules stay score_sheet's


# -- job level --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value, words", [
    ("episodes_total", 0, "episodes_total=0 refused: allowed range [1, 100000]"),
    ("episodes_total", 100_001, "episodes_total=100001 refused: allowed range [1, 100000]"),
    ("episodes_total", -1, "episodes_total=-1 refused"),
    ("episodes_total", 2.0, "must be an integer"),
    ("max_discards", 1001, "max_discards=1001 refused: allowed range [0, 1000]"),
    ("duration_s", 1e9, "duration_s=1000000000.0 refused: allowed range (0, 86400] s"),
    ("control_frequency", 5000.0, "control_frequency=5000.0 refused: allowed range (0, 2000] Hz"),
    ("control_frequency", "50", "must be a number > 0 and <= 2000"),
    ("policy_config", {"blob": "x" * rules.POLICY_CONFIG_MAX}, f"at most {rules.POLICY_CONFIG_MAX} are allowed"),
    ("policy_config", {"x": math.nan}, "JSON-compatible"),
])
def test_job_level_values_are_refused_by_the_same_ranges(field, value, words):
    with pytest.raises(JobSpecError) as info:
        validate_job_spec(make_spec(**{field: value}))
    assert info.value.field == field and info.value.task_index is None and words in info.value.reason


def test_a_job_has_at_most_1000_tasks():
    with pytest.raises(JobSpecError) as info:
        validate_job_spec(make_spec(*[make_task()] * 1001))
    assert "tasks=1001 refused: allowed range [1, 1000]" in str(info.value)


def test_the_episode_budget_is_checked_where_duration_and_rate_meet():
    # each value in range, together more steps than any episode may take: refused at submit, as the rollout would
    with pytest.raises(JobSpecError) as info:
        validate_job_spec(make_spec(make_task({"duration_s": "86400", "control_frequency": "2000"})))
    assert str(info.value).startswith("tasks[0].parameters['duration_s']: duration_s=86400.0 refused: at 2000 Hz "
                                      "it is 172800000 steps, more than the step budget's maximum 100000000")
    with pytest.raises(JobSpecError) as info:  # the job's default rate with the task's duration
        validate_job_spec(make_spec(make_task({"duration_s": "0.001"})))
    assert "less than one step at 50 Hz" in str(info.value)
    with pytest.raises(RunRefused) as run:
        validate_run(duration_s=86400.0, control_frequency=2000.0)
    assert "at 2000 Hz it is 172800000 steps, more than the step budget's maximum 100000000" in str(run.value)


# -- the rollout refuses by the same rules ----------------------------------------------------------------------
@pytest.mark.parametrize("params", [
    {"duration_s": "1e9"}, {"control_frequency": "5000"}, {"operator_takeover_at_s": "-1"},
    {"start_pose_tolerance_rad": "1e9"}, {"duraton_s": "3"}, {"seed": "12345678901234567890"},
])
def test_a_goal_task_with_a_bad_parameter_is_refused_by_validate_run_with_the_stations_reason(params):
    station = refusal(params)
    with pytest.raises(RunRefused) as info:
        validate_run(task={"task_id": "pick", "layout": "", "parameters": params})
    assert info.value.field == f"task.{station.field}" and info.value.reason == station.reason


def test_run_arguments_are_refused_with_the_same_range_as_the_task_parameter():
    for field, value in (("duration_s", 1e9), ("control_frequency", 5000.0), ("seed", 12345678901234567890)):
        with pytest.raises(RunRefused) as info:
            validate_run(**{field: value})
        assert info.value.reason == f"{field}={value!r} refused: {rules.RUN_LIMITS[field].allowed()}"
        assert rules.RUN_LIMITS[field].allowed() in refusal({field: str(value)}).reason


# -- the repository's job files ---------------------------------------------------------------------------------
def test_every_job_file_and_suite_in_the_repository_validates():
    from strands_robots.job_model.team_job import load_team_job
    from strands_robots.station.suite_file import load_suites
    from strands_robots.station.suite_job import job_spec_for

    files = [p for p in sorted((PACKAGE / "config").glob("*.yaml")) if "\ntasks:" in p.read_text()]
    assert PACKAGE / "config" / "demo_job.yaml" in files
    suites = load_suites(str(PACKAGE / "config" / "suites"), "simulated")
    assert "demo" in suites
    for path in files:
        job = load_team_job(str(path))
        spec = job_spec_for(job, suites, station_id=job.station_id, profile="simulated", allow_free_form_tasks=True,
                            job_id="j", client_id="c")
        assert spec.tasks, path


# -- the policy a station-run job's episodes get ----------------------------------------------------------------
def test_a_built_in_policys_options_are_refused_at_submit_not_at_ep_0000():
    scripted = {"policy_provider": "scripted", "policy_config": {"mode": "torque_ramp"}}
    validate_job_spec(make_spec(make_task({"policy.end_after_steps": "5"}), **scripted))
    with pytest.raises(JobSpecError) as info:  # a task's override, built as the rollout would build it
        validate_job_spec(make_spec(make_task(), make_task({"policy.end_after_steps": "abc"}, task_id="b"),
                                    **scripted))
    assert info.value.task_index == 1 and info.value.field == "parameters"
    assert "scripted policy: end_after_steps must be an integer, got 'abc'" in info.value.reason
    assert "(with this task's policy.end_after_steps)" in info.value.reason
    with pytest.raises(JobSpecError) as info:  # the job's own config
        validate_job_spec(make_spec(policy_provider="mock", policy_config={"amplitud": 1}))
    assert info.value.field == "policy_config" and info.value.task_index is None and "amplitud" in info.value.reason
    # a relay job's policy options are the team's remote policy's: passed through unbuilt
    validate_job_spec(make_spec(make_task({"policy.end_after_steps": "abc"})))
    assert "relay" not in rules.POLICIES_BUILT_AT_SUBMIT and "replay" not in rules.POLICIES_BUILT_AT_SUBMIT
