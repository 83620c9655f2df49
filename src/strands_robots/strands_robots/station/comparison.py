"""A comparison (A/B) job's core: its blocks, which slot runs next, when it stops, and its result.

A comparison job (``JobSpec.comparison``) compares two or more policies, each in a named slot with its own policy
session. Its ``tasks`` are its blocks, in order: block ``i`` is ``tasks[i]`` (one suite task and seed), and every
slot runs it once:

- **order and blind labels**: each block's slot order and its blind labels ("A", "B", ... shuffled apart from the
  order) are drawn from an RNG seeded by the job id and the block's index (:func:`block_plan`), so a restarted
  station draws the same ones; the order the slots ran is recorded in the result (``ComparisonBlock.outcomes``).
  The operator is shown the blind label, never the slot, until the job ends (:func:`operator_view`);
- **outcomes**: an episode is an outcome of its block when it was scored, not taken over, not a station fault and
  not a safety stop (:func:`outcome_of`). Any other episode of the block's slot (a fault, a safety stop, an
  unscored or taken-over one; a discarded one is not even listed) is never an outcome: the same slot runs the
  block again (the runner bounds the attempts; a safety stop waits for an operator's clear as every episode does);
- **the stop rule**: after every complete block, and only then, the anytime-valid test
  (:class:`~strands_robots.stats.pairwise_sequential.PairwiseSequentialTests`: with two slots one
  :class:`~strands_robots.stats.sequential.PairedSequentialTest`) takes the block. The job stops when the test is
  decided (separated, out of reach when asked, or at ``max_blocks``) or its blocks run out;
- **the result** (:func:`comparison_of`): per slot k of n with the job's interval method and the mean score with
  the summary's seeded bootstrap (the same figures as ``station.summary``), every pair's paired table, the
  difference with Newcombe's interval, the exact McNemar test and the smallest difference these blocks detect at
  80 % power (``stats.paired``), the complete blocks, and the stop rule's state.

:class:`ComparisonProgress` is the whole state, a frozen value folded over the job's listed episodes
(:func:`progress_of`), so it is never persisted on its own: the episodes (each carrying its slot, block and place
in the block) are the record. Pure: no rclpy.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import random
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple

from strands_robots.rollout.end_condition import END_INFRASTRUCTURE_FAULT, END_SAFETY_STOP

__all__ = ["BLIND_LABELS", "BlockPlan", "NextRun", "SlotResult", "CompleteBlock", "ComparisonProgress",
           "SlotFigures", "PairFigures", "StopState", "Comparison", "block_plan", "block_id_for", "outcome_of",
           "start_progress", "progress_of", "comparison_of", "stop_state", "operator_view", "verdict_text",
           "schedule_seed"]

#: Blind labels, one per slot (at most eight slots).
BLIND_LABELS = ("A", "B", "C", "D", "E", "F", "G", "H")


def block_id_for(index: int) -> str:
    """``b_0000`` for block 0; more digits past 9999."""
    return f"b_{index:04d}"


@functools.lru_cache(maxsize=64)
def schedule_seed(job_id: str) -> int:
    """Return the seed of a job's block orders and labels: from its id, so a restarted station draws the same."""
    return int.from_bytes(hashlib.sha256(f"comparison:{job_id}".encode()).digest()[:8], "big")


@dataclass(frozen=True)
class BlockPlan:
    """One block: its index and id, the slots in the order they run, and each slot's blind label."""

    index: int
    block_id: str
    order: Tuple[str, ...]
    labels: Mapping[str, str]


def block_plan(job_id: str, slots: Sequence[str], index: int) -> BlockPlan:
    """Return block ``index``'s plan: its order and labels drawn from the job's seeded RNG.

    :param slots: the job's slots, in the job's order.
    """
    rng = random.Random((schedule_seed(job_id) << 32) + index)  # Mersenne Twister, seeded: the same on every host
    order = list(slots)
    rng.shuffle(order)
    labels = list(BLIND_LABELS[:len(slots)])
    rng.shuffle(labels)
    return BlockPlan(index, block_id_for(index), tuple(order), MappingProxyType(dict(zip(slots, labels))))


def outcome_of(episode: Any) -> Optional[bool]:
    """Return an episode's outcome in its block (its headline ``success``), or None when it is not one.

    Not an outcome: a station fault, a safety stop (scored or not), an unscored or a taken-over episode.
    """
    if episode.end_condition in (END_INFRASTRUCTURE_FAULT, END_SAFETY_STOP) or not episode.scored \
            or episode.taken_over:
        return None
    return bool(episode.success)


@dataclass(frozen=True)
class NextRun:
    """The episode a comparison job runs next: its block, its slot, the slot's place in the block's order."""

    block: BlockPlan
    position: int
    slot: str

    @property
    def label(self) -> str:
        """The slot's blind label in this block (what the operator sees)."""
        return self.block.labels[self.slot]


@dataclass(frozen=True)
class SlotResult:
    """One slot's outcome in a block: success, score, the episode, the blind label it ran under."""

    slot: str
    success: bool
    score: float
    episode_id: str
    blind_label: str


