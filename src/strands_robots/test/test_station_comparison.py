"""A comparison (A/B) job at the station: its blocks, the stop rule, its result, through the station core.

The pure core (``station.comparison``) folded over episodes, and whole jobs through ``JobRunner`` with
``KnownRatePort`` (slots whose policies succeed with known rates) and the scripted operator.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
from known_rate_port import KnownRatePort, comparison_spec, run_comparison

from strands_robots.job_model.compare import CompareRequest, StopRequest
from strands_robots.station.comparison import (
    block_plan,
    comparison_of,
    operator_view,
    outcome_of,
    progress_of,
    start_progress,
)
from strands_robots.station.episodes import JobRunner
from strands_robots.station.job_codec import record_from_mapping, record_to_mapping
from strands_robots.station.model import JobState
from strands_robots.station.ports import RolloutOutcome
from strands_robots.station.record import JobRecord
from strands_robots.station.scripted_operator import ScriptedOperator
from strands_robots.stats.proportion import proportion_interval
from strands_robots.stats.sequential import StopRule, replay_stop_rule
from strands_robots.wire.pb_model import job_status_from_pb, job_status_to_pb


def _episode(run, success, n, end_condition="timeout", scored=True, taken_over=False):
    return SimpleNamespace(episode_id=f"ep_{n:04d}", end_condition=end_condition, scored=scored, success=success,
                           taken_over=taken_over, score=1.0 if success else 0.0, slot=run.slot,
                           block_id=run.block.block_id, task=SimpleNamespace(task_id="finish"), seed=run.block.index)


def _fold(progress, draws):
    """Run ``progress`` to its end, each slot's outcome drawn by ``draws(slot)``; the final state."""
    n = 0
    while (run := progress.next_run()) is not None:
        progress = progress.after(_episode(run, draws(run.slot), n))
        n += 1
    return progress


def test_each_block_draws_its_order_and_shuffled_labels_from_the_job_id_and_redraws_them_the_same():
    plans = [block_plan("job-1", ("vision", "blind"), i) for i in range(400)]
    assert plans == [block_plan("job-1", ("vision", "blind"), i) for i in range(400)]
    assert [p.order for p in plans] != [p.order for p in (block_plan("job-2", ("vision", "blind"), i)
                                                          for i in range(400))]
    firsts = Counter(p.order[0] for p in plans)
    assert 160 <= firsts["vision"] <= 240  # about half the blocks run each slot first
    labels = Counter((p.order[0], p.labels[p.order[0]]) for p in plans)
    assert all(labels[(slot, label)] >= 60 for slot in ("vision", "blind") for label in "AB")  # labels apart
    assert all(sorted(p.labels.values()) == ["A", "B"] and p.block_id == f"b_{p.index:04d}" for p in plans)


@pytest.mark.parametrize("how", [dict(end_condition="infrastructure_fault", scored=False),
                                 dict(end_condition="safety_stop"), dict(end_condition="safety_stop", scored=False),
                                 dict(scored=False), dict(taken_over=True)],
                         ids=["station fault", "scored safety stop", "safety stop", "unscored", "taken over"])
def test_an_episode_that_is_not_an_outcome_leaves_the_block_open_and_its_slot_runs_it_again(how):
    progress = start_progress("j", CompareRequest(("a", "b"), StopRequest(max_blocks=5)), 5)
    first = progress.next_run()
    progress = progress.after(_episode(first, True, 0))
    second = progress.next_run()
    assert outcome_of(_episode(second, True, 1, **how)) is None
    again = progress.after(_episode(second, True, 1, **how))
    assert again.next_run() == second and again.complete == () and again.tests.blocks == 0
    done = again.after(_episode(second, False, 2))
    assert [(r.slot, r.success, r.episode_id) for r in done.complete[0].results] == [
        (first.slot, True, "ep_0000"), (second.slot, False, "ep_0002")]
    assert done.tests.blocks == 1 and done.next_run().block.index == 1


