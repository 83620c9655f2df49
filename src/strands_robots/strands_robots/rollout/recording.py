"""Episode recording: one MCAP file per episode, ROS 2 CDR with the schemas of the installed .msg files.

Topics, under the live names (``topic_prefix`` is the ROS namespace the live topics use, e.g. ``/strands``,
so ``ros2 bag play`` stands in for a live run; the files open in ``ros2 bag info/play`` with the MCAP storage
plugin, and in Foxglove):

* ``<prefix>/joint_states`` — ``sensor_msgs/msg/JointState``, one per step (:meth:`EpisodeRecorder.write_step`)
* ``<prefix>/actions`` — ``strands_robots_msgs/msg/ActionCommand``, one per step
* ``<prefix>/observer_events`` — ``strands_robots_msgs/msg/ObserverEvent`` (:meth:`EpisodeRecorder.write_event`
  takes the event dataclasses themselves and encodes them here)
* latest-state topics — any installed type, captured at start (:meth:`EpisodeRecorder.write_latched`)

The ROS distro goes into a ``rosbag2`` metadata record under ``ROS_DISTRO``, where rosbag2's MCAP storage
plugin reads it (``ros2 bag info`` prints it): ``$ROS_DISTRO``, else derived from the installed rclpy's
version (read from package metadata; rclpy is never imported here).

Rules the recorder holds to (DESIGN.md §5 "Rollout loop"):

* The recording fps must equal the control frequency: :meth:`EpisodeRecorder.open` refuses otherwise
  (:class:`RecordingRefused`) before any file exists. It also refuses an existing path — a second episode
  never overwrites or merges into an earlier one — and a type whose .msg definition is not installed.
* A failure is never silent: every I/O or encoding failure raises :class:`RecordingError`. Messages are
  grouped into compressed chunks of about ``chunk_size`` bytes, held in memory until full; whatever the
  writer has handed to the file is flushed to the OS before each write returns, so a failing disk surfaces
  at the write that completed the chunk, not at close. After a failure the messages of the unwritten chunk
  are lost and the file is cut back to the end of the last chunk written whole: no summary, but a
  streaming MCAP reader (``mcap.stream_reader.StreamReader``) recovers every chunk in it.
  :attr:`EpisodeRecorder.frames` counts exactly the frames (both messages of a step) a reader gets back.
"""

from __future__ import annotations

import errno
import importlib.metadata
import io
import math
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO, Callable, Mapping, Sequence

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

# rosbag2's MCAP storage plugin reads the distro from this metadata record and key.
METADATA_ROSBAG2 = "rosbag2"
METADATA_ROS_DISTRO_KEY = "ROS_DISTRO"
# rclpy major version -> distro, for when ROS_DISTRO is not set.
_RCLPY_DISTROS = {3: "humble", 7: "jazzy", 9: "kilted"}

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


def ros_distro() -> str:
    """Return the ROS distro: ``$ROS_DISTRO``, else from the installed rclpy's major version, else unknown."""
    distro = os.environ.get("ROS_DISTRO", "").strip()
    if distro:
        return distro
    try:
        major = int(importlib.metadata.version("rclpy").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError, IndexError):
        return "unknown"
    return _RCLPY_DISTROS.get(major, "unknown")


def topic_names(prefix: str = "") -> tuple[str, str, str]:
    """``(joint_states, actions, observer_events)`` under the namespace ``prefix`` ("" = root)."""
    prefix = str(prefix or "").rstrip("/")
    if prefix and not prefix.startswith("/"):
        prefix = "/" + prefix
    return (prefix + TOPIC_JOINT_STATES, prefix + TOPIC_ACTIONS, prefix + TOPIC_OBSERVER_EVENTS)


