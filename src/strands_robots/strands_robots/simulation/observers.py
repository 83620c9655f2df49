"""The observer lane (spec/observer-lane.txt): event dataclasses and their synchronous dispatch.

``run_policy(observer=...)`` takes a read-only callable (or a list of them) receiving one
:class:`RunPolicyStarted`, one :class:`RunPolicyStep` per completed ``send_action`` and one
:class:`RunPolicyEnded` per episode. The lane is a second lane beside the backend's per-frame hook, never a use
of it. The events are frozen dataclasses whose fields are the fields of the ``strands_robots_msgs`` messages of
the same names (observer schema version 2); ``strands_robots.conversions.events`` maps them to the messages.

The five rules :class:`ObserverLane` holds to:

- **Additive.** It changes no applied action and no result field; it adds one, ``observer_failures``.
- **Contained.** An ``Exception`` from an observer never alters the rollout; neither does
  :class:`CooperativeStop`, contained by name (an observer only watches; it must not cancel). Both are counted
  in ``observer_failures`` and never reach the ``max_onframe_failures`` watchdog of the per-frame hook.
- **The four that propagate.** ``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit`` and
  ``asyncio.CancelledError`` are nobody's telemetry and propagate. Raised while another exception unwinds (the
  Ended dispatch of a rollout that is failing), the original stays primary and this one becomes a note on it.
- **Borrowed, not copied.** ``RunPolicyStep.observation`` and ``.action`` are the objects the hook received:
  read them during the call, do not mutate or retain them.
- **Not isolated.** Dispatch is synchronous on the rollout thread: a blocking observer blocks the robot. The
  loop paces on deadlines, so an observer has one control period for free; overrunning it drops deadlines.

Nothing here imports rclpy.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from dataclasses import MISSING, dataclass, fields
from typing import Any, Callable, Iterable, Mapping, Sequence, Tuple, Union

__all__ = [
    "SCHEMA_VERSION",
    "RESOLUTION_FULL", "RESOLUTION_PARTIAL", "RESOLUTION_NONE", "RESOLUTION_UNKNOWN", "RESOLUTIONS",
    "HOOK_OK", "HOOK_CANCELLED", "HOOK_RECORDING_ERROR", "HOOK_ERROR", "HOOK_ABSENT", "HOOK_OUTCOMES",
    "OUTCOME_OK", "OUTCOME_CANCELLED", "OUTCOME_ERROR", "OUTCOMES",
    "STOPPED_BUDGET", "STOPPED_PREDICATE", "STOPPED_CANCELLED", "STOPPED_ERROR", "STOPPED_POLICY_COMPLETED",
    "STOPPED_SAFETY_STOP", "STOPPED_REASONS",
    "CooperativeStop", "RunPolicyStarted", "RunPolicyStep", "RunPolicyEnded", "RunPolicyEvent", "Observer",
    "ObserverLane", "new_run_id", "attach_note",
]

SCHEMA_VERSION = 2

# RunPolicyStep.action_resolution (RunPolicyStep.msg RESOLUTION_*)
RESOLUTION_FULL = "full"
RESOLUTION_PARTIAL = "partial"
RESOLUTION_NONE = "none"
RESOLUTION_UNKNOWN = "unknown"
RESOLUTIONS = (RESOLUTION_FULL, RESOLUTION_PARTIAL, RESOLUTION_NONE, RESOLUTION_UNKNOWN)

# RunPolicyStep.legacy_hook_outcome (RunPolicyStep.msg HOOK_*)
HOOK_OK = "ok"
HOOK_CANCELLED = "cancelled"
HOOK_RECORDING_ERROR = "recording_error"
HOOK_ERROR = "error"
HOOK_ABSENT = "absent"
HOOK_OUTCOMES = (HOOK_OK, HOOK_CANCELLED, HOOK_RECORDING_ERROR, HOOK_ERROR, HOOK_ABSENT)

# RunPolicyEnded.outcome (RunPolicyEnded.msg OUTCOME_*)
OUTCOME_OK = "ok"
OUTCOME_CANCELLED = "cancelled"
OUTCOME_ERROR = "error"
OUTCOMES = (OUTCOME_OK, OUTCOME_CANCELLED, OUTCOME_ERROR)

# RunPolicyEnded.stopped_reason (RunPolicyEnded.msg STOPPED_*)
STOPPED_BUDGET = "budget"
STOPPED_PREDICATE = "predicate"
STOPPED_CANCELLED = "cancelled"
STOPPED_ERROR = "error"
STOPPED_POLICY_COMPLETED = "policy_completed"
STOPPED_SAFETY_STOP = "safety_stop"
STOPPED_REASONS = (STOPPED_BUDGET, STOPPED_PREDICATE, STOPPED_CANCELLED, STOPPED_ERROR, STOPPED_POLICY_COMPLETED,
                   STOPPED_SAFETY_STOP)


class CooperativeStop(BaseException):
    """A cooperative cancellation of a rollout (goal cancel, takeover abort).

    A ``BaseException`` so that a broad ``except Exception`` in user code cannot swallow a cancellation. Raised
    by the per-frame hook (or the policy) it cancels the episode (``stopped_reason`` ``cancelled``); raised by
    an observer it is contained by name and counted, because an observer only watches.
    """

    def __init__(self, reason: str = "cancelled") -> None:
        super().__init__(reason)
        self.reason = reason


# Events are frozen, slotted and keyword-only, so schema_version can lead as it does in the .msg files.
_EVENT = dict(frozen=True, slots=True, kw_only=True)


@dataclass(**_EVENT)
class RunPolicyStarted:
    """First event of one episode's lifecycle (RunPolicyStarted.msg)."""

    schema_version: int = SCHEMA_VERSION
    run_id: str                       # this episode's lifecycle id; every event of the episode carries it
    event_seq: int                    # dense, 0-based position in this run_id's stream (Started is 0)
    monotonic_ns: int                 # monotonic clock when the event was made; orders the stream
    utc_ns: int                       # wall-clock ns since the epoch, derived from one anchor per rollout
    robot_name: str                   # robot the policy drives
    policy: str                       # policy provider name
    instruction: str                  # language instruction given to the policy
    control_frequency: float          # requested control rate in Hz
    action_horizon: int               # maximum actions per inferred chunk
    total_steps: int                  # step budget of the episode
    async_rtc: bool                   # chunks prefetched asynchronously
    episode_index: int                # 0-based index of this episode within the call
    n_episodes: int                   # number of episodes the call asked for
    actuator_keys: Tuple[str, ...]    # every key send_action can apply on this robot
    recording_path: str = ""          # file this episode records to; empty when not recording


