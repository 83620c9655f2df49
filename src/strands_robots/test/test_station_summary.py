"""A job's summary (station/summary.py): intervals on every number, coverage that loses no episode, one computation.

Per task and per job: successes k of n with the job's interval, the mean score with its seeded bootstrap interval,
and every attempted episode in exactly one coverage bucket; in every snapshot the station makes, on the wire with
explicit presence, and printed by the CLI.
"""

from __future__ import annotations

import random

import pytest
from known_rate_port import SHEET, run_job
from scipy.stats import beta

from strands_robots.client.cli.client_side import summary_lines, summary_table
from strands_robots.station.job import JobSpecError
from strands_robots.station.job_file import job_spec_from_mapping, job_spec_to_mapping
from strands_robots.station.model import EpisodeResult, JobState, JobStatus, Task
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.station.summary import RunningSummary, disposition_of, summarize
from strands_robots.stats.coverage import Disposition
from strands_robots.wire import pb_model


def ep(number, task_id, end="timeout", scored=True, success=True, score=1.0, taken_over=False):
    return EpisodeResult(episode_id=f"ep_{number:04d}", end_condition=end, scored=scored, success=success,
                         score=score, items=(), task=Task(task_id, "do it"), taken_over=taken_over, end_detail="")


# The demo job's episodes: a safety stop the operator scored, two taken over, a start pose never reached, one
# discarded (ep_0004) and a station fault.
DEMO = (ep(0, "hold_pose", score=2 / 3), ep(1, "short_reach", end="policy_completed"),
        ep(2, "push_to_limit", end="safety_stop", success=False, score=0.0),
        ep(3, "redo", score=2 / 3, taken_over=True), ep(5, "redo", score=2 / 3, taken_over=True),
        ep(6, "blocked_start", end="start_pose_unreached", scored=False, success=False, score=0.0),
        ep(7, "reach_cube", score=2 / 3), ep(8, "reach_cube_blind", success=False, score=0.0),
        ep(9, "reach_cube", end="infrastructure_fault", scored=False, success=False, score=0.0))


def test_the_demo_job_reads_three_of_five_with_wilsons_23_to_88_percent_and_every_episode_accounted_for():
    summary = summarize(DEMO, discarded=("ep_0004",), interrupted=("ep_0010",))
    rate = summary.success
    assert (rate.successes, rate.trials) == (3, 5)
    assert (round(rate.low, 2), round(rate.high, 2)) == (0.23, 0.88) and rate.method.value == "wilson"
    assert summary.score.n == 5 and summary.score.mean == pytest.approx((2 / 3 * 2 + 1.0) / 5)
    assert summary.score.low < summary.score.mean < summary.score.high
    cov = summary.coverage
    assert cov.scored == ("ep_0000", "ep_0001", "ep_0002", "ep_0007", "ep_0008")
    assert cov.taken_over == ("ep_0003", "ep_0005") and cov.unscored == ("ep_0006",)
    assert cov.faulted == ("ep_0009",) and cov.discarded == ("ep_0004",) and cov.interrupted == ("ep_0010",)
    assert cov.attempted == 11
    assert summary.text().startswith("success 3/5 = 60 % [23 %, 88 %] Wilson 95 %; mean score 0.47 [")
    assert summary.text().endswith("coverage 5/11 scored (1 faulted, 1 discarded, 2 taken over, 1 unscored, "
                                   "1 interrupted)")


def test_tasks_are_the_episodes_own_task_ids_in_the_order_they_first_ran_with_figures_of_their_own():
    summary = summarize(DEMO, discarded=("ep_0004",))
    assert [t.task_id for t in summary.tasks] == ["hold_pose", "short_reach", "push_to_limit", "redo",
                                                  "blocked_start", "reach_cube", "reach_cube_blind"]
    reach = summary.task("reach_cube")
    assert (reach.success.successes, reach.success.trials) == (1, 1)
    assert reach.coverage.scored == ("ep_0007",) and reach.coverage.faulted == ("ep_0009",)
    redo = summary.task("redo")  # both taken over: no outcome, so no rate and no interval, said so
    assert redo.success.trials == 0 and redo.success.rate is None and redo.score.mean is None
    # discarded episodes have no result and so no task: the job's coverage holds them, no task's does
    assert sum(t.coverage.attempted for t in summary.tasks) == summary.coverage.attempted - 1
    assert summary.task("nothing") is None


def test_a_safety_stop_is_an_outcome_when_scored_and_listed_apart_when_not():
    assert disposition_of(ep(0, "t", end="safety_stop", success=False)) is Disposition.SCORED
    assert disposition_of(ep(0, "t", end="safety_stop", scored=False)) is Disposition.SAFETY_STOPPED
    assert disposition_of(ep(0, "t", end="infrastructure_fault", scored=False)) is Disposition.FAULTED
    assert disposition_of(ep(0, "t", scored=True, taken_over=True)) is Disposition.TAKEN_OVER


