"""Episode recording: one MCAP file per episode, ROS 2 CDR with the schemas of the installed .msg files.

Topics (the files open in ``ros2 bag info/play`` with the MCAP storage plugin, and in Foxglove):

* ``/joint_states`` — ``sensor_msgs/msg/JointState``, one per step (:meth:`EpisodeRecorder.write_step`)
* ``/actions`` — ``strands_robots_msgs/msg/ActionCommand``, one per step (:meth:`EpisodeRecorder.write_step`)
* ``/observer_events`` — ``strands_robots_msgs/msg/ObserverEvent`` (:meth:`EpisodeRecorder.write_event`)
* latest-state topics — any installed type, captured at start (:meth:`EpisodeRecorder.write_latched`)

Rules the recorder holds to (DESIGN.md §5 "Rollout loop"):

* The recording fps must equal the control frequency: :meth:`EpisodeRecorder.open` refuses otherwise
  (:class:`RecordingRefused`) before any file exists. It also refuses an existing path — a second episode
  never overwrites or merges into an earlier one — and a type whose .msg definition is not installed.
* A failure is never silent: every I/O or encoding failure raises :class:`RecordingError`. Messages are
  grouped into compressed chunks of about ``chunk_size`` bytes, held in memory until full; whatever the
  writer has handed to the file is flushed to the OS before each write returns, so a failing disk surfaces
  at the write that completed the chunk, not at close. After a failure the messages of the unwritten chunk
  are lost and the file is left as far as it got: no summary, but a streaming MCAP reader
  (``mcap.stream_reader.StreamReader``) recovers every complete chunk.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO, Mapping, Sequence

from mcap.records import Schema
from mcap.writer import CompressionType
from mcap_ros2.writer import Writer

from strands_robots.rollout.msg_schema import (
    FieldSpec,
    MsgDefinitionNotFound,
    MsgDefinitions,
    canonical_type_name,
)

TOPIC_JOINT_STATES = "/joint_states"
TOPIC_ACTIONS = "/actions"
TOPIC_OBSERVER_EVENTS = "/observer_events"

JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
ACTION_COMMAND_TYPE = "strands_robots_msgs/msg/ActionCommand"
OBSERVER_EVENT_TYPE = "strands_robots_msgs/msg/ObserverEvent"

# MCAP metadata record describing the episode (robot, rates, actuators), and its closing counterpart.
METADATA_EPISODE = "strands_robots.episode"
METADATA_RESULT = "strands_robots.recording"

DEFAULT_CHUNK_SIZE = 64 * 1024
_FPS_RELATIVE_TOLERANCE = 1e-9

# Observation key suffix -> JointState array, for actuator key "<arm>.<joint>".
_JOINT_QUANTITIES = (("pos", "position"), ("vel", "velocity"), ("effort", "effort"))


class RecordingRefused(ValueError):
    """The recording cannot start as asked; nothing was created."""


class RecordingError(RuntimeError):
    """Writing the recording failed; the frames after the last written chunk are lost."""


def _check_rate(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise RecordingRefused(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _int_or(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _ros_time(stamp_ns: int) -> dict[str, int]:
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    return {"sec": sec, "nanosec": nanosec}


class EpisodeRecorder:
    """Writes one episode to one MCAP file. Create it with :meth:`open`.

    Not thread-safe: one thread (the rollout loop) writes.
    """

    def __init__(self, path: Path, stream: BinaryIO, writer: Writer, definitions: MsgDefinitions,
                 actuator_keys: tuple[str, ...]) -> None:
        self._path = path
        self._stream = stream
        self._writer = writer
        self._definitions = definitions
        self._actuator_keys = actuator_keys
        self._schemas: dict[str, Schema] = {}
        self._topic_types: dict[str, str] = {}
        self._fields: dict[str, dict[str, FieldSpec]] = {}
        self._frames = 0
        self._last_step_index = -1
        self._failure: BaseException | None = None
        self._closed = False

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        control_frequency: float,
        fps: float,
        actuator_keys: Sequence[str],
        robot_name: str = "",
        msg_search_path: Sequence[str | os.PathLike[str]] | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> "EpisodeRecorder":
        """Create the episode's MCAP file.

        :param path: the file to create; must not exist (parent directories are created).
        :param control_frequency: the rollout's control rate in Hz.
        :param fps: the recording rate in Hz; must equal ``control_frequency`` (relative tolerance 1e-9).
        :param actuator_keys: ``<arm>.<joint>`` keys; ``/joint_states`` names them in this order.
        :param robot_name: stored in the file's episode metadata.
        :param msg_search_path: share directories / prefixes holding the .msg files (default: the environment,
            see :mod:`strands_robots.rollout.msg_schema`).
        :param chunk_size: uncompressed bytes per MCAP chunk; bounds what a failure can lose.
        :raises RecordingRefused: fps differs from the control frequency, a rate is not > 0, the path exists,
            or a schema is not installed — before any file is created.
        :raises RecordingError: the file could not be created or its header written.
        """
        control_frequency = _check_rate("control_frequency", control_frequency)
        fps = _check_rate("fps", fps)
        if abs(fps - control_frequency) > _FPS_RELATIVE_TOLERANCE * max(fps, control_frequency):
            raise RecordingRefused(
                f"recording fps {fps:g} must equal the control frequency {control_frequency:g} Hz: one frame per "
                f"control step, none dropped or repeated")
        if not isinstance(chunk_size, int) or chunk_size <= 0:
            raise RecordingRefused(f"chunk_size must be a positive integer, got {chunk_size!r}")
        path = Path(path)
        if os.path.lexists(path):
            raise RecordingRefused(f"{path} already exists; an episode never overwrites another recording")

        definitions = MsgDefinitions(msg_search_path)
        texts: dict[str, str] = {}
        try:
            for type_name in (JOINT_STATE_TYPE, ACTION_COMMAND_TYPE, OBSERVER_EVENT_TYPE):
                texts[type_name] = definitions.full_text(type_name)
        except MsgDefinitionNotFound as exc:
            raise RecordingRefused(f"cannot record: {exc}") from exc

        keys = tuple(str(k) for k in actuator_keys)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RecordingError(f"cannot create the directory of recording {path}: {exc}") from exc
        stream: BinaryIO | None = None
        try:
            stream = open(path, "xb")  # noqa: SIM115 - owned by the recorder, closed in close()
            writer = Writer(stream, chunk_size=chunk_size, compression=CompressionType.ZSTD)
            recorder = cls(path, stream, writer, definitions, keys)
            for type_name, text in texts.items():
                recorder._schemas[type_name] = writer.register_msgdef(type_name, text)
            writer.add_metadata(METADATA_EPISODE, {
                "robot_name": str(robot_name),
                "control_frequency_hz": repr(control_frequency),
                "fps": repr(fps),
                "actuator_keys": ",".join(keys),
            })
            stream.flush()
        except FileExistsError as exc:
            raise RecordingRefused(f"{path} already exists; an episode never overwrites another recording") from exc
        except Exception as exc:
            if stream is not None:  # the file is ours (exclusive create): leave no half-written header behind
                try:
                    stream.close()
                except OSError:
                    pass
                try:
                    path.unlink()
                except OSError:
                    pass
            raise RecordingError(f"cannot create recording {path}: {exc}") from exc
        return recorder

    # ------------------------------------------------------------------ properties

    @property
    def path(self) -> Path:
        return self._path

    @property
    def frames(self) -> int:
        """Steps accepted by :meth:`write_step`."""
        return self._frames

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ writing

    def write_step(self, step_index: int, stamp_ns: int, observation: Mapping[str, Any],
                   action: Mapping[str, float], verdict: Any) -> None:
        """Record one control step: ``/joint_states`` from the observation and ``/actions`` as emitted.

        ``/joint_states`` names every actuator key (in ``actuator_keys`` order) with the observation's
        ``<key>.pos`` / ``.vel`` / ``.effort``; a missing value is NaN and an array with no value at all is
        left empty, as JointState allows. ``/actions`` holds the action exactly as emitted, also when the
        driver applied only part of it: the per-key ``verdict`` is recorded in the step's ObserverEvent.

        :raises ValueError: ``step_index`` does not increase, ``stamp_ns`` is negative, or a value is not a
            number (nothing is written).
        :raises RecordingError: writing failed (now or at an earlier step).
        """
        del verdict  # recorded by the step's ObserverEvent (see docstring)
        self._check_writable()
        if step_index <= self._last_step_index:
            raise ValueError(f"step_index {step_index} does not follow {self._last_step_index}")
        if stamp_ns < 0:
            raise ValueError(f"stamp_ns must be >= 0, got {stamp_ns}")
        joint_state = self._joint_state(stamp_ns, observation)
        command = {"keys": [str(k) for k in action], "values": [float(v) for v in action.values()]}
        self._write(TOPIC_JOINT_STATES, JOINT_STATE_TYPE, joint_state, stamp_ns, step_index)
        self._write(TOPIC_ACTIONS, ACTION_COMMAND_TYPE, command, stamp_ns, step_index)
        self._flush()
        self._last_step_index = step_index
        self._frames += 1

    def write_event(self, event_dict: Mapping[str, Any]) -> None:
        """Record one ObserverEvent, given as a dict shaped like the message (payload arrays as lists).

        Logged at its ``utc_ns`` (or now when that is absent), with ``event_seq`` as the MCAP sequence.
        """
        self._check_writable()
        message = self._message(OBSERVER_EVENT_TYPE, event_dict)
        log_time = _int_or(event_dict.get("utc_ns"), 0)
        if log_time <= 0:
            log_time = time.time_ns()
        sequence = _int_or(event_dict.get("event_seq"), 0) & 0xFFFFFFFF
        self._write(TOPIC_OBSERVER_EVENTS, OBSERVER_EVENT_TYPE, message, log_time, sequence)
        self._flush()

    def write_latched(self, topic: str, schema_name: str, msg_dict: Mapping[str, Any]) -> None:
        """Record the latest state of a transient-local topic (job, lease, driver, safety) at its capture.

        Call it when the recording starts, so the file holds the state in force when the episode began
        even though that state was published earlier; call it again when the state changes.
        """
        self._check_writable()
        try:
            type_name = canonical_type_name(schema_name)
        except ValueError as exc:
            raise RecordingError(f"cannot record {topic}: {exc}") from exc
        self._write(topic, type_name, self._message(type_name, msg_dict), time.time_ns(), 0)
        self._flush()

    # ------------------------------------------------------------------ closing

    def close(self) -> int:
        """Finish the file (chunk, indexes, summary) and close it; the frames written. Idempotent.

        :raises RecordingError: the file could not be finished. A recorder whose write already raised
            RecordingError only releases its file here (the failure was reported once, where it happened).
        """
        if self._closed:
            return self._frames
        self._closed = True
        if self._failure is not None:
            try:
                self._stream.close()
            except OSError:
                pass
            return self._frames
        try:
            self._writer.add_metadata(METADATA_RESULT, {"frames": str(self._frames)})
            self._writer.finish()
            self._stream.flush()
            os.fsync(self._stream.fileno())
            self._stream.close()
        except Exception as exc:
            self._failure = exc
            try:
                self._stream.close()
            except OSError:
                pass
            raise RecordingError(f"cannot finish recording {self._path}: {exc}") from exc
        return self._frames

    def __enter__(self) -> "EpisodeRecorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _check_writable(self) -> None:
        if self._failure is not None:
            raise RecordingError(f"recording {self._path} already failed: {self._failure}")
        if self._closed:
            raise RecordingError(f"recording {self._path} is closed")

    def _joint_state(self, stamp_ns: int, observation: Mapping[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {
            "header": {"stamp": _ros_time(stamp_ns), "frame_id": ""},
            "name": list(self._actuator_keys),
        }
        for suffix, field in _JOINT_QUANTITIES:
            values = [observation.get(f"{key}.{suffix}") for key in self._actuator_keys]
            if all(v is None for v in values):
                message[field] = []
            else:
                message[field] = [math.nan if v is None else float(v) for v in values]
        return message

    def _message(self, type_name: str, value: Any) -> SimpleNamespace:
        """A message dict checked against its definition and shaped as the CDR encoder needs it.

        Every field name must exist in the .msg (a misspelt field would otherwise be recorded silently as its
        default). Nested messages become namespaces, never dicts: the encoder falls back to
        ``getattr(msg, field)``, so a dict standing in for a missing ``ScoringSheetDefinition`` would hand it
        the dict's ``items`` method. Missing primitive fields and arrays get their defaults.
        """
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            raise RecordingError(f"a {type_name} must be given as a mapping, got {type(value).__name__}")
        fields = self._fields.get(type_name)
        if fields is None:
            try:
                fields = {f.name: f for f in self._definitions.fields(type_name)}
            except (MsgDefinitionNotFound, ValueError) as exc:
                raise RecordingError(f"cannot record {type_name}: {exc}") from exc
            self._fields[type_name] = fields
        unknown = [str(k) for k in value if k not in fields]
        if unknown:
            raise RecordingError(f"{type_name} has no field {', '.join(sorted(unknown))}")
        out: dict[str, Any] = {}
        for name, spec in fields.items():
            item = value.get(name)
            if spec.message_type:
                if spec.is_array:
                    out[name] = [self._message(spec.message_type, v) for v in (item or ())]
                else:
                    out[name] = self._message(spec.message_type, item)
            elif item is not None:
                out[name] = list(item) if isinstance(item, tuple) else item
        return SimpleNamespace(**out)

    def _schema(self, type_name: str) -> Schema:
        schema = self._schemas.get(type_name)
        if schema is None:
            try:
                text = self._definitions.full_text(type_name)
            except (MsgDefinitionNotFound, ValueError) as exc:
                raise RecordingError(f"cannot record {type_name}: {exc}") from exc
            schema = self._write_guarded(lambda: self._writer.register_msgdef(type_name, text))
            self._schemas[type_name] = schema
        return schema

    def _write(self, topic: str, type_name: str, message: Mapping[str, Any], log_time: int, sequence: int) -> None:
        recorded_as = self._topic_types.setdefault(topic, type_name)
        if recorded_as != type_name:
            raise RecordingError(f"topic {topic} is recorded as {recorded_as}, not {type_name}")
        schema = self._schema(type_name)
        self._write_guarded(lambda: self._writer.write_message(
            topic, schema, message, log_time=log_time, publish_time=log_time, sequence=sequence))

    def _flush(self) -> None:
        self._write_guarded(self._stream.flush)

    def _write_guarded(self, operation: Any) -> Any:
        """Run one writer operation; an OS failure breaks the recorder, any failure is a RecordingError."""
        try:
            return operation()
        except OSError as exc:
            self._failure = exc
            raise RecordingError(f"writing recording {self._path} failed: {exc}") from exc
        except Exception as exc:  # encoding: the message does not fit its schema; nothing was written
            raise RecordingError(f"cannot encode a message for {self._path}: {exc}") from exc
