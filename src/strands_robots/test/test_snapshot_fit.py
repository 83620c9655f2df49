"""A job's snapshot always fits one relay message, and what a trimmed one leaves out is said in it."""

from __future__ import annotations

from strands_robots.client.policy_spec import MAX_SPEC_JSON
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.station_link.snapshot_fit import (
    SKELETON_EPISODE_MAX_BYTES,
    SLIM_END_DETAIL_MAX,
    fit_snapshot,
    worst_case_bytes,
)
from strands_robots.station.limits import EPISODES_LISTED_MAX, JOB_MESSAGE_MAX
from strands_robots.station.model import STATION_END_CONDITIONS
from strands_robots.station.record import episode_id_for
from strands_robots.validation import JOB_LIMITS

DEFAULT_RELAY_MESSAGE = 16 * 1024 * 1024  # the relay's and the station link's default max_message_bytes
REQUEST_OVERHEAD = 4096  # what the station link keeps for the ReportStatus request's own fields


def big_task(i):
    task = ev.Task(task_id=f"task_{i}", instruction="i" * 4096, layout="l" * 1024)
    for k in range(20):
        task.parameters[f"policy.option_{k}"] = "v" * 200
    for k in range(5):
        task.scoring.items.add(name=f"item_{k}", question="q" * 1024, choices=["c" * 200] * 5)
    return task


def snapshot(episodes, state="RUNNING", message="ep_0049 running", spec_json=""):
    status = ev.JobStatus(job_id="job-1", station_id="sim_station", state=state, episodes_total=episodes,
                          updated_unix_ms=1, sequence=7, message=message)
    if spec_json:
        status.provenance.policy_spec_json = spec_json
    for i in range(episodes):
        ep = status.episodes.add(episode_id=episode_id_for(i), end_condition="timeout", scored=True,
                                 success=i % 2 == 0, score=0.5 + i / 1000, taken_over=i % 7 == 0,
                                 end_detail="d" * 2048, run_id=f"run-{i}", recording_sha256="f" * 64)
        ep.task.CopyFrom(big_task(i))
        ep.items.add(name="done", question="Done?" * 100, yes_no=True, points=1, max_points=1, is_success_item=True)
    return status


def rates(status):
    return [(e.episode_id, e.end_condition, e.scored, e.success, e.score, e.taken_over) for e in status.episodes]


def test_a_snapshot_that_fits_is_reported_unchanged():
    status = snapshot(3)
    assert fit_snapshot(status, status.ByteSize()) is status


def test_an_oversized_snapshot_keeps_every_episode_leaves_out_the_oldest_tasks_texts_first_and_says_so():
    status = snapshot(50)
    budget = status.ByteSize() // 2
    fitted = fit_snapshot(status, budget)
    assert fitted is not None and fitted.ByteSize() <= budget
    assert len(fitted.episodes) == 50 and rates(fitted) == rates(status)  # what every rate is computed from
    slim = [i for i, e in enumerate(fitted.episodes) if e.task.instruction == ""]
    assert slim == list(range(len(slim))) and 0 < len(slim) < 50  # the oldest first, only as many as needed
    for i in slim:
        ep = fitted.episodes[i]
        assert ep.task.task_id == f"task_{i}" and ep.run_id == f"run-{i}" and ep.recording_sha256 == "f" * 64
        assert len(ep.end_detail) <= SLIM_END_DETAIL_MAX and ep.items[0].yes_no and ep.items[0].question == ""
    assert fitted.episodes[49] == status.episodes[49]  # the newest episode in full
    assert fitted.message.startswith("ep_0049 running [this snapshot was trimmed to fit one relay message")
    assert f"the first {len(slim)} episode(s) without their task's texts" in fitted.message
    assert "the station's record holds every episode in full" in fitted.message
    assert len(fitted.message) <= JOB_MESSAGE_MAX
    assert status.episodes[0].task.instruction  # the station's own snapshot is never changed


def test_past_the_tasks_texts_episodes_become_skeletons_and_then_the_declared_spec_is_left_out():
    status = snapshot(40, state="SUCCEEDED", message="completed", spec_json="{" + " " * (MAX_SPEC_JSON - 2) + "}")
    skeleton_room = 40 * SKELETON_EPISODE_MAX_BYTES + 12 * 1024  # room for skeletons and the note, not the spec
    fitted = fit_snapshot(status, skeleton_room)
    assert fitted is not None and fitted.ByteSize() <= skeleton_room
    assert fitted.state == "SUCCEEDED" and rates(fitted) == rates(status)
    assert all(not e.HasField("task") and not e.items and not e.run_id for e in fitted.episodes)
    assert fitted.provenance.policy_spec_json == ""
    assert "the first 40 with only their id, end condition and score" in fitted.message
    assert "the policy's declared spec left out of the provenance" in fitted.message


