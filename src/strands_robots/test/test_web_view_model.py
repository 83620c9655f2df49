"""What the status page shows of a job, from the relay's JobView and JobStatus (pure: no server)."""

from __future__ import annotations

from web_helpers import episode, snapshot

from strands_robots.client import pb
from strands_robots.relay.core import RelayCore
from strands_robots.relay.store import JobRecord, JobView, Snapshot
from strands_robots.relay.web.view_model import job_page, not_kept_ids


def _view(status=None, episodes_total=4, heard=None):
    request = pb.SubmitJobRequest(station_id="sim_station", episodes=episodes_total, job_id="mine")
    job = JobRecord(job_id="relay-1", client_id="team_a", station_id="sim_station",
                    request=request.SerializeToString(), submitted_unix_ms=5, episodes_total=episodes_total,
                    client_job_id="mine")
    snap = None if status is None else Snapshot(job_id="relay-1", updated_unix_ms=status.updated_unix_ms,
                                                state=status.state, payload=status.SerializeToString(),
                                                episodes_done=len(status.episodes), sequence=status.sequence)
    return JobView(job=job, snapshot=snap, station_last_heard=heard)


def _page(status=None, **kw):
    view = _view(status, **kw)
    return job_page(view, RelayCore.status_of_view(view), view.job.client_job_id)


def test_before_the_first_report_the_job_is_created_with_no_progress():
    page = _page()
    assert (page.job_id, page.state, page.episodes_done, page.episodes_total, page.progress_percent) == (
        "mine", "CREATED", 0, 4, 0)
    assert "has not reported" in page.message and page.mean_score is None and not page.terminal


def test_progress_scores_answers_and_flags_come_from_the_snapshot():
    eps = [episode(0, count=5), episode(1, success=False, taken_over=True),
           episode(2, end="safety_stop", scored=False, detail="e-stop at 3.0 s"),
           episode(5, end="infrastructure_fault", scored=False, detail="driver died")]
    page = _page(snapshot("relay-1", 9, eps, total=6), episodes_total=6, heard=77)
    assert (page.episodes_done, page.progress_percent, page.scored_count, page.success_count) == (4, 66, 2, 1)
    first = page.episodes[0]
    assert [(a.name, a.answer, a.points, a.max_points) for a in first.answers] == [
        ("placed", "yes", 1.0, 1.0), ("stacked", "5", 3.0, 3.0)]
    assert first.score == 1.0 and first.success and first.end_label == "ran to its time limit"
    assert page.episodes[1].taken_over and page.episodes[1].score == 0.0 and not page.episodes[1].success
    assert [e.episode_id for e in page.safety_stops] == ["ep_0002"] and page.safety_stops[0].end_detail == \
        "e-stop at 3.0 s"
    assert page.episodes[2].score is None  # unscored: no number shown
    assert page.episodes[3].fault and page.not_kept == ("ep_0003", "ep_0004")
    assert page.mean_score == 0.5 and page.taken_over_count == 1
    assert page.station_last_heard_unix_ms == 77 and page.version[0] == 9


def test_a_choice_answer_shows_the_option_the_operator_chose():
    result = pb.EpisodeResult(episode_id="ep_0000", end_condition="policy_completed", scored=True, success=True,
                              score=0.5)
    result.task.scoring.items.add(name="grip", answer_type=pb.ANSWER_TYPE_CHOICE, choices=["none", "weak", "firm"],
                                  choice_points=[0, 1, 2], max_points=2)
    result.items.add(name="grip", answer_type=pb.ANSWER_TYPE_CHOICE, choice_index=1, points=1, max_points=2)
    result.items.add(name="unanswered", answer_type=pb.ANSWER_TYPE_YES_NO, max_points=1)
    page = _page(snapshot("relay-1", 1, [result]))
    assert [a.answer for a in page.episodes[0].answers] == ["weak", "(no answer)"]


def test_the_version_changes_with_every_new_snapshot():
    a = _page(snapshot("relay-1", 1, [])).version
    b = _page(snapshot("relay-1", 2, [])).version
    assert a != b


def test_ids_not_kept_are_the_gaps_below_the_highest_listed_id():
    assert not_kept_ids(["ep_0000", "ep_0003", "ep_0001"]) == ("ep_0002",)
    assert not_kept_ids([]) == () and not_kept_ids(["custom"]) == ()
    assert not_kept_ids(["ep_10001"])[-1] == "ep_10000" and len(not_kept_ids(["ep_0004"])) == 4


def test_the_page_shows_the_figures_the_station_computed_with_their_intervals_and_none_when_it_sent_none():
    from strands_robots.station.summary import score_text, summarize
    from strands_robots.wire import pb_model

    eps = [episode(0), episode(1, success=False), episode(2), episode(3, taken_over=True)]
    status = snapshot("relay-1", 9, eps, total=6)
    summary = summarize([pb_model.episode_result_from_pb(e) for e in eps], discarded=("ep_0004",))
    status.summary.CopyFrom(pb_model.summary_to_pb(summary))
    page = _page(status, episodes_total=6)
    (row,) = page.figures  # one task: the job's line only
    assert row.label == "all tasks" and row.success == "2/3 = 67 % [21 %, 94 %] Wilson 95 %"
    assert row.coverage == "3/5 scored (1 discarded, 1 taken over)"
    assert row.score == score_text(summary.score) and "bootstrap" in row.score
    assert _page(snapshot("relay-1", 9, eps, total=6), episodes_total=6).figures == ()
