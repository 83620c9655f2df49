"""Both meanings of success (station/success_judgement.py) and what each episode's score is read against.

The predicate judged per step by the rollout and at the end by the station, through real in-process rollouts of
the station core (JobRunner, InProcessRobot, the scripted operator), and the figures every kept episode carries.
"""

from __future__ import annotations

import pytest

from strands_robots.station.success_judgement import (
    HEADLINE_AT_END,
    HEADLINE_EVER,
    InputReader,
    SuccessWatch,
    headline_of,
    judge_episode,
)
from strands_robots.station.success_predicate import parse_predicate
from strands_robots.station.task_parameters import check_task_parameters
from strands_robots.validation import ValueRefused

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 2, "success_answer": "yes"},
         {"name": "motion", "question": "How smooth?", "answer_type": "choice", "max_points": 1,
          "choices": ["jerky", "smooth"], "choice_points": [0, 1]}]


def test_a_comparison_reads_its_key_and_an_end_condition_predicate_reads_nothing_of_an_observation():
    compare = parse_predicate("right.joint_4.pos >= 0.5")
    assert compare.reads == ("right.joint_4.pos",) and compare.per_step
    assert compare.holds_on({"right.joint_4.pos": 0.5}) and not compare.holds_on({"right.joint_4.pos": 0.49})
    assert not compare.holds_on({}) and not compare.holds_on({"right.joint_4.pos": True})
    end = parse_predicate("end_condition in timeout|policy_completed")
    assert end.reads == () and not end.per_step
    assert end.judge("timeout", {}) and not end.judge("safety_stop", {})
    assert not end.holds_on({"anything": 1.0})


def test_the_watch_reports_each_steps_inputs_and_the_first_step_the_predicate_held():
    watch = SuccessWatch.for_task({"success_when": "x < 0.3"}, seed=None)
    seen = [watch.step(i, {"x": x, "y": 9.0}) for i, x in enumerate([0.5, 0.4, 0.2, 0.6, 0.1])]
    assert seen == [(("x",), (0.5,), False), (("x",), (0.4,), False), (("x",), (0.2,), True),
                    (("x",), (0.6,), False), (("x",), (0.1,), True)]
    assert watch.ever and watch.first_step == 2
    assert watch.end({"x": 0.7}) == (("x",), (0.7,))
    assert SuccessWatch.for_task({"duration_s": "1"}, seed=None) is None


def test_a_chunks_reused_observation_is_read_once_and_a_missing_key_never_holds():
    reads = []

    def read(observation):
        reads.append(observation)
        return {k: v for k, v in observation.items() if k == "x"}

    watch = SuccessWatch(parse_predicate("x > 1"), read)
    chunk_start = {"x": 2.0}
    assert [watch.step(i, chunk_start)[2] for i in range(3)] == [True, True, True]
    assert len(reads) == 1 and watch.first_step == 0
    assert watch.step(3, {"y": 5.0}) == ((), (), False)


def test_object_distance_m_is_derived_from_the_joints_as_the_scene_places_the_cube():
    pytest.importorskip("mujoco", reason="the vision measure poses the MJCF")
    from strands_robots.cameras.reach import object_distance

    params = {"success_when": "object_distance_m < 0.06", "object_x": "0.4", "object_y": "-0.15"}
    home = {f"{arm}.joint_{i}.pos": 0.1 * i for arm in ("left", "right") for i in range(1, 7)}
    reader = InputReader(parse_predicate(params["success_when"]), params, seed=3)
    inputs = reader(home)
    assert list(inputs) == ["object_distance_m"]
    assert inputs["object_distance_m"] == pytest.approx(object_distance(home, params, 3), abs=1e-12)
    moved = dict(home, **{"right.joint_2.pos": 0.9})
    assert reader(moved)["object_distance_m"] != pytest.approx(inputs["object_distance_m"])  # poses are not stale
    assert reader({"step": 1.0}) == {}  # no joints: nothing to measure, the predicate does not hold


def test_success_ever_includes_the_end_and_the_headline_picks_the_episodes_success():
    steps_only = judge_episode({"success_when": "x < 0.3"}, "timeout", {"x": 0.9}, steps_ever=True)
    assert (steps_only.success_at_end, steps_only.success_ever, steps_only.success) == (False, True, False)
    ever = judge_episode({"success_when": "x < 0.3", "headline": "success_ever"}, "timeout", {"x": 0.9}, True)
    assert ever.headline == HEADLINE_EVER and ever.success
    at_end = judge_episode({"success_when": "x < 0.3"}, "timeout", {"x": 0.1}, steps_ever=False)
    assert (at_end.success_at_end, at_end.success_ever) == (True, True)
    by_end = judge_episode({"success_when": "end_condition == timeout"}, "timeout", {}, steps_ever=False)
    assert (by_end.success_at_end, by_end.success_ever) == (True, True)
    assert judge_episode({}, "timeout", {}, True) is None