class _FileSink:
    """The file the MCAP writer writes into: unbuffered, every write whole or an OSError, position tracked.

    Unbuffered so that what the writer handed over is in the OS when a write returns (a full disk surfaces at
    the write that fails, not later), and so the file can be cut back to a known offset after a failure
    without a buffer flushing stale bytes behind the cut.
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._pos = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        done = 0
        while done < total:
            n = self._raw.write(view[done:])
            if n is None or n <= 0:  # a short write of nothing: the device is full
                raise OSError(errno.ENOSPC, "no space left on device (short write)")
            done += n
            self._pos += n
        return total

    def tell(self) -> int:
        return self._pos

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self._raw.fileno()

    def truncate_to(self, offset: int) -> None:
        os.ftruncate(self._raw.fileno(), offset)
        self._raw.seek(offset)
        self._pos = offset

    def close(self) -> None:
        self._raw.close()


def _default_raw(path: Path) -> Any:
    return io.FileIO(path, "xb")


# -- observer events as ObserverEvent dicts (the recorder's own encoding: the core never imports conversions)
_EVENT_KINDS = {"RunPolicyStarted": "started", "RunPolicyStep": "step", "RunPolicyEnded": "ended"}
_EVENT_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _numeric_items(mapping: Mapping[str, Any]) -> tuple[list[str], list[float]]:
    """Return the numeric-scalar entries (not bools) of an observation or action, in order."""
    keys: list[str] = []
    values: list[float] = []
    for key, value in mapping.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)) or (getattr(getattr(value, "dtype", None), "kind", None) in ("i", "u", "f")
                                               and getattr(value, "shape", None) == ()):
            keys.append(str(key))
            values.append(float(value))
    return keys, values


def event_envelope(event: Any) -> dict[str, Any]:
    """Encode an observer event dataclass as the dict form of an ``ObserverEvent`` (arrays as lists).

    A step's ``observation``/``action`` become ``observation_keys/values`` and ``action_keys/values``.
    """
    cls = type(event)
    kind = _EVENT_KINDS.get(cls.__name__)
    if kind is None:
        raise RecordingError(f"not an observer event: {cls.__qualname__}")
    names = _EVENT_FIELD_NAMES.get(cls)
    if names is None:
        names = tuple(f for f in getattr(cls, "__dataclass_fields__", {}) if f not in ("observation", "action"))
        _EVENT_FIELD_NAMES[cls] = names
    payload: dict[str, Any] = {}
    for name in names:
        value = getattr(event, name)
        payload[name] = list(value) if isinstance(value, tuple) else value
    if kind == "step":
        payload["observation_keys"], payload["observation_values"] = _numeric_items(event.observation)
        payload["action_keys"], payload["action_values"] = _numeric_items(event.action)
    return {
        "stamp": _ros_time(event.utc_ns),
        "kind": kind,
        "schema_version": event.schema_version,
        "run_id": event.run_id,
        "event_seq": event.event_seq,
        "monotonic_ns": event.monotonic_ns,
        "utc_ns": event.utc_ns,
        "dropped_before": 0,
        "started": [payload] if kind == "started" else [],
        "step": [payload] if kind == "step" else [],
        "ended": [payload] if kind == "ended" else [],
    }


class EpisodeRecorder:
    """Writes one episode to one MCAP file. Create it with :meth:`open`.

    Not thread-safe: one thread (the rollout loop) writes.
    """

    def __init__(self, path: Path, stream: BinaryIO, writer: Writer, definitions: MsgDefinitions,
                 actuator_keys: tuple[str, ...], topic_prefix: str = "") -> None:
        self._path = path
        self._stream = stream
        self._writer = writer
        self._definitions = definitions
        self._actuator_keys = actuator_keys
        self._topic_joint_states, self._topic_actions, self._topic_events = topic_names(topic_prefix)
        self._accepted = 0          # frames handed to the writer
        self._durable = 0           # frames whose both messages are in the file (a reader gets them back)
        self._good_offset = 0       # end of the last write that left the file whole
        self._schemas: dict[str, Schema] = {}
        self._topic_types: dict[str, str] = {}
        self._fields: dict[str, dict[str, FieldSpec]] = {}
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
        topic_prefix: str = "",
        raw_file: "Callable[[Path], Any] | None" = None,
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
        :param topic_prefix: the ROS namespace of the live topics (``/strands``); "" records at the root.
        :param raw_file: opens the file unbuffered and exclusively (default ``io.FileIO(path, "xb")``; tests
            pass a file that fails after N bytes).
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
        stream: Any = None
        try:
            stream = _FileSink((raw_file or _default_raw)(path))  # owned by the recorder, closed in close()
            writer = Writer(stream, chunk_size=chunk_size, compression=CompressionType.ZSTD)
            recorder = cls(path, stream, writer, definitions, keys, topic_prefix)
            for type_name, text in texts.items():
                recorder._schemas[type_name] = writer.register_msgdef(type_name, text)
            writer.add_metadata(METADATA_EPISODE, {
                "robot_name": str(robot_name),
                "control_frequency_hz": repr(control_frequency),
                "fps": repr(fps),
                "actuator_keys": ",".join(keys),
                "topic_prefix": str(topic_prefix or ""),
            })
            writer.add_metadata(METADATA_ROSBAG2, {METADATA_ROS_DISTRO_KEY: ros_distro()})
            stream.flush()
            recorder._good_offset = stream.tell()
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
        """Frames (a step's ``joint_states`` and ``actions``) in the file: exactly what a reader gets back.

        While writing, frames still in the open chunk are not counted yet; after a successful :meth:`close`
        every accepted frame is; after a failure, the frames of the chunks written whole.
        """
        return self._durable

    @property
    def accepted_frames(self) -> int:
        """Steps accepted by :meth:`write_step` (in the file once :meth:`close` succeeds)."""
        return self._accepted

    @property
    def topics(self) -> tuple[str, str, str]:
        """``(joint_states, actions, observer_events)`` as recorded."""
        return (self._topic_joint_states, self._topic_actions, self._topic_events)

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
        self._write(self._topic_joint_states, JOINT_STATE_TYPE, joint_state, stamp_ns, step_index)
        # The frame counts as accepted once its first message is in; a chunk written during the second
        # write holds both, one written during the first only the frames before it.
        self._accepted += 1
        self._write(self._topic_actions, ACTION_COMMAND_TYPE, command, stamp_ns, step_index)
        self._last_step_index = step_index

    def write_event(self, event: Any) -> None:
        """Record one ObserverEvent.

        The event is a dataclass (``RunPolicyStarted`` / ``Step`` / ``Ended``), encoded here, or a dict shaped
        like the message (payload arrays as lists).

        Logged at its ``utc_ns`` (or now when that is absent), with ``event_seq`` as the MCAP sequence.
        """
        self._check_writable()
        event_dict = event if isinstance(event, Mapping) else event_envelope(event)
        message = self._message(OBSERVER_EVENT_TYPE, event_dict)
        log_time = _int_or(event_dict.get("utc_ns"), 0)
        if log_time <= 0:
            log_time = time.time_ns()
        sequence = _int_or(event_dict.get("event_seq"), 0) & 0xFFFFFFFF
        self._write(self._topic_events, OBSERVER_EVENT_TYPE, message, log_time, sequence)
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
            return self._durable
        self._closed = True
        if self._failure is not None:
            try:
                self._stream.close()
            except OSError:
                pass
            return self._durable
        try:
            self._writer.add_metadata(METADATA_RESULT, {"frames": str(self._accepted)})
            self._writer.finish()
            self._stream.flush()
            os.fsync(self._stream.fileno())
        except Exception as exc:
            self._failure = exc
            self._cut_back()
            try:
                self._stream.close()
            except OSError:
                pass
            raise RecordingError(f"cannot finish recording {self._path}: {exc}") from exc
        self._durable = self._accepted
        try:
            self._stream.close()
        except OSError:
            pass
        return self._durable

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
        """Check a message dict against its definition and shape it as the CDR encoder needs it.

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
        before = self._stream.tell()
        self._write_guarded(lambda: self._writer.write_message(
            topic, schema, message, log_time=log_time, publish_time=log_time, sequence=sequence))
        after = self._stream.tell()
        if after != before:  # a chunk (with every message handed over so far) went into the file whole
            self._good_offset = after
            self._durable = self._accepted

    def _cut_back(self) -> None:
        """Cut the file back to the end of the last whole write, after a failed one.

        So a partial chunk never follows the recoverable ones.
        """
        try:
            self._stream.truncate_to(self._good_offset)
        except (OSError, AttributeError):
            pass

    def _flush(self) -> None:
        self._write_guarded(self._stream.flush)

    def _write_guarded(self, operation: Any) -> Any:
        """Run one writer operation; an OS failure breaks the recorder, any failure is a RecordingError."""
        try:
            return operation()
        except OSError as exc:
            self._failure = exc
            self._cut_back()
            raise RecordingError(f"writing recording {self._path} failed: {exc}") from exc
        except Exception as exc:  # encoding: the message does not fit its schema; nothing was written
            raise RecordingError(f"cannot encode a message for {self._path}: {exc}") from exc
