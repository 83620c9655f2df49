"""What a comparison (A/B) job's result shows: a frozen view of ``JobStatus.comparison``, and its text lines.

The station computes every number (``stats.paired``, ``stats.sequential``); this module only reads the
``pb.Comparison`` it sent and says it in words, so ``job status``/``watch``, the relay's job page and the report
show the same thing. No ROS, no scipy: the Evaluation Client installed with pip can show a comparison.

Blind labels: while ``labels_revealed`` is false (the job runs), the operator must not learn which policy is
which, so nothing here names a slot: each block's outcomes are shown under the blind label the operator saw
("A", "B", shuffled per block), and the per-slot figures, the paired differences and the verdict's words (which
name the slots) are held back until the job ends. The stop rule's state (test, e-value, blocks) shows throughout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

__all__ = ["SlotRow", "PairRow", "BlockRow", "StopRow", "ComparisonView", "comparison_view", "comparison_lines",
           "percent_interval", "rate_line", "score_line", "HELD_BACK", "early_stop_text", "status_early_stop"]

#: Said where the slot-named figures would be while the labels are blind.
HELD_BACK = ("per-policy figures, paired differences and the verdict's words are shown when the job ends "
             "(the operator sees blind labels while it runs)")

_METHOD_LABELS = {"wilson": "Wilson", "clopper-pearson": "Clopper-Pearson"}


def _get(msg: Any, name: str) -> Optional[float]:
    """Return an optional field's value, None when absent."""
    return getattr(msg, name) if msg.HasField(name) else None


def percent_interval(value: Optional[float], low: Optional[float], high: Optional[float]) -> str:
    """Return a rate as ``60 % [23 %, 88 %]``; ``60 %`` without bounds; ``n/a`` without a value."""
    if value is None:
        return "n/a"
    if low is None or high is None:
        return f"{value * 100:.0f} %"
    return f"{value * 100:.0f} % [{low * 100:.0f} %, {high * 100:.0f} %]"


def rate_line(rate: Any) -> str:
    """Return a ``pb.Rate`` as ``3/5 = 60 % [23 %, 88 %] Wilson 95 %`` (``3/5 (no outcomes)`` without an interval)."""
    if not rate.HasField("rate") or not rate.HasField("low") or not rate.HasField("high"):
        return f"{rate.successes}/{rate.trials} (no outcomes)" if rate.trials == 0 else \
            f"{rate.successes}/{rate.trials} ({rate.note or 'no interval'})"
    method = _METHOD_LABELS.get(rate.method, rate.method)
    return (f"{rate.successes}/{rate.trials} = {percent_interval(rate.rate, rate.low, rate.high)} {method} "
            f"{rate.confidence * 100:g} %")


def score_line(score: Any) -> str:
    """Return a ``pb.MeanScore`` as ``0.47 [0.20, 0.73] bootstrap``, ``1.00 (note)`` or ``n/a (no scores)``."""
    if not score.HasField("mean"):
        return "n/a (no scores)"
    if not score.HasField("low") or not score.HasField("high"):
        return f"{score.mean:.2f} ({score.note})" if score.note else f"{score.mean:.2f}"
    return f"{score.mean:.2f} [{score.low:.2f}, {score.high:.2f}] bootstrap"


@dataclass(frozen=True)
class SlotRow:
    """One slot's figures over the complete blocks."""

    slot: str
    success: str            # 14/20 = 70 % [48 %, 85 %] Wilson 95 %
    rate: Optional[float]   # for a plot: the rate and its bounds (None without outcomes)
    low: Optional[float]
    high: Optional[float]
    score: str              # 0.70 [0.50, 0.85] bootstrap


@dataclass(frozen=True)
class PairRow:
    """Slot ``a`` against slot ``b`` over their paired blocks."""

    a: str
    b: str
    both: int
    only_a: int
    only_b: int
    neither: int
    difference: str         # +35 pts [+12, +52] (rate(a) - rate(b), Newcombe 95 %)
    value: Optional[float]  # for a plot: the difference and its bounds
    low: Optional[float]
    high: Optional[float]
    p_value: str            # p = 0.0039 (exact McNemar ...)
    detectable: str         # 31 pts at 80 % power
    note: str


