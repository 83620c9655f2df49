"""An evaluation job: its validated specification and its state machine.

States and the only legal transitions (spec/evaluation-status.txt)::

    CREATED        -> WAITING_POLICY | FAILED | CANCELLED
    WAITING_POLICY -> RUNNING | FAILED | CANCELLED
    RUNNING        -> FINALIZING | WAITING_POLICY (the policy session was lost; wait for it again)
                      | FAILED | CANCELLED
    FINALIZING     -> SUCCEEDED | FAILED | CANCELLED
    SUCCEEDED, FAILED, CANCELLED: terminal, nothing leaves them

SUCCEEDED means the job ran every episode it was asked for, not that the episodes passed: each episode's
``scored`` and ``success`` say that. A cancel is legal from every non-terminal state. Every transition
carries a message (the job's progress detail or terminal reason).

A job's tasks run in order, cycling until ``episodes_total`` episodes are kept; a discarded episode's task
runs again. No rclpy here: the station node adapts its services onto these classes.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional, Tuple

from strands_robots import validation as rules
from strands_robots.job_model.compare import CompareRequest
from strands_robots.job_model.team_job import INTERVAL_METHODS
from strands_robots.station.limits import IDENTIFIER_MAX
from strands_robots.station.model import (
    TERMINAL_STATES,
    JobState,
    ScoringSheet,
    Task,
)
from strands_robots.station.score_sheet import ScoreSheetError, validate_sheet
from strands_robots.station.task_parameters import check_task_parameters

__all__ = [
    "JobSpec",
    "JobSpecError",
    "JobTransitionError",
    "JobStateMachine",
    "Transition",
    "LEGAL_TRANSITIONS",
    "transition_refusal",
    "validate_job_spec",
    "validate_task",
    "EpisodePlan",
    "plan_episode",
    "DEFAULT_DURATION_S",
    "DEFAULT_CONTROL_FREQUENCY_HZ",
    "INTERVAL_METHODS",
]

LEGAL_TRANSITIONS: Mapping[JobState, frozenset] = MappingProxyType({
    JobState.CREATED: frozenset({JobState.WAITING_POLICY, JobState.FAILED, JobState.CANCELLED}),
    JobState.WAITING_POLICY: frozenset({JobState.RUNNING, JobState.FAILED, JobState.CANCELLED}),
    JobState.RUNNING: frozenset({JobState.FINALIZING, JobState.WAITING_POLICY, JobState.FAILED,
                                 JobState.CANCELLED}),
    JobState.FINALIZING: frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
})

DEFAULT_DURATION_S = 10.0
DEFAULT_CONTROL_FREQUENCY_HZ = 50.0
# Job ids become file names (persistence) and keys (relay): a safe alphabet, bounded length.
_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# Task parameters the station itself reads (per-episode settings); values are strings.
PARAM_DURATION_S = "duration_s"
PARAM_CONTROL_FREQUENCY = "control_frequency"
PARAM_START_POSE_TIMEOUT_S = "start_pose_timeout_s"
PARAM_START_POSE_TOLERANCE_RAD = "start_pose_tolerance_rad"
PARAM_SEED = "seed"
# A parameter "policy.<option>" overrides the job's policy_config[<option>] for that task's episodes (the value
# is JSON when it parses as JSON, else the string): how one simulated job drives mixed end conditions.
POLICY_PARAM_PREFIX = "policy."


class JobSpecError(ValueError):
    """A job was refused. ``task_index`` (None for job-level fields), ``field`` and ``reason`` say why."""

    def __init__(self, field_name: str, reason: str, task_index: Optional[int] = None) -> None:
        self.task_index = task_index
        self.field = field_name
        self.reason = reason
        where = f"tasks[{task_index}].{field_name}" if task_index is not None else field_name
        super().__init__(f"{where}: {reason}")


class JobTransitionError(RuntimeError):
    """An illegal job state transition; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class JobSpec:
    """A validated evaluation job (build it with :func:`validate_job_spec` or ``job_file.job_spec_from_mapping``).

    :param tasks: run in order, cycling until ``episodes_total`` episodes are kept.
    :param policy_provider: the rollout's provider (``mock``, ``replay``, ``scripted``, ``relay``).
    :param policy_config: the provider's options (JSON-compatible).
    :param duration_s: default rollout budget per episode (task parameter ``duration_s`` overrides it).
    :param control_frequency: default control rate in Hz (task parameter ``control_frequency`` overrides it).
    :param max_discards: discarded episodes tolerated before the job fails (a guard against a discard loop).
    :param intervals: how the job's success rates get their 95 % interval: ``wilson`` (the default) or
        ``clopper-pearson`` (``station.summary``).
    :param comparison: a comparison (A/B) job's slots and stop rule (``job_model.compare``); its ``tasks`` are its
        blocks in order (each run by every slot once: ``station.comparison``) and ``episodes_total`` is every
        slot's episode of every block, the most it runs. None: a single-policy job.
    :param record: the team wants its episodes' recordings: each episode is recorded to MCAP and, for a relay
        job, sent to the job's team (a station whose config forbids it refuses the job at submit).
    """

    job_id: str
    client_id: str
    station_id: str
    tasks: Tuple[Task, ...]
    episodes_total: int
    policy_provider: str
    policy_config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    duration_s: float = DEFAULT_DURATION_S
    control_frequency: float = DEFAULT_CONTROL_FREQUENCY_HZ
    max_discards: int = 10
    intervals: str = INTERVAL_METHODS[0]
    comparison: Optional[CompareRequest] = None
    record: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.policy_config, Mapping) and not isinstance(self.policy_config, MappingProxyType):
            object.__setattr__(self, "policy_config", MappingProxyType(dict(self.policy_config)))

    def task_for(self, slot: int) -> Task:
        """Return the task of kept-episode slot ``slot`` (0-based): tasks cycle in order."""
        return self.tasks[slot % len(self.tasks)]


