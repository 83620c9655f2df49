from strands_robots.relay.proto import evaluation_pb2 as _evaluation_pb2
from strands_robots.relay.proto import policy_session_pb2 as _policy_session_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubmitJobRequest(_message.Message):
    __slots__ = ("station_id", "tasks", "episodes", "job_id")
    STATION_ID_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    station_id: str
    tasks: _containers.RepeatedCompositeFieldContainer[_evaluation_pb2.Task]
    episodes: int
    job_id: str
    def __init__(self, station_id: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[_evaluation_pb2.Task, _Mapping]]] = ..., episodes: _Optional[int] = ..., job_id: _Optional[str] = ...) -> None: ...

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
