"""A complete block: one task and seed, every policy once, each with a real outcome (success or failure).

Paired comparisons, the stopping test and the ranking take blocks, never episodes. A block can only be made
from real outcomes: each policy's outcome must be ``True`` or ``False``. A faulted, discarded or safety-stopped
episode has no outcome (``None``, a string, a number are all refused with a ``TypeError``), so it can never
reach a statistic or trigger a stop: the station runs that policy's episode of the block again, or drops the
block, and says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Tuple

import numpy as np

NOT_AN_OUTCOME = ("a block's outcome is True (success) or False (failure); a faulted, discarded or "
                  "safety-stopped episode is not an outcome and never enters a block")


def outcome(value: object, name: str) -> bool:
    """Return ``value`` as a real outcome.

    :param value: ``True``/``False`` (numpy's bool too).
    :param name: what the value is (a policy, a slot), for the error.
    :raises TypeError: anything else (``None``, 0/1, a string).
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name}: got {value!r}; {NOT_AN_OUTCOME}")


@dataclass(frozen=True)
class PairedBlock:
    """One block of a two-policy comparison: policy A's and policy B's outcome on the same task and seed.

    :param a_success: policy A succeeded (``True``) or failed (``False``).
    :param b_success: policy B succeeded or failed.
    :param block_id: the block's id in its job (task and seed), for the record; may be empty.
    """

    a_success: bool
    b_success: bool
    block_id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "a_success", outcome(self.a_success, "a_success"))
        object.__setattr__(self, "b_success", outcome(self.b_success, "b_success"))
        if not isinstance(self.block_id, str):
            raise TypeError(f"block_id must be a string, got {self.block_id!r}")

    @property
    def discordant(self) -> bool:
        """True when exactly one policy succeeded (the only blocks that say which is better)."""
        return self.a_success != self.b_success


@dataclass(frozen=True)
class Block:
    """One block of a comparison of two or more policies: each policy's outcome on the same task and seed.

    :param outcomes: policy name -> success (``True``) or failure (``False``); at least two policies.
    :param block_id: the block's id in its job (task and seed), for the record; may be empty.
    """

    outcomes: Mapping[str, bool]
    block_id: str = ""
    policies: Tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.outcomes, Mapping):
            raise TypeError(f"outcomes must map policy names to True/False, got {type(self.outcomes).__name__}")
        checked = {}
        for policy, value in self.outcomes.items():
            if not isinstance(policy, str) or not policy:
                raise ValueError(f"policy names must be non-empty strings, got {policy!r}")
            checked[policy] = outcome(value, f"policy {policy!r}")
        if len(checked) < 2:
            raise ValueError(f"a block compares at least two policies, got {sorted(checked)}")
        if not isinstance(self.block_id, str):
            raise TypeError(f"block_id must be a string, got {self.block_id!r}")
        object.__setattr__(self, "outcomes", MappingProxyType(checked))
        object.__setattr__(self, "policies", tuple(sorted(checked)))

    def pair(self, a: str, b: str) -> PairedBlock:
        """Return the paired block of policies ``a`` (as A) and ``b`` (as B).

        :param a: a policy of this block.
        :param b: another policy of this block.
        :raises KeyError: a policy not in the block.
        :raises ValueError: ``a == b``.
        """
        if a == b:
            raise ValueError(f"a pair needs two different policies, got {a!r} twice")
        for policy in (a, b):
            if policy not in self.outcomes:
                raise KeyError(f"policy {policy!r} is not in block {self.block_id or '(unnamed)'}: "
                               f"{list(self.policies)}")
        return PairedBlock(self.outcomes[a], self.outcomes[b], self.block_id)
