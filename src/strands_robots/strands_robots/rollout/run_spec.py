"""RunSpec: every argument of one rollout, validated once, the same in process and over ROS.

``validate_run(**kwargs)`` checks every field (type, range, finiteness, the recording's fps and directory, the
policy provider and its config) **without moving anything or touching the robot**, and returns a frozen
:class:`RunSpec`, or raises :class:`RunRefused` naming the field, the value and what is allowed.
``PolicyRunner.run(**kwargs)`` calls it; the rollout node calls it on a goal before the arms move and hands the
spec to ``PolicyRunner.run_spec``. :data:`FIELD_LIMITS` is the one table of numeric ranges
(``strands_robots.validation.RUN_LIMITS``, by which the relay and the station check a job's values too), also
used for the node's parameter descriptors. A ``task`` carrying ``parameters`` (a RunEpisode goal's task) has them
checked by the station's rules (``station.task_parameters.check_task_parameters``): known keys only, every value
in range.

``n_steps`` and ``max_steps`` are two names of one thing: the step budget of an episode (the RunEpisode goal's
"step budget; 0 derives it from duration_s"). Without either, the budget is ``round(duration_s *
control_frequency)``. Nothing here imports rclpy.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import types
from typing import Any, Mapping

from strands_robots import validation as rules
from strands_robots.policies.base import Policy
from strands_robots.policies.registry import known_providers, make_policy
from strands_robots.station.task_parameters import check_task_parameters
from strands_robots.validation import FieldLimit

__all__ = [
    "FIELD_LIMITS", "FieldLimit", "PreflightRefused", "RunRefused", "RunSpec", "validate_run",
    "DEFAULT_INFERENCE_TIMEOUT_S", "DEFAULT_MAX_ONFRAME_FAILURES", "RUN_ARGUMENTS",
]

DEFAULT_INFERENCE_TIMEOUT_S = 10.0
# The on_frame watchdog: this many failing hooks are tolerated, one more stops the episode with an error.
DEFAULT_MAX_ONFRAME_FAILURES = 3
DEFAULT_RECORDING_TOPIC_PREFIX = ""


class PreflightRefused(ValueError):
    """The rollout was refused before any episode started (no lifecycle was opened)."""


class RunRefused(PreflightRefused):
    """One run argument is invalid.

    :ivar field: the argument's name (as :class:`RunSpec` spells it, e.g. ``duration_s``).
    :ivar value: the value given.
    :ivar reason: the whole sentence, naming the field, the value and what is allowed.
    """

    def __init__(self, field: str, value: Any, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.value = value
        self.reason = reason


# The one table of numeric ranges is strands_robots.validation's (the station and the relay check a job's values
# by it too); FieldLimit and FIELD_LIMITS are its names here.
FIELD_LIMITS: "Mapping[str, FieldLimit]" = rules.RUN_LIMITS


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Every validated argument of one rollout (see :func:`validate_run` for each field's meaning)."""

    policy_provider: Any
    policy_config: Mapping[str, Any]
    instruction: str
    duration_s: float
    control_frequency: float
    action_horizon: int
    fast_mode: bool
    n_steps: int
    n_episodes: int
    reset_between: bool
    max_onframe_failures: int
    seed: "int | None"
    async_rtc: bool
    rtc_inference_timeout_s: float
    record: bool
    recording_dir: str
    fps: "float | None"
    task: Mapping[str, Any]
    robot_name: str
    recording_topic_prefix: str
    episode_number_offset: int
    # The policy built once while validating its config (a policy object given as provider is used as is).
    policy: Any = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def period_s(self) -> float:
        return 1.0 / self.control_frequency

    @property
    def policy_name(self) -> str:
        p = self.policy_provider
        return p if isinstance(p, str) else type(p).__name__

    def episode_seed(self, index: int) -> "int | None":
        """Return the seed of episode ``index``: ``seed + index`` (``None`` without a seed)."""
        return None if self.seed is None else self.seed + index


# Every keyword validate_run takes (the peer's names; duration/max_steps are aliases of duration_s/n_steps).
RUN_ARGUMENTS = frozenset(f.name for f in dataclasses.fields(RunSpec) if f.name != "policy") | {
    "duration", "max_steps"}


def _bad(field: str, value: Any, what: str) -> RunRefused:
    return RunRefused(field, value, f"{field}={value!r} refused: {what}")


