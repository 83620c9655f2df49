"""A task's success predicate (``success_when``), parsed from its text form (no eval).

:func:`parse_predicate` gives the predicate itself (:class:`Predicate`: the key it reads, judged at the end of an
episode or on one step's observation); :func:`parse_success_predicate` the callable on the final state the
scripted operator answered with before a predicate was judged per step; ``task_parameters`` checks a task's
``success_when`` by parsing it here, so a job with a bad predicate is refused at submit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, FrozenSet, Mapping

__all__ = ["Predicate", "SuccessPredicate", "parse_predicate", "parse_success_predicate"]

# (pending episode, final observation) -> success; the pending episode is read for its end_condition only.
SuccessPredicate = Callable[[Any, Mapping[str, Any]], bool]
_COMPARE = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(<=|>=|<|>)\s*([-+]?[0-9.eE+-]+)\s*$")
_END_IS = re.compile(r"^\s*end_condition\s*(?:==|=|in)\s*([a-z_|, ]+)\s*$")


_COMPARE_OPS = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__}


@dataclass(frozen=True)
class Predicate:
    """One parsed success predicate.

    :param text: the predicate as the task wrote it.
    :param key: the observation key a comparison reads (``object_distance_m`` is derived from the joints);
        empty for an ``end_condition`` predicate, which only the end of an episode can judge.
    :param op: the comparison (``<``, ``<=``, ``>``, ``>=``); empty for an ``end_condition`` predicate.
    :param bound: the number compared against.
    :param end_conditions: the end conditions an ``end_condition`` predicate accepts.
    """

    text: str
    key: str = ""
    op: str = ""
    bound: float = 0.0
    end_conditions: FrozenSet[str] = frozenset()

    @property
    def reads(self) -> tuple:
        """The keys of an observation the predicate reads (none for an ``end_condition`` predicate)."""
        return (self.key,) if self.key else ()

    @property
    def per_step(self) -> bool:
        """True when it can be judged on one step's observation (a comparison, not an end condition)."""
        return bool(self.key)

    def holds_on(self, inputs: Mapping[str, Any]) -> bool:
        """Judge a comparison on ``inputs`` (false when its key is missing); false for an end condition."""
        if not self.key:
            return False
        value = inputs.get(self.key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        return _COMPARE_OPS[self.op](float(value), self.bound)

    def judge(self, end_condition: str, inputs: Mapping[str, Any]) -> bool:
        """Judge it at the end of an episode that ended ``end_condition`` with the final ``inputs``."""
        if self.key:
            return self.holds_on(inputs)
        return end_condition in self.end_conditions


def parse_predicate(text: str) -> Predicate:
    """Parse a success predicate from its text form (no eval).

    The forms:

    - ``end_condition == policy_completed`` (or ``end_condition in timeout|policy_completed``);
    - ``<observation key> <op> <number>`` with ``op`` one of ``< <= > >=``, e.g. ``right.joint_4.pos > 1.2``
      (false when the key is missing from the observation). ``object_distance_m`` (the tool points' distance to
      the coloured object, ``cameras.reach``) is derived from the joints by whoever judges it.

    :raises ValueError: the text is neither form.
    """
    match = _END_IS.match(text)
    if match:
        wanted = frozenset(p.strip() for p in re.split(r"[|,]", match.group(1)) if p.strip())
        return Predicate(text=text, end_conditions=wanted)
    match = _COMPARE.match(text)
    if match:
        key, op, raw = match.groups()
        try:
            bound = float(raw)
        except ValueError:
            bound = math.nan
        if not math.isfinite(bound):
            raise ValueError(f"success predicate {text!r}: {raw!r} is not a finite number")
        return Predicate(text=text, key=key, op=op, bound=bound)
    raise ValueError(f"success predicate {text!r} is neither 'end_condition == <name>' nor "
                     "'<observation key> <op> <number>'")


def parse_success_predicate(text: str) -> SuccessPredicate:
    """Parse a success predicate on the final state: ``(pending episode, final observation) -> success``.

    The pending episode is read for its ``end_condition`` only (:func:`parse_predicate` for the forms).

    :raises ValueError: the text is neither form.
    """
    predicate = parse_predicate(text)
    if predicate.per_step:  # a comparison reads the observation alone
        return lambda pending, obs: predicate.holds_on(obs)
    return lambda pending, obs: predicate.judge(pending.end_condition, obs)