# -- validation -------------------------------------------------------------------------------------------------
# Every range and key is strands_robots.validation's (the relay's SubmitJob and the rollout check by the same
# rules); this turns its refusals into JobSpecErrors naming the task index.
def _non_empty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _refused(exc: rules.ValueRefused, index: Optional[int] = None) -> JobSpecError:
    return JobSpecError(exc.field, exc.reason, index)


def validate_task(task: Any, index: int) -> Task:
    """Return ``task`` when valid; raise :class:`JobSpecError` naming ``tasks[index]``, the field and why.

    Checked: the free text (``task_id``, ``instruction``, ``layout``: ``station.limits``), every parameter (a
    known key of ``station.task_parameters.TASK_PARAMETERS`` or a ``policy.``/``answer.`` prefix, its value in
    range) and the score sheet (``score_sheet.validate_sheet``).
    """
    if not isinstance(task, Task):
        raise JobSpecError("task", f"must be a Task, got {type(task).__name__}", index)
    try:
        rules.check_task_text(task.task_id, task.instruction, task.layout)
    except rules.ValueRefused as exc:
        raise _refused(exc, index) from None
    if not isinstance(task.scoring, ScoringSheet):
        raise JobSpecError("scoring", f"must be a ScoringSheet, got {type(task.scoring).__name__}", index)
    try:
        validate_sheet(task.scoring)
    except ScoreSheetError as exc:
        raise JobSpecError("scoring", str(exc), index) from exc
    try:
        check_task_parameters(task.parameters, task.scoring)
    except rules.ValueRefused as exc:
        raise _refused(exc, index) from None
    return task


def _check_budgets(spec: JobSpec) -> None:
    """Check every task's episode budget: its duration (task or job) at its rate (task or job) is 1..n_steps max."""
    for index, task in enumerate(spec.tasks):
        params = task.parameters
        duration = float(params.get(PARAM_DURATION_S, spec.duration_s))
        frequency = float(params.get(PARAM_CONTROL_FREQUENCY, spec.control_frequency))
        field_name = f"parameters[{PARAM_DURATION_S!r}]" if PARAM_DURATION_S in params else PARAM_DURATION_S
        try:
            rules.check_episode_budget(duration, frequency, field_name)
        except rules.ValueRefused as exc:
            raise _refused(exc, index if PARAM_DURATION_S in params or PARAM_CONTROL_FREQUENCY in params
                           else None) from None


def _without_seed(task: Task) -> Task:
    """Return the task as its trials share it: a suite task's trials differ only in their seed."""
    if PARAM_SEED not in task.parameters:
        return task
    return Task(task.task_id, task.instruction, task.layout,
                {k: v for k, v in task.parameters.items() if k != PARAM_SEED}, task.scoring)


