"""Every value a job, a task or a rollout may carry: its allowed range stated once, and the one check of each.

One set of rules, three callers, so a job the relay accepts is one the station and the rollout run:

- the relay's ``SubmitJob`` (``relay.job_request.check_submit``) refuses a job before it is stored;
- the station (``station.job.validate_job_spec``: ``Station.submit``, the station node's ``submit_job``, a job
  file, a job the relay hands it, a job recovered after a restart);
- the rollout (``rollout.run_spec.validate_run``: every ``RunEpisode`` goal and every ``run_policy`` call),
  which checks its run arguments with :data:`RUN_LIMITS` and the task's parameters with
  :func:`check_task_parameters`.

The tables:

- :data:`RUN_LIMITS`: the numeric run arguments (``control_frequency``, ``duration_s``, ``action_horizon``,
  ``seed`` ...) and the episode budget rule (:func:`check_episode_budget`: ``round(duration_s *
  control_frequency)`` steps, at least 1 and at most ``n_steps``' maximum);
- :data:`JOB_LIMITS`: a job's episode count, task count and discard budget;
- :data:`TASK_PARAMETERS`: every task parameter key the station, the scripted operator, the simulated faults or
  the rollout reads, each with its kind (number, integer, flag, success predicate) and range; the prefixes in
  :data:`TASK_PARAMETER_PREFIXES` (``policy.<option>``, ``answer.<item>``) name the rest. Any other key is
  refused (a typo such as ``duraton_s`` would otherwise run silently with the default);
- :data:`SHEET_LIMITS`: the size of a score sheet (items, choices, points);
- free text: :func:`strands_robots.station.limits.check_text` with ``INSTRUCTION_MAX`` (instruction),
  ``IDENTIFIER_MAX`` (task id, ids) and ``TASK_TEXT_MAX`` (layout, parameter keys and values, item names,
  questions, choices);
- the policy of a station-run job: :func:`check_policy_config` (a JSON object of at most
  :data:`POLICY_CONFIG_MAX` characters) and :func:`check_policy`, which builds a built-in mock or scripted
  policy from the config each task's episodes get, as the rollout will, so a bad option is refused at submit.

The readers (``station.scripted_operator``, ``station.inprocess``, ``nodes.station_robot_port``) may parse a value with
:func:`parameter_number` / :func:`parameter_flag` to read it by the same rule it was checked by.

A refusal is a :class:`ValueRefused` naming the field, the value and the allowed range, e.g. ``duration_s='1e9'
refused: allowed range (0, 86400] s: a number > 0 and <= 86400 (episode budget in seconds ...)``; the callers
add where it was (``tasks[0].parameters['duration_s']: ...``). Pure: no rclpy, no protobuf, no policies.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import numbers
import re
import types
from typing import Any, Mapping, Optional

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
    "TASK_PARAMETERS",
    "TASK_PARAMETER_PREFIXES",
    "MAX_TASK_PARAMETERS",
    "POLICIES_BUILT_AT_SUBMIT",
    "POLICY_CONFIG_MAX",
    "TaskParameter",
    "ValueRefused",
    "check_episode_budget",
    "check_number",
    "check_policy",
    "check_policy_config",
    "check_sheet_bounds",
    "check_task_parameters",
    "check_task_text",
    "check_text_field",
    "known_parameter_keys",
    "parameter_number",
    "parameter_flag",
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
#: Parameters one task may carry.
MAX_TASK_PARAMETERS = 100

# -- a score sheet ----------------------------------------------------------------------------------------------
SHEET_LIMITS: "Mapping[str, FieldLimit]" = _limits({
    "items": FieldLimit(1, 100, True, "items of one score sheet, the success item first"),
    "choices": FieldLimit(0, 100, True, "choices of one choice item"),
    "max_points": FieldLimit(0, 1_000_000, False, "points an item is worth at most"),
    "points_per_unit": FieldLimit(0, 1_000_000, False, "points per counted unit of a count item"),
    "success_count": FieldLimit(0, 1_000_000_000, True, "the minimum count a count success item needs"),
})


# -- task parameters --------------------------------------------------------------------------------------------
NUMBER, INTEGER, FLAG, PREDICATE = "number", "integer", "flag", "success predicate"
CAMERAS, CAMERA_NAMES, IMAGE_FORMAT = "camera selection", "camera names", "image format"


@dataclasses.dataclass(frozen=True)
class TaskParameter:
    """One task parameter key: its kind, its range (numbers) and who reads it."""

    key: str
    kind: str
    description: str
    limit: Optional[FieldLimit] = None

    def allowed(self) -> str:
        """Return the "what is allowed" phrase of a refusal of this key's value."""
        if self.limit is not None:
            return self.limit.allowed()
        if self.kind == FLAG:
            return f"allowed: true or false (also yes/no, 1/0) ({self.description})"
        return f"allowed: {self.description}"


