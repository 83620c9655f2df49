"""A ranking of policies from a suite's paired outcomes: Bradley-Terry, with an interval on every strength.

Every block (one task and seed, each of its policies once) gives, for each pair of its policies, a win to the
one that succeeded where the other failed; concordant pairs are ties and carry no evidence. Bradley-Terry
models the chance that ``i`` wins a decisive comparison with ``j`` as ``1 / (1 + exp(-(s_i - s_j)))``, with
``s`` the log-strengths. (When each policy succeeds independently with its own rate ``p``, this holds exactly
with ``s = logit(p)``: the order of the strengths is the order of the success rates.)

- **Fit**: the log-strengths maximise the log-likelihood plus a weak normal prior, ``s_i ~ N(0, prior_sd**2)``
  (``scipy.optimize.minimize``, trust-region Newton with the exact gradient and Hessian). The prior keeps every
  strength finite when a policy won (or lost) every comparison, where the plain maximum-likelihood strength is
  infinite; with a few dozen comparisons per policy it moves the strengths little. The strengths are
  identifiable only up to a common shift: they are reported with mean log-strength 0.
- **Intervals**: Wald intervals on the log-strengths. The pairs of one block share its outcomes (A's success
  is in every pair A is in), so the model's own information overstates the evidence; the variance is the
  block-clustered sandwich (``H^-1 (sum over blocks of u u^T) H^-1``, ``u`` a block's score), or the model's
  (``H^-1``, prior included) where that is larger, as it is when a policy won everything and the sandwich
  would shrink to nothing. Seeded simulation (the ranking tests) checks they cover the true strengths at
  about the nominal rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Iterable, List, Tuple

import numpy as np

from strands_robots.stats import arguments
from strands_robots.stats.blocks import Block

BRADLEY_TERRY_METHOD = ("Bradley-Terry, normal prior on log-strengths, Wald intervals from the larger of the "
                        "block-clustered sandwich and the model variance")
#: The default prior standard deviation of a log-strength: a strength ratio of e**6 (about 400) at two sd.
DEFAULT_PRIOR_SD = 3.0


@dataclass(frozen=True)
class RankedPolicy:
    """One policy's place in a ranking.

    :param policy: the policy's name.
    :param rank: 1 for the strongest (equal strengths are ordered by name).
    :param log_strength: the fitted log-strength (the policies' mean is 0).
    :param low: the interval's lower bound on the log-strength.
    :param high: the interval's upper bound on the log-strength.
    :param wins: decisive comparisons won (this policy succeeded, the other failed, same block).
    :param losses: decisive comparisons lost.
    :param ties: comparisons where both succeeded or both failed.
    :param comparisons: every pairwise comparison in a shared block: ``wins + losses + ties``.
    """

    policy: str
    rank: int
    log_strength: float
    low: float
    high: float
    wins: int
    losses: int
    ties: int
    comparisons: int

    @property
    def strength(self) -> float:
        """``exp(log_strength)``: the odds of beating a policy of mean strength in a decisive comparison."""
        return math.exp(self.log_strength)


@dataclass(frozen=True)
class Ranking:
    """Policies ordered by Bradley-Terry strength, strongest first.

    :param entries: one per policy, by rank.
    :param blocks: the blocks the fit used.
    :param confidence: the intervals' two-sided level.
    :param prior_sd: the normal prior's standard deviation on each log-strength.
    :param method: how the strengths and intervals were computed.
    :param note: what to keep in mind (policies never compared with each other), empty otherwise.
    """

    entries: Tuple[RankedPolicy, ...]
    blocks: int
    confidence: float
    prior_sd: float
    method: str = BRADLEY_TERRY_METHOD
    note: str = ""

    def entry(self, policy: str) -> RankedPolicy:
        """Return the entry of ``policy``.

        :param policy: a ranked policy's name.
        :raises KeyError: not ranked.
        """
        for entry in self.entries:
            if entry.policy == policy:
                return entry
        raise KeyError(f"policy {policy!r} is not in the ranking")

    @property
    def order(self) -> Tuple[str, ...]:
        """The policies, strongest first."""
        return tuple(entry.policy for entry in self.entries)


def bradley_terry(blocks: Iterable[Block], *, confidence: float = 0.95, prior_sd: float = DEFAULT_PRIOR_SD
                  ) -> Ranking:
    """Return the Bradley-Terry ranking of the policies in ``blocks``.

    :param blocks: complete blocks (:class:`~strands_robots.stats.blocks.Block`); a block may hold any two or
        more policies, so blocks from different comparison jobs on one suite can be pooled.
    :param confidence: the intervals' two-sided level in (0, 1).
    :param prior_sd: the prior's standard deviation on each log-strength (> 0).
    :raises TypeError: an item that is not a Block.
    :raises ValueError: a level outside (0, 1), a non-positive prior, or fewer than two policies.
    """
    level = arguments.open_unit(confidence, "confidence")
    tau = float(prior_sd)
    if not math.isfinite(tau) or tau <= 0:
        raise ValueError(f"prior_sd must be a positive number, got {prior_sd!r}")
    block_list = list(blocks)
    for block in block_list:
        if not isinstance(block, Block):
            raise TypeError(f"a ranking takes complete Blocks, got {type(block).__name__}")
    policies = sorted({policy for block in block_list for policy in block.policies})
    if len(policies) < 2:
        raise ValueError(f"a ranking needs blocks with at least two policies, got {policies}")
    index = {policy: i for i, policy in enumerate(policies)}
    k = len(policies)
    # outcome[b, i] = 1 success, 0 failure; present[b, i] = policy i ran in block b.
    outcome = np.zeros((len(block_list), k))
    present = np.zeros((len(block_list), k))
    for b, block in enumerate(block_list):
        for policy, success in block.outcomes.items():
            present[b, index[policy]] = 1.0
            outcome[b, index[policy]] = 1.0 if success else 0.0
    won = outcome * present
    lost = (1.0 - outcome) * present
    beat = np.einsum("bi,bj->bij", won, lost)  # beat[b, i, j]: i beat j in block b
    shared = np.einsum("bi,bj->bij", present, present) * (1.0 - np.eye(k))
    wins = beat.sum(axis=0)
    decisive = wins + wins.T
    strengths = _fit(wins, decisive, tau)
    model_cov, sandwich_cov = _covariances(strengths, beat, tau)
    centre = np.eye(k) - 1.0 / k
    variance = np.maximum(np.diag(centre @ model_cov @ centre.T), np.diag(centre @ sandwich_cov @ centre.T))
    from scipy.stats import norm

    half = float(norm.isf((1.0 - level) / 2.0)) * np.sqrt(variance)
    order = sorted(range(k), key=lambda i: (-strengths[i], policies[i]))
    comparisons = shared.sum(axis=0).sum(axis=1)
    entries = tuple(RankedPolicy(
        policy=policies[i], rank=rank, log_strength=float(strengths[i]), low=float(strengths[i] - half[i]),
        high=float(strengths[i] + half[i]), wins=int(wins[i].sum()), losses=int(wins[:, i].sum()),
        ties=int(comparisons[i] - wins[i].sum() - wins[:, i].sum()), comparisons=int(comparisons[i]))
        for rank, i in enumerate(order, start=1))
    return Ranking(entries, len(block_list), level, tau, note=_disconnected_note(policies, decisive))


def _fit(wins: np.ndarray, decisive: np.ndarray, tau: float) -> np.ndarray:
    """Return the posterior mode of the log-strengths (mean 0: the symmetric prior centres it)."""
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    k = wins.shape[0]

    def objective(s: np.ndarray) -> tuple:
        diff = s[:, None] - s[None, :]
        value = -float(np.sum(wins * log_expit(diff))) + float(s @ s) / (2 * tau ** 2)
        gradient = -(wins - decisive * expit(diff)).sum(axis=1) + s / tau ** 2
        return value, gradient

    # The gradient sums one term per comparison: judge convergence relative to how many there are (a stop
    # for "no predicted improvement" at that precision is the optimum reached in floating point).
    tolerance = 1e-9 * (1.0 + float(decisive.sum()))
    result = minimize(objective, np.zeros(k), jac=True, hess=lambda s: _hessian(s, decisive, tau),
                      method="trust-exact", options={"gtol": tolerance})
    if np.max(np.abs(objective(result.x)[1])) > 1e3 * tolerance:
        raise RuntimeError(f"the Bradley-Terry fit did not converge: {result.message}")
    return result.x - result.x.mean()


def _hessian(s: np.ndarray, decisive: np.ndarray, tau: float) -> np.ndarray:
    from scipy.special import expit

    p = expit(s[:, None] - s[None, :])
    v = decisive * p * (1.0 - p)
    hessian = -v
    hessian[np.diag_indices_from(hessian)] = v.sum(axis=1)
    return hessian + np.eye(len(s)) / tau ** 2


def _covariances(s: np.ndarray, beat: np.ndarray, tau: float) -> tuple:
    """Return the model covariance ``H^-1`` and the block-clustered sandwich ``H^-1 M H^-1``."""
    from scipy.special import expit

    decisive = beat.sum(axis=0) + beat.sum(axis=0).T
    inverse = np.linalg.inv(_hessian(s, decisive, tau))
    p = expit(s[:, None] - s[None, :])
    # A block's score for policy i: its wins minus each decisive comparison's expected win.
    per_block = (beat - (beat + np.transpose(beat, (0, 2, 1))) * p[None]).sum(axis=2)
    meat = per_block.T @ per_block
    return inverse, inverse @ meat @ inverse


def _disconnected_note(policies: List[str], decisive: np.ndarray) -> str:
    """Name the groups of policies no chain of decisive comparisons links (their order is the prior's)."""
    k = len(policies)
    group: Dict[int, int] = {}
    for start in range(k):
        if start in group:
            continue
        group[start] = start
        stack = [start]
        while stack:
            i = stack.pop()
            for j in range(k):
                if decisive[i, j] > 0 and j not in group:
                    group[j] = start
                    stack.append(j)
    groups: Dict[int, List[str]] = {}
    for i, g in group.items():
        groups.setdefault(g, []).append(policies[i])
    if len(groups) == 1:
        return ""
    listed = "; ".join(", ".join(sorted(names)) for names in sorted(groups.values()))
    return (f"no decisive comparison links these groups, so their relative order is the prior's, not the "
            f"data's: {listed}")