@dataclass(frozen=True)
class BlockRow:
    """One complete block: its task and seed, and each run in the order it ran."""

    block_id: str
    task_id: str
    seed: int
    runs: Tuple[Tuple[str, bool], ...]   # (slot name, or the blind label while blind; success)


@dataclass(frozen=True)
class StopRow:
    """The stop rule the job asked for and where it stands."""

    test: str
    alpha: float
    max_blocks: int
    stop_when_out_of_reach: bool
    e_value: float
    threshold: float                 # 1 / alpha: the e-value that separates the policies
    stopped_at_block: Optional[int]  # None while it runs
    verdict: str                     # a_better | b_better | not_separated | undecided
    text: str                        # the verdict in words (names the slots: empty while blind)


@dataclass(frozen=True)
class ComparisonView:
    """A comparison job's result as every view shows it (see the module docstring for what blind hides)."""

    suite: str
    slots: Tuple[str, ...]           # the slot names; empty while blind
    slot_count: int
    revealed: bool
    figures: Tuple[SlotRow, ...]     # empty while blind
    pairs: Tuple[PairRow, ...]       # empty while blind
    blocks: Tuple[BlockRow, ...]
    stop: Optional[StopRow]

    @property
    def block_count(self) -> int:
        return len(self.blocks)


def _pair(msg: Any) -> PairRow:
    value, low, high = _get(msg, "difference"), _get(msg, "low"), _get(msg, "high")
    if value is None:
        difference = "n/a (no blocks)"
    elif low is None or high is None:
        difference = f"{value * 100:+.0f} pts (no interval)"
    else:
        difference = (f"{value * 100:+.0f} pts [{low * 100:+.0f}, {high * 100:+.0f}] "
                      f"{'Newcombe' if 'Newcombe' in msg.interval_method else msg.interval_method} "
                      f"{msg.confidence * 100:g} %")
    p = _get(msg, "p_value")
    p_text = "n/a" if p is None else f"p = {p:.3g} ({msg.test.split(' (')[0] or 'paired test'})"
    detectable = _get(msg, "detectable_difference")
    detect_text = "none at 80 % power" if detectable is None else f"{detectable * 100:.0f} pts at 80 % power"
    return PairRow(a=msg.a, b=msg.b, both=msg.both, only_a=msg.only_a, only_b=msg.only_b, neither=msg.neither,
                   difference=difference, value=value, low=low, high=high, p_value=p_text, detectable=detect_text,
                   note=msg.note)


def comparison_view(msg: Any) -> ComparisonView:
    """Return the view of a ``pb.Comparison`` (``JobStatus.comparison``)."""
    revealed = bool(msg.labels_revealed)
    blocks = tuple(BlockRow(block_id=b.block_id, task_id=b.task_id, seed=int(b.seed),
                            runs=tuple(((o.slot if revealed else (o.blind_label or "?")), bool(o.success))
                                       for o in b.outcomes))
                   for b in msg.blocks)
    stop = None
    if msg.HasField("stop"):
        s = msg.stop
        stop = StopRow(test=s.test, alpha=float(s.alpha), max_blocks=int(s.max_blocks),
                       stop_when_out_of_reach=bool(s.stop_when_out_of_reach), e_value=float(s.e_value),
                       threshold=(1.0 / s.alpha) if s.alpha > 0 else float("inf"),
                       stopped_at_block=_get(s, "stopped_at_block"), verdict=s.verdict or "undecided",
                       text=s.text if revealed else "")
    figures: Tuple[SlotRow, ...] = ()
    pairs: Tuple[PairRow, ...] = ()
    if revealed:
        figures = tuple(SlotRow(slot=f.slot, success=rate_line(f.success), rate=_get(f.success, "rate"),
                                low=_get(f.success, "low"), high=_get(f.success, "high"), score=score_line(f.score))
                        for f in msg.figures)
        pairs = tuple(_pair(p) for p in msg.pairs)
    return ComparisonView(suite=msg.suite, slots=tuple(msg.slots) if revealed else (), slot_count=len(msg.slots),
                          revealed=revealed, figures=figures, pairs=pairs, blocks=blocks, stop=stop)