# where the coloured object may stand (strands_robots.cameras.scene.REGION; test_cameras_request keeps them equal)
_OBJECT_REGION = {"object_x": (0.25, 0.45), "object_y": (-0.3, 0.3)}


def _seconds(description: str, maximum: float, *, exclusive: bool = False) -> FieldLimit:
    return FieldLimit(0.0, maximum, False, description, "s", exclusive_minimum=exclusive)


_PARAMETERS = (
    # the station's per-episode settings (station.job.plan_episode), the same ranges as the rollout's
    TaskParameter("duration_s", NUMBER, "rollout budget of the task's episodes", RUN_LIMITS["duration_s"]),
    TaskParameter("control_frequency", NUMBER, "control rate of the task's episodes",
                  RUN_LIMITS["control_frequency"]),
    TaskParameter("seed", INTEGER, "policy/simulation seed of the task's episodes", RUN_LIMITS["seed"]),
    TaskParameter("start_pose_tolerance_rad", NUMBER, "start pose",
                  FieldLimit(0.0, 0.5, False, "largest joint position error the start pose accepts", "rad",
                             exclusive_minimum=True)),
    TaskParameter("start_pose_timeout_s", NUMBER, "start pose",
                  _seconds("how long the arms may take to settle at the start pose", 600.0, exclusive=True)),
    # the scripted operator (station.scripted_operator.ScriptedOperator)
    TaskParameter("operator_takeover_at_s", NUMBER, "scripted operator",
                  _seconds("rollout time at which the scripted operator takes over", 86400.0)),
    TaskParameter("operator_takeover_for_s", NUMBER, "scripted operator",
                  _seconds("wall seconds the scripted operator holds the arms before handing back", 600.0)),
    TaskParameter("operator_claim_at_s", NUMBER, "scripted operator",
                  _seconds("rollout time at which the scripted operator claims the arms (authority_lost)",
                           86400.0)),
    TaskParameter("operator_discard", FLAG, "the scripted operator discards the taken-over episode's first try"),
    TaskParameter("operator_score", FLAG, "false: the scripted operator keeps the task's episodes unscored"),
    TaskParameter("success_when", PREDICATE,
                  "'end_condition == <name>' or '<observation key> <op> <number>' (op one of < <= > >=)"),
    # simulated faults (station.inprocess, nodes.station_robot_port)
    TaskParameter("fault.stop_heartbeat_at_s", NUMBER, "simulated fault",
                  _seconds("rollout time at which the station stops renewing the lease (lease_lost)", 86400.0)),
    TaskParameter("fault.policy_lost_at_s", NUMBER, "simulated fault",
                  _seconds("rollout time at which the in-process station loses the policy session", 86400.0)),
    # the cameras (strands_robots.cameras): the scene's object, a covered lens, what the policy gets
    TaskParameter("object_x", NUMBER, "the coloured object's place",
                  FieldLimit(*_OBJECT_REGION["object_x"], False, "x of the coloured object on the table", "m")),
    TaskParameter("object_y", NUMBER, "the coloured object's place",
                  FieldLimit(*_OBJECT_REGION["object_y"], False, "y of the coloured object on the table", "m")),
    TaskParameter("camera_cover", CAMERA_NAMES, "comma-separated cameras whose lens is covered (black frames)"),
    TaskParameter("cameras", CAMERAS, "the cameras the policy gets through the relay: 'none', or comma-separated "
                                      "<camera> or <camera>:<width>x<height> (8..4096 px), e.g. scene:224x224,wrist"),
    TaskParameter("image_format", IMAGE_FORMAT, "jpeg or png (the camera frames' encoding through the relay)"),
    TaskParameter("image_quality", INTEGER, "camera frames through the relay",
                  FieldLimit(1, 95, True, "JPEG quality of the camera frames through the relay")),
)
TASK_PARAMETERS: "Mapping[str, TaskParameter]" = types.MappingProxyType({p.key: p for p in _PARAMETERS})

