from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AnswerType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ANSWER_TYPE_UNSPECIFIED: _ClassVar[AnswerType]
    ANSWER_TYPE_YES_NO: _ClassVar[AnswerType]
    ANSWER_TYPE_COUNT: _ClassVar[AnswerType]
    ANSWER_TYPE_CHOICE: _ClassVar[AnswerType]
ANSWER_TYPE_UNSPECIFIED: AnswerType
ANSWER_TYPE_YES_NO: AnswerType
ANSWER_TYPE_COUNT: AnswerType
ANSWER_TYPE_CHOICE: AnswerType

class ScoringItemDefinition(_message.Message):
    __slots__ = ("name", "question", "answer_type", "max_points", "choices", "choice_points", "points_per_unit", "success_answer")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    ANSWER_TYPE_FIELD_NUMBER: _ClassVar[int]
    MAX_POINTS_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    CHOICE_POINTS_FIELD_NUMBER: _ClassVar[int]
    POINTS_PER_UNIT_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_ANSWER_FIELD_NUMBER: _ClassVar[int]
    name: str
    question: str
    answer_type: AnswerType
    max_points: float
    choices: _containers.RepeatedScalarFieldContainer[str]
    choice_points: _containers.RepeatedScalarFieldContainer[float]
    points_per_unit: float
    success_answer: str
    def __init__(self, name: _Optional[str] = ..., question: _Optional[str] = ..., answer_type: _Optional[_Union[AnswerType, str]] = ..., max_points: _Optional[float] = ..., choices: _Optional[_Iterable[str]] = ..., choice_points: _Optional[_Iterable[float]] = ..., points_per_unit: _Optional[float] = ..., success_answer: _Optional[str] = ...) -> None: ...

