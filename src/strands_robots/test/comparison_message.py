"""A ``pb.Comparison`` built from paired blocks through the real statistics, for the tests that show one.

Every number in the message comes from ``stats``: each slot's rate and interval (``proportion_interval``), the
paired table, Newcombe's difference, the exact test and the detectable difference (``compare_paired``), and the
stop rule's state after each block in turn (``PairedSequentialTest``); the message is filled through
``wire.pb_model``'s conversions. The tests then read what the views made of those numbers.
"""

from __future__ import annotations

import random
from typing import Optional, Sequence, Tuple

from strands_robots.stats.blocks import PairedBlock
from strands_robots.stats.paired import compare_paired
from strands_robots.stats.mean_score import mean_score_interval
from strands_robots.stats.sequential import PairedSequentialTest, StopRule
from strands_robots.wire.pb_model import mean_score_to_pb, rate_to_pb
from strands_robots.wire.proto import evaluation_pb2 as pb


def seeded_outcomes(p_a: float, p_b: float, blocks: int, seed: int) -> Tuple[Tuple[bool, bool], ...]:
    """Return ``blocks`` pairs of outcomes of two policies succeeding independently with ``p_a`` and ``p_b``."""
    rng = random.Random(seed)
    return tuple((rng.random() < p_a, rng.random() < p_b) for _ in range(blocks))


def comparison_message(outcomes: Sequence[Tuple[bool, bool]], *, slots: Tuple[str, str] = ("vision", "blind"),
                       revealed: bool = True, rule: Optional[StopRule] = None, suite: str = "demo",
                       tasks: Sequence[str] = ("reach_cube",), seed: int = 5) -> pb.Comparison:
    """Return the comparison of ``slots`` over ``outcomes`` (``(a_success, b_success)`` per block), as sent.

    With a ``rule`` the blocks stop where the rule stops them (the later outcomes are not run).
    """
    rng = random.Random(seed)
    test = PairedSequentialTest(rule) if rule is not None else None
    kept = []
    for a_ok, b_ok in outcomes:
        kept.append(PairedBlock(a_ok, b_ok, f"b_{len(kept):04d}"))
        if test is not None:
            test = test.after(kept[-1])
            if test.decided:
                break
    result = compare_paired(kept)
    a, b = slots
    msg = pb.Comparison(suite=suite, slots=list(slots), labels_revealed=revealed)
    for slot, rate, successes in ((a, result.a, [x.a_success for x in kept]),
                                  (b, result.b, [x.b_success for x in kept])):
        score = mean_score_interval([1.0 if s else 0.0 for s in successes], n_resamples=999, seed=0)
        msg.figures.add(slot=slot, success=rate_to_pb(rate), score=mean_score_to_pb(score))
    pair = msg.pairs.add(a=a, b=b, both=result.table.both_succeeded, only_a=result.table.only_a,
                         only_b=result.table.only_b, neither=result.table.both_failed,
                         confidence=result.difference.confidence, interval_method=result.difference.method,
                         test=result.test.test, note=result.difference.note)
    for name, value in (("difference", result.difference.difference), ("low", result.difference.low),
                        ("high", result.difference.high), ("p_value", result.test.p_value),
                        ("detectable_difference", result.detectable.difference)):
        if value is not None:
            setattr(pair, name, float(value))
    for n, block in enumerate(kept):
        order = [(a, block.a_success), (b, block.b_success)]
        rng.shuffle(order)
        labels = ["A", "B"]
        rng.shuffle(labels)
        done = msg.blocks.add(block_id=block.block_id, task_id=tasks[n % len(tasks)], seed=100 + n)
        for (slot, ok), label in zip(order, labels):
            done.outcomes.add(slot=slot, success=ok, episode_id=f"ep_{2 * n + len(done.outcomes):04d}",
                              blind_label=label)
    if test is not None:
        stop = msg.stop
        stop.test, stop.alpha, stop.max_blocks = test.test, test.rule.alpha, test.rule.max_blocks
        stop.stop_when_out_of_reach = test.rule.stop_when_out_of_reach
        stop.e_value, stop.verdict = test.e_value, test.verdict.value
        stop.text = test.text().replace("A won", f"{a} won").replace("B won", f"{b} won")
        if test.stopped_at is not None:
            stop.stopped_at_block = test.stopped_at
    return msg