def early_stop_text(episodes: int, episodes_total: int, stop: Optional[StopRow]) -> str:
    """Return a comparison's progress once its stop rule ended it before every episode it could run.

    ``14 episodes, stopped at block 7 of 12: a_better``: the job asked for up to ``episodes_total`` episodes, but
    "14/24" would read as a job cut short. Empty when the job has no stop rule, has not stopped, or ran every
    episode (then ``done/total`` says it).
    """
    if stop is None or stop.stopped_at_block is None or episodes >= episodes_total:
        return ""
    return (f"{episodes} episode{'s' if episodes != 1 else ''}, stopped at block {stop.stopped_at_block} of "
            f"{stop.max_blocks}: {stop.verdict}")


def status_early_stop(status: Any) -> str:
    """Return :func:`early_stop_text` of a ``pb.JobStatus`` (empty for a job of one policy)."""
    if not status.HasField("comparison") or not status.comparison.HasField("stop"):
        return ""
    return early_stop_text(len(status.episodes), int(status.episodes_total),
                           comparison_view(status.comparison).stop)


def _stop_lines(stop: StopRow) -> List[str]:
    where = (f"stopped at block {stop.stopped_at_block}" if stop.stopped_at_block is not None
             else "running")
    reach = ", or once out of reach" if stop.stop_when_out_of_reach else ""
    lines = [f"stop rule: separated at alpha {stop.alpha:g} within {stop.max_blocks} blocks{reach}; {where}",
             f"  test {stop.test}",
             f"  e-value {stop.e_value:.3g} (separates at {stop.threshold:g}); verdict {stop.verdict}"]
    if stop.text:
        lines.append(f"  {stop.text}")
    return lines


def comparison_lines(msg: Any, *, blocks_shown: int = 40) -> List[str]:
    """Return a ``pb.Comparison`` as the CLI prints it: slots, per-slot figures, pairs, the stop rule, blocks.

    :param blocks_shown: the most recent blocks listed one per line (the rest are counted).
    """
    view = comparison_view(msg)
    head = (f"comparison on suite {view.suite or '(none)'}: {view.slot_count} policies, {view.block_count} "
            f"complete blocks")
    lines = [head + (f" ({', '.join(view.slots)})" if view.revealed else " (labels blind until the job ends)")]
    if view.revealed:
        width = max([len(r.slot) for r in view.figures] + [4])
        lines += [f"  {r.slot:<{width}}  success {r.success}; mean score {r.score}" for r in view.figures]
        for p in view.pairs:
            lines.append(f"  {p.a} - {p.b}: {p.difference}; {p.p_value}; detectable {p.detectable}")
            lines.append(f"    paired blocks: both {p.both}, only {p.a} {p.only_a}, only {p.b} {p.only_b}, "
                         f"neither {p.neither}" + (f" ({p.note})" if p.note else ""))
    else:
        lines.append(f"  {HELD_BACK}")
    if view.stop is not None:
        lines += ["  " + line for line in _stop_lines(view.stop)]
    if view.blocks:
        lines.append("  blocks (task, seed, the order they ran: success + / failure -):")
        hidden = max(0, view.block_count - blocks_shown)
        if hidden:
            lines.append(f"    ... {hidden} earlier blocks")
        for b in view.blocks[hidden:]:
            runs = " ".join(f"{label}{'+' if ok else '-'}" for label, ok in b.runs)
            lines.append(f"    {b.block_id}  {b.task_id}  seed {b.seed}  {runs}")
    return lines