def test_clopper_pearson_on_request_gives_the_beta_bounds_and_an_unknown_method_is_refused():
    summary = summarize(DEMO, method="clopper-pearson")
    assert summary.success.method.value == "clopper-pearson"
    assert summary.success.low == pytest.approx(beta.ppf(0.025, 3, 3), abs=1e-9)
    assert summary.success.high == pytest.approx(beta.ppf(0.975, 4, 2), abs=1e-9)
    assert all(t.success.method.value == "clopper-pearson" for t in summary.tasks)
    with pytest.raises(ValueError, match="agresti"):
        summarize(DEMO, method="agresti")


def test_the_same_scores_in_any_order_give_the_same_interval():
    shuffled = list(DEMO)
    random.Random(3).shuffle(shuffled)
    assert summarize(shuffled).score == summarize(DEMO).score


def test_an_episode_listed_twice_is_refused_and_one_both_listed_and_discarded_counts_once_as_listed():
    with pytest.raises(ValueError, match="listed twice"):
        summarize(DEMO + (DEMO[0],))
    summary = summarize(DEMO, discarded=("ep_0000", "ep_0004", "ep_0004"))
    assert summary.coverage.discarded == ("ep_0004",) and "ep_0000" in summary.coverage.scored


def test_the_running_summary_equals_the_summary_of_every_prefix_and_rereads_a_list_that_did_not_grow():
    rng = random.Random(11)
    episodes = []
    for number in range(40):
        scored = rng.random() < 0.8
        episodes.append(ep(number, rng.choice(["a", "b", "c"]), end=rng.choice(["timeout", "safety_stop"]),
                           scored=scored, success=scored and rng.random() < 0.5,
                           score=round(rng.random(), 2) if scored else 0.0, taken_over=rng.random() < 0.1))
    running = RunningSummary("wilson")
    for n in range(len(episodes) + 1):
        assert running.summary(tuple(episodes[:n])) == summarize(episodes[:n])
    other = tuple(reversed(episodes[:10]))
    assert running.summary(other) == summarize(other)


def test_no_episode_no_rate_no_mean_and_nothing_attempted():
    summary = summarize(())
    assert summary.success.rate is None and summary.score.mean is None and summary.coverage.attempted == 0
    assert summary.tasks == () and summary.text() == "success 0/0 (no outcomes); mean score n/a (no scores); " \
                                                     "coverage 0/0 scored"


def test_the_summary_crosses_the_wire_with_explicit_presence_and_back_unchanged():
    summary = summarize(DEMO, discarded=("ep_0004",))
    status = JobStatus("job-1", "sim", JobState.RUNNING, 10, DEMO, 5, "running", summary=summary)
    msg = pb_model.job_status_to_pb(status)
    assert msg.HasField("summary") and msg.summary.success.HasField("low")
    assert not msg.summary.tasks[3].success.HasField("rate")  # "redo": no outcome, absent rather than 0
    again = pb_model.job_status_from_pb(type(msg).FromString(msg.SerializeToString())).summary
    assert (again.success, again.score, again.text()) == (summary.success, summary.score, summary.text())
    assert again.coverage.counts() == summary.coverage.counts()  # counts travel, not ids: a bounded snapshot
    assert [(t.task_id, t.success, t.score, t.coverage.counts()) for t in again.tasks] == \
        [(t.task_id, t.success, t.score, t.coverage.counts()) for t in summary.tasks]
    bare = pb_model.job_status_to_pb(JobStatus("job-1", "sim", JobState.RUNNING, 10, (), 5, ""))
    assert not bare.HasField("summary") and pb_model.job_status_from_pb(bare).summary is None


def test_a_summary_whose_figures_do_not_hold_together_is_refused_naming_the_job():
    msg = pb_model.job_status_to_pb(JobStatus("job-7", "sim", JobState.RUNNING, 10, DEMO, 5, "",
                                              summary=summarize(DEMO)))
    msg.summary.coverage.scored = 4  # 5 trials
    with pytest.raises(ValueError, match="job 'job-7': summary refused: the job: 5 trials, 5 scores and 4 scored"):
        pb_model.job_status_from_pb(msg)
    msg = pb_model.job_status_to_pb(JobStatus("job-8", "sim", JobState.RUNNING, 10, DEMO, 5, "",
                                              summary=summarize(DEMO)))
    msg.summary.success.low = 0.9  # above the rate
    with pytest.raises(ValueError, match="job 'job-8': summary refused"):
        pb_model.job_status_from_pb(msg)


