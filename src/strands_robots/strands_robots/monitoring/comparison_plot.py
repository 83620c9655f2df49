"""The report's comparison figure (``<stem>_comparison.png``): each policy's rate with its interval, the difference.

Drawn from the comparison the recorded ``JobStatus`` carries (``strands_robots_msgs/Comparison``, read back as plain
data), turned into the wire's ``pb.Comparison`` and read through the same view as ``job status`` and the web page
(:mod:`strands_robots.client.comparison_view`), so the three show the same numbers.

Left: each policy's success rate over the complete blocks with its interval as an error bar. Right: each pair's
difference with its paired (Newcombe) interval against zero, the exact test's p and the difference these blocks
could detect. The title says the stop rule's test, e-value, the block it stopped at and the verdict. While the
labels are blind (the job had not ended when recorded) no slot is named: the figure says how many blocks are
complete and where the stop rule stands, nothing else.

Every artist the tests look for carries a ``gid`` (``slot_rate:<slot>``, ``slot_interval:<slot>``,
``difference:<a>-<b>``, ``difference_interval:<a>-<b>``).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = ["comparison_from_recorded", "comparison_figure"]

_OPTIONAL = {"Rate": ("rate", "low", "high"), "MeanScore": ("mean", "low", "high"),
             "PairDifference": ("difference", "low", "high", "p_value", "detectable_difference"),
             "SequentialStop": ("stopped_at_block",)}


def _fill(target: Any, data: Mapping[str, Any], kind: str) -> None:
    optional = _OPTIONAL.get(kind, ())
    for name, value in data.items():
        if name in optional:
            if value is not None and len(value):
                setattr(target, name, value[0])
        elif not isinstance(value, (dict, list)):
            setattr(target, name, value)


def comparison_from_recorded(data: Optional[Mapping[str, Any]]) -> Optional[Any]:
    """Return the ``pb.Comparison`` of a recorded ``JobStatus`` (plain data); None when it carries none."""
    recorded = (data or {}).get("comparison") or []
    if not recorded:
        return None
    from strands_robots.wire.proto import evaluation_pb2 as pb

    c = recorded[0]
    msg = pb.Comparison(suite=c.get("suite", ""), slots=list(c.get("slots", [])),
                        labels_revealed=bool(c.get("labels_revealed", False)))
    for f in c.get("figures", []):
        slot = msg.figures.add(slot=f.get("slot", ""))
        _fill(slot.success, f.get("success", {}), "Rate")
        _fill(slot.score, f.get("score", {}), "MeanScore")
    for p in c.get("pairs", []):
        _fill(msg.pairs.add(), p, "PairDifference")
    for b in c.get("blocks", []):
        block = msg.blocks.add(block_id=b.get("block_id", ""), task_id=b.get("task_id", ""), seed=int(b.get("seed", 0)))
        for o in b.get("outcomes", []):
            block.outcomes.add(slot=o.get("slot", ""), success=bool(o.get("success")),
                               episode_id=o.get("episode_id", ""), blind_label=o.get("blind_label", ""))
    for s in c.get("stop", [])[:1]:
        _fill(msg.stop, s, "SequentialStop")
    return msg


def _stop_title(view: Any) -> str:
    stop = view.stop
    if stop is None:
        return "no stop rule asked"
    where = f"stopped at block {stop.stopped_at_block}" if stop.stopped_at_block is not None else "running"
    return (f"stop rule (alpha {stop.alpha:g}, at most {stop.max_blocks} blocks): e-value {stop.e_value:.3g} "
            f"(separates at {stop.threshold:g}), {where}, verdict {stop.verdict}")


def comparison_figure(msg: Any) -> Any:
    """Draw a ``pb.Comparison`` (a matplotlib ``Figure``; no pyplot state)."""
    from matplotlib.figure import Figure

    from strands_robots.client.comparison_view import comparison_view

    view = comparison_view(msg)
    head = f"comparison on suite {view.suite or '(none)'}: {view.slot_count} policies, {view.block_count} blocks"
    if not view.revealed:
        fig = Figure(figsize=(8, 2.5), layout="constrained")
        ax = fig.subplots()
        ax.axis("off")
        ax.text(0.5, 0.5, "labels blind: per-policy figures are shown when the job ends", ha="center",
                va="center", fontsize=10)
        fig.suptitle(f"{head}\n{_stop_title(view)}", fontsize=9)
        return fig
    fig = Figure(figsize=(max(8.0, 1.6 * len(view.figures) + 6), 4.8), layout="constrained")
    rates, diffs = fig.subplots(1, 2, width_ratios=[max(1, len(view.figures)), max(1, len(view.pairs)) + 1])
    for n, row in enumerate(view.figures):
        if row.rate is None:
            rates.text(n, 0.02, "n/a", ha="center", fontsize=8)
            continue
        rates.bar(n, row.rate, 0.6, color=f"C{n % 10}", alpha=0.7, gid=f"slot_rate:{row.slot}")
        if row.low is not None and row.high is not None:
            rates.errorbar(n, row.rate, yerr=[[row.rate - row.low], [row.high - row.rate]], fmt="none",
                           ecolor="black", capsize=5, gid=f"slot_interval:{row.slot}")
        rates.text(n, 1.03, row.success.split(" = ")[0], ha="center", fontsize=8)
    rates.set_xticks(range(len(view.figures)), [r.slot for r in view.figures], fontsize=9)
    rates.set_ylim(0, 1.12)
    rates.set_ylabel("success rate over the complete blocks")
    first = msg.figures[0].success if msg.figures else None
    level = f"{first.confidence * 100:g} % {first.method}" if first is not None and first.method else "95 %"
    rates.set_title(f"error bars: {level} interval", fontsize=8)
    diffs.axhline(0.0, color="gray", linewidth=0.8)
    for n, pair in enumerate(view.pairs):
        name = f"{pair.a}-{pair.b}"
        if pair.value is None:
            diffs.text(n, 0.02, "n/a", ha="center", fontsize=8)
            continue
        diffs.plot([n], [pair.value], marker="o", color="C3", gid=f"difference:{name}")
        if pair.low is not None and pair.high is not None:
            diffs.errorbar(n, pair.value, yerr=[[pair.value - pair.low], [pair.high - pair.value]], fmt="none",
                           ecolor="black", capsize=5, gid=f"difference_interval:{name}")
        diffs.text(n + 0.08, pair.value, f"{pair.p_value}\ndetectable {pair.detectable}", fontsize=7, va="center")
    diffs.set_xticks(range(len(view.pairs)), [f"{p.a} − {p.b}" for p in view.pairs], fontsize=9)
    diffs.set_xlim(-0.5, len(view.pairs) + 0.5)
    diffs.set_ylim(-1.05, 1.05)
    diffs.set_ylabel("difference in success rate (paired)")
    diffs.set_title("error bars: Newcombe paired interval", fontsize=8)
    fig.suptitle(f"{head}\n{_stop_title(view)}" + (f"\n{view.stop.text}" if view.stop and view.stop.text else ""),
                 fontsize=9)
    return fig