@dataclass(**_EVENT)
class RunPolicyStep:
    """One completed ``send_action`` (RunPolicyStep.msg).

    Where the message carries ``observation_keys``/``observation_values`` and ``action_keys``/``action_values``,
    this dataclass carries the borrowed objects themselves as :attr:`observation` and :attr:`action` (the objects
    the hook received, never copies); the converter derives the four arrays, and the properties of the same
    names give them here too, on demand. Do not mutate or retain ``observation``/``action`` past the call.
    """

    schema_version: int = SCHEMA_VERSION
    run_id: str                             # lifecycle id of the episode
    event_seq: int                          # dense, 0-based position in this run_id's stream
    monotonic_ns: int                       # monotonic clock when the event was made
    utc_ns: int                             # wall-clock ns from the rollout's single anchor
    applied_action_index: int               # 0-based index of this send_action in the episode
    legacy_step_index: int                  # the hook's step index; always equal to applied_action_index
    action_resolution: str                  # full / partial / none / unknown (RESOLUTION_*)
    applied_action_keys: Tuple[str, ...]    # keys the driver applied, emission order
    unresolved_action_keys: Tuple[str, ...]  # keys the driver did not apply, emission order
    unresolved_action_reasons: Tuple[str, ...]  # reason per unresolved key, same index
    action_error: str                       # coarse error text when action_resolution is unknown, else empty
    observation_is_chunk_reused: bool       # true only for a later action reusing the chunk-start observation
    observation_age_steps: int              # authoritative age of the observation in control steps
    legacy_hook_outcome: str                # ok / cancelled / recording_error / error / absent (HOOK_*)
    chunk_index: int                        # index of this action within its chunk
    elapsed_s: float                        # rollout time since Started (excludes takeover)
    sim_time_s: float                       # robot time reported with the observation
    deadline_missed: bool                   # deadlines were dropped before this step (it ran after a gap)
    camera_names: Tuple[str, ...] = ()      # cameras whose frames the observation held (never the pixels)
    camera_stamp_ns: Tuple[int, ...] = ()   # each frame's stamp (ns), same index
    camera_age_steps: Tuple[int, ...] = ()  # each frame's age in control steps, same index
    success_input_keys: Tuple[str, ...] = ()  # the success predicate's inputs on this observation: keys ...
    success_input_values: Tuple[float, ...] = ()  # ... and values, same index (empty: the task has none)
    success_holds: bool = False             # the predicate held on this step's observation
    observation: Mapping[str, Any]          # borrowed: the observation the action was inferred from
    action: Mapping[str, float]             # borrowed: the emitted action

    @property
    def observation_keys(self) -> Tuple[str, ...]:
        return tuple(k for k, v in self.observation.items() if _is_number(v))

    @property
    def observation_values(self) -> Tuple[float, ...]:
        return tuple(float(v) for v in self.observation.values() if _is_number(v))

    @property
    def action_keys(self) -> Tuple[str, ...]:
        return tuple(self.action.keys())

    @property
    def action_values(self) -> Tuple[float, ...]:
        return tuple(float(v) for v in self.action.values())


