"""A mean score with a seeded bootstrap interval (``scipy.stats.bootstrap``).

Scores (a score sheet's ``sum(points) / sum(max_points)``) are bounded and often skewed or lumpy (many 0s and
1s), so the interval is a bootstrap one, BCa by default: it corrects the percentile interval for bias and skew
(second-order accurate). The percentile interval is there on request. Below about ten scores every bootstrap
interval is too narrow (seeded simulation, bench/decision_bench.py: at a nominal 95 %, about 73 % coverage
with 3 scores, 87 % with 5, 89 % with 10, 93 % with 20), so ``note`` says so for a small ``n``.

The bootstrap is seeded and sees the scores sorted, so the same scores, in any order, give the same interval
every time (a status, a report and a re-run of the report agree).

Edge cases, each stated:

- no scores: no mean and no interval;
- one score: the mean, no interval (nothing to resample);
- every score equal: the mean, no interval (every resample has the same mean; a zero-width interval would
  claim a certainty the data cannot give);
- BCa undefined (its jackknife is degenerate for some lumpy samples): the percentile interval, and the
  method says so.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Optional, Union

import numpy as np

from strands_robots.stats import arguments

#: Below this many scores the note warns that bootstrap intervals are too narrow.
SMALL_SAMPLE = 10
NO_SCORES_NOTE = "no scores: no mean and no interval"
ONE_SCORE_NOTE = "one score: no interval (nothing to resample)"
CONSTANT_NOTE = "every score is the same: no interval (resampling cannot vary the mean)"
SMALL_SAMPLE_NOTE = f"fewer than {SMALL_SAMPLE} scores: a bootstrap interval is likely too narrow"
BCA_FALLBACK_NOTE = "BCa undefined for these scores (degenerate jackknife): percentile interval"


class BootstrapMethod(str, Enum):
    """The bootstrap interval's kind; the value is scipy's ``method`` name, lower-cased."""

    BCA = "bca"
    PERCENTILE = "percentile"

    @property
    def scipy_name(self) -> str:
        return {BootstrapMethod.BCA: "BCa", BootstrapMethod.PERCENTILE: "percentile"}[self]


@dataclass(frozen=True)
class MeanScore:
    """The mean of ``n`` scores and its bootstrap interval at ``confidence``.

    :param n: how many scores.
    :param mean: their mean; ``None`` when ``n = 0``.
    :param low: the interval's lower bound; ``None`` when there is no interval (see ``note``).
    :param high: the interval's upper bound; ``None`` when there is no interval.
    :param confidence: the two-sided level, e.g. 0.95.
    :param method: the bootstrap interval actually computed (``None`` when there is no interval).
    :param n_resamples: the bootstrap's resample count.
    :param seed: the seed of the bootstrap's generator.
    :param note: why there is no interval, or what to keep in mind reading it (empty when nothing).
    """

    n: int
    mean: Optional[float]
    low: Optional[float]
    high: Optional[float]
    confidence: float
    method: Optional[BootstrapMethod]
    n_resamples: int
    seed: int
    note: str = ""

    @property
    def has_interval(self) -> bool:
        """True when ``low`` and ``high`` are set."""
        return self.low is not None

    def text(self) -> str:
        """One line for a person: ``mean 0.47 (95 % BCa bootstrap 0.31-0.62, n=12)`` or the reason for none."""
        if self.mean is None:
            return self.note
        if self.low is None:
            return f"mean {self.mean:.2f} (n={self.n}; {self.note})"
        label = "BCa" if self.method is BootstrapMethod.BCA else "percentile"
        tail = f"; {self.note}" if self.note else ""
        return (f"mean {self.mean:.2f} ({self.confidence * 100:g} % {label} bootstrap "
                f"{self.low:.2f}-{self.high:.2f}, n={self.n}{tail})")


def mean_score_interval(scores: Iterable[float], *, confidence: float = 0.95,
                        method: Union[BootstrapMethod, str] = BootstrapMethod.BCA, n_resamples: int = 9999,
                        seed: int = 0) -> MeanScore:
    """Return the mean of ``scores`` with a seeded bootstrap interval.

    :param scores: finite numbers (one per scored episode).
    :param confidence: the two-sided level in (0, 1).
    :param method: ``"bca"`` (default) or ``"percentile"``.
    :param n_resamples: bootstrap resamples (>= 100).
    :param seed: the seed of the resampling generator; the same seed and scores give the same interval.
    :raises ValueError: a non-finite score, a level outside (0, 1), an unknown method, too few resamples.
    """
    chosen = arguments.choice(BootstrapMethod, method, "bootstrap method")
    level = arguments.open_unit(confidence, "confidence")
    resamples = arguments.positive_int(n_resamples, "n_resamples")
    if resamples < 100:
        raise ValueError(f"n_resamples must be >= 100 for a usable interval, got {resamples}")
    seed = arguments.count(seed, "seed")
    try:
        values = np.sort(np.asarray(list(scores), dtype=float))
    except (TypeError, ValueError):
        raise TypeError("scores must be numbers") from None
    if values.ndim != 1:
        raise ValueError("scores must be a flat sequence of numbers")
    if not np.all(np.isfinite(values)):
        raise ValueError("every score must be finite (a NaN or infinite score is a scoring fault, not a score)")
    n = int(values.size)

    def without_interval(mean: Optional[float], note: str) -> MeanScore:
        return MeanScore(n, mean, None, None, level, None, resamples, seed, note)

    if n == 0:
        return without_interval(None, NO_SCORES_NOTE)
    mean = float(values.mean())
    if n == 1:
        return without_interval(mean, ONE_SCORE_NOTE)
    if values[0] == values[-1]:
        return without_interval(mean, CONSTANT_NOTE)
    low, high = _bootstrap(values, level, chosen, resamples, seed)
    used, notes = chosen, []
    if not (math.isfinite(low) and math.isfinite(high)):
        used = BootstrapMethod.PERCENTILE
        low, high = _bootstrap(values, level, used, resamples, seed)
        notes.append(BCA_FALLBACK_NOTE)
    if n < SMALL_SAMPLE:
        notes.append(SMALL_SAMPLE_NOTE)
    # The interval of a mean lies within the scores' range; clip the last ulp of BCa's interpolation.
    low, high = max(low, float(values[0])), min(high, float(values[-1]))
    return MeanScore(n, mean, min(low, mean), max(high, mean), level, used, resamples, seed, "; ".join(notes))


def _bootstrap(values: np.ndarray, level: float, method: BootstrapMethod, resamples: int, seed: int) -> tuple:
    from scipy.stats import bootstrap

    with warnings.catch_warnings():
        # A degenerate BCa comes back as NaN bounds with a warning; the caller falls back and says so.
        warnings.simplefilter("ignore")
        result = bootstrap((values,), np.mean, confidence_level=level, n_resamples=resamples,
                           method=method.scipy_name, vectorized=True, rng=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)