def test_intervals_is_a_job_setting_checked_kept_and_carried_by_the_relay_messages():
    base = {"job_id": "j", "client_id": "c", "station_id": "s", "episodes_total": 1, "policy": {"provider": "mock"},
            "tasks": [{"task_id": "t", "instruction": "do", "scoring": SHEET}]}
    assert job_spec_from_mapping(base).intervals == "wilson"
    spec = job_spec_from_mapping({**base, "intervals": "clopper-pearson"})
    assert spec.intervals == "clopper-pearson" and job_spec_to_mapping(spec)["intervals"] == "clopper-pearson"
    with pytest.raises(JobSpecError, match="intervals: 'bayes' refused: must be one of wilson, clopper-pearson"):
        job_spec_from_mapping({**base, "intervals": "bayes"})
    from strands_robots.wire.proto import evaluation_service_pb2, station_service_pb2

    request = evaluation_service_pb2.SubmitJobRequest(intervals="clopper-pearson")
    assert pb_model.job_options_from_pb(request) == {"intervals": "clopper-pearson"}
    assert pb_model.job_options_from_pb(evaluation_service_pb2.SubmitJobRequest()) == {}
    job = station_service_pb2.Job(job_id="j", client_id="c", station_id="s", episodes_total=1,
                                  tasks=[pb_model.task_to_pb(spec.tasks[0])], intervals="clopper-pearson")
    assert pb_model.job_spec_from_pb(job).intervals == "clopper-pearson"


def test_every_snapshot_of_a_job_run_through_the_station_core_carries_the_summary_of_its_episodes():
    snapshots = []
    operator = ScriptedOperator()
    try:
        final, draws = run_job(12, 0.5, seed=4, operator=operator, tasks=3, publish=snapshots.append)
    finally:
        operator.close()
    assert final.state is JobState.SUCCEEDED and len(final.episodes) == 12
    assert all(s.summary is not None for s in snapshots)
    for snapshot in snapshots:  # the summary is of that snapshot's episodes, never of an older or newer list
        assert snapshot.summary == summarize(snapshot.episodes)
    assert (final.summary.success.successes, final.summary.success.trials) == (sum(draws), 12)
    assert [t.task_id for t in final.summary.tasks] == ["finish_0", "finish_1", "finish_2"]
    assert [t.success.trials for t in final.summary.tasks] == [4, 4, 4]


def test_the_cli_prints_the_summary_the_status_carries_and_computes_one_only_for_a_status_without():
    summary = summarize(DEMO, discarded=("ep_0004",))
    msg = pb_model.job_status_to_pb(JobStatus("job-1", "sim", JobState.SUCCEEDED, 8, DEMO, 5, "", summary=summary))
    lines = summary_lines(msg)
    assert lines[0] == f"job: {summary.text()}" and "1 discarded" in lines[0]
    assert any(line.strip().startswith("reach_cube ") and "success 1/1 = 100 % [21 %, 100 %]" in line
               for line in lines[1:])
    assert summary.text() in summary_table(msg)
    msg.ClearField("summary")
    fallback = summary_lines(msg)[0]
    assert "the station sent no summary" in fallback and "1 discarded" not in fallback
    assert fallback.startswith("job: success 3/5 = 60 % [23 %, 88 %] Wilson 95 %")


def test_discarded_and_interrupted_episodes_are_listed_under_the_task_they_ran_and_in_the_job():
    summary = summarize(DEMO, discarded=("ep_0004",), interrupted=("ep_0010", "ep_0011"),
                        unlisted_tasks={"ep_0004": "redo", "ep_0010": "reach_cube", "ep_0012": "never_listed"})
    redo, reach = summary.task("redo"), summary.task("reach_cube")
    assert redo.coverage.discarded == ("ep_0004",) and redo.coverage.attempted == 3
    assert reach.coverage.interrupted == ("ep_0010",)
    assert redo.success.trials == 0  # two taken over, one discarded: none an outcome
    # ep_0011's task is not known: the job's coverage holds it, no task's does
    assert summary.coverage.interrupted == ("ep_0010", "ep_0011") and summary.coverage.discarded == ("ep_0004",)
    assert sum(t.coverage.attempted for t in summary.tasks) == summary.coverage.attempted - 1


def test_a_task_whose_only_episode_was_discarded_is_listed_with_no_outcome():
    summary = summarize(DEMO[:1], discarded=("ep_0001",), unlisted_tasks={"ep_0001": "short_reach"})
    assert [t.task_id for t in summary.tasks] == ["hold_pose", "short_reach"]
    lonely = summary.task("short_reach")
    assert (lonely.success.trials, lonely.coverage.attempted, lonely.coverage.discarded) == (0, 1, ("ep_0001",))