def _number(field: str, value: Any) -> float:
    try:
        return rules.check_number(field, value, FIELD_LIMITS[field])
    except rules.ValueRefused as exc:
        raise RunRefused(exc.field, exc.value, exc.reason) from None


def _flag(field: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    raise _bad(field, value, "must be a bool (True or False)")


def _text(field: str, value: Any, *, allow_none: bool = True) -> str:
    if value is None and allow_none:
        return ""
    if not isinstance(value, str):
        raise _bad(field, value, "must be a string")
    return value


def _mapping(field: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return types.MappingProxyType({})
    if not isinstance(value, Mapping):
        raise _bad(field, value, f"must be a mapping (dict), not {type(value).__name__}")
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise _bad(field, value, f"keys must be strings; {bad[0]!r} is {type(bad[0]).__name__}")
    return types.MappingProxyType(dict(value))


def _alias(kwargs: dict, name: str, alias: str) -> Any:
    """Return the value under ``name`` or ``alias``; both given with different values is refused."""
    a = kwargs.pop(name, None)
    b = kwargs.pop(alias, None)
    if a is not None and b is not None and a != b:
        raise RunRefused(name, a, f"{name}={a!r} and {alias}={b!r} disagree: they are two names of one "
                                  f"argument; give one")
    return a if a is not None else b


def _check_recording_dir(path: str) -> None:
    """Check the directory exists and is writable, or can be created (nothing is created here)."""
    field = "recording_dir"
    probe = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(probe):
        if not os.path.isdir(probe):
            raise _bad(field, path, "exists and is not a directory")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise _bad(field, path, "is not writable")
        return
    parent = probe
    while not os.path.exists(parent):
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    if not os.path.isdir(parent):
        raise _bad(field, path, f"cannot be created: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _bad(field, path, f"cannot be created: {parent} is not writable")


def validate_run(**kwargs: Any) -> RunSpec:
    """Check every run argument and return the :class:`RunSpec`; moves nothing, touches no robot.

    Keywords (the peer's names; all optional): ``policy_provider`` (a registered provider name or a policy
    object; default ``mock``), ``policy_config`` (mapping), ``instruction``, ``duration_s`` (alias
    ``duration``, default 10 s; with a step budget, 0 or absent means steps only and it becomes
    ``n_steps / control_frequency``), ``control_frequency`` (50 Hz), ``action_horizon`` (8), ``fast_mode``,
    ``n_steps`` (alias ``max_steps``: the step budget), ``n_episodes`` (1), ``reset_between`` (True),
    ``max_onframe_failures`` (3), ``seed`` (None), ``async_rtc``, ``rtc_inference_timeout_s`` (10 s),
    ``record``, ``recording_dir``, ``fps`` (default: the control frequency), ``task`` (mapping handed to the
    policy's ``reset``; its ``parameters``, when present, are a station task's: known keys and string values
    in range, by ``station.task_parameters.check_task_parameters``), ``robot_name`` ("" = the runner's),
    ``recording_topic_prefix`` (the ROS namespace the recording files its topics under, e.g. ``/strands``; "" =
    root), ``episode_number_offset`` (0).
    Numeric ranges: :data:`FIELD_LIMITS`.

    :raises RunRefused: the first invalid field, with ``.field`` and a reason naming value and allowed range.
    """
    kw = dict(kwargs)
    duration = _alias(kw, "duration_s", "duration")
    steps = _alias(kw, "n_steps", "max_steps")
    unknown = sorted(set(kw) - RUN_ARGUMENTS)
    if unknown:
        raise RunRefused(unknown[0], kw[unknown[0]],
                         f"unknown run argument(s) {', '.join(unknown)}; known: {', '.join(sorted(RUN_ARGUMENTS))}")

    control_frequency = _number("control_frequency", kw.get("control_frequency", 50.0))
    action_horizon = _number("action_horizon", kw.get("action_horizon", 8))
    n_episodes = _number("n_episodes", kw.get("n_episodes", 1))
    max_onframe = _number("max_onframe_failures", kw.get("max_onframe_failures", DEFAULT_MAX_ONFRAME_FAILURES))
    timeout = kw.get("rtc_inference_timeout_s")
    timeout = _number("rtc_inference_timeout_s", DEFAULT_INFERENCE_TIMEOUT_S if timeout is None else timeout)
    if steps is not None:
        n_steps = _number("n_steps", steps)
        if duration is None or (not isinstance(duration, bool) and isinstance(duration, numbers.Real)
                                and duration == 0):
            duration_s = n_steps / control_frequency  # steps only (the goal's duration_s 0): what they last
        else:
            duration_s = _number("duration_s", duration)
    else:
        duration_s = _number("duration_s", 10.0 if duration is None else duration)
        try:
            n_steps = rules.check_episode_budget(duration_s, control_frequency)
        except rules.ValueRefused as exc:
            raise RunRefused(exc.field, exc.value, exc.reason) from None
    seed = kw.get("seed")
    if seed is not None:
        seed = _number("seed", seed)
        if seed + n_episodes - 1 > FIELD_LIMITS["seed"].maximum:
            raise _bad("seed", seed, f"seed + n_episodes - 1 = {seed + n_episodes - 1} exceeds the seed range "
                                     f"{FIELD_LIMITS['seed'].text()} (episode i uses seed + i)")
    offset = _number("episode_number_offset", kw.get("episode_number_offset", 0))

    fast_mode = _flag("fast_mode", kw.get("fast_mode", False))
    reset_between = _flag("reset_between", kw.get("reset_between", True))
    async_rtc = _flag("async_rtc", kw.get("async_rtc", False))
    record = _flag("record", kw.get("record", False))
    instruction = _text("instruction", kw.get("instruction", ""))
    robot_name = _text("robot_name", kw.get("robot_name", ""))
    prefix = _text("recording_topic_prefix", kw.get("recording_topic_prefix", DEFAULT_RECORDING_TOPIC_PREFIX))
    prefix = prefix.rstrip("/")
    if prefix and (not prefix.startswith("/") or any(not part or not (part[0].isalpha() or part[0] == "_") or
                                                     not all(c.isalnum() or c == "_" for c in part)
                                                     for part in prefix[1:].split("/"))):
        raise _bad("recording_topic_prefix", kw.get("recording_topic_prefix"),
                   "must be an absolute ROS namespace such as /strands (letters, digits, _; each part starting "
                   "with a letter or _), or empty for the root")
    task = _mapping("task", kw.get("task"))
    if "parameters" in task:  # a station task (a RunEpisode goal's): its parameters by the station's rules
        try:
            check_task_parameters(_mapping("task", task["parameters"]))
        except rules.ValueRefused as exc:
            raise RunRefused(f"task.{exc.field}", exc.value, exc.reason) from None
    config = _mapping("policy_config", kw.get("policy_config"))

    recording_dir = _text("recording_dir", kw.get("recording_dir"))
    fps = kw.get("fps")
    if record:
        if not recording_dir:
            raise _bad("recording_dir", kw.get("recording_dir"), "record=True needs a recording directory")
        _check_recording_dir(recording_dir)
        fps = control_frequency if fps is None else _number("fps", fps)
        if fps != control_frequency:
            raise _bad("fps", fps, f"the recording fps must equal control_frequency ({control_frequency:g}): "
                                   "every control step is one frame")
        try:
            import mcap  # noqa: F401  (the recorder's dependency)
        except ImportError as exc:
            raise _bad("record", True, f"recording needs the mcap package: {exc}") from None
    elif fps is not None:
        fps = _number("fps", fps)

    provider = kw.get("policy_provider", "mock")
    if provider is None:
        provider = "mock"
    if isinstance(provider, str):
        name = provider.strip().lower()
        known = known_providers()
        if name not in known:
            raise _bad("policy_provider", provider, f"unknown policy provider; known providers: {', '.join(known)}")
        try:
            policy = make_policy(provider, config)
        except Exception as exc:
            raise _bad("policy_config", dict(config), f"the {name} provider refused it: {exc}") from None
    elif isinstance(provider, Policy):
        policy = provider
    else:
        raise _bad("policy_provider", provider, "must be a provider name or an object with reset/act/resume")

    return RunSpec(
        policy_provider=provider, policy_config=config, instruction=instruction, duration_s=duration_s,
        control_frequency=control_frequency, action_horizon=action_horizon, fast_mode=fast_mode, n_steps=n_steps,
        n_episodes=n_episodes, reset_between=reset_between, max_onframe_failures=max_onframe, seed=seed,
        async_rtc=async_rtc, rtc_inference_timeout_s=timeout, record=record, recording_dir=recording_dir,
        fps=fps, task=task, robot_name=robot_name, recording_topic_prefix=prefix, episode_number_offset=offset,
        policy=policy)