POLICY_PREFIX = "policy."
ANSWER_PREFIX = "answer."
TASK_PARAMETER_PREFIXES: "Mapping[str, str]" = types.MappingProxyType({
    POLICY_PREFIX: "policy.<option>: overrides the job's policy option for the task's episodes (JSON or text)",
    ANSWER_PREFIX: "answer.<item>: the scripted operator's answer to a non-success item of the sheet",
})
# policy options every provider reads (policies.options.COMMON_OPTIONS): the rollout's own ranges
_POLICY_OPTION_LIMITS = {"action_horizon": RUN_LIMITS["action_horizon"], "seed": RUN_LIMITS["seed"]}


def known_parameter_keys() -> str:
    """Return the known task parameter keys and prefixes, as a refusal lists them."""
    return ", ".join(sorted(TASK_PARAMETERS)) + ", " + ", ".join(f"{p}<{'option' if p == POLICY_PREFIX else 'item'}>"
                                                                for p in TASK_PARAMETER_PREFIXES)


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


_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")


def parameter_number(key: str, text: str, limit: FieldLimit, *, integer: bool = False) -> "int | float":
    """Parse a task parameter's number (its value is text) and check it against ``limit``."""
    field = f"parameters[{key!r}]"
    if integer:
        if not _INTEGER_TEXT.fullmatch(text.strip()):
            raise ValueRefused(field, text, f"{key}={text!r} refused: must be {limit.words()} in {limit.text()} "
                                            f"({limit.description})")
        value: "int | float" = int(text)
    else:
        try:
            value = float(text)
        except ValueError:
            raise ValueRefused(field, text, f"{key}={text!r} refused: must be {limit.words()} in {limit.text()} "
                                            f"({limit.description})") from None
    if not limit.contains(value):
        raise ValueRefused(field, text, f"{key}={text!r} refused: {limit.allowed()}")
    return value


def parameter_flag(key: str, text: str) -> bool:
    """Parse a task parameter's flag: true/yes/1 or false/no/0 (any case)."""
    word = text.strip().lower()
    if word in ("true", "yes", "1"):
        return True
    if word in ("false", "no", "0"):
        return False
    raise ValueRefused(f"parameters[{key!r}]", text, f"{key}={text!r} refused: {TASK_PARAMETERS[key].allowed()}")