@dataclass(frozen=True)
class CompleteBlock:
    """A block every slot has an outcome of; ``results`` in the order the slots ran."""

    block_id: str
    task_id: str
    seed: Optional[int]
    results: Tuple[SlotResult, ...]

    def outcomes(self) -> Mapping[str, bool]:
        return {r.slot: r.success for r in self.results}


@dataclass(frozen=True)
class ComparisonProgress:
    """A comparison job's state after the episodes listed so far (fold them with :meth:`after`).

    :param job_id: seeds the blocks' orders and labels.
    :param slots: the job's slots, in its order.
    :param blocks_total: the blocks the job lists (its ``tasks``).
    :param tests: the stop rule's test (``PairwiseSequentialTests``); None when the job asked for no stop rule.
    :param block: the current block (its index); ``blocks_total`` once every block ran.
    :param results: the current block's outcomes so far, in the order they came.
    :param complete: the complete blocks, in order.
    """

    job_id: str
    slots: Tuple[str, ...]
    blocks_total: int
    tests: Any = None
    block: int = 0
    results: Tuple[SlotResult, ...] = ()
    complete: Tuple[CompleteBlock, ...] = ()
    _plan: Optional[BlockPlan] = None

    @property
    def decided(self) -> bool:
        """True when the stop rule decided (every pair separated or not_separated)."""
        return self.tests is not None and self.tests.decided

    @property
    def finished(self) -> bool:
        """True when the job runs no more episodes: the stop rule decided, or every block ran."""
        return self.decided or self.block >= self.blocks_total

    def plan(self) -> BlockPlan:
        """Return the current block's plan."""
        if self._plan is None or self._plan.index != self.block:
            object.__setattr__(self, "_plan", block_plan(self.job_id, self.slots, self.block))  # a memo only
        return self._plan

    def next_run(self) -> Optional[NextRun]:
        """Return the episode to run next; None once :attr:`finished`."""
        if self.finished:
            return None
        plan = self.plan()
        done = {r.slot for r in self.results}
        position = next(i for i, slot in enumerate(plan.order) if slot not in done)
        return NextRun(plan, position, plan.order[position])

    def after(self, episode: Any, task_id: str = "", seed: Optional[int] = None) -> "ComparisonProgress":
        """Return the state after one more listed episode of the current block.

        An episode that is not an outcome (:func:`outcome_of`) changes nothing: its slot runs the block again.

        :param episode: an ``EpisodeResult`` whose ``slot`` and ``block_id`` are the next run's.
        :param task_id: the block's task (for the record; default: the episode's).
        :param seed: the block's seed (default: the episode's).
        :raises ValueError: the episode is not the next run's (another block or slot), or the job is finished.
        """
        run = self.next_run()
        if run is None:
            raise ValueError(f"the comparison ran every block it will run; {episode.episode_id} is not one of them")
        if episode.block_id != run.block.block_id or episode.slot != run.slot:
            raise ValueError(f"{episode.episode_id} ran slot {episode.slot!r} of block {episode.block_id!r}; the "
                             f"comparison expected slot {run.slot!r} of block {run.block.block_id}")
        success = outcome_of(episode)
        if success is None:
            return dataclasses.replace(self, _plan=run.block)
        results = self.results + (SlotResult(run.slot, success, float(episode.score), episode.episode_id,
                                             run.label),)
        if len(results) < len(self.slots):
            return dataclasses.replace(self, results=results, _plan=run.block)
        done = CompleteBlock(run.block.block_id, task_id or episode.task.task_id,
                             seed if seed is not None else getattr(episode, "seed", None), results)
        tests = self.tests
        if tests is not None:
            from strands_robots.stats.blocks import Block

            tests = tests.after(Block(done.outcomes(), done.block_id))
        return dataclasses.replace(self, tests=tests, block=self.block + 1, results=(),
                                   complete=self.complete + (done,), _plan=None)


def start_progress(job_id: str, comparison: Any, blocks_total: int) -> ComparisonProgress:
    """Return a comparison job's state before any episode.

    :param comparison: the job's ``job_model.compare.CompareRequest``.
    :param blocks_total: the blocks the job lists.
    """
    tests = None
    if comparison.stop is not None:
        from strands_robots.stats.pairwise_sequential import PairwiseSequentialTests
        from strands_robots.stats.sequential import StopRule

        stop = comparison.stop
        rule = StopRule(min(stop.max_blocks or blocks_total, blocks_total), stop.alpha, stop.or_out_of_reach)
        tests = PairwiseSequentialTests.start(comparison.slots, rule)
    return ComparisonProgress(job_id, tuple(comparison.slots), blocks_total, tests)


def progress_of(spec: Any, episodes: Iterable[Any]) -> ComparisonProgress:
    """Fold a comparison job's listed episodes (``JobRecord.episodes``) into its state."""
    progress = start_progress(spec.job_id, spec.comparison, len(spec.tasks))
    for episode in episodes:
        progress = progress.after(episode)
    return progress


# -- the result -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlotFigures:
    """One slot over the complete blocks: k of n with its interval, the mean score with its interval."""

    slot: str
    success: Any  # stats.proportion.Proportion
    score: Any    # stats.mean_score.MeanScore


