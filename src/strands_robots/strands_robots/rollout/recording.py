"""Episode recording: one MCAP file per episode, ROS 2 CDR with the schemas of the installed .msg files.

Topics, under the live names (``topic_prefix`` is the ROS namespace the live topics use, e.g. ``/strands``,
so ``ros2 bag play`` stands in for a live run; the files open in ``ros2 bag info/play`` with the MCAP storage
plugin, and in Foxglove):

* ``<prefix>/joint_states`` — ``sensor_msgs/msg/JointState``, one per step (:meth:`EpisodeRecorder.write_step`)
* ``<prefix>/action_commands`` — ``strands_robots_msgs/msg/ActionCommand``, one per step (the keys and values
  emitted; the live message's lease proof, deadline and stamps are the command path's, not the episode's)
* ``<prefix>/observer_events`` — ``strands_robots_msgs/msg/ObserverEvent`` (:meth:`EpisodeRecorder.write_event`
  takes the event dataclasses themselves and encodes them here)
* latest-state topics — any installed type, captured at start (:meth:`EpisodeRecorder.write_latched`)
* messages received already serialized — the cameras' ``<camera>/image_raw/compressed`` and
  ``<camera>/camera_info`` under their live names, the CDR bytes as published (:meth:`EpisodeRecorder.write_raw`,
  from any thread: ``nodes/rollout/camera_recording.py`` hands them over while the episode runs); in process the
  camera backend writes each frame it renders as message dicts (:meth:`EpisodeRecorder.write_message`)

The ROS distro goes into a ``rosbag2`` metadata record (:mod:`~strands_robots.rollout.mcap_file`); the events are
encoded by :mod:`~strands_robots.rollout.event_envelope`.

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

import functools
import math
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO, Callable, Mapping, Sequence

from mcap.records import Schema
from mcap.writer import CompressionType
from mcap_ros2.writer import Writer

from strands_robots.rollout.event_envelope import event_envelope, ros_time
from strands_robots.rollout.mcap_file import METADATA_ROS_DISTRO_KEY, METADATA_ROSBAG2, FileSink, ros_distro
from strands_robots.rollout.mcap_file import default_raw as _default_raw
from strands_robots.rollout.msg_shape import MessageShapeError, MessageShaper
from strands_robots.rollout.msg_schema import (
    MsgDefinitionNotFound,
    MsgDefinitions,
    canonical_type_name,
)

TOPIC_JOINT_STATES = "/joint_states"
TOPIC_ACTIONS = "/action_commands"
TOPIC_OBSERVER_EVENTS = "/observer_events"

JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
ACTION_COMMAND_TYPE = "strands_robots_msgs/msg/ActionCommand"
OBSERVER_EVENT_TYPE = "strands_robots_msgs/msg/ObserverEvent"

__all__ = ["EpisodeRecorder", "RecordingError", "RecordingRefused", "event_envelope", "ros_distro", "topic_names",
           "METADATA_ROSBAG2", "METADATA_ROS_DISTRO_KEY"]

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


def topic_names(prefix: str = "") -> tuple[str, str, str]:
    """``(joint_states, action_commands, observer_events)`` under the namespace ``prefix`` ("" = root)."""
    prefix = str(prefix or "").rstrip("/")
    if prefix and not prefix.startswith("/"):
        prefix = "/" + prefix
    return (prefix + TOPIC_JOINT_STATES, prefix + TOPIC_ACTIONS, prefix + TOPIC_OBSERVER_EVENTS)


def _locked(method: Any) -> Any:
    """Run a recorder method under the recorder's lock."""
    @functools.wraps(method)
    def run(self: "EpisodeRecorder", *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return run


class EpisodeRecorder:
    """Writes one episode to one MCAP file. Create it with :meth:`open`.

    One thread (the rollout loop) writes the steps and events; :meth:`write_raw` may be called from any other
    (each write holds the recorder's lock, so a step's two messages are never split by another).
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
        self._shaper = MessageShaper(definitions)
        self._last_step_index = -1
        self._failure: BaseException | None = None
        self._closed = False
        self._lock = threading.RLock()
        self.raw_counts: dict[str, int] = {}  # topic: messages handed over by write_raw

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
            stream = FileSink((raw_file or _default_raw)(path))  # owned by the recorder, closed in close()
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
        """Frames (a step's ``joint_states`` and ``action_commands``) in the file: exactly what a reader gets back.

        While writing, frames still in the open chunk are not counted yet; after a successful :meth:`close`
        every accepted frame is; after a failure, the frames of the chunks written whole.
        """
        return self._durable

    @property
    def accepted_frames(self) -> int:
        """Steps accepted by :meth:`write_step` (in the file once :meth:`close` succeeds)."""
        return self._accepted

    @property
    def topic_prefix(self) -> str:
        """The namespace the topics are recorded under (``/strands``; "" at the root)."""
        return self._topic_joint_states[: -len(TOPIC_JOINT_STATES)]

    @property
    def topics(self) -> tuple[str, str, str]:
        """``(joint_states, action_commands, observer_events)`` as recorded."""
        return (self._topic_joint_states, self._topic_actions, self._topic_events)

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ writing

    @_locked
    def write_step(self, step_index: int, stamp_ns: int, observation: Mapping[str, Any],
                   action: Mapping[str, float], verdict: Any) -> None:
        """Record one control step: ``/joint_states`` from the observation and ``/action_commands`` as emitted.

        ``/joint_states`` names every actuator key (in ``actuator_keys`` order) with the observation's
        ``<key>.pos`` / ``.vel`` / ``.effort``; a missing value is NaN and an array with no value at all is
        left empty, as JointState allows. ``/action_commands`` holds the action exactly as emitted, also when the
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

    @_locked
    def write_event(self, event: Any) -> None:
        """Record one ObserverEvent.

        The event is a dataclass (``RunPolicyStarted`` / ``Step`` / ``Ended``), encoded here, or a dict shaped
        like the message (payload arrays as lists).

        Logged at its ``utc_ns`` (or now when that is absent), with ``event_seq`` as the MCAP sequence.
        """
        self._check_writable()
        try:
            event_dict = event if isinstance(event, Mapping) else event_envelope(event)
        except ValueError as exc:
            raise RecordingError(str(exc)) from exc
        message = self._message(OBSERVER_EVENT_TYPE, event_dict)
        log_time = _int_or(event_dict.get("utc_ns"), 0)
        if log_time <= 0:
            log_time = time.time_ns()
        sequence = _int_or(event_dict.get("event_seq"), 0) & 0xFFFFFFFF
        self._write(self._topic_events, OBSERVER_EVENT_TYPE, message, log_time, sequence)
        self._flush()

    @_locked
    def write_latched(self, topic: str, schema_name: str, msg_dict: Mapping[str, Any]) -> None:
        """Record the latest state of a transient-local topic (job, lease, driver, safety) at its capture.

        Call it when the recording starts, so the file holds the state in force when the episode began
        even though that state was published earlier; call it again when the state changes.
        """
        self.write_message(topic, schema_name, msg_dict, time.time_ns())

    @_locked
    def write_message(self, topic: str, schema_name: str, msg_dict: Mapping[str, Any], log_ns: int,
                      sequence: int = 0) -> None:
        """Record one message given as a dict shaped like its .msg (nested messages as dicts) at ``log_ns``."""
        self._check_writable()
        try:
            type_name = canonical_type_name(schema_name)
        except ValueError as exc:
            raise RecordingError(f"cannot record {topic}: {exc}") from exc
        self._write(topic, type_name, self._message(type_name, msg_dict), int(log_ns), sequence & 0xFFFFFFFF)
        self._flush()

    @_locked
    def write_raw(self, topic: str, schema_name: str, data: bytes, log_ns: int) -> bool:
        """Record one message as received serialized (CDR with its encapsulation header) on live topic ``topic``.

        For the cameras' topics while the episode runs; any thread. Logged at ``log_ns`` (its receipt).
        Returns False, writing nothing, once the recorder is closed or failed (the episode has ended: the
        frame is not the episode's).

        :raises RecordingError: the type is not installed, the topic is recorded as another type, or writing
            failed.
        """
        if self._closed or self._failure is not None:
            return False
        try:
            type_name = canonical_type_name(schema_name)
        except ValueError as exc:
            raise RecordingError(f"cannot record {topic}: {exc}") from exc
        recorded_as = self._topic_types.setdefault(topic, type_name)
        if recorded_as != type_name:
            raise RecordingError(f"topic {topic} is recorded as {recorded_as}, not {type_name}")
        schema = self._schema(type_name)
        writer = self._writer
        channel_id = writer._channel_ids.get(topic)  # mcap_ros2 keeps its channels by topic; raw ones join them
        if channel_id is None:
            channel_id = self._write_guarded(lambda: writer._writer.register_channel(
                topic=topic, message_encoding="cdr", schema_id=schema.id))
            writer._channel_ids[topic] = channel_id
        seq = self.raw_counts.get(topic, 0)
        self._add(lambda: writer._writer.add_message(
            channel_id=channel_id, log_time=int(log_ns), publish_time=int(log_ns), sequence=seq & 0xFFFFFFFF,
            data=bytes(data)))
        self.raw_counts[topic] = seq + 1
        return True

    # ------------------------------------------------------------------ closing

    @_locked
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
            "header": {"stamp": ros_time(stamp_ns), "frame_id": ""},
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
        try:
            return self._shaper.shape(type_name, value)
        except MessageShapeError as exc:
            raise RecordingError(str(exc)) from exc

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
        self._add(lambda: self._writer.write_message(
            topic, schema, message, log_time=log_time, publish_time=log_time, sequence=sequence))

    def _add(self, operation: Any) -> None:
        """Hand one message to the writer; a chunk it completes holds every message handed over so far."""
        before = self._stream.tell()
        self._write_guarded(operation)
        after = self._stream.tell()
        if after != before:  # a chunk went into the file whole
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
