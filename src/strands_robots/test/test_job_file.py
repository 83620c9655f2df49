"""Job files: YAML -> validated JobSpec, refusals naming task index, field and reason (station/job_file.py)."""

import pytest

from strands_robots.station.job import JobSpecError
from strands_robots.station.job_file import job_spec_from_mapping, job_spec_from_yaml, job_spec_to_mapping, \
    load_job_file
from strands_robots.station.model import AnswerType

GOOD = """
job_id: demo
client_id: demo
station_id: sim_station
episodes_total: 4
duration_s: 2
policy: {provider: scripted, config: {mode: torque_ramp, target: 1.0}}
tasks:
  - task_id: reach
    instruction: reach the cube
    layout: cube on the left mat
    parameters: {duration_s: 1.5, operator_discard: true, policy.end_after_steps: 20}
    scoring:
      - {name: reached, question: "Reached?", answer_type: yes_no, max_points: 1, success_answer: yes}
      - {name: grasp, question: "Grasp?", answer_type: choice, max_points: 2, choices: [none, firm],
         choice_points: [0, 2]}
      - {name: blocks, question: "Blocks?", answer_type: count, max_points: 3, points_per_unit: 1}
"""


def refusal(text):
    with pytest.raises(JobSpecError) as info:
        job_spec_from_yaml(text)
    return info.value


def test_good_file_loads_typed_and_round_trips(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(GOOD)
    spec = load_job_file(str(path))
    task = spec.tasks[0]
    assert spec.episodes_total == 4 and spec.duration_s == 2 and spec.policy_provider == "scripted"
    assert dict(task.parameters) == {"duration_s": "1.5", "operator_discard": "true", "policy.end_after_steps": "20"}
    assert [i.answer_type for i in task.scoring.items] == [AnswerType.YES_NO, AnswerType.CHOICE, AnswerType.COUNT]
    assert task.scoring.items[0].success_answer == "yes"  # YAML's bare yes (a bool) is the answer "yes"
    assert job_spec_from_mapping(job_spec_to_mapping(spec)) == spec


def test_overrides_replace_job_level_fields():
    spec = job_spec_from_yaml(GOOD, job_id="relay-job-7", client_id="team-b")
    assert (spec.job_id, spec.client_id) == ("relay-job-7", "team-b")


@pytest.mark.parametrize("old,new,index,field,words", [
    ("answer_type: yes_no", "answer_type: maybe", 0, "scoring", "answer_type must be one of"),
    ("choices: [none, firm]", "choices: [none, none]", 0, "scoring", "unique"),
    ("choice_points: [0, 2]", "choice_points: [0, 3]", 0, "scoring", "'firm'"),
    ("instruction: reach the cube", "instruction: ''", 0, "instruction", "non-empty"),
    ("layout: cube on the left mat", "lay_out: typo", 0, "task", "unknown keys ['lay_out']"),
    ("duration_s: 1.5,", "duration_s: [1],", 0, "parameters['duration_s']", "scalar"),
    ("max_points: 3,", "max_points: .nan,", 0, "scoring", "finite"),
])
def test_malformed_task_is_refused_with_index_field_and_reason(old, new, index, field, words):
    assert old in GOOD
    err = refusal(GOOD.replace(old, new))
    assert (err.task_index, err.field) == (index, field) and words in err.reason


@pytest.mark.parametrize("old,new,field,words", [
    ("episodes_total: 4", "episodes_total: 0", "episodes_total", ">= 1"),
    ("policy: {provider: scripted,", "policy: {kind: scripted, provider: scripted,", "policy", "unknown keys"),
    ("station_id: sim_station", "station: sim_station", "job", "unknown keys ['station']"),
])
def test_malformed_job_is_refused_naming_the_field(old, new, field, words):
    assert old in GOOD
    err = refusal(GOOD.replace(old, new))
    assert err.task_index is None and err.field == field and words in err.reason


def test_not_yaml_and_not_a_mapping_are_refused():
    assert "not valid YAML" in refusal("tasks: [").reason
    assert "must be a mapping" in refusal("- 1\n- 2\n").reason
