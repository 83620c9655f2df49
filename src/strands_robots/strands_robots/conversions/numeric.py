"""Observations and actions as messages carry them: the numeric-scalar entries as parallel keys and values.

Observations are ``Mapping[str, float]`` in the core but may carry other entries (images, nested arrays, text).
Messages carry numeric scalars only (:func:`split_numeric`): int, float and numpy integer/floating scalars;
bools, arrays, text and None are left out.
"""

from __future__ import annotations

from array import array
from typing import Any, Iterable, Mapping


# -- numeric mappings -----------------------------------------------------------------------------------------
def split_numeric(mapping: Mapping[str, Any]) -> tuple[list[str], array]:
    """Keys and values of the numeric-scalar entries of ``mapping``, in its order.

    A numeric scalar is a real number that is not a bool: int, float, numpy integer or floating scalar.
    Everything else (arrays, images, text, None, bools) is skipped. Fast path: every value is a plain float
    or int, checked by type in one pass.
    """
    values = list(mapping.values())
    if set(map(type, values)) <= _PLAIN_NUMBERS:
        return list(mapping), array("d", values)
    keys: list[str] = []
    out = array("d")
    for key, value in mapping.items():
        if _is_numeric_scalar(value):
            keys.append(key)
            out.append(float(value))
    return keys, out


_PLAIN_NUMBERS = frozenset({float, int})


def _is_numeric_scalar(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    # numpy scalars (and 0-d arrays) without importing numpy: a real dtype kind and no dimensions.
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    return kind in ("i", "u", "f") and getattr(value, "shape", None) == ()


def join_numeric(keys: Iterable[str], values: Iterable[float]) -> dict[str, float]:
    """Return the mapping back from parallel keys and values (plain floats)."""
    return dict(zip(keys, map(float, values)))