def test_an_episode_of_another_slot_or_block_is_refused():
    progress = start_progress("j", CompareRequest(("a", "b")), 3)
    run = progress.next_run()
    other = dataclasses.replace(run, slot="b" if run.slot == "a" else "a")
    with pytest.raises(ValueError, match="expected slot"):
        progress.after(_episode(other, True, 0))


@pytest.mark.parametrize("p_a,p_b,reach", [(0.8, 0.4, False), (0.5, 0.5, False), (0.7, 0.5, True)])
def test_the_station_stops_where_the_stop_rule_replayed_on_the_same_outcomes_stops(p_a, p_b, reach):
    for seed in range(40):
        rng = np.random.default_rng(seed)
        a, b = rng.random(60) < p_a, rng.random(60) < p_b
        draws = {"a": iter(a), "b": iter(b)}
        progress = _fold(start_progress(f"j{seed}", CompareRequest(("a", "b"), StopRequest(
            alpha=0.05, max_blocks=60, or_out_of_reach=reach)), 60), lambda slot: bool(next(draws[slot])))
        replay = replay_stop_rule(a, b, StopRule(60, 0.05, reach))
        assert progress.block == replay.blocks_used[0]
        assert progress.tests.verdict("a", "b").value == replay.verdicts[0]


def test_without_a_stop_rule_every_block_runs():
    progress = _fold(start_progress("j", CompareRequest(("a", "b")), 12), lambda slot: slot == "a")
    assert progress.finished and not progress.decided and len(progress.complete) == 12
    result = comparison_of(progress)
    assert result.stop is None and result.figures[0].success.successes == 12


def test_three_slots_split_alpha_over_the_pairs_and_name_each_pair():
    rates = {"x": 0.9, "y": 0.1, "z": 0.1}
    rng = np.random.default_rng(3)
    progress = _fold(start_progress("j3", CompareRequest(tuple(rates), StopRequest(max_blocks=80)), 80),
                     lambda slot: bool(rng.random() < rates[slot]))
    stop = comparison_of(progress).stop
    assert stop.alpha == 0.05 and "split over 3 pairs" in stop.text
    assert "x is better than y" in stop.text and "x is better than z" in stop.text
    assert [(p.a, p.b) for p in comparison_of(progress).pairs] == [("x", "y"), ("x", "z"), ("y", "z")]


def test_the_result_counts_the_complete_blocks_with_the_stats_cores_intervals():
    outcomes = [(True, False), (True, True), (False, False), (True, False), (False, True), (True, False)]
    it = iter(outcomes)
    progress = start_progress("j", CompareRequest(("a", "b")), 6)
    n = 0
    while (run := progress.next_run()) is not None:
        if run.position == 0:
            block = dict(zip(("a", "b"), next(it)))
        progress = progress.after(_episode(run, block[run.slot], n))
        n += 1
    result = comparison_of(progress, suite="demo", method="clopper-pearson")
    a, b = result.figures
    assert (a.success.successes, a.success.trials, b.success.successes) == (4, 6, 2)
    assert a.success == proportion_interval(4, 6, method="clopper-pearson")
    assert a.score.n == 6 and a.score.mean == pytest.approx(4 / 6)
    pair = result.pairs[0].paired
    assert (pair.table.both_succeeded, pair.table.only_a, pair.table.only_b, pair.table.both_failed) == (1, 3, 1, 1)
    assert pair.difference.difference == pytest.approx(2 / 6)
    assert pair.difference.low < pair.difference.difference < pair.difference.high
    assert pair.test.p_value == pytest.approx(0.625)
    for block, pair_outcome in zip(result.blocks, outcomes):
        assert block.outcomes() == dict(zip(("a", "b"), pair_outcome))
        assert [r.slot for r in block.results] == list(block_plan("j", ("a", "b"), int(block.block_id[2:])).order)


def test_the_operators_view_shows_blind_labels_until_the_labels_are_revealed():
    progress = _fold(start_progress("j", CompareRequest(("seeing", "guessing"), StopRequest(max_blocks=10)), 10),
                     lambda slot: slot == "seeing")
    running = operator_view(comparison_of(progress, revealed=False))
    text = repr(running)
    assert "seeing" not in text and "guessing" not in text
    assert running.slots == ("A", "B") and running.figures == () and running.pairs == ()
    assert [sorted(r.slot for r in b.results) for b in running.blocks] == [["A", "B"]] * len(running.blocks)
    ended = comparison_of(progress, revealed=True)
    assert operator_view(ended) is ended and "seeing is better than guessing" in ended.stop.text


