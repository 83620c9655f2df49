"""The station's data model, shared with the relay and the Evaluation Client (spec/evaluation-status.txt).

Frozen dataclasses and string enums, no ROS and no protobuf: the relay's protobuf messages carry the same
names and fields. Values the spec gives as strings (job state, end condition) stay those strings.

Score sheet arithmetic (``score_sheet.py`` validates and scores):

- ``yes_no``: ``True`` ("yes") earns ``max_points``, ``False`` earns 0.
- ``count``: ``min(count * points_per_unit, max_points)``.
- ``choice``: ``choice_points[index]``, each in ``[0, max_points]``.

An episode's score is ``sum(points) / sum(max_points)``, 0.0 when nothing carries weight. ``scored=False``
means no sheet was submitted: ``items`` is empty, ``success`` is False and ``score`` 0.0 (not meaningful).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Mapping, Optional, Tuple, Union

from strands_robots.rollout.end_condition import (
    END_AUTHORITY_LOST,
    END_CONDITIONS,
    END_INFRASTRUCTURE_FAULT,
    END_LEASE_LOST,
    END_POLICY_COMPLETED,
    END_POLICY_ERROR,
    END_SAFETY_STOP,
    END_START_POSE_UNREACHED,
    END_TIMEOUT,
    STATION_END_CONDITIONS,
)

__all__ = [
    "AnswerType",
    "JobState",
    "TERMINAL_STATES",
    "END_CONDITIONS",
    "END_TIMEOUT",
    "END_POLICY_COMPLETED",
    "END_LEASE_LOST",
    "END_AUTHORITY_LOST",
    "END_SAFETY_STOP",
    "END_START_POSE_UNREACHED",
    "END_POLICY_ERROR",
    "END_INFRASTRUCTURE_FAULT",
    "STATION_END_CONDITIONS",
    "Answer",
    "ScoringItemDefinition",
    "ScoringSheet",
    "Task",
    "ScoredItem",
    "EpisodeResult",
    "EPISODE_FIGURES",
    "episode_figures",
    "COMPARISON_PLACE",
    "comparison_place",
    "JobStatus",
    "frozen_parameters",
]


class AnswerType(str, Enum):
    """How an operator answers a score-sheet item."""

    YES_NO = "yes_no"
    COUNT = "count"
    CHOICE = "choice"


class JobState(str, Enum):
    """A job's lifecycle state; the value is the spec's string."""

    CREATED = "CREATED"
    WAITING_POLICY = "WAITING_POLICY"
    RUNNING = "RUNNING"
    FINALIZING = "FINALIZING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        """True for SUCCEEDED, FAILED and CANCELLED (no transition leaves them)."""
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
JobState.TERMINAL = TERMINAL_STATES  # type: ignore[attr-defined]  # the model's agreed spelling

#: A typed answer: ``bool`` for yes_no, ``int >= 0`` for count, ``int`` choice index for choice.
Answer = Union[bool, int]


def frozen_parameters(parameters: Mapping[str, str] | None) -> Mapping[str, str]:
    """Return a read-only copy of a task's parameters (keys and values as strings, insertion order kept)."""
    return MappingProxyType(dict(parameters or {}))


@dataclass(frozen=True)
class ScoringItemDefinition:
    """One question of a score sheet, with how its answer earns points.

    :param success_answer: on the success item only: ``"yes"``/``"no"`` for yes_no, one of ``choices`` for
        choice, or the minimum count (``"3"``) for count.
    """

    name: str
    question: str
    answer_type: AnswerType
    max_points: float
    choices: Tuple[str, ...] = ()
    choice_points: Tuple[float, ...] = ()
    points_per_unit: float = 0.0
    success_answer: str = ""


@dataclass(frozen=True)
class ScoringSheet:
    """A task's score sheet; ``items[0]`` is the success item."""

    items: Tuple[ScoringItemDefinition, ...]

    @property
    def max_points(self) -> float:
        """The sheet's maximum: the sum of every item's ``max_points``."""
        return float(sum(item.max_points for item in self.items))


@dataclass(frozen=True)
class Task:
    """What one episode runs: the instruction, layout, parameters and score sheet (the exact ones used)."""

    task_id: str
    instruction: str
    layout: str = ""
    parameters: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    scoring: ScoringSheet = field(default_factory=lambda: ScoringSheet(()))

    def __post_init__(self) -> None:
        if not isinstance(self.parameters, MappingProxyType):
            object.__setattr__(self, "parameters", frozen_parameters(self.parameters))

    def __hash__(self) -> int:
        return hash((self.task_id, self.instruction, self.layout, tuple(self.parameters.items()), self.scoring))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Task):
            return NotImplemented
        return (
            self.task_id == other.task_id
            and self.instruction == other.instruction
            and self.layout == other.layout
            and dict(self.parameters) == dict(other.parameters)
            and self.scoring == other.scoring
        )


