"""A comparison job's result as lines of text, read from the protobuf the station sent (nothing computed here).

The station computes every figure (``station/comparison.py``) and sends them in ``JobStatus.comparison``; the
client prints them with :func:`comparison_lines` (no numpy, no scipy: the client installs with its wheels alone)::

    comparison of vision and blind on suite demo: 7 complete blocks
      vision  7/7 = 100 % [65 %, 100 %] Wilson 95 %
      blind   0/7 = 0 % [0 %, 35 %] Wilson 95 %
      vision - blind: +100 % [+50 %, +100 %] Newcombe 95 %; exact McNemar p = 0.016; 7 blocks detect 88 % (80 % power)
      verdict a_better (stopped at block 7 of at most 12, alpha 0.05): vision is better than blind (e-value 26.8, ...)
      block order: b_0000 blind, vision; b_0001 vision, blind; ...
"""

from __future__ import annotations

from typing import Any, List

from strands_robots.client.cli.figures_text import rate_text

__all__ = ["comparison_lines", "ORDER_SHOWN"]

#: Blocks whose order is listed in full; the rest are counted.
ORDER_SHOWN = 12


def _percent(x: float, signed: bool = False) -> str:
    return f"{x * 100:+.0f} %" if signed else f"{x * 100:.0f} %"


def _short(name: str) -> str:
    """Return a method's name without its explanation: ``Newcombe (1998) method 10: ...`` -> ``Newcombe``."""
    return name.split(" (", 1)[0].split(":", 1)[0].strip()


def _pair_line(pair: Any) -> str:
    if not pair.HasField("difference"):
        return f"{pair.a} - {pair.b}: no complete blocks" + (f" ({pair.note})" if pair.note else "")
    text = f"{pair.a} - {pair.b}: {_percent(pair.difference, True)}"
    if pair.HasField("low"):
        text += (f" [{_percent(pair.low, True)}, {_percent(pair.high, True)}] {_short(pair.interval_method)} "
                 f"{pair.confidence * 100:g} %")
    if pair.HasField("p_value"):
        text += f"; {_short(pair.test) or 'exact paired test'} p = {pair.p_value:.2g}"
    if pair.HasField("detectable_difference"):
        blocks = pair.both + pair.only_a + pair.only_b + pair.neither
        text += f"; {blocks} blocks detect {_percent(pair.detectable_difference)} (80 % power)"
    return text


def _stop_line(stop: Any) -> str:
    if stop.HasField("stopped_at_block"):
        where = f"stopped at block {stop.stopped_at_block} of at most {stop.max_blocks}"
    else:
        where = f"running, at most {stop.max_blocks} blocks"
    return f"verdict {stop.verdict} ({where}, alpha {stop.alpha:g}): {stop.text or stop.verdict}"


def comparison_lines(status: Any) -> List[str]:
    """Return the comparison's lines (empty when the status carries none).

    Each slot's rate with its interval, every pair's paired difference, the stop rule's verdict and the block where
    it stopped, the blocks' order.

    While the job runs the station sends the blind labels in place of the slots' names; they are printed as sent.

    :param status: a ``pb.JobStatus``.
    """
    if not status.HasField("comparison"):
        return []
    comparison = status.comparison
    slots = list(comparison.slots)
    lines = [f"comparison of {' and '.join(slots)}" + (f" on suite {comparison.suite}" if comparison.suite else "")
             + f": {len(comparison.blocks)} complete blocks"]
    width = max((len(f.slot) for f in comparison.figures), default=0)
    lines += [f"  {f.slot.ljust(width)}  {rate_text(f.success)}" for f in comparison.figures]
    lines += [f"  {_pair_line(pair)}" for pair in comparison.pairs]
    if comparison.HasField("stop"):
        lines.append(f"  {_stop_line(comparison.stop)}")
    if comparison.blocks:
        shown = "; ".join(f"{b.block_id} {', '.join(o.slot for o in b.outcomes)}"
                          for b in comparison.blocks[:ORDER_SHOWN])
        more = len(comparison.blocks) - ORDER_SHOWN
        lines.append(f"  block order: {shown}" + (f"; {more} more" if more > 0 else ""))
    return lines