@dataclass(**_EVENT)
class RunPolicyEnded:
    """Last event of an episode's lifecycle, and the episode's result (RunPolicyEnded.msg).

    ``observer_failures`` counts the contained failures up to this event's dispatch; the result dict
    (:meth:`to_result`, as returned by ``run_policy``) also counts failures during this event's own dispatch.
    """

    schema_version: int = SCHEMA_VERSION
    run_id: str
    event_seq: int
    monotonic_ns: int
    utc_ns: int
    outcome: str                      # ok / cancelled / error (OUTCOME_*)
    stopped_reason: str               # why the loop stopped (STOPPED_*)
    end_detail: str = ""              # what ended it in words (every tripped safety check, ...)
    applied_actions: int = 0          # send_action calls made (step_count)
    legacy_steps_used: int = 0        # steps whose hook completed; applied_actions may exceed it by one
    action_errors: Tuple[str, ...] = ()  # one entry per step resolved unknown ("step 12: ...")
    full_count: int = 0
    partial_count: int = 0
    none_count: int = 0
    unknown_count: int = 0
    full_rate: float = 0.0            # full / (full + partial + none); unknown steps are not in it
    partial_rate: float = 0.0
    none_rate: float = 0.0
    observer_failures: int = 0        # contained observer failures (Exception, CooperativeStop)
    missed_deadlines: int = 0         # control deadlines dropped because a step overran
    chunks_inferred: int = 0
    prefetch_hits: int = 0
    prefetch_blocks: int = 0
    inference_latency_p50_s: float = 0.0
    inference_latency_max_s: float = 0.0
    inference_latency_p99_s: float = 0.0
    mean_observation_age_steps: float = 0.0  # mean age (steps) of the observations actions were inferred from
    elapsed_s: float = 0.0            # rollout time (excludes takeover)
    paused_s: float = 0.0             # time the rollout clock stood still under takeover
    sim_time_s: float = 0.0           # robot time at the end
    error_type: str = ""
    error_message: str = ""
    recording_path: str = ""
    recorded_frames: int = 0
    success_when: str = ""            # the task's success predicate judged on every step; empty: none
    success_ever: bool = False        # it held on some step's observation
    success_first_step: int = -1      # the first step it held on; -1 never
    end_input_keys: Tuple[str, ...] = ()  # the predicate's inputs on the final observation: keys ...
    end_input_values: Tuple[float, ...] = ()  # ... and values, same index

    def to_result(self) -> dict:
        """Return the episode's JSON-able result: every field (tuples as lists)."""
        out = {}
        for name in _ENDED_FIELDS:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