def _unknown_key(key: str, value: str) -> ValueRefused:
    close = difflib.get_close_matches(key, list(TASK_PARAMETERS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValueRefused(f"parameters[{key!r}]", value, f"{key}={value!r} refused: unknown task parameter "
                                                       f"{key!r}{hint}; known: {known_parameter_keys()}")


def check_task_parameters(parameters: Mapping[str, Any], sheet: Any = None) -> None:
    """Check every task parameter: a known key (or prefix), text within its limit, a value in its range.

    :param sheet: the task's ``ScoringSheet`` when known (the station): ``answer.<item>`` must then name a
        non-success item and hold a valid answer for it. Without it (a rollout's task) only the name is checked.
    :raises ValueRefused: ``field`` is ``parameters['<key>']``; the reason names the key, value and range.
    """
    if not isinstance(parameters, Mapping):
        raise ValueRefused("parameters", parameters, f"parameters must be a mapping, got {type(parameters).__name__}")
    if len(parameters) > MAX_TASK_PARAMETERS:
        raise ValueRefused("parameters", f"<{len(parameters)} parameters>",
                           f"a task carries at most {MAX_TASK_PARAMETERS} parameters, got {len(parameters)}")
    for key, value in parameters.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueRefused("parameters", key, f"parameter keys must be non-empty strings, got {key!r}")
        if len(key) > TASK_TEXT_MAX:
            raise ValueRefused("parameters", f"<{len(key)} characters>",
                               f"a parameter key is {len(key)} characters long; at most {TASK_TEXT_MAX} are "
                               f"allowed")
        field = f"parameters[{key!r}]"
        if not isinstance(value, str):
            raise ValueRefused(field, value, f"{key}: values are strings, got {value!r}")
        try:
            check_text(value, TASK_TEXT_MAX, f"the value of {key}")
        except TextTooLong as exc:
            raise ValueRefused(field, f"<{exc.length} characters>", str(exc)) from None
        _check_parameter(key, value, sheet)


def _check_parameter(key: str, value: str, sheet: Any) -> None:
    field = f"parameters[{key!r}]"
    rule = TASK_PARAMETERS.get(key)
    if rule is not None:
        if rule.kind in (NUMBER, INTEGER):
            parameter_number(key, value, rule.limit, integer=rule.kind == INTEGER)
        elif rule.kind == FLAG:
            parameter_flag(key, value)
        elif rule.kind in (CAMERAS, CAMERA_NAMES, IMAGE_FORMAT):
            from strands_robots.cameras import request as camera_request

            try:
                if rule.kind == CAMERAS:
                    camera_request.parse_cameras(value)
                elif rule.kind == CAMERA_NAMES:
                    camera_request.parse_camera_names(value)
                elif value.strip().lower() not in ("jpeg", "png"):
                    raise camera_request.CameraRequestError("not an image format")
            except camera_request.CameraRequestError as exc:
                raise ValueRefused(field, value, f"{key}={value!r} refused: {exc}; {rule.allowed()}") from None
        else:
            from strands_robots.station.success_predicate import parse_success_predicate

            try:
                parse_success_predicate(value)
            except ValueError as exc:
                raise ValueRefused(field, value, f"{key}={value!r} refused: {exc}; {rule.allowed()}") from None
        return
    if key.startswith(POLICY_PREFIX):
        option = key[len(POLICY_PREFIX):]
        if not option.strip():
            raise ValueRefused(field, value, f"{key}: names no policy option (policy.<option>)")
        limit = _POLICY_OPTION_LIMITS.get(option)
        if limit is not None:
            parameter_number(key, value, limit, integer=True)
        return
    if key.startswith(ANSWER_PREFIX):
        name = key[len(ANSWER_PREFIX):]
        if not name.strip():
            raise ValueRefused(field, value, f"{key}: names no item of the sheet (answer.<item>)")
        if sheet is None:
            return
        items = {item.name: item for item in sheet.items}
        if name not in items:
            raise ValueRefused(field, value, f"{key} names no item of the sheet (items: {', '.join(items)})")
        if name == sheet.items[0].name:
            raise ValueRefused(field, value, f"{key}: the success item is answered from success_when, not answer.*")
        from strands_robots.station.answers import ScoreSheetError, parse_answer

        try:
            parse_answer(items[name], value)
        except ScoreSheetError as exc:
            raise ValueRefused(field, value, f"{key}={value!r} refused: {exc.reason}") from None
        return
    raise _unknown_key(key, value)


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