@dataclass(frozen=True)
class PairFigures:
    """Slot ``a`` against slot ``b`` over the complete blocks (``stats.paired.PairedComparison``)."""

    a: str
    b: str
    paired: Any


@dataclass(frozen=True)
class StopState:
    """The stop rule the job asked for and where it stands (``SequentialStop``)."""

    test: str
    alpha: float
    max_blocks: int
    stop_when_out_of_reach: bool
    e_value: float
    stopped_at_block: Optional[int]
    verdict: str
    text: str


@dataclass(frozen=True)
class Comparison:
    """A comparison job's result (``JobStatus.comparison``); ``labels_revealed`` once the job ended."""

    suite: str
    slots: Tuple[str, ...]
    figures: Tuple[SlotFigures, ...]
    pairs: Tuple[PairFigures, ...]
    blocks: Tuple[CompleteBlock, ...]
    stop: Optional[StopState]
    labels_revealed: bool


def verdict_text(verdict: str, a: str, b: str) -> str:
    """Return a pair's verdict in words, with the slot names."""
    return {"a_better": f"{a} is better than {b}", "b_better": f"{b} is better than {a}",
            "not_separated": f"{a} and {b} are not separated",
            "undecided": f"{a} against {b}: undecided"}[verdict]


def stop_state(progress: ComparisonProgress) -> Optional[StopState]:
    tests = progress.tests
    if tests is None:
        return None
    a, b = progress.slots[0], progress.slots[1]
    lead = tests.test(a, b)
    verdict = tests.verdict(a, b).value
    words = [f"{verdict_text(verdict, a, b)} (e-value {lead.e_value:.3g}, separates at {1 / lead.rule.alpha:g})"]
    for p, q in tests.pairs:
        if {p, q} != {a, b}:
            test = tests.test(p, q)
            words.append(f"{verdict_text(tests.verdict(p, q).value, p, q)} (e-value {test.e_value:.3g})")
    where = (f"stopped at block {progress.block}" if tests.decided
             else f"after {progress.block} of at most {tests.rule.max_blocks} blocks")
    if len(progress.slots) > 2:
        where += f"; alpha {tests.rule.alpha:g} split over {len(tests.pairs)} pairs"
    return StopState(test=lead.test, alpha=tests.rule.alpha, max_blocks=tests.rule.max_blocks,
                     stop_when_out_of_reach=tests.rule.stop_when_out_of_reach, e_value=lead.e_value,
                     stopped_at_block=progress.block if tests.decided else None, verdict=verdict,
                     text=f"{'; '.join(words)}; {where}")


def comparison_of(progress: ComparisonProgress, *, suite: str = "", method: str = "wilson",
                  revealed: bool = False) -> Comparison:
    """Return the result of the complete blocks so far (every figure computed here, nowhere else).

    :param method: the job's interval method (``wilson`` or ``clopper-pearson``), as ``station.summary`` uses.
    :param revealed: the job ended: the blind labels may be matched to the slots.
    """
    from strands_robots.station.summary import CONFIDENCE, _mean, _rate
    from strands_robots.stats.blocks import PairedBlock
    from strands_robots.stats.paired import compare_paired

    figures = []
    for slot in progress.slots:
        rows = [r for block in progress.complete for r in block.results if r.slot == slot]
        figures.append(SlotFigures(slot, _rate(sum(r.success for r in rows), len(rows), method, CONFIDENCE),
                                   _mean(tuple(sorted(r.score for r in rows)), CONFIDENCE)))
    alpha = progress.tests.rule.alpha if progress.tests is not None else 0.05
    pairs = []
    for i, a in enumerate(progress.slots):
        for b in progress.slots[i + 1:]:
            blocks = [PairedBlock(o[a], o[b], block.block_id) for block in progress.complete
                      for o in (block.outcomes(),)]
            pairs.append(PairFigures(a, b, compare_paired(blocks, confidence=CONFIDENCE, alpha=alpha)))
    return Comparison(suite, progress.slots, tuple(figures), tuple(pairs), progress.complete,
                      stop_state(progress), bool(revealed))


def operator_view(comparison: Optional[Comparison]) -> Optional[Comparison]:
    """Return what the station's operator may see: until the labels are revealed, blind labels for slot names.

    The figures and pairs (which name slots) are left out until then; each block keeps its outcomes under their
    blind labels.
    """
    if comparison is None or comparison.labels_revealed:
        return comparison
    blocks = tuple(dataclasses.replace(block, results=tuple(dataclasses.replace(r, slot=r.blind_label)
                                                            for r in block.results))
                   for block in comparison.blocks)
    stop = comparison.stop
    if stop is not None:
        stop = dataclasses.replace(stop, verdict="undecided" if stop.stopped_at_block is None else stop.verdict,
                                   text=f"e-value {stop.e_value:.3g} after {len(blocks)} blocks (slots are shown "
                                        f"blind until the job ends)")
    return Comparison(comparison.suite, tuple(BLIND_LABELS[:len(comparison.slots)]), (), (), blocks, stop, False)