def _fast_init(cls: type) -> type:
    """Replace a frozen slotted dataclass's ``__init__`` by one writing the slots directly.

    The generated frozen ``__init__`` goes through ``object.__setattr__`` per field (~0.2 µs each, ~5 µs for a
    step); the slot descriptors' own setters do the same in a third of the time, which keeps the lane's
    per-step cost well under its 10 µs budget. Same keyword-only signature and defaults; no validation
    (neither does the dataclass one).
    """
    params, body, env = [], [], {}
    for i, f in enumerate(fields(cls)):
        env[f"_set{i}"] = cls.__dict__[f.name].__set__
        if f.default is not MISSING:
            env[f"_default{i}"] = f.default
            params.append(f"{f.name}=_default{i}")
        else:
            params.append(f.name)
        body.append(f"    _set{i}(self, {f.name})")
    source = f"def __init__(self, *, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    namespace: dict = {}
    exec(source, env, namespace)  # noqa: S102 - generated from the dataclass's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init
    return cls


for _cls in (RunPolicyStarted, RunPolicyStep, RunPolicyEnded):
    _fast_init(_cls)
del _cls

_ENDED_FIELDS = tuple(f.name for f in fields(RunPolicyEnded))

RunPolicyEvent = Union[RunPolicyStarted, RunPolicyStep, RunPolicyEnded]
Observer = Callable[[Any], Any]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def new_run_id() -> str:
    """Return a fresh lifecycle id (uuid4 hex, 32 characters)."""
    return uuid.uuid4().hex


