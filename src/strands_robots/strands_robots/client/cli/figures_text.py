"""A status's figures as a line of text, read from the protobuf the station sent (no statistics computed here).

The station computes every figure (``station/summary.py``) and sends them in ``JobStatus.summary``
(``pb.JobFigures``); the client command line prints them with these functions, which need neither numpy nor scipy
so the client installs with its wheels alone. The text is the station's own ``JobSummary.text()`` word for word
(a test holds the two together)::

    success 3/5 = 60 % [23 %, 88 %] Wilson 95 %; mean score 0.47 [0.20, 0.73] bootstrap; coverage 5/8 scored (...)
"""

from __future__ import annotations

from typing import Any

__all__ = ["rate_text", "score_text", "coverage_text", "figures_text", "METHOD_LABELS", "COVERAGE_BUCKETS"]

#: A person's name for each interval method the station uses (``pb.Rate.method``).
METHOD_LABELS = {"wilson": "Wilson", "clopper-pearson": "Clopper-Pearson"}
#: The coverage buckets in the order the station names them (``stats.coverage.Disposition``).
COVERAGE_BUCKETS = ("scored", "faulted", "safety_stopped", "discarded", "taken_over", "unscored", "interrupted")


def rate_text(rate: Any) -> str:
    """Return ``3/5 = 60 % [23 %, 88 %] Wilson 95 %``, or ``0/0 (no outcomes)``.

    :param rate: a ``pb.Rate``.
    """
    if not rate.HasField("rate"):
        return f"{rate.successes}/{rate.trials} (no outcomes)"
    label = METHOD_LABELS.get(rate.method, rate.method)
    return (f"{rate.successes}/{rate.trials} = {rate.rate * 100:.0f} % [{rate.low * 100:.0f} %, "
            f"{rate.high * 100:.0f} %] {label} {rate.confidence * 100:g} %")


def score_text(score: Any) -> str:
    """Return ``0.47 [0.20, 0.73] bootstrap``, ``1.00 (<why no interval>)`` or ``n/a (no scores)``.

    :param score: a ``pb.MeanScore``.
    """
    if not score.HasField("mean"):
        return "n/a (no scores)"
    if not score.HasField("low"):
        return f"{score.mean:.2f} ({score.note})"
    tail = " (fewer than 10 scores: likely too narrow)" if score.n < 10 else ""
    return f"{score.mean:.2f} [{score.low:.2f}, {score.high:.2f}] bootstrap{tail}"


def coverage_text(coverage: Any) -> str:
    """Return ``5/8 scored (2 taken over, 1 unscored)``: outcomes of attempted, every other bucket named.

    :param coverage: a ``pb.Coverage``.
    """
    counts = {name: int(getattr(coverage, name)) for name in COVERAGE_BUCKETS}
    others = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in counts.items() if name != "scored" and n)
    return f"{counts['scored']}/{sum(counts.values())} scored" + (f" ({others})" if others else "")


def figures_text(figures: Any) -> str:
    """Return one line: the success rate, the mean score and the coverage of a ``pb.JobFigures`` or ``TaskFigures``."""
    return f"success {rate_text(figures.success)}; mean score {score_text(figures.score)}; " \
           f"coverage {coverage_text(figures.coverage)}"
