"""A task's parameters: every key the station, the scripted operator, the simulated faults or the rollout reads.

:data:`TASK_PARAMETERS` holds each key with its kind (number, integer, flag, success predicate, camera
selection ...) and range; the prefixes in :data:`TASK_PARAMETER_PREFIXES` (``policy.<option>``,
``answer.<item>``) name the rest. Any other key is refused (a typo such as ``duraton_s`` would otherwise run
silently with the default), with the nearest known key as a hint.

:func:`check_task_parameters` is the one check, called by the station (``station.job.validate_job_spec``) and by
the rollout (``rollout.run_spec.validate_run``); the readers (``station.scripted_operator``, ``station.inprocess``,
``nodes.station.robot_port``) may parse a value with :func:`parameter_number` / :func:`parameter_flag` to read it
by the same rule it was checked by. The ranges are :class:`~strands_robots.validation.FieldLimit` s, the rollout's
own (:data:`~strands_robots.validation.RUN_LIMITS`) where a parameter sets a run argument, and a refusal is a
:class:`~strands_robots.validation.ValueRefused` whose ``field`` is ``parameters['<key>']``. Pure: no rclpy.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
from typing import Any, Mapping, Optional

from strands_robots.station.limits import TASK_TEXT_MAX, TextTooLong, check_text
from strands_robots.validation import RUN_LIMITS, FieldLimit, ValueRefused

__all__ = [
    "MAX_TASK_PARAMETERS",
    "TASK_PARAMETERS",
    "TASK_PARAMETER_PREFIXES",
    "TaskParameter",
    "check_task_parameters",
    "known_parameter_keys",
    "parameter_flag",
    "parameter_number",
]

#: Parameters one task may carry.
MAX_TASK_PARAMETERS = 100

# -- the table --------------------------------------------------------------------------------------------------
NUMBER, INTEGER, FLAG, PREDICATE, HEADLINE = "number", "integer", "flag", "success predicate", "headline"
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
    TaskParameter("headline", HEADLINE, "success_at_end or success_ever: which success is the episode's (the one "
                                        "the rates count; station.success_judgement)"),
    # simulated faults (station.inprocess, nodes.station.robot_port)
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
        elif rule.kind == HEADLINE:
            from strands_robots.station.success_judgement import headline_of

            try:
                headline_of({key: value})
            except ValueError as exc:
                raise ValueRefused(field, value, f"{key}={value!r} refused: {exc}") from None
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


def check_choices(job: Any) -> None:
    """Refuse a team job's choice outside the station's range, as the relay does at submit.

    :param job: a ``job_model.team_job.TeamJob``.
    :raises job_model.team_keys.TeamJobRefused: ``choose.<key>`` and the reason :func:`check_task_parameters` gives.
    """
    from strands_robots.job_model.team_keys import TeamJobRefused

    for key, value in job.choose.items():
        try:
            check_task_parameters({key: value})
        except ValueRefused as exc:
            raise TeamJobRefused(f"choose.{key}", exc.reason) from None
