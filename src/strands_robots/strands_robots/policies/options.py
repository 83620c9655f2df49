"""Reading provider options and task fields, refusing invalid ones with a reason.

Every provider takes a ``config`` mapping and, at ``reset``, a ``task`` mapping. Both come from users' scripts
and job files, so a typo (``action_horzion``) or a wrong type must fail at construction with the option's name
and the options the provider knows, not silently fall back to a default.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

DEFAULT_ACTION_HORIZON = 8
DEFAULT_CONTROL_FREQUENCY = 50.0

# Options the rollout layer may pass to any provider; a provider that has no use for one accepts and ignores it.
COMMON_OPTIONS = frozenset({"action_horizon", "seed"})


def check_options(provider: str, config: Mapping[str, Any] | None, known: Iterable[str]) -> dict[str, Any]:
    """Return ``config`` as a dict after checking every key is an option ``provider`` knows.

    :param provider: the provider's name, for the error message.
    :param config: the options given (``None`` means none).
    :param known: the provider's own options; ``COMMON_OPTIONS`` are always accepted.
    :raises ValueError: naming the unknown options and listing the known ones.
    """
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise TypeError(f"{provider} policy config must be a mapping, got {type(config).__name__}")
    allowed = set(known) | COMMON_OPTIONS
    unknown = sorted(str(k) for k in config if k not in allowed)
    if unknown:
        raise ValueError(
            f"{provider} policy: unknown option(s) {', '.join(unknown)}; "
            f"known options: {', '.join(sorted(allowed))}"
        )
    return dict(config)


def optional_int(provider: str, name: str, value: Any, *, minimum: int = 0) -> int | None:
    """``value`` as an int >= ``minimum``, or ``None`` when not given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{provider} policy: {name} must be an integer, got {value!r}")
    try:
        as_float = float(value)
    except ValueError:
        raise ValueError(f"{provider} policy: {name} must be an integer, got {value!r}") from None
    if not as_float.is_integer() or as_float < minimum:
        raise ValueError(f"{provider} policy: {name} must be an integer >= {minimum}, got {value!r}")
    return int(as_float)


def finite_float(provider: str, name: str, value: Any, *, minimum: float | None = None) -> float:
    """``value`` as a finite float (strings such as task parameters are parsed)."""
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{provider} policy: {name} must be a number, got {value!r}") from None
    if not math.isfinite(result):
        raise ValueError(f"{provider} policy: {name} must be finite, got {value!r}")
    if minimum is not None and result < minimum:
        raise ValueError(f"{provider} policy: {name} must be >= {minimum}, got {value!r}")
    return result


def action_horizon(provider: str, configured: int | None, task: Mapping[str, Any]) -> int:
    """Return the chunk length: the provider's own option, then the task's, then ``DEFAULT_ACTION_HORIZON``."""
    if configured is not None:
        return configured
    value = optional_int(provider, "task action_horizon", task.get("action_horizon"), minimum=1)
    return DEFAULT_ACTION_HORIZON if value is None else value


def action_keys(provider: str, task: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the task's actuator keys; a task without them cannot be run."""
    keys = task.get("action_keys")
    if keys is None or isinstance(keys, (str, bytes)):
        raise ValueError(f"{provider} policy: task must give action_keys as a sequence of actuator keys")
    return tuple(str(k) for k in keys)


def joint_limits(provider: str, task: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """Return the task's ``{key: (lower, upper)}`` limits, checked finite and ordered; empty when not given."""
    raw = task.get("joint_limits") or {}
    limits: dict[str, tuple[float, float]] = {}
    for key, bounds in raw.items():
        try:
            lower, upper = (float(b) for b in bounds)
        except (TypeError, ValueError):
            raise ValueError(
                f"{provider} policy: joint_limits[{key!r}] must be (lower, upper), got {bounds!r}"
            ) from None
        if not (math.isfinite(lower) and math.isfinite(upper) and lower <= upper):
            raise ValueError(f"{provider} policy: joint_limits[{key!r}] must be finite with lower <= upper")
        limits[str(key)] = (lower, upper)
    return limits


def control_period(provider: str, task: Mapping[str, Any]) -> float:
    """Seconds per control step, from the task's ``control_frequency`` (default 50 Hz)."""
    frequency = task.get("control_frequency")
    if frequency is None:
        return 1.0 / DEFAULT_CONTROL_FREQUENCY
    value = finite_float(provider, "task control_frequency", frequency)
    if value <= 0.0:
        raise ValueError(f"{provider} policy: task control_frequency must be > 0, got {frequency!r}")
    return 1.0 / value


def observed_position(
    observation: Mapping[str, Any], key: str, limits: Mapping[str, tuple[float, float]]
) -> float:
    """Return the measured position of ``key``; without one, the middle of its limits, else 0.0.

    A key the arm does not report (an unknown key emitted on purpose) still needs a value to command.
    """
    value = observation.get(f"{key}.pos")
    if value is not None:
        value = float(value)
        if math.isfinite(value):
            return value
    if key in limits:
        lower, upper = limits[key]
        return 0.5 * (lower + upper)
    return 0.0
