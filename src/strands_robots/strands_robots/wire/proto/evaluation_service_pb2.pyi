from strands_robots.wire.proto import evaluation_pb2 as _evaluation_pb2
from strands_robots.wire.proto import suites_pb2 as _suites_pb2
from strands_robots.wire.proto import policy_session_pb2 as _policy_session_pb2
from strands_robots.wire.proto import recording_pb2 as _recording_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubmitJobRequest(_message.Message):
    __slots__ = ("station_id", "tasks", "episodes", "job_id", "duration_s", "control_frequency", "max_discards", "intervals", "record", "suite_job")
    STATION_ID_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    MAX_DISCARDS_FIELD_NUMBER: _ClassVar[int]
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    SUITE_JOB_FIELD_NUMBER: _ClassVar[int]
    station_id: str
    tasks: _containers.RepeatedCompositeFieldContainer[_evaluation_pb2.Task]
    episodes: int
    job_id: str
    duration_s: float
    control_frequency: float
    max_discards: int
    intervals: str
    record: bool
    suite_job: _suites_pb2.SuiteJob
    def __init__(self, station_id: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[_evaluation_pb2.Task, _Mapping]]] = ..., episodes: _Optional[int] = ..., job_id: _Optional[str] = ..., duration_s: _Optional[float] = ..., control_frequency: _Optional[float] = ..., max_discards: _Optional[int] = ..., intervals: _Optional[str] = ..., record: _Optional[bool] = ..., suite_job: _Optional[_Union[_suites_pb2.SuiteJob, _Mapping]] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ("already_terminal",)
    ALREADY_TERMINAL_FIELD_NUMBER: _ClassVar[int]
    already_terminal: bool
    def __init__(self, already_terminal: _Optional[bool] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "states")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    states: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., states: _Optional[_Iterable[str]] = ...) -> None: ...

class JobSummary(_message.Message):
    __slots__ = ("job_id", "station_id", "state", "episodes_total", "episodes_done", "submitted_unix_ms", "updated_unix_ms", "message", "owner", "invitation", "slots")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EPISODES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    EPISODES_DONE_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    INVITATION_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    station_id: str
    state: str
    episodes_total: int
    episodes_done: int
    submitted_unix_ms: int
    updated_unix_ms: int
    message: str
    owner: str
    invitation: str
    slots: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_id: _Optional[str] = ..., station_id: _Optional[str] = ..., state: _Optional[str] = ..., episodes_total: _Optional[int] = ..., episodes_done: _Optional[int] = ..., submitted_unix_ms: _Optional[int] = ..., updated_unix_ms: _Optional[int] = ..., message: _Optional[str] = ..., owner: _Optional[str] = ..., invitation: _Optional[str] = ..., slots: _Optional[_Iterable[str]] = ...) -> None: ...

class RespondInvitationRequest(_message.Message):
    __slots__ = ("job_id", "accept", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    accept: bool
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., accept: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class RespondInvitationResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobSummary]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class LeaderboardRequest(_message.Message):
    __slots__ = ("suite",)
    SUITE_FIELD_NUMBER: _ClassVar[int]
    suite: str
    def __init__(self, suite: _Optional[str] = ...) -> None: ...

class LeaderboardEntry(_message.Message):
    __slots__ = ("policy", "rank", "log_strength", "low", "high", "wins", "losses", "ties", "comparisons", "jobs", "team", "others")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    LOG_STRENGTH_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    WINS_FIELD_NUMBER: _ClassVar[int]
    LOSSES_FIELD_NUMBER: _ClassVar[int]
    TIES_FIELD_NUMBER: _ClassVar[int]
    COMPARISONS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    TEAM_FIELD_NUMBER: _ClassVar[int]
    OTHERS_FIELD_NUMBER: _ClassVar[int]
    policy: str
    rank: int
    log_strength: float
    low: float
    high: float
    wins: int
    losses: int
    ties: int
    comparisons: int
    jobs: int
    team: str
    others: bool
    def __init__(self, policy: _Optional[str] = ..., rank: _Optional[int] = ..., log_strength: _Optional[float] = ..., low: _Optional[float] = ..., high: _Optional[float] = ..., wins: _Optional[int] = ..., losses: _Optional[int] = ..., ties: _Optional[int] = ..., comparisons: _Optional[int] = ..., jobs: _Optional[int] = ..., team: _Optional[str] = ..., others: _Optional[bool] = ...) -> None: ...

class LeaderboardResponse(_message.Message):
    __slots__ = ("suite", "entries", "blocks", "jobs", "confidence", "prior_sd", "method", "note")
    SUITE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    PRIOR_SD_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    suite: str
    entries: _containers.RepeatedCompositeFieldContainer[LeaderboardEntry]
    blocks: int
    jobs: int
    confidence: float
    prior_sd: float
    method: str
    note: str
    def __init__(self, suite: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[LeaderboardEntry, _Mapping]]] = ..., blocks: _Optional[int] = ..., jobs: _Optional[int] = ..., confidence: _Optional[float] = ..., prior_sd: _Optional[float] = ..., method: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...