class ScoringSheet(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ScoringItemDefinition]
    def __init__(self, items: _Optional[_Iterable[_Union[ScoringItemDefinition, _Mapping]]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("task_id", "instruction", "layout", "parameters", "scoring")
    class ParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    SCORING_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    instruction: str
    layout: str
    parameters: _containers.ScalarMap[str, str]
    scoring: ScoringSheet
    def __init__(self, task_id: _Optional[str] = ..., instruction: _Optional[str] = ..., layout: _Optional[str] = ..., parameters: _Optional[_Mapping[str, str]] = ..., scoring: _Optional[_Union[ScoringSheet, _Mapping]] = ...) -> None: ...

class ScoredItem(_message.Message):
    __slots__ = ("name", "question", "answer_type", "yes_no", "count", "choice_index", "points", "max_points", "is_success_item")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    ANSWER_TYPE_FIELD_NUMBER: _ClassVar[int]
    YES_NO_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    CHOICE_INDEX_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    MAX_POINTS_FIELD_NUMBER: _ClassVar[int]
    IS_SUCCESS_ITEM_FIELD_NUMBER: _ClassVar[int]
    name: str
    question: str
    answer_type: AnswerType
    yes_no: bool
    count: int
    choice_index: int
    points: float
    max_points: float
    is_success_item: bool
    def __init__(self, name: _Optional[str] = ..., question: _Optional[str] = ..., answer_type: _Optional[_Union[AnswerType, str]] = ..., yes_no: _Optional[bool] = ..., count: _Optional[int] = ..., choice_index: _Optional[int] = ..., points: _Optional[float] = ..., max_points: _Optional[float] = ..., is_success_item: _Optional[bool] = ...) -> None: ...

class EpisodeResult(_message.Message):
    __slots__ = ("episode_id", "end_condition", "scored", "success", "score", "items", "task", "taken_over", "end_detail", "run_id", "recording_sha256", "success_at_end", "success_ever", "inference_latency_p50_ms", "inference_latency_p99_ms", "mean_observation_age_steps", "missed_deadlines")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    END_CONDITION_FIELD_NUMBER: _ClassVar[int]
    SCORED_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TAKEN_OVER_FIELD_NUMBER: _ClassVar[int]
    END_DETAIL_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDING_SHA256_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_AT_END_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_EVER_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_LATENCY_P50_MS_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_LATENCY_P99_MS_FIELD_NUMBER: _ClassVar[int]
    MEAN_OBSERVATION_AGE_STEPS_FIELD_NUMBER: _ClassVar[int]
    MISSED_DEADLINES_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    end_condition: str
    scored: bool
    success: bool
    score: float
    items: _containers.RepeatedCompositeFieldContainer[ScoredItem]
    task: Task
    taken_over: bool
    end_detail: str
    run_id: str
    recording_sha256: str
    success_at_end: bool
    success_ever: bool
    inference_latency_p50_ms: float
    inference_latency_p99_ms: float
    mean_observation_age_steps: float
    missed_deadlines: int
    def __init__(self, episode_id: _Optional[str] = ..., end_condition: _Optional[str] = ..., scored: _Optional[bool] = ..., success: _Optional[bool] = ..., score: _Optional[float] = ..., items: _Optional[_Iterable[_Union[ScoredItem, _Mapping]]] = ..., task: _Optional[_Union[Task, _Mapping]] = ..., taken_over: _Optional[bool] = ..., end_detail: _Optional[str] = ..., run_id: _Optional[str] = ..., recording_sha256: _Optional[str] = ..., success_at_end: _Optional[bool] = ..., success_ever: _Optional[bool] = ..., inference_latency_p50_ms: _Optional[float] = ..., inference_latency_p99_ms: _Optional[float] = ..., mean_observation_age_steps: _Optional[float] = ..., missed_deadlines: _Optional[int] = ...) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ("job_id", "station_id", "state", "episodes_total", "episodes", "updated_unix_ms", "message", "station_last_heard_unix_ms", "sequence", "provenance", "summary")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EPISODES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    UPDATED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATION_LAST_HEARD_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    station_id: str
    state: str
    episodes_total: int
    episodes: _containers.RepeatedCompositeFieldContainer[EpisodeResult]
    updated_unix_ms: int
    message: str
    station_last_heard_unix_ms: int
    sequence: int
    provenance: Provenance
    summary: JobFigures
    def __init__(self, job_id: _Optional[str] = ..., station_id: _Optional[str] = ..., state: _Optional[str] = ..., episodes_total: _Optional[int] = ..., episodes: _Optional[_Iterable[_Union[EpisodeResult, _Mapping]]] = ..., updated_unix_ms: _Optional[int] = ..., message: _Optional[str] = ..., station_last_heard_unix_ms: _Optional[int] = ..., sequence: _Optional[int] = ..., provenance: _Optional[_Union[Provenance, _Mapping]] = ..., summary: _Optional[_Union[JobFigures, _Mapping]] = ...) -> None: ...

class Rate(_message.Message):
    __slots__ = ("successes", "trials", "rate", "low", "high", "method", "confidence", "note")
    SUCCESSES_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    successes: int
    trials: int
    rate: float
    low: float
    high: float
    method: str
    confidence: float
    note: str
    def __init__(self, successes: _Optional[int] = ..., trials: _Optional[int] = ..., rate: _Optional[float] = ..., low: _Optional[float] = ..., high: _Optional[float] = ..., method: _Optional[str] = ..., confidence: _Optional[float] = ..., note: _Optional[str] = ...) -> None: ...

class MeanScore(_message.Message):
    __slots__ = ("n", "mean", "low", "high", "method", "confidence", "n_resamples", "seed", "note")
    N_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    N_RESAMPLES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    n: int
    mean: float
    low: float
    high: float
    method: str
    confidence: float
    n_resamples: int
    seed: int
    note: str
    def __init__(self, n: _Optional[int] = ..., mean: _Optional[float] = ..., low: _Optional[float] = ..., high: _Optional[float] = ..., method: _Optional[str] = ..., confidence: _Optional[float] = ..., n_resamples: _Optional[int] = ..., seed: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class Coverage(_message.Message):
    __slots__ = ("scored", "faulted", "safety_stopped", "discarded", "taken_over", "unscored", "interrupted")
    SCORED_FIELD_NUMBER: _ClassVar[int]
    FAULTED_FIELD_NUMBER: _ClassVar[int]
    SAFETY_STOPPED_FIELD_NUMBER: _ClassVar[int]
    DISCARDED_FIELD_NUMBER: _ClassVar[int]
    TAKEN_OVER_FIELD_NUMBER: _ClassVar[int]
    UNSCORED_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    scored: int
    faulted: int
    safety_stopped: int
    discarded: int
    taken_over: int
    unscored: int
    interrupted: int
    def __init__(self, scored: _Optional[int] = ..., faulted: _Optional[int] = ..., safety_stopped: _Optional[int] = ..., discarded: _Optional[int] = ..., taken_over: _Optional[int] = ..., unscored: _Optional[int] = ..., interrupted: _Optional[int] = ...) -> None: ...

class TaskFigures(_message.Message):
    __slots__ = ("task_id", "success", "score", "coverage")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    success: Rate
    score: MeanScore
    coverage: Coverage
    def __init__(self, task_id: _Optional[str] = ..., success: _Optional[_Union[Rate, _Mapping]] = ..., score: _Optional[_Union[MeanScore, _Mapping]] = ..., coverage: _Optional[_Union[Coverage, _Mapping]] = ...) -> None: ...

class JobFigures(_message.Message):
    __slots__ = ("success", "score", "coverage", "tasks")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    success: Rate
    score: MeanScore
    coverage: Coverage
    tasks: _containers.RepeatedCompositeFieldContainer[TaskFigures]
    def __init__(self, success: _Optional[_Union[Rate, _Mapping]] = ..., score: _Optional[_Union[MeanScore, _Mapping]] = ..., coverage: _Optional[_Union[Coverage, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[TaskFigures, _Mapping]]] = ...) -> None: ...

class ConfigHash(_message.Message):
    __slots__ = ("name", "path", "sha256")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    sha256: str
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class Provenance(_message.Message):
    __slots__ = ("software_version", "git_revision", "config_files", "policy_spec_json")
    SOFTWARE_VERSION_FIELD_NUMBER: _ClassVar[int]
    GIT_REVISION_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FILES_FIELD_NUMBER: _ClassVar[int]
    POLICY_SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    software_version: str
    git_revision: str
    config_files: _containers.RepeatedCompositeFieldContainer[ConfigHash]
    policy_spec_json: str
    def __init__(self, software_version: _Optional[str] = ..., git_revision: _Optional[str] = ..., config_files: _Optional[_Iterable[_Union[ConfigHash, _Mapping]]] = ..., policy_spec_json: _Optional[str] = ...) -> None: ...
