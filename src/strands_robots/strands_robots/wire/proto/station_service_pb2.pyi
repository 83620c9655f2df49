from strands_robots.wire.proto import evaluation_pb2 as _evaluation_pb2
from strands_robots.wire.proto import policy_session_pb2 as _policy_session_pb2
from strands_robots.wire.proto import recording_pb2 as _recording_pb2
from strands_robots.wire.proto import suites_pb2 as _suites_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HeartbeatRequest(_message.Message):
    __slots__ = ("station_id", "unix_ms")
    STATION_ID_FIELD_NUMBER: _ClassVar[int]
    UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    station_id: str
    unix_ms: int
    def __init__(self, station_id: _Optional[str] = ..., unix_ms: _Optional[int] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("relay_unix_ms",)
    RELAY_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    relay_unix_ms: int
    def __init__(self, relay_unix_ms: _Optional[int] = ...) -> None: ...

class ReportStatusRequest(_message.Message):
    __slots__ = ("station_id", "snapshots")
    STATION_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    station_id: str
    snapshots: _containers.RepeatedCompositeFieldContainer[_evaluation_pb2.JobStatus]
    def __init__(self, station_id: _Optional[str] = ..., snapshots: _Optional[_Iterable[_Union[_evaluation_pb2.JobStatus, _Mapping]]] = ...) -> None: ...

class ReportStatusResponse(_message.Message):
    __slots__ = ("stored", "stale", "refused")
    STORED_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    stored: int
    stale: int
    refused: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, stored: _Optional[int] = ..., stale: _Optional[int] = ..., refused: _Optional[_Iterable[str]] = ...) -> None: ...

class TakeJobsRequest(_message.Message):
    __slots__ = ("station_id", "offer")
    STATION_ID_FIELD_NUMBER: _ClassVar[int]
    OFFER_FIELD_NUMBER: _ClassVar[int]
    station_id: str
    offer: _suites_pb2.StationOffer
    def __init__(self, station_id: _Optional[str] = ..., offer: _Optional[_Union[_suites_pb2.StationOffer, _Mapping]] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("job_id", "client_id", "station_id", "tasks", "episodes_total", "submitted_unix_ms", "duration_s", "control_frequency", "max_discards", "intervals", "record", "suite_job")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    STATION_ID_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    EPISODES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    MAX_DISCARDS_FIELD_NUMBER: _ClassVar[int]
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    SUITE_JOB_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    client_id: str
    station_id: str
    tasks: _containers.RepeatedCompositeFieldContainer[_evaluation_pb2.Task]
    episodes_total: int
    submitted_unix_ms: int
    duration_s: float
    control_frequency: float
    max_discards: int
    intervals: str
    record: bool
    suite_job: _suites_pb2.SuiteJob
    def __init__(self, job_id: _Optional[str] = ..., client_id: _Optional[str] = ..., station_id: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[_evaluation_pb2.Task, _Mapping]]] = ..., episodes_total: _Optional[int] = ..., submitted_unix_ms: _Optional[int] = ..., duration_s: _Optional[float] = ..., control_frequency: _Optional[float] = ..., max_discards: _Optional[int] = ..., intervals: _Optional[str] = ..., record: _Optional[bool] = ..., suite_job: _Optional[_Union[_suites_pb2.SuiteJob, _Mapping]] = ...) -> None: ...

class JobCancel(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class JobAssignment(_message.Message):
    __slots__ = ("job", "cancel")
    JOB_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    job: Job
    cancel: JobCancel
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., cancel: _Optional[_Union[JobCancel, _Mapping]] = ...) -> None: ...