def validate_job_spec(spec: Any) -> JobSpec:
    """Return ``spec`` when every field is valid; raise :class:`JobSpecError` at the first invalid one.

    The ranges are ``validation.JOB_LIMITS`` (episodes, tasks, discards) and ``validation.RUN_LIMITS`` (the
    job's default ``duration_s`` and ``control_frequency``); each task by :func:`validate_task`.
    """
    if not isinstance(spec, JobSpec):
        raise JobSpecError("job", f"must be a JobSpec, got {type(spec).__name__}")
    for name in ("job_id", "client_id", "station_id"):
        if not _non_empty_str(getattr(spec, name)):
            raise JobSpecError(name, "must be a non-empty string")
        try:
            rules.check_text_field(name, getattr(spec, name), IDENTIFIER_MAX)
        except rules.ValueRefused as exc:
            raise _refused(exc) from None
    if not _ID_PATTERN.match(spec.job_id):
        raise JobSpecError("job_id", f"must be 1-128 characters of letters, digits, '.', '_', '-' starting with "
                                     f"a letter or digit, got {spec.job_id!r}")
    try:
        rules.check_number("episodes_total", spec.episodes_total, rules.JOB_LIMITS["episodes_total"])
        if isinstance(spec.episodes_total, float):
            raise rules.ValueRefused("episodes_total", spec.episodes_total,
                                     f"episodes_total={spec.episodes_total!r} refused: must be an integer")
    except rules.ValueRefused as exc:
        raise _refused(exc) from None
    if not isinstance(spec.tasks, tuple) or not spec.tasks:
        raise JobSpecError("tasks", "a job needs at least one task")
    try:
        rules.check_number("tasks", len(spec.tasks), rules.JOB_LIMITS["tasks"])
    except rules.ValueRefused as exc:
        raise _refused(exc) from None
    first_index: dict = {}
    for index, task in enumerate(spec.tasks):
        validate_task(task, index)
        earlier = first_index.setdefault(task.task_id, index)
        if earlier != index and _without_seed(spec.tasks[earlier]) != _without_seed(task):
            raise JobSpecError("task_id", f"{task.task_id!r} is also tasks[{earlier}] with a different definition",
                               index)
    if not _non_empty_str(spec.policy_provider):
        raise JobSpecError("policy_provider", "must name a policy provider")
    try:
        rules.check_text_field("policy_provider", spec.policy_provider, IDENTIFIER_MAX)
        rules.check_policy_config(spec.policy_config)
        for name in ("duration_s", "control_frequency"):  # the defaults of tasks that do not set them
            rules.check_number(name, getattr(spec, name), rules.RUN_LIMITS[name])
        if isinstance(spec.max_discards, float):
            raise rules.ValueRefused("max_discards", spec.max_discards,
                                     f"max_discards={spec.max_discards!r} refused: must be an integer")
        rules.check_number("max_discards", spec.max_discards, rules.JOB_LIMITS["max_discards"])
    except rules.ValueRefused as exc:
        raise _refused(exc) from None
    if not isinstance(spec.record, bool):
        raise JobSpecError("record", f"must be true or false, got {spec.record!r}")
    if spec.intervals not in INTERVAL_METHODS:
        raise JobSpecError("intervals", f"{spec.intervals!r} refused: must be one of {', '.join(INTERVAL_METHODS)}")
    _check_comparison(spec)
    _check_budgets(spec)
    _check_policies(spec)
    check_job_images(spec)
    return spec


def _check_comparison(spec: JobSpec) -> None:
    """Check a comparison job: its slots and stop rule are well formed; every slot runs once in every block."""
    compare = spec.comparison
    if compare is None:
        return
    if not isinstance(compare, CompareRequest):
        raise JobSpecError("comparison", f"must be a CompareRequest, got {type(compare).__name__}")
    from strands_robots.job_model.compare import compare_from_mapping, compare_to_mapping
    from strands_robots.job_model.team_keys import TeamJobRefused

    try:
        compare_from_mapping(compare_to_mapping(compare))
    except TeamJobRefused as exc:
        raise JobSpecError(exc.field, exc.reason) from None
    expected = len(spec.tasks) * len(compare.slots)
    if spec.episodes_total != expected:
        raise JobSpecError("episodes_total", f"{spec.episodes_total} refused: a comparison of {len(compare.slots)} "
                                             f"slots over {len(spec.tasks)} blocks runs {expected} episodes at most")
    if compare.stop is not None and compare.stop.max_blocks is not None and compare.stop.max_blocks < len(spec.tasks):
        raise JobSpecError("compare.stop.max_blocks", f"{compare.stop.max_blocks} refused: the job lists "
                                                      f"{len(spec.tasks)} blocks")


