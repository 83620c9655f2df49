from strands_robots.wire.proto import evaluation_pb2 as _evaluation_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tensor(_message.Message):
    __slots__ = ("shape", "values", "dtype", "data")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    dtype: str
    data: bytes
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., values: _Optional[_Iterable[float]] = ..., dtype: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class EncodedImage(_message.Message):
    __slots__ = ("format", "data", "width", "height", "channels")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    format: str
    data: bytes
    width: int
    height: int
    channels: int
    def __init__(self, format: _Optional[str] = ..., data: _Optional[bytes] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., channels: _Optional[int] = ...) -> None: ...

class Value(_message.Message):
    __slots__ = ("number", "text", "tensor", "flag", "image")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    number: float
    text: str
    tensor: Tensor
    flag: bool
    image: EncodedImage
    def __init__(self, number: _Optional[float] = ..., text: _Optional[str] = ..., tensor: _Optional[_Union[Tensor, _Mapping]] = ..., flag: _Optional[bool] = ..., image: _Optional[_Union[EncodedImage, _Mapping]] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.MessageMap[str, Value]
    def __init__(self, values: _Optional[_Mapping[str, Value]] = ...) -> None: ...

class Action(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.ScalarMap[str, float]
    def __init__(self, values: _Optional[_Mapping[str, float]] = ...) -> None: ...

class ActionChunk(_message.Message):
    __slots__ = ("actions",)
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedCompositeFieldContainer[Action]
    def __init__(self, actions: _Optional[_Iterable[_Union[Action, _Mapping]]] = ...) -> None: ...

class SessionOpen(_message.Message):
    __slots__ = ("job_id", "slot")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    slot: str
    def __init__(self, job_id: _Optional[str] = ..., slot: _Optional[str] = ...) -> None: ...

class CameraNeed(_message.Message):
    __slots__ = ("name", "height", "width")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    name: str
    height: int
    width: int
    def __init__(self, name: _Optional[str] = ..., height: _Optional[int] = ..., width: _Optional[int] = ...) -> None: ...

class ActionRange(_message.Message):
    __slots__ = ("key", "low", "high", "closed")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    key: str
    low: float
    high: float
    closed: float
    def __init__(self, key: _Optional[str] = ..., low: _Optional[float] = ..., high: _Optional[float] = ..., closed: _Optional[float] = ...) -> None: ...

class PolicySpec(_message.Message):
    __slots__ = ("action_keys", "action_dim", "observation_keys", "cameras", "control_frequency_hz", "action_ranges", "source", "metadata_json", "action_space")
    ACTION_KEYS_FIELD_NUMBER: _ClassVar[int]
    ACTION_DIM_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_KEYS_FIELD_NUMBER: _ClassVar[int]
    CAMERAS_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FREQUENCY_HZ_FIELD_NUMBER: _ClassVar[int]
    ACTION_RANGES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    ACTION_SPACE_FIELD_NUMBER: _ClassVar[int]
    action_keys: _containers.RepeatedScalarFieldContainer[str]
    action_dim: int
    observation_keys: _containers.RepeatedScalarFieldContainer[str]
    cameras: _containers.RepeatedCompositeFieldContainer[CameraNeed]
    control_frequency_hz: float
    action_ranges: _containers.RepeatedCompositeFieldContainer[ActionRange]
    source: str
    metadata_json: str
    action_space: str
    def __init__(self, action_keys: _Optional[_Iterable[str]] = ..., action_dim: _Optional[int] = ..., observation_keys: _Optional[_Iterable[str]] = ..., cameras: _Optional[_Iterable[_Union[CameraNeed, _Mapping]]] = ..., control_frequency_hz: _Optional[float] = ..., action_ranges: _Optional[_Iterable[_Union[ActionRange, _Mapping]]] = ..., source: _Optional[str] = ..., metadata_json: _Optional[str] = ..., action_space: _Optional[str] = ...) -> None: ...

class SessionAttach(_message.Message):
    __slots__ = ("job_id", "spec", "slot")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    spec: PolicySpec
    slot: str
    def __init__(self, job_id: _Optional[str] = ..., spec: _Optional[_Union[PolicySpec, _Mapping]] = ..., slot: _Optional[str] = ...) -> None: ...

class EpisodeStart(_message.Message):
    __slots__ = ("episode_id", "task", "action_keys", "control_frequency", "action_horizon", "preflight")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ACTION_KEYS_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    ACTION_HORIZON_FIELD_NUMBER: _ClassVar[int]
    PREFLIGHT_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    task: _evaluation_pb2.Task
    action_keys: _containers.RepeatedScalarFieldContainer[str]
    control_frequency: float
    action_horizon: int
    preflight: bool
    def __init__(self, episode_id: _Optional[str] = ..., task: _Optional[_Union[_evaluation_pb2.Task, _Mapping]] = ..., action_keys: _Optional[_Iterable[str]] = ..., control_frequency: _Optional[float] = ..., action_horizon: _Optional[int] = ..., preflight: _Optional[bool] = ...) -> None: ...

class Preflight(_message.Message):
    __slots__ = ("episode", "observation")
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    episode: EpisodeStart
    observation: Observation
    def __init__(self, episode: _Optional[_Union[EpisodeStart, _Mapping]] = ..., observation: _Optional[_Union[Observation, _Mapping]] = ...) -> None: ...

class EpisodeEnd(_message.Message):
    __slots__ = ("episode_id", "end_condition", "end_detail")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    END_CONDITION_FIELD_NUMBER: _ClassVar[int]
    END_DETAIL_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    end_condition: str
    end_detail: str
    def __init__(self, episode_id: _Optional[str] = ..., end_condition: _Optional[str] = ..., end_detail: _Optional[str] = ...) -> None: ...

class StationLeft(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class JobEnded(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _evaluation_pb2.JobStatus
    def __init__(self, status: _Optional[_Union[_evaluation_pb2.JobStatus, _Mapping]] = ...) -> None: ...

class PolicyAttached(_message.Message):
    __slots__ = ("client_id", "spec")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    spec: PolicySpec
    def __init__(self, client_id: _Optional[str] = ..., spec: _Optional[_Union[PolicySpec, _Mapping]] = ...) -> None: ...

class EndEpisode(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PolicyError(_message.Message):
    __slots__ = ("type", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    def __init__(self, type: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class PolicyRequest(_message.Message):
    __slots__ = ("request_id", "open", "episode_start", "act", "resume", "episode_end", "station_left", "job_ended", "preflight")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    EPISODE_START_FIELD_NUMBER: _ClassVar[int]
    ACT_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    EPISODE_END_FIELD_NUMBER: _ClassVar[int]
    STATION_LEFT_FIELD_NUMBER: _ClassVar[int]
    JOB_ENDED_FIELD_NUMBER: _ClassVar[int]
    PREFLIGHT_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    open: SessionOpen
    episode_start: EpisodeStart
    act: Observation
    resume: Observation
    episode_end: EpisodeEnd
    station_left: StationLeft
    job_ended: JobEnded
    preflight: Preflight
    def __init__(self, request_id: _Optional[int] = ..., open: _Optional[_Union[SessionOpen, _Mapping]] = ..., episode_start: _Optional[_Union[EpisodeStart, _Mapping]] = ..., act: _Optional[_Union[Observation, _Mapping]] = ..., resume: _Optional[_Union[Observation, _Mapping]] = ..., episode_end: _Optional[_Union[EpisodeEnd, _Mapping]] = ..., station_left: _Optional[_Union[StationLeft, _Mapping]] = ..., job_ended: _Optional[_Union[JobEnded, _Mapping]] = ..., preflight: _Optional[_Union[Preflight, _Mapping]] = ...) -> None: ...

class PolicyReply(_message.Message):
    __slots__ = ("request_id", "attach", "chunk", "end_episode", "ack", "error", "attached")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    END_EPISODE_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTACHED_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    attach: SessionAttach
    chunk: ActionChunk
    end_episode: EndEpisode
    ack: Ack
    error: PolicyError
    attached: PolicyAttached
    def __init__(self, request_id: _Optional[int] = ..., attach: _Optional[_Union[SessionAttach, _Mapping]] = ..., chunk: _Optional[_Union[ActionChunk, _Mapping]] = ..., end_episode: _Optional[_Union[EndEpisode, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., error: _Optional[_Union[PolicyError, _Mapping]] = ..., attached: _Optional[_Union[PolicyAttached, _Mapping]] = ...) -> None: ...
