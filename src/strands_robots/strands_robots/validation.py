"""Every value a job, a task or a rollout may carry: its allowed range stated once, and the one check of each.

One set of rules, three callers, so a job the relay accepts is one the station and the rollout run:

- the relay's ``SubmitJob`` (``relay.job_request.check_submit``) refuses a job before it is stored;
- the station (``station.job.validate_job_spec``: ``Station.submit``, the station node's ``submit_job``, a job
  file, a job the relay hands it, a job recovered after a restart);
- the rollout (``rollout.run_spec.validate_run``: every ``RunEpisode`` goal and every ``run_policy`` call),
  which checks its run arguments with :data:`RUN_LIMITS` and the task's parameters with
  :func:`~strands_robots.station.task_parameters.check_task_parameters`.

The tables:

- :data:`RUN_LIMITS`: the numeric run arguments (``control_frequency``, ``duration_s``, ``action_horizon``,
  ``seed`` ...) and the episode budget rule (:func:`check_episode_budget`: ``round(duration_s *
  control_frequency)`` steps, at least 1 and at most ``n_steps``' maximum);
- :data:`JOB_LIMITS`: a job's episode count, task count and discard budget;
- ``station.task_parameters.TASK_PARAMETERS``: every task parameter key the station, the scripted operator, the
  simulated faults or the rollout reads, each with its kind and range (its own module, by these limits);
- :data:`SHEET_LIMITS`: the size of a score sheet (items, choices, points);
- free text: :func:`strands_robots.station.limits.check_text` with ``INSTRUCTION_MAX`` (instruction),
  ``IDENTIFIER_MAX`` (task id, ids) and ``TASK_TEXT_MAX`` (layout, parameter keys and values, item names,
  questions, choices);
- the policy of a station-run job: :func:`check_policy_config` (a JSON object of at most
  :data:`POLICY_CONFIG_MAX` characters) and :func:`check_policy`, which builds a built-in mock or scripted
  policy from the config each task's episodes get, as the rollout will, so a bad option is refused at submit.

A refusal is a :class:`ValueRefused` naming the field, the value and the allowed range, e.g. ``duration_s='1e9'
refused: allowed range (0, 86400] s: a number > 0 and <= 86400 (episode budget in seconds ...)``; the callers
add where it was (``tasks[0].parameters['duration_s']: ...``). Pure: no rclpy, no protobuf, no policies.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import types
from typing import Any, Mapping

from strands_robots.station.limits import (
    IDENTIFIER_MAX,
    INSTRUCTION_MAX,
    TASK_TEXT_MAX,
    TextTooLong,
    check_text,
)

__all__ = [
    "FieldLimit",
    "JOB_LIMITS",
    "RUN_LIMITS",
    "SHEET_LIMITS",
    "POLICIES_BUILT_AT_SUBMIT",
    "POLICY_CONFIG_MAX",
    "ValueRefused",
    "check_episode_budget",
    "check_number",
    "check_policy",
    "check_policy_config",
    "check_sheet_bounds",
    "check_task_text",
    "check_text_field",
]


class ValueRefused(ValueError):
    """One value was refused.

    :ivar field: the value's name where it was given (``duration_s``, ``parameters['duration_s']``).
    :ivar value: the value as given.
    :ivar reason: the whole sentence, naming the key, the value and what is allowed.
    """

    def __init__(self, field: str, value: Any, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.value = value
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class FieldLimit:
    """The allowed range of one numeric value.

    ``minimum``..``maximum``, both inclusive unless ``exclusive_minimum`` (then ``value > minimum``).
    Non-finite values are always refused.
    """

    minimum: float
    maximum: float
    integer: bool
    description: str
    unit: str = ""
    exclusive_minimum: bool = False

    def contains(self, value: float) -> bool:
        """Return whether ``value`` is finite and inside the range."""
        if not math.isfinite(value) or value > self.maximum:
            return False
        return value > self.minimum if self.exclusive_minimum else value >= self.minimum

    def _fmt(self, v: float) -> str:
        return f"{int(v)}" if self.integer else f"{v:g}"

    def text(self) -> str:
        """Return the range as a reader writes it: ``(0, 2000] Hz``, ``[1, 1000]``."""
        lo = "(" if self.exclusive_minimum else "["
        return f"{lo}{self._fmt(self.minimum)}, {self._fmt(self.maximum)}]" + (f" {self.unit}" if self.unit else "")

    def words(self) -> str:
        """Return the range in words: ``a number > 0 and <= 86400``, ``an integer >= 1 and <= 1000``."""
        kind = "an integer" if self.integer else "a number"
        op = ">" if self.exclusive_minimum else ">="
        return f"{kind} {op} {self._fmt(self.minimum)} and <= {self._fmt(self.maximum)}"

    def allowed(self) -> str:
        """Return the whole "what is allowed" phrase of a refusal."""
        return f"allowed range {self.text()}: {self.words()} ({self.description})"


def _limits(table: Mapping[str, FieldLimit]) -> "Mapping[str, FieldLimit]":
    return types.MappingProxyType(dict(table))


# -- the rollout's run arguments (run_policy keywords, RunEpisode goal fields) -----------------------------------
RUN_LIMITS: "Mapping[str, FieldLimit]" = _limits({
    "control_frequency": FieldLimit(0.0, 2000.0, False, "control rate", "Hz", exclusive_minimum=True),
    "duration_s": FieldLimit(0.0, 86400.0, False, "episode budget in seconds (used when n_steps is not given)",
                             "s", exclusive_minimum=True),
    "n_steps": FieldLimit(1, 10**8, True, "step budget of an episode; without it derived from duration_s",
                          "steps"),
    "action_horizon": FieldLimit(1, 1000, True, "maximum actions used per inferred chunk", "actions"),
    "n_episodes": FieldLimit(1, 100_000, True, "episodes in one run, each its own run_id lifecycle"),
    "max_onframe_failures": FieldLimit(0, 1_000_000, True,
                                       "failing on_frame hooks tolerated per episode (observer failures never "
                                       "count)"),
    # The RunEpisode goal's seed is int64 ("negative for none"); a seed is one of 2^32 simulation seeds.
    "seed": FieldLimit(0, 2**32 - 1, True, "policy/simulation seed; a run of several episodes gives episode i "
                                            "seed + i"),
    "rtc_inference_timeout_s": FieldLimit(0.0, 600.0, False, "async prefetch: longest wait for a chunk at a "
                                                             "boundary, then the episode ends as an error", "s",
                                          exclusive_minimum=True),
    "fps": FieldLimit(0.0, 2000.0, False, "recording frame rate; must equal control_frequency", "Hz",
                      exclusive_minimum=True),
    "episode_number_offset": FieldLimit(0, 10**9, True, "number of the first episode in recording file names "
                                                        "(a node running one goal per episode counts goals)"),
})

# -- a job ------------------------------------------------------------------------------------------------------
JOB_LIMITS: "Mapping[str, FieldLimit]" = _limits({
    "episodes_total": FieldLimit(1, 100_000, True, "episodes a job asks for (kept episodes; the relay's "
                                                   "SubmitJob calls it episodes)"),
    "tasks": FieldLimit(1, 1000, True, "tasks of one job, run in order and cycled"),
    "max_discards": FieldLimit(0, 1000, True, "discarded episodes tolerated before the job fails"),
})
#: A job's policy_config as JSON, at most this many characters (it travels in every episode's goal).
POLICY_CONFIG_MAX = 65536

# -- a score sheet ----------------------------------------------------------------------------------------------
SHEET_LIMITS: "Mapping[str, FieldLimit]" = _limits({
    "items": FieldLimit(1, 100, True, "items of one score sheet, the success item first"),
    "choices": FieldLimit(0, 100, True, "choices of one choice item"),
    "max_points": FieldLimit(0, 1_000_000, False, "points an item is worth at most"),
    "points_per_unit": FieldLimit(0, 1_000_000, False, "points per counted unit of a count item"),
    "success_count": FieldLimit(0, 1_000_000_000, True, "the minimum count a count success item needs"),
})


# -- checks -----------------------------------------------------------------------------------------------------
def check_number(field: str, value: Any, limit: FieldLimit) -> "int | float":
    """Return ``value`` as int (integer limits) or float when it is inside ``limit``; raise :class:`ValueRefused`.

    An integral float (``8.0``) passes an integer limit; ``bool`` is never a number.
    """
    if limit.integer:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
                    and float(value).is_integer():
                value = int(value)
            else:
                raise ValueRefused(field, value, f"{field}={value!r} refused: must be {limit.words()} "
                                                 f"in {limit.text()} ({limit.description})")
        value = int(value)
    else:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueRefused(field, value, f"{field}={value!r} refused: must be {limit.words()} "
                                             f"in {limit.text()} ({limit.description})")
        value = float(value)
    if not limit.contains(value):
        raise ValueRefused(field, value, f"{field}={value!r} refused: {limit.allowed()}")
    return value


def check_episode_budget(duration_s: float, control_frequency: float, field: str = "duration_s") -> int:
    """Return an episode's step budget ``round(duration_s * control_frequency)``; refuse fewer than 1 or too many."""
    derived = round(duration_s * control_frequency)
    limit = RUN_LIMITS["n_steps"]
    if derived < 1:
        raise ValueRefused(field, duration_s, f"duration_s={duration_s!r} refused: it is less than one step at "
                                              f"{control_frequency:g} Hz (one step is {1.0 / control_frequency:g} s)")
    if derived > limit.maximum:
        raise ValueRefused(field, duration_s, f"duration_s={duration_s!r} refused: at {control_frequency:g} Hz it is "
                                              f"{derived} steps, more than the step budget's maximum "
                                              f"{int(limit.maximum)} (duration_s * control_frequency <= "
                                              f"{int(limit.maximum)})")
    return int(derived)