def check_job_images(spec: JobSpec, sizes: Optional[Mapping[str, Tuple[int, int]]] = None,
                     max_message_bytes: Optional[int] = None, observed: Optional[Tuple[str, ...]] = None) -> None:
    """Refuse a relay job a task of which asks for images that can never be served (``cameras.image_budget``).

    :param sizes: the station's cameras a task may name and the ``(width, height)`` each renders (None: not known;
        only the sizes a task names are checked).
    :param max_message_bytes: the relay's largest message (None: the relay's default).
    :param observed: the cameras every observation holds (None: not known).
    :raises JobSpecError: ``tasks[i].parameters`` naming the task's camera request and why it cannot be served.
    """
    if spec.policy_provider != "relay":  # images go to a policy only through the relay
        return
    from strands_robots.cameras.image_budget import image_request_refusal
    from strands_robots.cameras.request import PARAM_CAMERAS, PARAM_FORMAT, CameraRequestError, image_request

    if max_message_bytes is None:
        from strands_robots.wire.message_size import MAX_MESSAGE_BYTES

        max_message_bytes = MAX_MESSAGE_BYTES
    for index, task in enumerate(spec.tasks):
        params = task.parameters
        try:
            request = image_request(params)
        except CameraRequestError as exc:
            raise JobSpecError("parameters", str(exc), index) from None
        rate = float(params.get(PARAM_CONTROL_FREQUENCY, spec.control_frequency))
        reason = image_request_refusal(request, sizes, rate, max_message_bytes, observed)
        if reason:
            asked = f"{PARAM_CAMERAS}={params.get(PARAM_CAMERAS, '(every camera)')!r}, " \
                    f"{PARAM_FORMAT}={request.format!r}"
            raise JobSpecError("parameters", f"{asked} refused: {reason}", index)


def _check_policies(spec: JobSpec) -> None:
    """Check the policy each task's episodes get (the job's config with the task's ``policy.*`` overrides)."""
    try:
        rules.check_policy(spec.policy_provider, spec.policy_config)
    except rules.ValueRefused as exc:
        raise _refused(exc) from None
    checked: set = set()
    for index, task in enumerate(spec.tasks):
        overrides = tuple((k, v) for k, v in task.parameters.items() if k.startswith(POLICY_PARAM_PREFIX))
        if not overrides or overrides in checked:
            continue
        checked.add(overrides)
        config = dict(spec.policy_config)
        config.update((k[len(POLICY_PARAM_PREFIX):], _policy_value(v)) for k, v in overrides)
        try:
            rules.check_policy(spec.policy_provider, config)
        except rules.ValueRefused as exc:
            keys = ", ".join(k for k, _ in overrides)
            raise JobSpecError("parameters", f"{exc.reason} (with this task's {keys})", index) from None


# -- one episode's plan -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EpisodePlan:
    """Everything the station's robot side needs to run one episode.

    ``start_pose_tolerance_rad`` / ``start_pose_timeout_s`` are 0.0 for the driver's configured values;
    ``seed`` is None for none. A comparison job's episode also names its slot (``compare_slot``: whose policy
    session serves it; never shown to the operator), the slot's ``blind_label`` in this block (what the operator
    is shown), its ``block_id`` and its ``block_position`` in the block's order; empty / None otherwise.
    """

    episode_id: str
    slot: int
    attempt: int
    task: Task
    policy_provider: str
    policy_config: Mapping[str, Any]
    duration_s: float
    control_frequency: float
    start_pose_tolerance_rad: float = 0.0
    start_pose_timeout_s: float = 0.0
    seed: Optional[int] = None
    compare_slot: str = ""
    blind_label: str = ""
    block_id: str = ""
    block_position: Optional[int] = None
    record: bool = False  # the job asked for its episodes' recordings


