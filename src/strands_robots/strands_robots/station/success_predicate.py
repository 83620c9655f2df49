"""A task's success predicate (``success_when``) on the final state, parsed from its text form (no eval).

The scripted operator answers a sheet's success item with it; ``validation`` checks a task's ``success_when``
by parsing it here, so a job with a bad predicate is refused at submit.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping

__all__ = ["SuccessPredicate", "parse_success_predicate"]

# (pending episode, final observation) -> success; the pending episode is read for its end_condition only.
SuccessPredicate = Callable[[Any, Mapping[str, Any]], bool]
_COMPARE = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(<=|>=|<|>)\s*([-+]?[0-9.eE+-]+)\s*$")
_END_IS = re.compile(r"^\s*end_condition\s*(?:==|=|in)\s*([a-z_|, ]+)\s*$")


def parse_success_predicate(text: str) -> SuccessPredicate:
    """Parse a success predicate on the final state from its text form (no eval).

    The forms:

    - ``end_condition == policy_completed`` (or ``end_condition in timeout|policy_completed``);
    - ``<observation key> <op> <number>`` with ``op`` one of ``< <= > >=``, e.g. ``right.joint_4.pos > 1.2``
      (false when the key is missing from the final observation). The scripted operator adds
      ``object_distance_m`` (the tool points' distance to the coloured object, ``cameras.reach``) when a task's
      ``success_when`` names it.

    :raises ValueError: the text is neither form.
    """
    match = _END_IS.match(text)
    if match:
        wanted = frozenset(p.strip() for p in re.split(r"[|,]", match.group(1)) if p.strip())
        return lambda pending, obs: pending.end_condition in wanted
    match = _COMPARE.match(text)
    if match:
        key, op, raw = match.groups()
        try:
            bound = float(raw)
        except ValueError:
            bound = math.nan
        if not math.isfinite(bound):
            raise ValueError(f"success predicate {text!r}: {raw!r} is not a finite number")
        compare = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__}[op]

        def predicate(pending: Any, obs: Mapping[str, Any]) -> bool:
            value = obs.get(key)
            return isinstance(value, (int, float)) and compare(float(value), bound)

        return predicate
    raise ValueError(f"success predicate {text!r} is neither 'end_condition == <name>' nor "
                     "'<observation key> <op> <number>'")
