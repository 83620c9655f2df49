"""The checks every statistics function applies to its arguments, each with a reason that names the argument.

A statistic computed from a bad argument is worse than none: a negative count, ``k > n``, an ``alpha`` of 5
(meant as 5 %) or a misspelt method name is refused with a ``ValueError`` (``TypeError`` for a value of the
wrong kind) before anything is computed.
"""

from __future__ import annotations

import math
import operator
from enum import Enum
from typing import Type, TypeVar

E = TypeVar("E", bound=Enum)


def count(value: object, name: str) -> int:
    """Return ``value`` as a non-negative ``int``.

    :param value: an integer (``bool`` and floats are refused: a count is never a flag or a fraction).
    :param name: the argument's name, for the error.
    :raises TypeError: not an integer.
    :raises ValueError: negative.
    """
    if isinstance(value, bool) or isinstance(value, float):
        raise TypeError(f"{name} must be an integer count, got {value!r}")
    try:
        as_int = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer count, got {value!r}") from None
    if as_int < 0:
        raise ValueError(f"{name} must be >= 0, got {as_int}")
    return as_int


def successes_of(successes: object, trials: object) -> tuple:
    """Return ``(k, n)`` as ints with ``0 <= k <= n``.

    :param successes: the number of successes ``k``.
    :param trials: the number of trials ``n``.
    :raises ValueError: a negative count, or ``k > n``.
    """
    k = count(successes, "successes")
    n = count(trials, "trials")
    if k > n:
        raise ValueError(f"successes ({k}) cannot exceed trials ({n})")
    return k, n


def open_unit(value: object, name: str) -> float:
    """Return ``value`` as a float strictly between 0 and 1 (a level, an alpha, a power, a probability).

    :param value: the number to check.
    :param name: the argument's name, for the error.
    :raises TypeError: not a real number.
    :raises ValueError: not finite, or outside (0, 1).
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a number in (0, 1), got {value!r}")
    try:
        as_float = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not math.isfinite(as_float) or not 0.0 < as_float < 1.0:
        raise ValueError(f"{name} must be in (0, 1) (0.05, not 5), got {value!r}")
    return as_float


def closed_unit(value: object, name: str) -> float:
    """Return ``value`` as a float in [0, 1] (a true success probability may be 0 or 1).

    :param value: the number to check.
    :param name: the argument's name, for the error.
    :raises TypeError: not a real number.
    :raises ValueError: not finite, or outside [0, 1].
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a number in [0, 1], got {value!r}")
    try:
        as_float = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number in [0, 1], got {value!r}") from None
    if not math.isfinite(as_float) or not 0.0 <= as_float <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return as_float


def positive_int(value: object, name: str) -> int:
    """Return ``value`` as an ``int >= 1``.

    :param value: the number to check.
    :param name: the argument's name, for the error.
    :raises TypeError: not an integer.
    :raises ValueError: below 1.
    """
    as_int = count(value, name)
    if as_int < 1:
        raise ValueError(f"{name} must be >= 1, got {as_int}")
    return as_int


def choice(enum: Type[E], value: object, name: str) -> E:
    """Return the member of ``enum`` that ``value`` is or names.

    :param enum: a string enum.
    :param value: a member, or its value (``"wilson"``).
    :param name: the argument's name, for the error.
    :raises ValueError: no member has that value.
    """
    if isinstance(value, enum):
        return value
    try:
        return enum(value)
    except ValueError:
        known = ", ".join(repr(member.value) for member in enum)
        raise ValueError(f"unknown {name} {value!r}: one of {known}") from None