# -- through the station core ---------------------------------------------------------------------------------
def test_a_comparison_job_stops_when_separated_and_succeeds_with_its_verdict():
    snapshots = []
    status, port = run_comparison({"vision": 0.9, "blind": 0.1}, 5, ScriptedOperator(), 40,
                                  publish=snapshots.append)
    assert status.state is JobState.SUCCEEDED
    stop = status.comparison.stop
    assert stop.verdict == "a_better" and stop.stopped_at_block == len(status.comparison.blocks) < 40
    assert "a_better" in status.message and "vision is better than blind" in status.message
    assert status.comparison.labels_revealed
    # the episodes say where they ran; each block's order is the one its plan drew
    for episode, plan in zip(status.episodes, port.plans):
        assert (episode.slot, episode.block_id, episode.block_position, episode.seed) == (
            plan.compare_slot, plan.block_id, plan.block_position, plan.seed)
        assert plan.task.parameters["seed"] == str(plan.seed)
    for block in status.comparison.blocks:
        ran = [e.slot for e in status.episodes if e.block_id == block.block_id]
        assert ran == [r.slot for r in block.results] == list(block_plan(status.job_id, ("vision", "blind"),
                                                                         int(block.block_id[2:])).order)
    # every snapshot carries the comparison; none before the end reveals the labels or names a slot to the operator
    running = [s for s in snapshots if s.state is not JobState.SUCCEEDED]
    assert running and all(s.comparison is not None and not s.comparison.labels_revealed for s in running)
    assert not any("vision" in s.message or "blind" in s.message for s in running)
    assert any("policy A" in s.message for s in running) and any("policy B" in s.message for s in running)
    # the stop rule decided exactly where it does on the port's own draws
    a = np.array([d for d, p in zip(port.draws, port.plans) if p.compare_slot == "vision"])
    b = np.array([d for d, p in zip(port.draws, port.plans) if p.compare_slot == "blind"])
    replay = replay_stop_rule(a, b, StopRule(40, 0.05))
    assert (stop.stopped_at_block, stop.verdict) == (replay.blocks_used[0], replay.verdicts[0])


def test_the_comparison_crosses_the_wire_and_survives_a_restart():
    status, _ = run_comparison({"vision": 0.9, "blind": 0.2}, 7, ScriptedOperator(), 30)
    msg = job_status_to_pb(status)
    assert msg.HasField("comparison") and msg.comparison.stop.verdict == status.comparison.stop.verdict
    assert msg.comparison.stop.stopped_at_block == status.comparison.stop.stopped_at_block
    assert [o.blind_label for o in msg.comparison.blocks[0].outcomes] == [
        r.blind_label for r in status.comparison.blocks[0].results]
    assert msg.comparison.pairs[0].HasField("p_value") and msg.comparison.pairs[0].HasField("detectable_difference")
    assert job_status_from_pb(msg).episodes == status.episodes
    spec = comparison_spec("known-rates-7", ["vision", "blind"], 30)
    record = JobRecord(spec, episodes=status.episodes)
    again = record_from_mapping(record_to_mapping(record))
    assert again.episodes == status.episodes
    assert progress_of(spec, again.episodes).complete == progress_of(spec, status.episodes).complete


class _FlakyPort(KnownRatePort):
    """Slot ``blind``'s first try of every block ends in a station fault, then in a safety stop; then it runs."""

    def __init__(self, seed):
        super().__init__({"vision": 0.5, "blind": 0.5}, seed)
        self.tries = Counter()

    def run_rollout(self, plan, progress):
        key = (plan.block_id, plan.compare_slot)
        self.tries[key] += 1
        if plan.compare_slot == "blind" and self.tries[key] == 1:
            return RolloutOutcome(stopped_reason="error", infrastructure="the arm driver died")
        if plan.compare_slot == "blind" and self.tries[key] == 2:
            return RolloutOutcome(stopped_reason="safety_stop", end_detail="joint limit", run_id=plan.episode_id)
        return super().run_rollout(plan, progress)


