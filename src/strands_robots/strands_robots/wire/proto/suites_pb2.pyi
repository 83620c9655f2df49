from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChoiceRule(_message.Message):
    __slots__ = ("key", "min", "max")
    KEY_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    key: str
    min: float
    max: float
    def __init__(self, key: _Optional[str] = ..., min: _Optional[float] = ..., max: _Optional[float] = ...) -> None: ...

class OfferedTask(_message.Message):
    __slots__ = ("task_id", "instruction", "layout", "trials", "budget_s", "questions")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_S_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    instruction: str
    layout: str
    trials: int
    budget_s: float
    questions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, task_id: _Optional[str] = ..., instruction: _Optional[str] = ..., layout: _Optional[str] = ..., trials: _Optional[int] = ..., budget_s: _Optional[float] = ..., questions: _Optional[_Iterable[str]] = ...) -> None: ...

class SuiteOffer(_message.Message):
    __slots__ = ("suite", "title", "headline", "tasks", "team_may_choose")
    SUITE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    HEADLINE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    TEAM_MAY_CHOOSE_FIELD_NUMBER: _ClassVar[int]
    suite: str
    title: str
    headline: str
    tasks: _containers.RepeatedCompositeFieldContainer[OfferedTask]
    team_may_choose: _containers.RepeatedCompositeFieldContainer[ChoiceRule]
    def __init__(self, suite: _Optional[str] = ..., title: _Optional[str] = ..., headline: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[OfferedTask, _Mapping]]] = ..., team_may_choose: _Optional[_Iterable[_Union[ChoiceRule, _Mapping]]] = ...) -> None: ...

class StationOffer(_message.Message):
    __slots__ = ("profile", "allow_free_form_tasks", "suites", "refuses_recordings")
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FREE_FORM_TASKS_FIELD_NUMBER: _ClassVar[int]
    SUITES_FIELD_NUMBER: _ClassVar[int]
    REFUSES_RECORDINGS_FIELD_NUMBER: _ClassVar[int]
    profile: str
    allow_free_form_tasks: bool
    suites: _containers.RepeatedCompositeFieldContainer[SuiteOffer]
    refuses_recordings: bool
    def __init__(self, profile: _Optional[str] = ..., allow_free_form_tasks: _Optional[bool] = ..., suites: _Optional[_Iterable[_Union[SuiteOffer, _Mapping]]] = ..., refuses_recordings: _Optional[bool] = ...) -> None: ...

class SuiteTrials(_message.Message):
    __slots__ = ("task", "trials")
    TASK_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    task: str
    trials: int
    def __init__(self, task: _Optional[str] = ..., trials: _Optional[int] = ...) -> None: ...

class SuiteJob(_message.Message):
    __slots__ = ("suite", "tasks", "choose", "compare")
    class ChooseEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SUITE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    CHOOSE_FIELD_NUMBER: _ClassVar[int]
    COMPARE_FIELD_NUMBER: _ClassVar[int]
    suite: str
    tasks: _containers.RepeatedCompositeFieldContainer[SuiteTrials]
    choose: _containers.ScalarMap[str, str]
    compare: Compare
    def __init__(self, suite: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[SuiteTrials, _Mapping]]] = ..., choose: _Optional[_Mapping[str, str]] = ..., compare: _Optional[_Union[Compare, _Mapping]] = ...) -> None: ...

class Compare(_message.Message):
    __slots__ = ("slots", "stop", "slot_teams")
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    SLOT_TEAMS_FIELD_NUMBER: _ClassVar[int]
    slots: _containers.RepeatedScalarFieldContainer[str]
    stop: CompareStop
    slot_teams: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, slots: _Optional[_Iterable[str]] = ..., stop: _Optional[_Union[CompareStop, _Mapping]] = ..., slot_teams: _Optional[_Iterable[str]] = ...) -> None: ...

class CompareStop(_message.Message):
    __slots__ = ("when", "alpha", "max_blocks", "or_out_of_reach")
    WHEN_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    MAX_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    OR_OUT_OF_REACH_FIELD_NUMBER: _ClassVar[int]
    when: str
    alpha: float
    max_blocks: int
    or_out_of_reach: bool
    def __init__(self, when: _Optional[str] = ..., alpha: _Optional[float] = ..., max_blocks: _Optional[int] = ..., or_out_of_reach: _Optional[bool] = ...) -> None: ...

class ListSuitesRequest(_message.Message):
    __slots__ = ("station_id",)
    STATION_ID_FIELD_NUMBER: _ClassVar[int]
    station_id: str
    def __init__(self, station_id: _Optional[str] = ...) -> None: ...

class StationSuites(_message.Message):
    __slots__ = ("station_id", "offer", "offered_unix_ms")
    STATION_ID_FIELD_NUMBER: _ClassVar[int]
    OFFER_FIELD_NUMBER: _ClassVar[int]
    OFFERED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    station_id: str
    offer: StationOffer
    offered_unix_ms: int
    def __init__(self, station_id: _Optional[str] = ..., offer: _Optional[_Union[StationOffer, _Mapping]] = ..., offered_unix_ms: _Optional[int] = ...) -> None: ...

class ListSuitesResponse(_message.Message):
    __slots__ = ("stations",)
    STATIONS_FIELD_NUMBER: _ClassVar[int]
    stations: _containers.RepeatedCompositeFieldContainer[StationSuites]
    def __init__(self, stations: _Optional[_Iterable[_Union[StationSuites, _Mapping]]] = ...) -> None: ...
