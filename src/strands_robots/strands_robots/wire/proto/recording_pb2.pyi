from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RecordingHeader(_message.Message):
    __slots__ = ("job_id", "episode_id", "size_bytes", "sha256", "file_name")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    episode_id: str
    size_bytes: int
    sha256: str
    file_name: str
    def __init__(self, job_id: _Optional[str] = ..., episode_id: _Optional[str] = ..., size_bytes: _Optional[int] = ..., sha256: _Optional[str] = ..., file_name: _Optional[str] = ...) -> None: ...

class RecordingChunk(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: RecordingHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[RecordingHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadRecordingResponse(_message.Message):
    __slots__ = ("already_stored",)
    ALREADY_STORED_FIELD_NUMBER: _ClassVar[int]
    already_stored: bool
    def __init__(self, already_stored: _Optional[bool] = ...) -> None: ...

class DownloadRecordingRequest(_message.Message):
    __slots__ = ("job_id", "episode_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    episode_id: str
    def __init__(self, job_id: _Optional[str] = ..., episode_id: _Optional[str] = ...) -> None: ...

class RecordingInfo(_message.Message):
    __slots__ = ("episode_id", "size_bytes", "sha256", "file_name", "refused")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    size_bytes: int
    sha256: str
    file_name: str
    refused: str
    def __init__(self, episode_id: _Optional[str] = ..., size_bytes: _Optional[int] = ..., sha256: _Optional[str] = ..., file_name: _Optional[str] = ..., refused: _Optional[str] = ...) -> None: ...

class ListRecordingsRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ListRecordingsResponse(_message.Message):
    __slots__ = ("recordings",)
    RECORDINGS_FIELD_NUMBER: _ClassVar[int]
    recordings: _containers.RepeatedCompositeFieldContainer[RecordingInfo]
    def __init__(self, recordings: _Optional[_Iterable[_Union[RecordingInfo, _Mapping]]] = ...) -> None: ...