def _policy_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def plan_episode(spec: JobSpec, episode_id: str, slot: int, attempt: int = 0) -> EpisodePlan:
    """Plan episode ``episode_id`` running kept-slot ``slot`` (``attempt`` 0 the first time)."""
    task = spec.task_for(slot)
    params = task.parameters
    config = dict(spec.policy_config)
    for key, value in params.items():
        if key.startswith(POLICY_PARAM_PREFIX):
            config[key[len(POLICY_PARAM_PREFIX):]] = _policy_value(value)
    seed = int(params[PARAM_SEED]) if PARAM_SEED in params else None
    return EpisodePlan(
        episode_id=episode_id,
        slot=slot,
        attempt=attempt,
        task=task,
        policy_provider=spec.policy_provider,
        policy_config=MappingProxyType(config),
        duration_s=float(params.get(PARAM_DURATION_S, spec.duration_s)),
        control_frequency=float(params.get(PARAM_CONTROL_FREQUENCY, spec.control_frequency)),
        start_pose_tolerance_rad=float(params.get(PARAM_START_POSE_TOLERANCE_RAD, 0.0)),
        start_pose_timeout_s=float(params.get(PARAM_START_POSE_TIMEOUT_S, 0.0)),
        seed=seed,
        record=spec.record,
    )


# -- the state machine ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Transition:
    """One state change: from, to, its message, and when (the machine's clock, ms since the Unix epoch)."""

    from_state: JobState
    to_state: JobState
    message: str
    unix_ms: int


def transition_refusal(current: JobState, target: JobState) -> str:
    """Why ``current -> target`` is illegal; empty when it is legal."""
    if not isinstance(target, JobState):
        return f"{target!r} is not a job state ({', '.join(s.value for s in JobState)})"
    if current in TERMINAL_STATES:
        return f"the job is {current.value}, a terminal state: no transition leaves it"
    allowed = LEGAL_TRANSITIONS[current]
    if target in allowed:
        return ""
    names = ", ".join(s.value for s in JobState if s in allowed)
    return f"{current.value} -> {target.value} is not a legal transition (from {current.value}: {names})"


class JobStateMachine:
    """A job's state with only the legal transitions. Thread-safe.

    :param clock_ms: ms since the Unix epoch (injectable for tests); stamps every transition.
    :param on_transition: called with each :class:`Transition` after it happened, outside the lock.
    """

    def __init__(
        self,
        state: JobState = JobState.CREATED,
        message: str = "",
        *,
        clock_ms: Optional[Callable[[], int]] = None,
        on_transition: Optional[Callable[[Transition], None]] = None,
    ) -> None:
        if not isinstance(state, JobState):
            raise ValueError(f"state must be a JobState, got {state!r}")
        import time

        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._lock = threading.Lock()
        self._state = state
        self._message = str(message)
        self._history: list = []
        self._on_transition = on_transition

    @property
    def state(self) -> JobState:
        with self._lock:
            return self._state

    @property
    def message(self) -> str:
        with self._lock:
            return self._message

    @property
    def terminal(self) -> bool:
        with self._lock:
            return self._state in TERMINAL_STATES

    def history(self) -> Tuple[Transition, ...]:
        """Every transition this machine made, oldest first."""
        with self._lock:
            return tuple(self._history)

    def transition(self, target: JobState, message: str) -> Transition:
        """Move to ``target`` with ``message`` (required: the job's progress detail or terminal reason).

        :raises JobTransitionError: the transition is illegal (with the reason), or the message is empty.
        """
        if not isinstance(message, str) or not message.strip():
            raise JobTransitionError(f"a transition to {getattr(target, 'value', target)} needs a message")
        with self._lock:
            refusal = transition_refusal(self._state, target)
            if refusal:
                raise JobTransitionError(refusal)
            record = Transition(self._state, target, message, int(self._clock_ms()))
            self._state = target
            self._message = message
            self._history.append(record)
        if self._on_transition is not None:
            self._on_transition(record)
        return record

    def cancel(self, message: str) -> Transition:
        """Move to CANCELLED, from any non-terminal state.

        :raises JobTransitionError: the job already ended (the reason names its terminal state).
        """
        return self.transition(JobState.CANCELLED, message)

    def set_message(self, message: str) -> None:
        """Update the progress detail without changing state (e.g. "ep_0003 running")."""
        with self._lock:
            self._message = str(message)