def test_faulted_and_safety_stopped_episodes_are_never_outcomes_and_their_slot_runs_the_block_again():
    spec = comparison_spec("flaky", ["vision", "blind"], 4, stop=False)
    port = _FlakyPort(1)
    status = JobRunner(JobRecord(spec), port, ScriptedOperator()).run()
    assert status.state is JobState.SUCCEEDED, status.message
    assert len(status.comparison.blocks) == 4
    for block in status.comparison.blocks:
        mine = [e for e in status.episodes if e.block_id == block.block_id and e.slot == "blind"]
        assert [e.end_condition for e in mine][:2] == ["infrastructure_fault", "safety_stop"]
        assert [r.episode_id for r in block.results if r.slot == "blind"] == [mine[2].episode_id]
    assert status.comparison.figures[1].success.trials == 4  # the faults and stops are not in n


def test_a_slot_that_never_gives_an_outcome_fails_the_job_naming_its_block():
    class NeverScored(KnownRatePort):
        def run_rollout(self, plan, progress):
            if plan.compare_slot == "blind":
                return RolloutOutcome(stopped_reason="safety_stop", end_detail="joint limit", run_id=plan.episode_id)
            return super().run_rollout(plan, progress)

    spec = comparison_spec("never", ["vision", "blind"], 3, stop=False)
    status = JobRunner(JobRecord(spec), NeverScored({"vision": 0.5, "blind": 0.5}, 2), ScriptedOperator()).run()
    assert status.state is JobState.FAILED
    assert "block b_0000" in status.message and "without an outcome" in status.message
    assert status.comparison.labels_revealed and status.comparison.blocks == ()


def test_a_comparison_job_on_a_robot_side_that_cannot_serve_slots_fails_before_anything_moves():
    class OnePolicy(KnownRatePort):
        serves_slots = False

    port = OnePolicy({"vision": 0.5, "blind": 0.5}, 3)
    status = JobRunner(JobRecord(comparison_spec("one", ["vision", "blind"], 3)), port, ScriptedOperator()).run()
    assert status.state is JobState.FAILED and "cannot serve a comparison's slots (vision, blind)" in status.message
    assert port.draws == [] and status.episodes == ()


def test_a_station_resumes_a_comparison_after_a_restart_where_its_saved_episodes_left_it(tmp_path):
    from strands_robots.station.persistence import JobStore
    from strands_robots.station.record import RunningEpisode
    from strands_robots.station.station import Station

    spec = comparison_spec("known-rates-11", ["vision", "blind"], 30)  # the job whose first life ran below
    first, _ = run_comparison({"vision": 0.9, "blind": 0.1}, 11, ScriptedOperator(), 30)
    kept = first.episodes[:5]  # two complete blocks and the first slot of the third: the station died in it
    store = JobStore(str(tmp_path))
    store.save(JobRecord(spec, state=JobState.RUNNING, message="running", episodes=kept,
                         running=RunningEpisode("ep_0005", 5, 0), next_episode_number=6))
    operator = ScriptedOperator()
    station = Station("sim", KnownRatePort({"vision": 0.9, "blind": 0.1}, 12), operator, store=store)
    try:
        station.recover()
        station.start()
        assert station.wait_idle(timeout_s=120.0)
        status = station.status("known-rates-11")
    finally:
        station.stop()
        operator.close()
    assert status.state is JobState.SUCCEEDED and status.comparison.stop.verdict == "a_better"
    assert status.episodes[:5] == kept
    resumed = status.episodes[5]
    assert (resumed.block_id, resumed.slot) == ("b_0002", [s for s in ("vision", "blind") if s != kept[4].slot][0])
    assert resumed.episode_id != "ep_0005"  # the interrupted one's id is never reused
    assert [b.block_id for b in status.comparison.blocks][:3] == ["b_0000", "b_0001", "b_0002"]
