"""A success rate with its interval: ``k`` of ``n`` with a 95 % Wilson interval, Clopper-Pearson on request.

The bounds come from statsmodels (``statsmodels.stats.proportion.proportion_confint``: ``"wilson"``, and
``"beta"`` for Clopper-Pearson). Wilson's score interval is the default because its coverage stays near the
nominal level for the small ``n`` of robot evaluations (for ``n`` = 10 to 50 its exact coverage at 95 % lies
in about 92-98 %); Clopper-Pearson is the conservative choice (coverage never below nominal, wider).

Edge cases, each stated rather than guessed:

- ``k = 0`` or ``k = n``: a proper interval with a bound at 0 or 1 (0 of 10 is not "0 %, certain").
- ``n = 0``: no rate and no interval (``rate``, ``low`` and ``high`` are ``None``; ``note`` says why).

statsmodels is imported when a bound is first computed, not when this module is: the result type is needed by
code (the relay, the client) that never computes one, and statsmodels brings pandas.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from strands_robots.stats import arguments

NO_TRIALS_NOTE = "no trials: no rate and no interval"


class IntervalMethod(str, Enum):
    """How a proportion's interval is computed; the value is the name a job, the CLI or a report uses."""

    WILSON = "wilson"
    CLOPPER_PEARSON = "clopper-pearson"

    @property
    def statsmodels_name(self) -> str:
        """The ``method`` argument of ``statsmodels.stats.proportion.proportion_confint``."""
        return {IntervalMethod.WILSON: "wilson", IntervalMethod.CLOPPER_PEARSON: "beta"}[self]

    @property
    def label(self) -> str:
        """A person's name for the method (``Wilson``, ``Clopper-Pearson``)."""
        return {IntervalMethod.WILSON: "Wilson", IntervalMethod.CLOPPER_PEARSON: "Clopper-Pearson"}[self]


@dataclass(frozen=True)
class Proportion:
    """``successes`` of ``trials``, the rate and its two-sided interval at ``confidence``.

    :param successes: ``k``, the number of successes (``0 <= k <= n``).
    :param trials: ``n``, the number of trials.
    :param rate: ``k / n``; ``None`` when ``n = 0``.
    :param low: the interval's lower bound in [0, 1]; ``None`` when ``n = 0``.
    :param high: the interval's upper bound in [0, 1]; ``None`` when ``n = 0``.
    :param confidence: the interval's level, e.g. 0.95.
    :param method: how the interval was computed.
    :param note: why a field is ``None`` (empty when every field is set).
    """

    successes: int
    trials: int
    rate: Optional[float]
    low: Optional[float]
    high: Optional[float]
    confidence: float
    method: IntervalMethod
    note: str = ""

    def __post_init__(self) -> None:
        k, n = arguments.successes_of(self.successes, self.trials)
        arguments.open_unit(self.confidence, "confidence")
        if (n == 0) != (self.rate is None) or (self.low is None) != (self.rate is None) \
                or (self.high is None) != (self.rate is None):
            raise ValueError("rate, low and high are None exactly when trials is 0")
        if self.rate is not None and not (0.0 <= self.low <= self.rate <= self.high <= 1.0):  # type: ignore[operator]
            raise ValueError(f"need 0 <= low <= rate <= high <= 1, got {self.low}, {self.rate}, {self.high}")

    @property
    def has_interval(self) -> bool:
        """True when there is a rate and an interval (``trials > 0``)."""
        return self.rate is not None

    def text(self) -> str:
        """One line for a person: ``3/5 = 60 % (95 % Wilson 23-88 %)``, or ``0/0: no trials ...``."""
        if self.rate is None:
            return f"{self.successes}/{self.trials}: {self.note}"
        level = f"{self.confidence * 100:g} %"
        return (f"{self.successes}/{self.trials} = {self.rate * 100:.0f} % "
                f"({level} {self.method.label} {self.low * 100:.0f}-{self.high * 100:.0f} %)")  # type: ignore[operator]


MethodArg = Union[IntervalMethod, str]


def proportion_interval(successes: int, trials: int, *, confidence: float = 0.95,
                        method: MethodArg = IntervalMethod.WILSON) -> Proportion:
    """Return ``successes`` of ``trials`` with its interval.

    :param successes: ``k >= 0``.
    :param trials: ``n >= k``; 0 gives a :class:`Proportion` with no rate and no interval.
    :param confidence: the two-sided level in (0, 1).
    :param method: ``"wilson"`` (default) or ``"clopper-pearson"``.
    :raises ValueError: a negative count, ``k > n``, a level outside (0, 1) or an unknown method.
    """
    return proportion_intervals([successes], [trials], confidence=confidence, method=method)[0]


def proportion_intervals(successes: Sequence[int], trials: Union[int, Sequence[int]], *, confidence: float = 0.95,
                         method: MethodArg = IntervalMethod.WILSON) -> Tuple[Proportion, ...]:
    """Return one :class:`Proportion` per ``(successes[i], trials[i])``, computed in one statsmodels call.

    For a table of tasks, or a simulation of many jobs: the same bounds as :func:`proportion_interval`, each.

    :param successes: the ``k`` of each proportion.
    :param trials: the ``n`` of each proportion, or one ``n`` for all.
    :param confidence: the two-sided level in (0, 1).
    :param method: ``"wilson"`` (default) or ``"clopper-pearson"``.
    :raises ValueError: as :func:`proportion_interval`, or ``trials`` of another length than ``successes``.
    """
    chosen = arguments.choice(IntervalMethod, method, "interval method")
    level = arguments.open_unit(confidence, "confidence")
    ks = list(successes)
    ns = [trials] * len(ks) if not isinstance(trials, Sequence) and not isinstance(trials, np.ndarray) \
        else list(trials)
    if len(ns) != len(ks):
        raise ValueError(f"successes and trials differ in length ({len(ks)} and {len(ns)})")
    pairs = [arguments.successes_of(k, n) for k, n in zip(ks, ns)]
    if not pairs:
        return ()
    k_arr = np.array([k for k, _ in pairs], dtype=np.int64)
    n_arr = np.array([n for _, n in pairs], dtype=np.int64)
    has = n_arr > 0
    low = np.full(len(pairs), np.nan)
    high = np.full(len(pairs), np.nan)
    if has.any():
        from statsmodels.stats.proportion import proportion_confint

        lo, hi = proportion_confint(k_arr[has], n_arr[has], alpha=1.0 - level, method=chosen.statsmodels_name)
        # Clip to the rate: the bounds are exact at k = 0 and k = n but may land an ulp on the wrong side.
        rate = k_arr[has] / n_arr[has]
        low[has] = np.minimum(np.clip(np.asarray(lo, dtype=float), 0.0, 1.0), rate)
        high[has] = np.maximum(np.clip(np.asarray(hi, dtype=float), 0.0, 1.0), rate)
    out = []
    for i, (k, n) in enumerate(pairs):
        if n == 0:
            out.append(Proportion(k, n, None, None, None, level, chosen, NO_TRIALS_NOTE))
        else:
            out.append(Proportion(k, n, k / n, float(low[i]), float(high[i]), level, chosen))
    return tuple(out)
