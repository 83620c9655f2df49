"""Stop a comparison of more than two policies: one anytime-valid test per pair, alpha split, one job rule.

With ``k`` policies there are ``k (k - 1) / 2`` pairs. Each pair gets its own
:class:`~strands_robots.stats.sequential.PairedSequentialTest` at ``alpha / pairs`` (Bonferroni): each pair's
chance of a false winner is at most ``alpha / pairs`` however often it is looked at, so the chance that *any*
pair names a false winner is at most ``alpha`` (the union bound; no assumption about how the pairs' outcomes
depend on each other, which they do: they share blocks).

The job-level rule: every complete block (each policy once, :class:`~strands_robots.stats.blocks.Block`)
updates every pair still undecided; a pair that is decided keeps its verdict and ignores later blocks. The job
stops when every pair is decided: separated, or ``not_separated`` (at ``max_blocks``, or earlier when the rule
asks to stop once separation is out of reach). So it runs at most ``max_blocks`` blocks, and stops sooner
exactly when every question it can answer is answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Iterable, Optional, Tuple

from strands_robots.stats.blocks import Block
from strands_robots.stats.sequential import PairedSequentialTest, StopRule, Verdict


@dataclass(frozen=True)
class PairwiseSequentialTests:
    """The anytime-valid comparison of every pair of ``policies`` after ``blocks`` complete blocks.

    Start with :meth:`start`; feed each complete block to :meth:`after`.

    :param policies: the policies compared (sorted, distinct, at least two).
    :param rule: the job's rule; its ``alpha`` is the family-wise false-winner rate, split over the pairs.
    :param tests: one test per pair, in :attr:`pairs` order (pair ``(p, q)``: ``p`` is A, ``q`` is B).
    :param blocks: complete blocks seen.
    """

    policies: Tuple[str, ...]
    rule: StopRule
    tests: Tuple[PairedSequentialTest, ...]
    blocks: int = 0

    def __post_init__(self) -> None:
        if len(self.policies) < 2 or len(set(self.policies)) != len(self.policies) \
                or tuple(sorted(self.policies)) != tuple(self.policies):
            raise ValueError(f"policies must be at least two distinct names, sorted; got {self.policies}")
        if len(self.tests) != len(self.pairs):
            raise ValueError(f"{len(self.pairs)} pairs need {len(self.pairs)} tests, got {len(self.tests)}")

    @classmethod
    def start(cls, policies: Iterable[str], rule: StopRule) -> "PairwiseSequentialTests":
        """Return the comparison of ``policies`` before any block.

        :param policies: two or more distinct policy names (slots).
        :param rule: the job's stop rule (``alpha`` is family-wise).
        :raises ValueError: fewer than two policies, or a name given twice.
        """
        names = list(policies)
        if any(not isinstance(name, str) or not name for name in names):
            raise ValueError(f"policy names must be non-empty strings, got {names}")
        if len(set(names)) != len(names):
            raise ValueError(f"a policy is named twice: {names}")
        ordered = tuple(sorted(names))
        if len(ordered) < 2:
            raise ValueError(f"a comparison needs at least two policies, got {ordered}")
        pairs = len(ordered) * (len(ordered) - 1) // 2
        pair_rule = StopRule(rule.max_blocks, rule.alpha / pairs, rule.stop_when_out_of_reach)
        return cls(ordered, rule, tuple(PairedSequentialTest(pair_rule) for _ in range(pairs)))

    @property
    def pairs(self) -> Tuple[Tuple[str, str], ...]:
        """Every pair ``(a, b)`` of policies, ``a`` before ``b`` in sorted order."""
        return tuple(combinations(self.policies, 2))

    @property
    def pair_alpha(self) -> float:
        """Each pair's alpha: the job's alpha over the number of pairs."""
        return self.rule.alpha / len(self.pairs)

    @property
    def decided(self) -> bool:
        """True when every pair is decided: the job stops."""
        return all(test.decided for test in self.tests)

    def test(self, a: str, b: str) -> PairedSequentialTest:
        """Return the test of the pair ``(a, b)`` as stored (A is the policy that sorts first).

        :param a: one policy.
        :param b: another.
        :raises KeyError: not a pair of this comparison.
        """
        key = (a, b) if a < b else (b, a)
        try:
            return self.tests[self.pairs.index(key)]
        except ValueError:
            raise KeyError(f"({a!r}, {b!r}) is not a pair of {list(self.policies)}") from None

    def verdict(self, a: str, b: str) -> Verdict:
        """Return the verdict on ``a`` against ``b``: ``a_better`` means ``a`` is better, whichever sorts first.

        :param a: one policy.
        :param b: another.
        """
        found = self.test(a, b).verdict
        return found if a < b else found.flipped()

    @property
    def best(self) -> Optional[str]:
        """The policy separated as better than every other one, if there is one."""
        for policy in self.policies:
            if all(self.verdict(policy, other) is Verdict.A_BETTER for other in self.policies if other != policy):
                return policy
        return None

    def after(self, block: Block) -> "PairwiseSequentialTests":
        """Return the comparison after one more complete block.

        :param block: every policy's real outcome on one task and seed.
        :raises TypeError: not a :class:`~strands_robots.stats.blocks.Block`.
        :raises ValueError: the block's policies are not exactly this comparison's, or the job is decided.
        """
        if not isinstance(block, Block):
            raise TypeError(f"a comparison takes complete Blocks, got {type(block).__name__}")
        if block.policies != self.policies:
            raise ValueError(f"a complete block has every policy once: expected {list(self.policies)}, "
                             f"got {list(block.policies)}")
        if self.decided:
            raise ValueError(f"every pair was decided after {self.blocks} blocks; the job takes no more blocks")
        tests = tuple(test if test.decided else test.after(block.pair(a, b))
                      for test, (a, b) in zip(self.tests, self.pairs))
        return PairwiseSequentialTests(self.policies, self.rule, tests, self.blocks + 1)