def check_text_field(field: str, value: Any, limit: int, *, required: bool = False) -> str:
    """Return ``value`` when it is a string of at most ``limit`` characters (non-blank when ``required``)."""
    if not isinstance(value, str):
        raise ValueRefused(field, value, f"{field} must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise ValueRefused(field, value, f"{field} must be a non-empty string")
    try:
        return check_text(value, limit, field)
    except TextTooLong as exc:
        raise ValueRefused(field, f"<{exc.length} characters>", str(exc)) from None


def check_task_text(task_id: Any, instruction: Any, layout: Any) -> None:
    """Check a task's free text: ``task_id`` (IDENTIFIER_MAX), ``instruction`` (INSTRUCTION_MAX), ``layout``."""
    check_text_field("task_id", task_id, IDENTIFIER_MAX, required=True)
    check_text_field("instruction", instruction, INSTRUCTION_MAX, required=True)
    check_text_field("layout", layout, TASK_TEXT_MAX)


def check_policy_config(config: Mapping[str, Any]) -> None:
    """Check a policy config is a JSON object of at most :data:`POLICY_CONFIG_MAX` characters."""
    if not isinstance(config, Mapping):
        raise ValueRefused("policy_config", config, f"policy_config must be a mapping, got {type(config).__name__}")
    if not all(isinstance(k, str) for k in config):
        raise ValueRefused("policy_config", config, "policy_config keys must be strings")
    try:
        text = json.dumps(dict(config), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueRefused("policy_config", config, f"policy_config must be JSON-compatible: {exc}") from None
    if len(text) > POLICY_CONFIG_MAX:
        raise ValueRefused("policy_config", f"<{len(text)} characters>",
                           f"policy_config is {len(text)} characters of JSON; at most {POLICY_CONFIG_MAX} are allowed")


#: Providers whose policy the station builds at submit from the job's config (as the rollout will build it), so a
#: bad option is refused then and not at ep_0000: the built-in ones that read no file and open no connection. A
#: relay job's options are the team's remote policy's; other providers (a replay file, a provider registered in
#: the rollout's process only) are checked by the rollout.
POLICIES_BUILT_AT_SUBMIT = frozenset({"mock", "scripted"})


def check_policy(provider: str, config: Mapping[str, Any]) -> None:
    """Build the policy of a job whose provider is in :data:`POLICIES_BUILT_AT_SUBMIT`; refuse the options it refuses.

    :raises ValueRefused: ``field`` is ``policy_config``; the reason is the provider's own.
    """
    name = provider.strip().lower() if isinstance(provider, str) else ""
    if name not in POLICIES_BUILT_AT_SUBMIT:
        return
    from strands_robots.policies.mock import MockPolicy
    from strands_robots.policies.scripted import ScriptedPolicy

    built_in = {"mock": MockPolicy, "scripted": ScriptedPolicy}  # the registry's own factories for these names
    try:
        built_in[name](dict(config))
    except Exception as exc:  # a provider refuses its config with ValueError (or TypeError): reported, not raised
        raise ValueRefused("policy_config", dict(config), f"policy_config refused: the {name} provider refused "
                                                          f"{json.dumps(dict(config), default=str)}: {exc}") from None


def check_sheet_bounds(sheet: Any) -> None:
    """Check a score sheet's size and text: items, choices, points, names, questions.

    The structure rules are ``station.score_sheet.validate_sheet``'s, which calls this after them.

    :raises ValueRefused: ``field`` is ``items``, or the item's name; the reason names the limit.
    """
    items = sheet.items
    if isinstance(items, tuple) and items:
        check_number("items", len(items), SHEET_LIMITS["items"])
    for index, item in enumerate(items if isinstance(items, tuple) else ()):
        name = getattr(item, "name", "")
        where = f"item {name!r}" if isinstance(name, str) and len(name) <= TASK_TEXT_MAX else f"item #{index}"
        for attr in ("name", "question"):
            text = getattr(item, attr, "")
            if isinstance(text, str) and len(text) > TASK_TEXT_MAX:
                raise ValueRefused(where, f"<{len(text)} characters>",
                                   f"{where}: {attr} is {len(text)} characters long; at most {TASK_TEXT_MAX} are "
                                   f"allowed")
        choices = getattr(item, "choices", ())
        if isinstance(choices, tuple):
            _bounded(where, "choices", len(choices), SHEET_LIMITS["choices"])
            for choice in choices:
                if isinstance(choice, str) and len(choice) > TASK_TEXT_MAX:
                    raise ValueRefused(where, f"<{len(choice)} characters>",
                                       f"{where}: a choice is {len(choice)} characters long; at most "
                                       f"{TASK_TEXT_MAX} are allowed")
        for attr in ("max_points", "points_per_unit"):
            value = getattr(item, attr, 0.0)
            if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
                _bounded(where, attr, value, SHEET_LIMITS[attr])
        success = getattr(item, "success_answer", "")
        if index == 0 and isinstance(success, str) and success.isdigit() and success.isascii() \
                and getattr(getattr(item, "answer_type", None), "value", "") == "count":
            _bounded(where, "success_answer", int(success), SHEET_LIMITS["success_count"])


def _bounded(where: str, attr: str, value: float, limit: FieldLimit) -> None:
    if not limit.contains(value):
        raise ValueRefused(where, value, f"{where}: {attr}={value!r} refused: {limit.allowed()}")