@dataclass(frozen=True)
class ScoredItem:
    """One answered item of a submitted sheet."""

    name: str
    question: str
    answer_type: AnswerType
    answer: Answer
    points: float
    max_points: float
    is_success_item: bool


@dataclass(frozen=True)
class EpisodeResult:
    """One finished episode (spec: EpisodeResult)."""

    episode_id: str
    end_condition: str
    scored: bool
    success: bool
    score: float
    items: Tuple[ScoredItem, ...]
    task: Task
    taken_over: bool
    end_detail: str
    run_id: str = ""
    recording_sha256: str = ""  # SHA-256 (hex) of the episode's MCAP recording; empty when not recorded
    # Both meanings of success (station.success_judgement; None when the task has no success predicate) ...
    success_at_end: Optional[bool] = None   # the predicate held on the final observation
    success_ever: Optional[bool] = None     # it held on some observation of the episode (a step's or the final one)
    # ... and what the score should be read against (None when no rollout ran)
    inference_latency_p50_ms: Optional[float] = None
    inference_latency_p99_ms: Optional[float] = None
    mean_observation_age_steps: Optional[float] = None  # of the observations the actions were inferred from
    missed_deadlines: Optional[int] = None
    # A comparison job's episode (station.comparison): its slot, its block, its place in the block's order, the
    # seed it ran with; None for a single-policy job's episode.
    slot: Optional[str] = None
    block_id: Optional[str] = None
    block_position: Optional[int] = None
    seed: Optional[int] = None


#: The episode's optional figures (absent: None) and their kinds: both meanings of success and what the score
#: should be read against. Every conversion (protobuf, ROS, the job's JSON) carries them by this list.
EPISODE_FIGURES: Tuple[Tuple[str, type], ...] = (
    ("success_at_end", bool), ("success_ever", bool), ("inference_latency_p50_ms", float),
    ("inference_latency_p99_ms", float), ("mean_observation_age_steps", float), ("missed_deadlines", int),
)


#: A comparison job episode's place (absent: None) and their kinds; the protobuf and the job's JSON carry them.
COMPARISON_PLACE: Tuple[Tuple[str, type], ...] = (
    ("slot", str), ("block_id", str), ("block_position", int), ("seed", int),
)


def comparison_place(values: Mapping[str, object]) -> dict:
    """Return the :data:`COMPARISON_PLACE` fields present in ``values`` (absent or None left out), each of its kind."""
    return {name: kind(values[name]) for name, kind in COMPARISON_PLACE if values.get(name) is not None}


def episode_figures(values: Mapping[str, object]) -> dict:
    """Return the :data:`EPISODE_FIGURES` present in ``values`` (absent or None left out), each of its kind."""
    out: dict = {}
    for name, kind in EPISODE_FIGURES:
        value = values.get(name)
        if value is not None:
            out[name] = kind(value)
    return out


@dataclass(frozen=True)
class ConfigHash:
    """One file a job ran with (``arms.yaml``, ``cameras.yaml``, ``job``), where it was read, its SHA-256."""

    name: str
    path: str
    sha256: str


@dataclass(frozen=True)
class SlotPolicySpec:
    """One comparison slot's declared policy spec (``PolicySpec.to_dict`` as JSON; "" when it declared none)."""

    slot: str
    policy_spec_json: str = ""


@dataclass(frozen=True)
class Provenance:
    """What produced a job's scores: the station's software and files, and the policy's declared spec (JSON).

    A comparison records every slot's declared spec in ``slot_specs`` (the job's slot order); its
    ``policy_spec_json`` is the first slot's, as a reader knowing only that field reads it.
    """

    software_version: str = ""
    git_revision: str = ""
    config_files: Tuple[ConfigHash, ...] = ()
    policy_spec_json: str = ""
    slot_specs: Tuple[SlotPolicySpec, ...] = ()


@dataclass(frozen=True)
class JobStatus:
    """The latest snapshot of a job as the station produced it (spec: JobStatus).

    :param sequence: the job's snapshot number at its station: one more for every snapshot the station makes of
        the job, persisted with the job, so it keeps growing across restarts. Snapshots are ordered by it, never
        by ``updated_unix_ms`` (the station's wall clock may jump).
    """

    job_id: str
    station_id: str
    state: JobState
    episodes_total: int
    episodes: Tuple[EpisodeResult, ...]
    updated_unix_ms: int
    message: str
    sequence: int = 0
    provenance: Optional[Provenance] = None
    #: the job's figures with their intervals (``station.summary.JobSummary``), computed by the station from
    #: these episodes and the job's discards; None from a producer that sends none.
    summary: Optional[Any] = None
    #: a comparison job's result (``station.comparison.Comparison``); None for a single-policy job.
    comparison: Optional[Any] = None


@dataclass(frozen=True)
class OperatorReply:
    """The answer to an operator action: ``ok``, or why not in ``message``."""

    ok: bool
    message: str
