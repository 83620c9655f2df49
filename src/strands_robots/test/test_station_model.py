"""The shared station data model (station/model.py): the spec's strings and frozen values."""

import dataclasses

import pytest

from strands_robots.rollout import end_condition
from strands_robots.station import model
from strands_robots.station.model import AnswerType, JobState, Task


def test_job_state_values_are_the_spec_strings_and_three_are_terminal():
    assert [s.value for s in JobState] == ["CREATED", "WAITING_POLICY", "RUNNING", "FINALIZING", "SUCCEEDED",
                                           "FAILED", "CANCELLED"]
    assert JobState.TERMINAL == model.TERMINAL_STATES == {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
    assert [s.terminal for s in JobState] == [False, False, False, False, True, True, True]
    assert JobState("RUNNING") is JobState.RUNNING and JobState.RUNNING == "RUNNING"


def test_answer_types_and_end_conditions_are_the_spec_strings():
    assert [t.value for t in AnswerType] == ["yes_no", "count", "choice"]
    assert model.END_CONDITIONS is end_condition.END_CONDITIONS
    assert model.END_CONDITIONS == ("timeout", "policy_completed", "lease_lost", "authority_lost", "safety_stop",
                                    "start_pose_unreached")


def test_task_parameters_are_a_frozen_copy_and_tasks_compare_by_value():
    params = {"duration_s": "1.0"}
    task = Task("t", "do it", parameters=params)
    params["duration_s"] = "9"
    assert task.parameters["duration_s"] == "1.0"
    with pytest.raises(TypeError):
        task.parameters["x"] = "y"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.instruction = "other"  # type: ignore[misc]
    same = Task("t", "do it", parameters={"duration_s": "1.0"})
    assert task == same and hash(task) == hash(same)
    assert task != Task("t", "do it", parameters={"duration_s": "2.0"})