def test_a_headline_other_than_the_two_meanings_is_refused_at_submit_naming_the_key():
    assert headline_of({}) == HEADLINE_AT_END
    check_task_parameters({"headline": "success_ever", "success_when": "x > 1"})
    with pytest.raises(ValueRefused) as refused:
        check_task_parameters({"headline": "sometimes"})
    assert refused.value.field == "parameters['headline']" and "success_at_end or success_ever" in str(refused.value)


# -- through the real station core ------------------------------------------------------------------------------
def _run_job(tasks, target=1.5, duration_s=1.0):
    from strands_robots.station.episodes import JobRunner
    from strands_robots.station.inprocess import InProcessRobot
    from strands_robots.station.job_file import job_spec_from_mapping
    from strands_robots.station.record import JobRecord
    from strands_robots.station.scripted_operator import ScriptedOperator
    from strands_robots.simulation.observers import RunPolicyEnded, RunPolicyStep

    spec = job_spec_from_mapping({
        "job_id": "both", "client_id": "team", "station_id": "sim", "episodes_total": len(tasks),
        "duration_s": duration_s,
        "policy": {"provider": "scripted", "config": {"mode": "torque_ramp", "target": target}},
        "tasks": [{"task_id": f"t{i}", "instruction": "ramp the wrist", "scoring": SHEET, "parameters": p}
                  for i, p in enumerate(tasks)]})
    robot = InProcessRobot()
    events: list = []
    run = robot.runner.run

    def run_observed(*args, **kwargs):  # the real rollout, its events kept (the observer the station passes too)
        theirs = kwargs.get("observer")

        def both(event):
            if isinstance(event, (RunPolicyStep, RunPolicyEnded)):
                events.append(event)
            if theirs is not None:
                theirs(event)

        kwargs["observer"] = both
        return run(*args, **kwargs)

    robot.runner.run = run_observed
    record = JobRunner(JobRecord(spec), robot, ScriptedOperator()).run()
    return record.episodes, events


def test_a_predicate_that_held_early_and_not_at_the_end_is_success_ever_and_the_headline_decides():
    pytest.importorskip("mujoco", reason="the in-process station simulates the arms")
    # The wrist starts near 1.0 rad and ramps to 1.5: "< 1.1" holds on the first steps, not at the end.
    predicate = "right.joint_4.pos < 1.1"
    episodes, events = _run_job([{"success_when": predicate},
                                 {"success_when": predicate, "headline": "success_ever"}])
    assert [(e.success_at_end, e.success_ever) for e in episodes] == [(False, True), (False, True)]
    assert [e.success for e in episodes] == [False, True]  # the scripted operator answers with the headline
    assert [e.score for e in episodes] == [0.0, pytest.approx(2 / 3)]  # done (2 points) + motion jerky (0)
    steps = [e for e in events if type(e).__name__ == "RunPolicyStep"]
    ended = [e for e in events if type(e).__name__ == "RunPolicyEnded"]
    first = [s for s in steps if s.success_holds]
    assert first and all(s.success_input_keys == ("right.joint_4.pos",) for s in steps)
    for s in steps:  # each step's recorded input is the value of its observation, and holds says so
        assert s.success_input_values == (s.observation["right.joint_4.pos"],)
        assert s.success_holds == (s.observation["right.joint_4.pos"] < 1.1)
    assert ended[0].success_when == predicate and ended[0].success_ever
    assert ended[0].success_first_step == first[0].applied_action_index
    assert ended[0].end_input_keys == ("right.joint_4.pos",) and ended[0].end_input_values[0] >= 1.1


def test_every_kept_episode_carries_what_its_score_is_read_against():
    pytest.importorskip("mujoco", reason="the in-process station simulates the arms")
    episodes, events = _run_job([{"success_when": "end_condition == timeout"}], target=1.0, duration_s=0.5)
    (episode,), ended = episodes, [e for e in events if type(e).__name__ == "RunPolicyEnded"][0]
    steps = [e for e in events if type(e).__name__ == "RunPolicyStep"]
    assert (episode.success_at_end, episode.success_ever) == (True, True)
    assert episode.inference_latency_p50_ms == pytest.approx(ended.inference_latency_p50_s * 1e3)
    assert episode.inference_latency_p99_ms == pytest.approx(ended.inference_latency_p99_s * 1e3)
    assert 0 < episode.inference_latency_p50_ms <= episode.inference_latency_p99_ms
    assert ended.inference_latency_p99_s <= ended.inference_latency_max_s
    ages = [s.observation_age_steps for s in steps]
    assert episode.mean_observation_age_steps == pytest.approx(sum(ages) / len(ages))
    assert episode.missed_deadlines == ended.missed_deadlines
    assert all(s.success_input_keys == () for s in steps)  # an end-condition predicate reads no observation


def test_an_episode_whose_task_has_no_predicate_carries_neither_meaning_of_success():
    pytest.importorskip("mujoco", reason="the in-process station simulates the arms")
    (episode,), _ = _run_job([{}], target=1.0, duration_s=0.3)
    assert episode.success_at_end is None and episode.success_ever is None
    assert episode.missed_deadlines is not None and episode.mean_observation_age_steps is not None