def test_past_the_skeletons_every_slots_declared_spec_is_left_out_and_the_note_says_so():
    spec = "{" + " " * (MAX_SPEC_JSON - 2) + "}"
    status = snapshot(40, state="SUCCEEDED", message="completed", spec_json=spec)
    for slot in ("vision", "theirs"):
        status.provenance.slot_specs.add(slot=slot, policy_spec_json=spec)
    skeleton_room = 40 * SKELETON_EPISODE_MAX_BYTES + 12 * 1024
    fitted = fit_snapshot(status, skeleton_room)
    assert fitted is not None and fitted.ByteSize() <= skeleton_room
    assert fitted.provenance.policy_spec_json == "" and not fitted.provenance.slot_specs
    assert "every slot's declared spec left out of the provenance" in fitted.message
    assert len(status.provenance.slot_specs) == 2  # the station's own snapshot is never changed


def test_a_budget_too_small_even_for_skeletons_gives_none_never_a_silent_loss():
    assert fit_snapshot(snapshot(40), 512) is None


def test_texts_over_their_limits_are_cut_first_with_a_marker_before_anything_is_left_out():
    status = ev.JobStatus(job_id="job-1", station_id="sim_station", state="CANCELLED",
                          message="cancelled by the team: " + "x" * 200_000)
    fitted = fit_snapshot(status, 64 * 1024)
    assert fitted.message.startswith("cancelled by the team: xxx") and fitted.message.endswith("characters cut]")
    assert len(fitted.message) <= JOB_MESSAGE_MAX and "trimmed" not in fitted.message


def test_by_construction_every_snapshot_a_station_makes_fits_the_relays_default_message():
    # The largest skeleton episode: the longest id the station hands out and its longest end condition.
    longest_id = episode_id_for(9_999_999)
    for end in STATION_END_CONDITIONS:
        ep = ev.EpisodeResult(episode_id=longest_id, end_condition=end, scored=True, success=True, score=0.987654321,
                              taken_over=True)
        framed = 1 + 1 + ep.ByteSize()
        assert framed <= SKELETON_EPISODE_MAX_BYTES, (end, framed)
    assert len(longest_id) == 10
    # A job lists at most EPISODES_LISTED_MAX episodes: at least every episode it may ask for, twice.
    assert EPISODES_LISTED_MAX >= 2 * JOB_LIMITS["episodes_total"].maximum
    assert worst_case_bytes() <= DEFAULT_RELAY_MESSAGE - REQUEST_OVERHEAD


def largest_summary(tasks):
    """Return a summary at its largest: every task id at its limit in 4-byte characters, each count and note too."""
    from strands_robots.station.limits import IDENTIFIER_MAX
    from strands_robots.stats import mean_score, proportion

    big = 2 ** 32 - 1

    def figures(msg):
        msg.success.CopyFrom(ev.Rate(successes=big, trials=big, rate=0.123456789, low=0.0123456789,
                                     high=0.987654321, method="clopper-pearson", confidence=0.95,
                                     note=proportion.NO_TRIALS_NOTE))
        msg.score.CopyFrom(ev.MeanScore(n=big, mean=0.123456789, low=0.0123456789, high=0.987654321,
                                        method="percentile", confidence=0.95, n_resamples=big, seed=2 ** 63,
                                        note=f"{mean_score.BCA_FALLBACK_NOTE}; {mean_score.SMALL_SAMPLE_NOTE}"))
        msg.coverage.CopyFrom(ev.Coverage(**{name: big for name in (
            "scored", "faulted", "safety_stopped", "discarded", "taken_over", "unscored", "interrupted")}))

    summary = ev.JobFigures()
    figures(summary)
    for i in range(tasks):
        task = summary.tasks.add(task_id=chr(0x1D538) * (IDENTIFIER_MAX - 4) + f"{i:04d}")
        figures(task)
    return summary


def test_a_summary_at_its_largest_stays_within_its_bound_and_the_worst_case_snapshot_with_it_fits():
    from strands_robots.station_link.snapshot_fit import summary_max_bytes

    tasks = int(JOB_LIMITS["tasks"].maximum)
    status = ev.JobStatus(job_id="j")
    status.summary.CopyFrom(largest_summary(tasks))
    assert status.ByteSize() - 1 <= summary_max_bytes(tasks)  # less the job id's bytes, more than the framing
    assert summary_max_bytes() == summary_max_bytes(tasks) < 1024 * 1024
    assert worst_case_bytes() <= DEFAULT_RELAY_MESSAGE - REQUEST_OVERHEAD