def attach_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)`` where it exists (3.11+), else append to ``__notes__`` (3.10)."""
    add = getattr(exc, "add_note", None)
    if add is not None:
        add(note)
        return
    notes = getattr(exc, "__notes__", None)
    try:
        if isinstance(notes, list):
            notes.append(note)
        else:
            exc.__notes__ = [note]  # type: ignore[attr-defined]
    except Exception:  # an exception type refusing attributes keeps its primacy, just without the note
        pass


def _observer_name(observer: Any) -> str:
    return getattr(observer, "__qualname__", None) or type(observer).__qualname__


class ObserverLane:
    """Dispatches events to observers synchronously and owns the stream's stamps.

    One lane per rollout (one ``run_policy`` / ``PolicyRunner.run`` call): it takes the clock anchor once, so
    ``utc_ns = anchor_utc_ns + (monotonic_ns - anchor_monotonic_ns)`` for every event of every episode. Each
    episode calls :meth:`open_run` for its own ``run_id`` and a dense, 0-based ``event_seq``.

    :param observers: a callable, a sequence of callables, or None. The rollout node adds its publishing
        observer beside a user's.
    :param monotonic_ns: the monotonic clock (tests inject one).
    :param wall_ns: the wall clock read once for the anchor.
    """

    __slots__ = ("_observers", "_mono", "_anchor_mono", "_anchor_utc", "run_id", "_seq", "run_failures",
                 "total_failures", "failure_log", "_lock")

    def __init__(
        self,
        observers: "Observer | Sequence[Observer] | None" = None,
        *,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
        wall_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._observers: Tuple[Observer, ...] = self.normalise(observers)
        self._mono = monotonic_ns
        # One anchor: read both clocks back to back, once.
        self._anchor_mono = monotonic_ns()
        self._anchor_utc = wall_ns()
        self.run_id = ""
        self._seq = 0
        self.run_failures = 0          # contained failures in the current run_id
        self.total_failures = 0        # contained failures over the lane's life
        self.failure_log: list = []    # (run_id, event type name, observer name, exception type name, text)
        self._lock = threading.Lock()

    @staticmethod
    def normalise(observers: "Observer | Iterable[Observer] | None") -> Tuple[Observer, ...]:
        """``None`` → ``()``, a callable → ``(callable,)``, a sequence → tuple; refuses non-callables."""
        if observers is None:
            return ()
        if callable(observers):
            return (observers,)
        if isinstance(observers, (str, bytes, Mapping)):
            raise TypeError(f"observer must be a callable or a sequence of callables, got {observers!r}")
        try:
            items = tuple(observers)
        except TypeError:
            raise TypeError(f"observer must be a callable or a sequence of callables, got {observers!r}") from None
        for item in items:
            if not callable(item):
                raise TypeError(f"every observer must be callable, got {item!r}")
        return items

    @property
    def observers(self) -> Tuple[Observer, ...]:
        return self._observers

    def add(self, observer: Observer) -> None:
        """Add an observer (e.g. the rollout node's publisher) before a run starts."""
        if not callable(observer):
            raise TypeError(f"observer must be callable, got {observer!r}")
        self._observers = self._observers + (observer,)

    @property
    def anchor(self) -> Tuple[int, int]:
        """``(anchor_monotonic_ns, anchor_utc_ns)``, taken once when the lane was made."""
        return self._anchor_mono, self._anchor_utc

    # -- lifecycle stamps -----------------------------------------------------------------------------------
    def open_run(self, run_id: "str | None" = None) -> str:
        """Start a new lifecycle: a fresh ``run_id`` (or the given one), ``event_seq`` back to 0."""
        self.run_id = run_id if run_id else new_run_id()
        self._seq = 0
        self.run_failures = 0
        return self.run_id

    def stamp(self) -> Tuple[int, int, int]:
        """``(event_seq, monotonic_ns, utc_ns)`` for the next event of the current run; consumes a seq."""
        seq = self._seq
        self._seq = seq + 1
        mono = self._mono()
        return seq, mono, self._anchor_utc + (mono - self._anchor_mono)

    def utc_of(self, monotonic_ns: int) -> int:
        return self._anchor_utc + (monotonic_ns - self._anchor_mono)

    # -- dispatch ---------------------------------------------------------------------------------------------
    def dispatch(self, event: Any, unwinding: "BaseException | None" = None) -> None:
        """Hand ``event`` to every observer in order, on this thread.

        :param unwinding: the exception already propagating when this dispatch runs (the Ended of a failing
            rollout); defaults to the one being handled, if any. A propagating observer exception raised then
            is attached to it as a note instead of replacing it, and the remaining observers still run.
        :raises KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError: from an observer, when
            nothing else is unwinding (any other non-``Exception`` ``BaseException`` too, except CooperativeStop).
        """
        outer = unwinding if unwinding is not None else sys.exc_info()[1]
        for observer in self._observers:
            try:
                observer(event)
            except Exception as exc:
                self._contain(event, observer, exc)
            except CooperativeStop as exc:
                self._contain(event, observer, exc)
            except BaseException as exc:
                if outer is None or outer is exc:
                    raise
                text = str(exc)
                attach_note(outer, f"observer {_observer_name(observer)} raised {type(exc).__name__}"
                                   f"{': ' + text if text else ''} during {type(event).__name__} dispatch "
                                   f"while {type(outer).__name__} was unwinding")

    def _contain(self, event: Any, observer: Any, exc: BaseException) -> None:
        with self._lock:
            self.run_failures += 1
            self.total_failures += 1
            if len(self.failure_log) < 100:
                self.failure_log.append((self.run_id, type(event).__name__, _observer_name(observer),
                                         type(exc).__name__, str(exc)))
