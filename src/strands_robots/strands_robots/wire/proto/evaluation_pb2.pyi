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
    __slots__ = ("episode_id", "end_condition", "scored", "success", "score", "items", "task", "taken_over", "end_detail", "run_id", "recording_sha256", "success_at_end", "success_ever", "inference_latency_p50_ms", "inference_latency_p99_ms", "mean_observation_age_steps", "missed_deadlines", "slot", "block_id", "block_position", "seed")
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
    SLOT_FIELD_NUMBER: _ClassVar[int]
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCK_POSITION_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
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
    slot: str
    block_id: str
    block_position: int
    seed: int
    def __init__(self, episode_id: _Optional[str] = ..., end_condition: _Optional[str] = ..., scored: _Optional[bool] = ..., success: _Optional[bool] = ..., score: _Optional[float] = ..., items: _Optional[_Iterable[_Union[ScoredItem, _Mapping]]] = ..., task: _Optional[_Union[Task, _Mapping]] = ..., taken_over: _Optional[bool] = ..., end_detail: _Optional[str] = ..., run_id: _Optional[str] = ..., recording_sha256: _Optional[str] = ..., success_at_end: _Optional[bool] = ..., success_ever: _Optional[bool] = ..., inference_latency_p50_ms: _Optional[float] = ..., inference_latency_p99_ms: _Optional[float] = ..., mean_observation_age_steps: _Optional[float] = ..., missed_deadlines: _Optional[int] = ..., slot: _Optional[str] = ..., block_id: _Optional[str] = ..., block_position: _Optional[int] = ..., seed: _Optional[int] = ...) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ("job_id", "station_id", "state", "episodes_total", "episodes", "updated_unix_ms", "message", "station_last_heard_unix_ms", "sequence", "provenance", "summary", "comparison")
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
    COMPARISON_FIELD_NUMBER: _ClassVar[int]
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
    comparison: Comparison
    def __init__(self, job_id: _Optional[str] = ..., station_id: _Optional[str] = ..., state: _Optional[str] = ..., episodes_total: _Optional[int] = ..., episodes: _Optional[_Iterable[_Union[EpisodeResult, _Mapping]]] = ..., updated_unix_ms: _Optional[int] = ..., message: _Optional[str] = ..., station_last_heard_unix_ms: _Optional[int] = ..., sequence: _Optional[int] = ..., provenance: _Optional[_Union[Provenance, _Mapping]] = ..., summary: _Optional[_Union[JobFigures, _Mapping]] = ..., comparison: _Optional[_Union[Comparison, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("software_version", "git_revision", "config_files", "policy_spec_json", "slot_specs")
    SOFTWARE_VERSION_FIELD_NUMBER: _ClassVar[int]
    GIT_REVISION_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FILES_FIELD_NUMBER: _ClassVar[int]
    POLICY_SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    SLOT_SPECS_FIELD_NUMBER: _ClassVar[int]
    software_version: str
    git_revision: str
    config_files: _containers.RepeatedCompositeFieldContainer[ConfigHash]
    policy_spec_json: str
    slot_specs: _containers.RepeatedCompositeFieldContainer[SlotPolicySpec]
    def __init__(self, software_version: _Optional[str] = ..., git_revision: _Optional[str] = ..., config_files: _Optional[_Iterable[_Union[ConfigHash, _Mapping]]] = ..., policy_spec_json: _Optional[str] = ..., slot_specs: _Optional[_Iterable[_Union[SlotPolicySpec, _Mapping]]] = ...) -> None: ...

class SlotPolicySpec(_message.Message):
    __slots__ = ("slot", "policy_spec_json")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    POLICY_SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    slot: str
    policy_spec_json: str
    def __init__(self, slot: _Optional[str] = ..., policy_spec_json: _Optional[str] = ...) -> None: ...

class SlotOutcome(_message.Message):
    __slots__ = ("slot", "success", "episode_id", "blind_label")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    BLIND_LABEL_FIELD_NUMBER: _ClassVar[int]
    slot: str
    success: bool
    episode_id: str
    blind_label: str
    def __init__(self, slot: _Optional[str] = ..., success: _Optional[bool] = ..., episode_id: _Optional[str] = ..., blind_label: _Optional[str] = ...) -> None: ...

class ComparisonBlock(_message.Message):
    __slots__ = ("block_id", "task_id", "seed", "outcomes")
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    task_id: str
    seed: int
    outcomes: _containers.RepeatedCompositeFieldContainer[SlotOutcome]
    def __init__(self, block_id: _Optional[str] = ..., task_id: _Optional[str] = ..., seed: _Optional[int] = ..., outcomes: _Optional[_Iterable[_Union[SlotOutcome, _Mapping]]] = ...) -> None: ...

class SlotFigures(_message.Message):
    __slots__ = ("slot", "success", "score")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    slot: str
    success: Rate
    score: MeanScore
    def __init__(self, slot: _Optional[str] = ..., success: _Optional[_Union[Rate, _Mapping]] = ..., score: _Optional[_Union[MeanScore, _Mapping]] = ...) -> None: ...

class PairDifference(_message.Message):
    __slots__ = ("a", "b", "both", "only_a", "only_b", "neither", "difference", "low", "high", "confidence", "interval_method", "p_value", "test", "detectable_difference", "note")
    A_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    BOTH_FIELD_NUMBER: _ClassVar[int]
    ONLY_A_FIELD_NUMBER: _ClassVar[int]
    ONLY_B_FIELD_NUMBER: _ClassVar[int]
    NEITHER_FIELD_NUMBER: _ClassVar[int]
    DIFFERENCE_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_METHOD_FIELD_NUMBER: _ClassVar[int]
    P_VALUE_FIELD_NUMBER: _ClassVar[int]
    TEST_FIELD_NUMBER: _ClassVar[int]
    DETECTABLE_DIFFERENCE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    a: str
    b: str
    both: int
    only_a: int
    only_b: int
    neither: int
    difference: float
    low: float
    high: float
    confidence: float
    interval_method: str
    p_value: float
    test: str
    detectable_difference: float
    note: str
    def __init__(self, a: _Optional[str] = ..., b: _Optional[str] = ..., both: _Optional[int] = ..., only_a: _Optional[int] = ..., only_b: _Optional[int] = ..., neither: _Optional[int] = ..., difference: _Optional[float] = ..., low: _Optional[float] = ..., high: _Optional[float] = ..., confidence: _Optional[float] = ..., interval_method: _Optional[str] = ..., p_value: _Optional[float] = ..., test: _Optional[str] = ..., detectable_difference: _Optional[float] = ..., note: _Optional[str] = ...) -> None: ...

class SequentialStop(_message.Message):
    __slots__ = ("test", "alpha", "max_blocks", "stop_when_out_of_reach", "e_value", "stopped_at_block", "verdict", "text")
    TEST_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    MAX_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    STOP_WHEN_OUT_OF_REACH_FIELD_NUMBER: _ClassVar[int]
    E_VALUE_FIELD_NUMBER: _ClassVar[int]
    STOPPED_AT_BLOCK_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    test: str
    alpha: float
    max_blocks: int
    stop_when_out_of_reach: bool
    e_value: float
    stopped_at_block: int
    verdict: str
    text: str
    def __init__(self, test: _Optional[str] = ..., alpha: _Optional[float] = ..., max_blocks: _Optional[int] = ..., stop_when_out_of_reach: _Optional[bool] = ..., e_value: _Optional[float] = ..., stopped_at_block: _Optional[int] = ..., verdict: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class Comparison(_message.Message):
    __slots__ = ("suite", "slots", "figures", "pairs", "blocks", "stop", "labels_revealed")
    SUITE_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    LABELS_REVEALED_FIELD_NUMBER: _ClassVar[int]
    suite: str
    slots: _containers.RepeatedScalarFieldContainer[str]
    figures: _containers.RepeatedCompositeFieldContainer[SlotFigures]
    pairs: _containers.RepeatedCompositeFieldContainer[PairDifference]
    blocks: _containers.RepeatedCompositeFieldContainer[ComparisonBlock]
    stop: SequentialStop
    labels_revealed: bool
    def __init__(self, suite: _Optional[str] = ..., slots: _Optional[_Iterable[str]] = ..., figures: _Optional[_Iterable[_Union[SlotFigures, _Mapping]]] = ..., pairs: _Optional[_Iterable[_Union[PairDifference, _Mapping]]] = ..., blocks: _Optional[_Iterable[_Union[ComparisonBlock, _Mapping]]] = ..., stop: _Optional[_Union[SequentialStop, _Mapping]] = ..., labels_revealed: _Optional[bool] = ...) -> None: ...
