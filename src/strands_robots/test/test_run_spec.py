"""One validation of every run argument: validate_run, FIELD_LIMITS, RunRefused."""

from __future__ import annotations

import math
import os

import pytest

from strands_robots.rollout.run_spec import FIELD_LIMITS, RunRefused, RunSpec, validate_run
from strands_robots.rollout.runner import PolicyRunner

from rollout_fakes import Collect, FakeBackend, ScriptedPolicy


def refused(**kwargs) -> RunRefused:
    with pytest.raises(RunRefused) as info:
        validate_run(**kwargs)
    return info.value


@pytest.mark.parametrize("field, value", [
    ("control_frequency", 5000.0), ("control_frequency", 1e9), ("control_frequency", 0.0),
    ("control_frequency", -1.0), ("control_frequency", math.nan), ("control_frequency", math.inf),
    ("action_horizon", 10**6), ("action_horizon", 10**7), ("action_horizon", 0),
    ("duration_s", 86401.0), ("duration_s", 0.0), ("duration_s", math.nan),
    ("n_steps", 10**8 + 1), ("n_steps", 0),
    ("n_episodes", 100_001), ("n_episodes", 0),
    ("rtc_inference_timeout_s", 601.0), ("rtc_inference_timeout_s", 0.0), ("rtc_inference_timeout_s", math.inf),
    ("max_onframe_failures", -1), ("seed", -1), ("seed", 2**40),
])
def test_out_of_range_field_is_refused_naming_field_value_and_range(field, value):
    exc = refused(**{field: value})
    assert exc.field == field
    text = str(exc)
    assert field in text and repr(value) in text
    assert FIELD_LIMITS[field].text() in text or "must be" in text


def test_every_numeric_field_has_limits_and_a_description():
    for name, limit in FIELD_LIMITS.items():
        assert limit.description and limit.minimum < limit.maximum, name
        assert limit.contains(limit.maximum) and not limit.contains(math.nan) and not limit.contains(math.inf)
        assert limit.contains(limit.minimum) is (not limit.exclusive_minimum)
    assert FIELD_LIMITS["control_frequency"].text() == "(0, 2000] Hz"
    assert FIELD_LIMITS["action_horizon"].text() == "[1, 1000] actions"


@pytest.mark.parametrize("field, value", [
    ("action_horizon", 8.5), ("action_horizon", "8"), ("n_steps", True), ("control_frequency", "50"),
    ("fast_mode", "false"), ("record", "yes"), ("instruction", 3), ("task", ["a"]), ("policy_config", "x"),
])
def test_wrong_type_is_refused(field, value):
    assert refused(**{field: value}).field == field


def test_unknown_policy_provider_is_refused_listing_known_ones():
    exc = refused(policy_provider="no_such_policy")
    assert exc.field == "policy_provider"
    assert "no_such_policy" in str(exc) and "mock" in str(exc)


def test_bad_policy_config_is_refused_by_constructing_the_policy():
    exc = refused(policy_provider="mock", policy_config={"amplitud": 0.1})
    assert exc.field == "policy_config" and "amplitud" in str(exc)
    spec = validate_run(policy_provider="mock", policy_config={"amplitude": 0.1})
    assert spec.policy is not None and spec.policy_config["amplitude"] == 0.1


def test_unknown_run_argument_is_refused():
    exc = refused(durration=3.0)
    assert exc.field == "durration"


def test_n_steps_and_max_steps_are_two_names_of_the_step_budget():
    assert validate_run(n_steps=7).n_steps == 7
    assert validate_run(max_steps=7).n_steps == 7
    assert validate_run(max_steps=7, n_steps=7).n_steps == 7
    exc = refused(n_steps=7, max_steps=8)
    assert exc.field == "n_steps" and "max_steps" in str(exc)
    # The budget is the budget, not a cap: it wins over duration in both directions.
    assert validate_run(duration=0.1, control_frequency=50.0, max_steps=100).n_steps == 100
    assert validate_run(duration=2.0, control_frequency=50.0).n_steps == 100


def test_duration_and_duration_s_are_one_argument():
    assert validate_run(duration=2.5).duration_s == 2.5
    assert validate_run(duration_s=2.5).duration_s == 2.5
    assert refused(duration=2.0, duration_s=3.0).field == "duration_s"


def test_duration_shorter_than_one_step_or_over_the_step_maximum_is_refused():
    assert refused(duration=0.001, control_frequency=50.0).field == "duration_s"
    assert refused(duration=86400.0, control_frequency=2000.0).field == "duration_s"


def test_recording_fps_must_equal_control_frequency(tmp_path):
    assert validate_run(record=True, recording_dir=str(tmp_path), control_frequency=50.0).fps == 50.0
    exc = refused(record=True, recording_dir=str(tmp_path), control_frequency=50.0, fps=30.0)
    assert exc.field == "fps"


def test_recording_dir_must_be_writable_or_creatable_and_is_not_created(tmp_path):
    target = tmp_path / "a" / "b"
    spec = validate_run(record=True, recording_dir=str(target))
    assert spec.recording_dir == str(target) and not target.exists()  # nothing created while validating
    assert refused(record=True).field == "recording_dir"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert refused(record=True, recording_dir=str(a_file)).field == "recording_dir"
    assert refused(record=True, recording_dir=str(a_file / "sub")).field == "recording_dir"
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            assert refused(record=True, recording_dir=str(locked / "x")).field == "recording_dir"
        finally:
            locked.chmod(0o700)


def test_recording_topic_prefix_is_a_ros_namespace():
    assert validate_run(recording_topic_prefix="/strands/").recording_topic_prefix == "/strands"
    assert validate_run().recording_topic_prefix == ""
    for bad in ("strands", "/1x", "/a b", "//x"):
        assert refused(recording_topic_prefix=bad).field == "recording_topic_prefix"


def test_seed_range_covers_every_episode():
    assert validate_run(seed=10, n_episodes=3).episode_seed(2) == 12
    assert refused(seed=2**32 - 2, n_episodes=5).field == "seed"


def test_spec_is_frozen():
    spec = validate_run()
    assert isinstance(spec, RunSpec)
    with pytest.raises(Exception):
        spec.n_steps = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.task["x"] = 1  # type: ignore[index]


def test_refused_run_never_touches_the_backend():
    backend = FakeBackend()
    seen = Collect()
    out = PolicyRunner(backend).run("mock", control_frequency=5000.0, observer=seen)
    assert out["status"] == "error" and out["episodes"] == [] and "control_frequency" in out["error_message"]
    assert seen.events == [] and backend.sent == [] and backend.resets == []


def test_run_spec_runs_a_validated_spec_with_its_robot_name():
    backend = FakeBackend()
    seen = Collect()
    spec = validate_run(policy_provider=ScriptedPolicy(), n_steps=5, fast_mode=True, robot_name="bob")
    out = PolicyRunner(backend, robot_name="alice").run_spec(spec, observer=seen)
    assert out["status"] == "success" and out["episodes"][0]["applied_actions"] == 5
    assert seen.events[0].robot_name == "bob" and seen.events[0].total_steps == 5
    assert len(backend.sent) == 5


def test_duration_zero_with_a_step_budget_means_steps_only():
    spec = validate_run(duration_s=0.0, n_steps=100, control_frequency=50.0)
    assert spec.n_steps == 100 and spec.duration_s == 2.0
    assert validate_run(n_steps=25, control_frequency=50.0).duration_s == 0.5
    assert refused(duration_s=0.0).field == "duration_s"  # without a step budget, 0 s is no episode
