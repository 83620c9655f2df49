"""PolicyRunner: the rollout control loop (DESIGN.md §5 "Rollout loop" and "Observer lane").

One call of :meth:`PolicyRunner.run` is one rollout of ``n_episodes`` episodes. Per episode::

    backend.reset(seed)            (before every episode, the first included)
    policy.reset(task)
    RunPolicyStarted               (from here on, exactly one RunPolicyEnded on every exit path)
    loop:
        pace                       (deadline grid; a cooperative stop ends the wait at once)
        backend.fault_detail()?    (optional: a driver gone or silent ends the episode as an error, DriverFault)
        planned = chunks.next_action(backend.observe)   (act on a worker, abandoned on a stop; observe
                                    raising ends the episode as an error)
        verdict = backend.send_action(planned.action)   (an exception is a coarse error: resolution unknown)
        resolution                 (full / partial / none need a complete per-key breakdown, else unknown)
        legacy hook                (recording + on_frame + cancellation: ok / cancelled / recording_error /
                                    error / absent); legacy_steps_used increments after it
        RunPolicyStep              (applied_action_index == legacy_step_index, also on the aborting step;
                                    recorded before it is dispatched, so every dispatched event is in the file)
        backend.advance(period); safety stop?; driver fault?; stop_when?; budget?
    RunPolicyEnded                 (also the episode's result)

Over a backend with an asynchronous command path (``command_window()``, the ROS command stream) the step is
split at ``send_action``: the action is submitted and the loop goes on; the step's verdict, legacy hook,
recording and ``RunPolicyStep`` follow when its verdict arrives, in step order
(:mod:`strands_robots.rollout.pipeline`), at the start of a later step or after its deadline wait. With the
window full or a verdict overdue the loop holds (budget clock paused, held periods counted as missed
deadlines) until the driver answers or ``fault_detail()`` ends the episode. On every exit the steps still in
flight are reported (their verdicts awaited, at most the verdict bound; none awaited after Ctrl-C) before the
one Ended; after a hook aborted the episode they report that hook's outcome, so ``applied_actions`` can exceed
``legacy_steps_used`` by the steps already sent.

Arguments are validated once by :func:`~strands_robots.rollout.run_spec.validate_run` (the rollout node calls
it on a goal before the arms move, then :meth:`PolicyRunner.run_spec`). A preflight refusal (invalid
arguments, unknown provider, policy keys matching no actuator, a recording whose fps differs from the control
frequency) returns ``{"status": "error", ...}`` before any event: it opens no lifecycle. Nothing here imports
rclpy or ``strands_robots.conversions`` (the recorder encodes the events it is handed).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from strands_robots.arm.verdict import REASON_UNKNOWN_KEY, ActionVerdict
from strands_robots.cameras.frames import event_fields
from strands_robots.policies.base import EndEpisode, Policy
from strands_robots.policies.registry import make_policy
from strands_robots.rollout.backend import RobotBackend
from strands_robots.rollout.chunks import ChunkPipeline, ChunkTelemetry
from strands_robots.rollout.pacing import DeadlinePacer
from strands_robots.rollout.pipeline import InFlight
from strands_robots.rollout.run_spec import (
    DEFAULT_INFERENCE_TIMEOUT_S,
    DEFAULT_MAX_ONFRAME_FAILURES,
    PreflightRefused,
    RunRefused,
    RunSpec,
    validate_run,
)
from strands_robots.rollout.stop import StopToken
from strands_robots.simulation.observers import (
    HOOK_ABSENT,
    HOOK_CANCELLED,
    HOOK_ERROR,
    HOOK_OK,
    HOOK_RECORDING_ERROR,
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_OK,
    RESOLUTION_FULL,
    RESOLUTION_NONE,
    RESOLUTION_PARTIAL,
    RESOLUTION_UNKNOWN,
    STOPPED_BUDGET,
    STOPPED_CANCELLED,
    STOPPED_ERROR,
    STOPPED_POLICY_COMPLETED,
    STOPPED_PREDICATE,
    STOPPED_SAFETY_STOP,
    CooperativeStop,
    Observer,
    ObserverLane,
    RunPolicyEnded,
    RunPolicyStarted,
    RunPolicyStep,
)

__all__ = [
    "PolicyRunner", "PreflightRefused", "RunRefused", "RunSpec", "validate_run", "UnknownActionKeys",
    "classify_verdict", "FAIL_FAST_STEPS", "DEFAULT_MAX_ONFRAME_FAILURES", "DEFAULT_INFERENCE_TIMEOUT_S",
    "DRIVER_FAULT",
    "STATUS_SUCCESS", "STATUS_ERROR",
]

STATUS_SUCCESS = "success"
# RunPolicyEnded.error_type when the backend reports a driver fault (gone, silent, stale observations).
DRIVER_FAULT = "DriverFault"
STATUS_ERROR = "error"
# Stop with an error when each of the first min(FAIL_FAST_STEPS, budget) steps applied nothing because every
# emitted key was unknown: the policy speaks another robot's key names.
FAIL_FAST_STEPS = 3

OnFrame = Callable[[int, Mapping[str, Any], Mapping[str, float]], Any]
StopWhen = Callable[[Mapping[str, Any]], bool]


class _HookAbort(Exception):
    """Internal: the legacy hook aborted the episode (recording failure, on_frame watchdog)."""

    def __init__(self, error: BaseException, message: str) -> None:
        super().__init__(message)
        self.error = error


class _RecordingFailed(_HookAbort):
    """Internal: the recorder failed outside the hook (writing an event, finishing the file)."""


class UnknownActionKeys(ValueError):
    """Fail fast: the first steps applied nothing because every emitted key was unknown to the robot."""


def classify_verdict(action: Mapping[str, Any], verdict: Any) -> tuple:
    """``(resolution, applied, unresolved, reasons, error)`` of one ``send_action``.

    ``partial`` and ``none`` need a complete breakdown: no duplicates, applied and unresolved disjoint, their
    union equal to the emitted keys, one reason per unresolved key. Anything else (a coarse error, a malformed
    or incomplete verdict) is ``unknown`` with empty key tuples and the error text.
    """
    if not isinstance(verdict, ActionVerdict):
        return RESOLUTION_UNKNOWN, (), (), (), f"backend returned {type(verdict).__name__}, not an ActionVerdict"
    if verdict.error:
        return RESOLUTION_UNKNOWN, (), (), (), verdict.error
    applied = verdict.applied_keys
    unresolved = verdict.unresolved_keys
    reasons = verdict.unresolved_reasons
    n = len(action)
    if len(applied) + len(unresolved) == n and len(reasons) == len(unresolved):
        keys = set(applied)
        keys.update(unresolved)
        if len(keys) == n and action.keys() == keys:
            if not unresolved and n:
                return RESOLUTION_FULL, tuple(applied), (), (), ""
            if applied:
                return RESOLUTION_PARTIAL, tuple(applied), tuple(unresolved), tuple(reasons), ""
            return RESOLUTION_NONE, (), tuple(unresolved), tuple(reasons), ""
    return (RESOLUTION_UNKNOWN, (), (), (),
            f"incomplete per-key verdict: applied {list(applied)}, unresolved {list(unresolved)} "
            f"({len(reasons)} reasons) for emitted {list(action.keys())}")


def _backend_joint_limits(backend: Any) -> dict:
    """``{key: (lower, upper)}`` when the backend can tell (``joint_limits()`` or an in-process core)."""
    getter = getattr(backend, "joint_limits", None)
    try:
        if callable(getter):
            return dict(getter())
        core = getattr(backend, "core", None)
        specs = getattr(core, "joint_specs", None)
        if callable(specs):
            return {k: (s.lower, s.upper) for k, s in specs().items()}
    except Exception:  # limits only shape the mock's motion; without them it uses its own amplitude
        return {}
    return {}


class _Settings:
    """The validated arguments of one run."""

    __slots__ = ("policy_name", "policy", "instruction", "control_frequency", "period_s", "action_horizon",
                 "fast_mode", "total_steps", "max_onframe_failures", "seed", "n_episodes", "reset_between",
                 "async_rtc", "inference_timeout_s", "stop_when", "on_frame", "hook_present", "record",
                 "recording_dir", "fps", "task_extra", "actuator_keys", "joint_limits", "recorder_cls",
                 "recording_error_cls", "spec", "robot_name")


class PolicyRunner:
    """Runs policies on one robot backend.

    :param backend: the robot (:class:`~strands_robots.rollout.backend.RobotBackend`).
    :param robot_name: reported as ``RunPolicyStarted.robot_name``.
    :param stop: the cooperative stop token; :meth:`request_stop` sets it. A stop requested before ``run`` is
        seen before the first step (it is cleared only by :meth:`StopToken.clear`).
    :param clock_ns: the pacing clock (monotonic ns); with ``waiter``, tests and simulated time run the loop
        on their own time, deterministically.
    :param waiter: ``waiter(event, timeout_s) -> bool``, how the pacer sleeps (default ``event.wait``).
    """

    def __init__(self, backend: RobotBackend, *, robot_name: str = "robot", stop: "StopToken | None" = None,
                 clock_ns: "Callable[[], int]" = time.perf_counter_ns,
                 waiter: "Callable[[Any, float], bool] | None" = None) -> None:
        for method in ("action_keys", "observe", "send_action", "reset", "advance", "safety_stop_detail"):
            if not callable(getattr(backend, method, None)):
                raise TypeError(f"backend lacks {method}(); it must implement RobotBackend")
        self.backend = backend
        self.robot_name = str(robot_name)
        self._stop_supplied = stop is not None
        self.stop = stop if stop is not None else StopToken()
        self._pacer: "DeadlinePacer | None" = None
        self._pause_lock = threading.Lock()
        self._pause_requested = False
        # The pacing clock and how its waits sleep (tests and simulated time inject both; see DeadlinePacer).
        self._clock_ns = clock_ns
        self._waiter = waiter

    # -- control from other threads ---------------------------------------------------------------------------
    def request_stop(self, reason: str = "cancelled") -> None:
        """Cooperative stop: takes effect within one control period, also during a deadline wait."""
        self.stop.request(reason)

    def pause(self) -> None:
        """Operator takeover: the loop holds before its next step and the budget clock stands still.

        Safe from any thread at any time of a run, also before its first step or between episodes (the next
        episode then starts held); it holds until :meth:`resume`, a stop, or the end of the ``run`` call.
        """
        with self._pause_lock:  # the pacer too: the loop's own hold (rollout/pipeline.py) checks under it
            self._pause_requested = True
            if self._pacer is not None:
                self._pacer.pause()

    def resume(self) -> None:
        """End the takeover: the loop continues from the arm's current state.

        The policy's ``resume`` is called with a fresh observation and the chunk in use is dropped, so no stale
        command is sent.
        """
        with self._pause_lock:
            self._pause_requested = False
            if self._pacer is not None:
                self._pacer.resume()

    @property
    def paused(self) -> bool:
        return self._pause_requested

    # -- the rollout ----------------------------------------------------------------------------------------
    def run(
        self,
        policy_provider: "str | Policy" = "mock",
        *,
        stop_when: "StopWhen | None" = None,
        observer: "Observer | Sequence[Observer] | None" = None,
        on_frame: "OnFrame | None" = None,
        **kwargs: Any,
    ) -> dict:
        """Run ``n_episodes`` episodes of a policy and return the results.

        The run arguments (the peer's keyword names) are checked by
        :func:`~strands_robots.rollout.run_spec.validate_run`, which documents each: ``policy_config``,
        ``instruction``, ``duration`` (seconds per episode), ``control_frequency``, ``action_horizon``,
        ``fast_mode``, ``n_steps`` / ``max_steps`` (two names of the step budget), ``max_onframe_failures``,
        ``seed`` (episode ``i`` uses ``seed + i``), ``n_episodes``, ``reset_between``, ``async_rtc``,
        ``rtc_inference_timeout_s``, ``record``, ``recording_dir``, ``fps``, ``task``, ``robot_name``,
        ``recording_topic_prefix``, ``episode_number_offset``.

        :param policy_provider: a provider name for :func:`make_policy` or a policy object.
        :param stop_when: ``predicate(observation) -> bool`` checked after every step on a fresh observation;
            true ends the episode with ``stopped_reason`` ``predicate``.
        :param observer: a callable or sequence of callables receiving every event (the observer lane).
        :param on_frame: the legacy per-frame hook ``on_frame(step, observation, action)``; raising
            ``CooperativeStop`` cancels, any other exception counts toward ``max_onframe_failures``.
        :returns: ``{"status": "success"|"error", "episodes": [result, ...]}``, plus ``observer_failures``
            (top level and per episode) when an observer was given; a preflight refusal adds ``error_type``
            and ``error_message`` and has no episodes.
        """
        try:
            spec = validate_run(policy_provider=policy_provider, **kwargs)
        except Exception as exc:
            return self._refusal(exc, observer)
        return self.run_spec(spec, observer=observer, on_frame=on_frame, stop_when=stop_when)

    @staticmethod
    def _refusal(exc: BaseException, observer: Any) -> dict:
        out = {"status": STATUS_ERROR, "episodes": [],
               "error_type": "ValueError" if isinstance(exc, PreflightRefused) else type(exc).__name__,
               "error_message": str(exc)}
        if observer is not None:
            out["observer_failures"] = 0
        return out

    def run_spec(self, spec: RunSpec, *, observer: "Observer | Sequence[Observer] | None" = None,
                 on_frame: "OnFrame | None" = None, stop_when: "StopWhen | None" = None) -> dict:
        """Run the episodes of a spec :func:`~strands_robots.rollout.run_spec.validate_run` accepted.

        Same result as :meth:`run`. The checks that need the robot (its action keys, the policy's keys
        against them) happen here, before any episode starts.
        """
        lane = None
        try:
            if not isinstance(spec, RunSpec):
                raise PreflightRefused(f"run_spec needs a RunSpec from validate_run, got {type(spec).__name__}")
            lane = ObserverLane(observer)
            settings = self._preflight(spec, stop_when, on_frame)
        except Exception as exc:
            return self._refusal(exc, observer)
        observed = bool(lane.observers)

        episodes: list = []
        status = STATUS_SUCCESS
        run_error: "tuple[str, str] | None" = None
        for index in range(spec.n_episodes):
            try:
                result = self._episode(settings, lane, index)
            except _SetupFailed as exc:  # before Started: no lifecycle for this episode
                status = STATUS_ERROR
                run_error = (type(exc.error).__name__, str(exc.error))
                break
            if not observed:
                del result["observer_failures"]  # additive: without an observer the lane adds nothing
            episodes.append(result)
            if result["outcome"] == OUTCOME_ERROR:
                status = STATUS_ERROR
            if result["outcome"] != OUTCOME_OK:
                break  # a cancel ends the call; an error (safety stop, failure) would repeat
        if not self._stop_supplied:
            self.stop.clear()  # our own token: a stop asked during this call does not leak into the next
        with self._pause_lock:
            self._pause_requested = False  # a takeover holds the run it was asked during, not the next one
        out: dict = {"status": status, "episodes": episodes}
        if observed:
            out["observer_failures"] = lane.total_failures
        if run_error is not None:
            out["error_type"], out["error_message"] = run_error
        return out

    # -- preflight ------------------------------------------------------------------------------------------
    def _preflight(self, spec: RunSpec, stop_when: Any, on_frame: Any) -> _Settings:
        """Run the robot-side checks of a validated spec; nothing moves."""
        s = _Settings()
        s.spec = spec
        s.control_frequency = spec.control_frequency
        s.period_s = spec.period_s
        s.action_horizon = spec.action_horizon
        s.n_episodes = spec.n_episodes
        s.max_onframe_failures = spec.max_onframe_failures
        s.total_steps = spec.n_steps
        s.seed = spec.seed
        s.fast_mode = spec.fast_mode
        s.reset_between = spec.reset_between
        s.async_rtc = spec.async_rtc
        s.inference_timeout_s = spec.rtc_inference_timeout_s
        if stop_when is not None and not callable(stop_when):
            raise PreflightRefused(f"stop_when must be callable, got {stop_when!r}")
        if on_frame is not None and not callable(on_frame):
            raise PreflightRefused(f"on_frame must be callable, got {on_frame!r}")
        s.stop_when = stop_when
        s.on_frame = on_frame
        s.instruction = spec.instruction
        s.robot_name = spec.robot_name or self.robot_name
        s.record = spec.record
        s.recording_dir = spec.recording_dir
        s.fps = spec.fps if spec.record else None
        s.recorder_cls = None
        s.recording_error_cls = None
        if s.record:
            from strands_robots.rollout import recording  # only when recording: it imports mcap

            s.recorder_cls = recording.EpisodeRecorder
            s.recording_error_cls = recording.RecordingError
        s.hook_present = s.record or on_frame is not None or self._stop_supplied

        keys = tuple(self.backend.action_keys())
        if not keys:
            raise PreflightRefused("the backend reports no action keys")
        s.actuator_keys = keys
        s.joint_limits = _backend_joint_limits(self.backend)
        s.task_extra = dict(spec.task)

        s.policy_name = spec.policy_name
        s.policy = spec.policy if spec.policy is not None else make_policy(spec.policy_provider,
                                                                           spec.policy_config)
        # Episode 0's policy reset happens here so a policy speaking another robot's keys is refused up front.
        s.policy.reset(self._task(s, 0))
        declared = getattr(s.policy, "action_keys", None)
        if isinstance(declared, (tuple, list)) and declared and all(isinstance(k, str) for k in declared):
            if not set(declared) & set(keys):
                raise PreflightRefused(
                    f"policy {s.policy_name!r} emits keys that match no actuator ({', '.join(declared)}); "
                    f"valid keys: {', '.join(keys)}")
        return s

    def _task(self, s: _Settings, episode_index: int) -> dict:
        task = {
            "instruction": s.instruction,
            "action_keys": s.actuator_keys,
            "joint_limits": s.joint_limits,
            "control_frequency": s.control_frequency,
            "action_horizon": s.action_horizon,
            "episode_index": episode_index,
        }
        seed = s.spec.episode_seed(episode_index)
        if seed is not None:
            task["seed"] = seed  # the policy's own randomness follows the run's seed (seed + i)
        task.update(s.task_extra)
        return task

    # -- one episode ----------------------------------------------------------------------------------------
    def _episode(self, s: _Settings, lane: ObserverLane, index: int) -> dict:
        backend = self.backend
        recorder = None
        try:
            if index == 0 or s.reset_between:
                backend.reset(None if s.seed is None else s.seed + index)
            if index > 0:
                s.policy.reset(self._task(s, index))
            run_id = lane.open_run()
            if s.record:
                import os

                os.makedirs(s.recording_dir, exist_ok=True)
                number = s.spec.episode_number_offset + index
                path = os.path.join(s.recording_dir, f"episode_{number:04d}_{run_id[:8]}.mcap")
                recorder = s.recorder_cls.open(path, control_frequency=s.control_frequency, fps=s.fps,
                                               actuator_keys=s.actuator_keys, robot_name=s.robot_name,
                                               topic_prefix=s.spec.recording_topic_prefix)
                _recording_hook(backend, "start_recording", recorder)  # the cameras' messages (over ROS)
            pacer = DeadlinePacer(s.period_s, fast_mode=s.fast_mode, stop=self.stop, clock_ns=self._clock_ns,
                                  waiter=self._waiter)
        except Exception as exc:
            if recorder is not None:
                _recording_hook(backend, "stop_recording")
                try:
                    recorder.close()
                except Exception:
                    pass
            raise _SetupFailed(exc) from exc

        st = _EpisodeState()
        recording_path = str(recorder.path) if recorder is not None else ""
        in_flight: "BaseException | None" = None
        propagate = False
        pipelines: list = []
        try:
            seq, mono, utc = lane.stamp()
            started = RunPolicyStarted(
                run_id=run_id, event_seq=seq, monotonic_ns=mono, utc_ns=utc, robot_name=s.robot_name,
                policy=s.policy_name, instruction=s.instruction, control_frequency=s.control_frequency,
                action_horizon=s.action_horizon, total_steps=s.total_steps, async_rtc=s.async_rtc,
                episode_index=index, n_episodes=s.n_episodes, actuator_keys=s.actuator_keys,
                recording_path=recording_path)
            pacer.start()
            with self._pause_lock:
                self._pacer = pacer
                if self._pause_requested:  # a takeover asked before this episode's first step
                    pacer.pause()
            lane.dispatch(started)
            if recorder is not None:
                self._write_event(recorder, started, s)
            self._loop(s, lane, pacer, recorder, st, pipelines)
        except EndEpisode as exc:
            st.finish(STOPPED_POLICY_COMPLETED, OUTCOME_OK, str(exc))
        except CooperativeStop as exc:
            st.finish(STOPPED_CANCELLED, OUTCOME_CANCELLED, exc.reason)
        except _HookAbort as exc:
            st.finish(STOPPED_ERROR, OUTCOME_ERROR, str(exc), exc.error)
        except _StepFailed as exc:
            st.finish(STOPPED_ERROR, OUTCOME_ERROR, f"{type(exc.error).__name__}: {exc.error}", exc.error)
        except Exception as exc:
            st.finish(STOPPED_ERROR, OUTCOME_ERROR, f"{type(exc).__name__}: {exc}", exc)
        except BaseException as exc:  # KeyboardInterrupt & co.: Ended first, then it propagates
            st.finish(STOPPED_CANCELLED, OUTCOME_CANCELLED, f"interrupted by {type(exc).__name__}")
            in_flight = exc
            propagate = True
        finally:
            with self._pause_lock:
                self._pacer = None
            for pipeline in pipelines:
                try:
                    pipeline.close()
                except Exception:
                    pass
            if in_flight is None:
                in_flight = sys.exc_info()[1]  # anything escaping the handlers above
            ended = self._ended(s, lane, pacer, st, pipelines, recording_path)
            if recorder is not None:
                ended = self._finish_recording(recorder, ended, s)
            lane.dispatch(ended, unwinding=in_flight)
        result = ended.to_result()
        result["observer_failures"] = lane.run_failures
        if propagate:
            raise in_flight  # type: ignore[misc]
        return result

    @staticmethod
    def _write_event(recorder: Any, event: Any, s: _Settings) -> None:
        """Record an event (the recorder encodes it); its failure is a recording error."""
        try:
            recorder.write_event(event)
        except Exception as exc:
            raise _RecordingFailed(exc, f"recording failed writing {type(event).__name__}: "
                                        f"{type(exc).__name__}: {exc}") from exc

    def _loop(self, s: _Settings, lane: ObserverLane, pacer: DeadlinePacer, recorder: Any, st: "_EpisodeState",
              pipelines: list) -> None:
        """Run the steps of one episode: one action sent per step, each step's event once its verdict is known.

        With a backend that offers ``command_window()`` (the command stream), a step's command is sent and the
        loop goes on; its event is dispatched when its verdict arrives, in step order
        (:mod:`strands_robots.rollout.pipeline`), and every step sent is reported before the Ended, on every
        exit. Otherwise ``send_action`` answers at once and the step completes there.
        """
        backend = self.backend
        observe = backend.observe
        send_action = backend.send_action
        advance = backend.advance
        safety_detail = backend.safety_stop_detail
        fault_detail = getattr(backend, "fault_detail", None)
        if not callable(fault_detail):
            fault_detail = None
        stop = self.stop
        period = s.period_s
        period_ns = max(1, int(round(period * 1e9)))
        total = s.total_steps
        on_frame = s.on_frame
        stop_when = s.stop_when
        hook_present = s.hook_present
        max_onframe = s.max_onframe_failures
        fail_fast_n = min(FAIL_FAST_STEPS, total)
        clock = self._clock_ns
        run_id = lane.run_id
        stamp = lane.stamp
        dispatch = lane.dispatch
        # Cameras (a backend with camera_names, strands_robots.cameras): each step's event carries every frame's
        # stamp and age in steps, never the pixels.
        camera_names = tuple(getattr(backend, "camera_names", None) or ())

        window = None
        window_factory = getattr(backend, "command_window", None)
        if callable(window_factory):
            window = window_factory()  # one per episode; None: this backend answers send_action at once
        inflight: "InFlight | None" = None
        hook_abort: list = []  # the hook's abort that ended the episode (the steps after it report its outcome)
        if window is not None:
            inflight = InFlight(window.max_outstanding, window.overdue_ns, window.verdict_bound_ns)

        def complete(sent: "_Sent", verdict: Any, forced_outcome: str = "", check_stop: bool = True) -> Any:
            """Classify, run the legacy hook, record and dispatch one step's event; the hook's abort, if any.

            ``forced_outcome``: the hook is not run (an earlier step's hook aborted the episode) and the step
            reports that outcome. ``check_stop``: False while draining, when the episode has already ended.
            """
            index = sent.index
            planned = sent.planned
            action = planned.action
            observation = planned.observation
            resolution, applied, unresolved, reasons, error = classify_verdict(action, verdict)
            if resolution is RESOLUTION_FULL:
                st.full += 1
            elif resolution is RESOLUTION_PARTIAL:
                st.partial += 1
            elif resolution is RESOLUTION_NONE:
                st.none += 1
            else:
                st.unknown += 1
                st.action_errors.append(f"step {index}: {error}")

            # The legacy hook: recording, on_frame, cancellation check.
            abort: "BaseException | None" = None
            if forced_outcome:
                outcome = forced_outcome
            elif hook_present:
                outcome = HOOK_OK
                try:
                    if recorder is not None:
                        try:
                            recorder.write_step(index, lane.utc_of(sent.mono_ns), observation, action, verdict)
                        except Exception as exc:  # never silent: this step's frame is lost, the episode ends
                            raise _RecordingFailed(exc, f"recording failed at step {index}: "
                                                        f"{type(exc).__name__}: {exc}") from exc
                        st.recorded_frames += 1
                    if on_frame is not None:
                        try:
                            on_frame(index, observation, action)
                        except Exception as exc:
                            st.onframe_failures += 1
                            outcome = HOOK_ERROR
                            if st.onframe_failures > max_onframe:
                                raise _HookAbort(exc, f"on_frame failed {st.onframe_failures} times "
                                                      f"(max_onframe_failures={max_onframe}); last: "
                                                      f"{type(exc).__name__}: {exc}") from exc
                    if check_stop:
                        stop.check()
                except CooperativeStop as exc:
                    outcome = HOOK_CANCELLED
                    abort = exc
                except _RecordingFailed as exc:
                    outcome = HOOK_RECORDING_ERROR
                    abort = exc
                except _HookAbort as exc:
                    outcome = HOOK_ERROR
                    abort = exc
                if abort is None:
                    st.legacy_steps_used = index + 1
            else:
                outcome = HOOK_ABSENT
                st.legacy_steps_used = index + 1

            cams = event_fields(observation, camera_names, planned.age_steps, period) if camera_names else _NO_CAMERAS
            seq, mono, utc = stamp()
            event = RunPolicyStep(
                run_id=run_id, event_seq=seq, monotonic_ns=mono, utc_ns=utc, applied_action_index=index,
                legacy_step_index=index, action_resolution=resolution, applied_action_keys=applied,
                unresolved_action_keys=unresolved, unresolved_action_reasons=reasons, action_error=error,
                observation_is_chunk_reused=planned.is_chunk_reused, observation_age_steps=planned.age_steps,
                legacy_hook_outcome=outcome, chunk_index=planned.chunk_index, elapsed_s=sent.elapsed_s,
                sim_time_s=float(observation.get("sim_time_s", 0.0)), deadline_missed=sent.deadline_missed,
                camera_names=cams[0], camera_stamp_ns=cams[1], camera_age_steps=cams[2],
                observation=observation, action=action)
            st.sim_time_s = event.sim_time_s
            if recorder is not None:
                # Recorded before it is dispatched, so every event dispatched reaches the recording (the
                # aborting step's too, and one whose observer raises Ctrl-C). A failing write (the disk is
                # full) is this step's recording_error: the event says so before anyone sees it.
                try:
                    self._write_event(recorder, event, s)
                except _RecordingFailed as exc:
                    if abort is None and not forced_outcome:
                        abort = exc
                        st.legacy_steps_used = index
                        event = dataclasses.replace(event, legacy_hook_outcome=HOOK_RECORDING_ERROR)
                        try:
                            self._write_event(recorder, event, s)  # attempted; the recorder has failed
                        except _RecordingFailed:
                            pass
            dispatch(event)

            if index < fail_fast_n:
                if resolution is RESOLUTION_NONE and all(r == REASON_UNKNOWN_KEY for r in reasons):
                    st.unknown_key_steps += 1
            return abort

        def fail_fast(sent: "_Sent") -> "UnknownActionKeys | None":
            if sent.index + 1 == fail_fast_n and st.unknown_key_steps == fail_fast_n:
                return UnknownActionKeys(
                    f"the policy's keys match no actuator: the first {fail_fast_n} steps applied nothing "
                    f"(emitted {', '.join(map(str, sent.planned.action.keys()))}); valid keys: "
                    f"{', '.join(s.actuator_keys)}")
            return None

        def take_verdicts(timeout_s: float) -> None:
            """Hand the verdicts arrived (waiting at most ``timeout_s`` for one) to the steps in flight."""
            for ticket, verdict in window.collect(timeout_s):
                inflight.resolve(ticket, verdict)
            if inflight.open_count:
                inflight.expire(clock(), window.describe_silence())

        def complete_ready(timeout_s: float = 0.0) -> None:
            """Complete the steps whose verdicts (and every earlier step's) are known; raise what ends the run."""
            take_verdicts(timeout_s)
            while True:
                ready = inflight.pop_one()
                if ready is None:
                    return
                abort = complete(ready.step, ready.verdict)
                if abort is not None:
                    hook_abort.append(abort)
                    raise abort
                error = fail_fast(ready.step)
                if error is not None:
                    raise error

        def hold() -> int:
            """Rule 4 of the pipeline: send nothing until the driver answers.

            :returns: the control periods held (missed deadlines), or -1 when the episode ended.
            """
            with self._pause_lock:
                mine = not pacer.paused
                if mine:
                    pacer.pause()  # the budget clock stands still, as in a takeover
            start = clock()
            poll = min(period, _HOLD_POLL_S)
            try:
                while True:
                    complete_ready(poll)
                    if not inflight.hold_reason(clock()):
                        return 0 if s.fast_mode else int((clock() - start) // period_ns)
                    if stop.requested:
                        st.finish(STOPPED_CANCELLED, OUTCOME_CANCELLED, stop.reason or "cancelled")
                        return -1
                    if fault_detail is not None and self._driver_fault(fault_detail(), st):
                        return -1
            finally:
                with self._pause_lock:
                    if mine and pacer.paused and not self._pause_requested:
                        pacer.resume()
                        pacer.take_resumed()  # not a takeover: the policy goes on with its chunk

        def steps() -> None:
            pipeline = new_pipeline()
            index = 0
            last_start = 0
            held = 0  # periods the loop held before this step (rollout/pipeline.py rule 4)
            late = False  # a deadline before this step was missed (the wait came back to a full window)
            while True:
                if inflight is not None:
                    complete_ready()
                    if inflight.hold_reason(clock()):
                        periods = hold()
                        if periods < 0:
                            return
                        held += periods
                if not pacer.wait():
                    st.finish(STOPPED_CANCELLED, OUTCOME_CANCELLED, stop.reason or "cancelled")
                    return
                if pacer.take_resumed():  # after a takeover: continue from the arm's current state
                    pipeline.close()  # first: no inference of the old chunk runs beside resume()
                    s.policy.resume(observe())
                    pipeline = new_pipeline()
                dropped = pacer.last_dropped
                if held > dropped:  # held periods are missed deadlines, reported (those the pacer did not count)
                    pacer.missed_deadlines += held - dropped
                    dropped = held
                held = 0
                if inflight is not None:
                    complete_ready()  # the verdicts that came during the wait: their events, fail fast
                    if inflight.hold_reason(clock()):
                        late = late or dropped > 0
                        continue  # the window filled during the wait: hold before sending
                step_start = clock()
                deadline_missed = dropped > 0 or late
                late = False
                if index > 0:
                    # The interval since the previous step's start (the period, or more after dropped
                    # deadlines): what the adaptive prefetch point needs, not this step's own work time.
                    pipeline.note_step_interval(period * (1 + dropped) if not s.fast_mode
                                                else (step_start - last_start) / 1e9)
                last_start = step_start
                if fault_detail is not None and self._driver_fault(fault_detail(), st):
                    return
                try:
                    planned = pipeline.next_action(observe)
                except (CooperativeStop, EndEpisode, _HookAbort):
                    raise
                except Exception as exc:  # a stale or failed observation (or a failed inference) ends the episode
                    raise _StepFailed(exc) from exc
                sent = _Sent(index, planned, time.monotonic_ns(), deadline_missed)
                if inflight is not None:
                    try:
                        ticket = window.submit(planned.action)
                    except Exception as exc:  # a coarse error: nothing known about what reached the arms
                        ticket = ActionVerdict.coarse(f"{type(exc).__name__}: {exc}")
                    sent.elapsed_s = pacer.elapsed_s
                    inflight.add(ticket, sent, clock())
                    st.applied_actions = index + 1
                else:
                    try:
                        verdict = send_action(planned.action)
                    except Exception as exc:  # a coarse error: nothing known about what reached the arms
                        verdict = ActionVerdict.coarse(f"{type(exc).__name__}: {exc}")
                    sent.elapsed_s = pacer.elapsed_s
                    st.applied_actions = index + 1
                    abort = complete(sent, verdict)
                    if abort is not None:
                        hook_abort.append(abort)
                        raise abort
                    error = fail_fast(sent)
                    if error is not None:
                        raise error
                index += 1

                advance(period)
                detail = safety_detail()
                if detail:
                    st.finish(STOPPED_SAFETY_STOP, OUTCOME_ERROR, detail)
                    st.error_type = "SafetyStop"
                    st.error_message = detail
                    return
                if fault_detail is not None and self._driver_fault(fault_detail(), st):
                    return
                if stop_when is not None and stop_when(observe()):
                    st.finish(STOPPED_PREDICATE, OUTCOME_OK, "stop_when returned true")
                    return
                if index >= total:
                    st.finish(STOPPED_BUDGET, OUTCOME_OK, f"{total} steps")
                    return

        def new_pipeline() -> ChunkPipeline:
            p = ChunkPipeline(s.policy, action_horizon=s.action_horizon, async_prefetch=s.async_rtc,
                              inference_timeout_s=s.inference_timeout_s, refresh_every_step=recorder is not None,
                              stop=stop, period_s=None if s.fast_mode else s.period_s)
            pipelines.append(p)
            return p

        def drain(ending: "BaseException | None") -> None:
            """Report every step still in flight, in order, before the Ended (module pipeline, all exits).

            After a normal end, an Exception or a cooperative stop the verdicts are awaited (at most the verdict
            bound, or until the driver is found silent) and the hooks run (no cancellation check: the episode has
            ended); after KeyboardInterrupt & co. nothing is awaited: what has arrived is used, the rest is
            unknown. A hook aborting here makes the remaining steps report its outcome; it ends an episode that
            ended well.
            """
            forced = _abort_outcome(hook_abort[0]) if hook_abort else ""
            # The four that propagate (Ctrl-C & co.) wait for nothing; a cooperative stop is a normal end.
            interrupted = ending is not None and not isinstance(ending, (Exception, CooperativeStop))
            late_abort: "BaseException | None" = None
            poll = min(period, _HOLD_POLL_S)
            while len(inflight):
                if interrupted:
                    take_verdicts(0.0)
                    inflight.abandon(f"the rollout was interrupted by {type(ending).__name__}")
                else:
                    take_verdicts(poll if inflight.open_count and not inflight.head_resolved else 0.0)
                    if inflight.open_count and fault_detail is not None:
                        detail = fault_detail()
                        if detail:
                            inflight.abandon(detail)
                            if ending is None and st.outcome == OUTCOME_OK:
                                self._driver_fault(detail, st)
                while True:
                    ready = inflight.pop_one()
                    if ready is None:
                        break
                    abort = complete(ready.step, ready.verdict, forced_outcome=forced, check_stop=False)
                    if abort is not None and not forced:
                        forced = _abort_outcome(abort)
                        late_abort = late_abort or abort
            if late_abort is not None and ending is None:
                raise late_abort

        try:
            steps()
        except BaseException as exc:
            if inflight is not None and len(inflight):
                drain(exc)
            raise
        if inflight is not None and len(inflight):
            drain(None)

    @staticmethod
    def _driver_fault(detail: Any, st: "_EpisodeState") -> bool:
        """End the episode as an error on a non-empty ``fault_detail()`` (the driver is gone or silent)."""
        if not detail:
            return False
        detail = str(detail)
        st.finish(STOPPED_ERROR, OUTCOME_ERROR, detail)
        st.error_type = DRIVER_FAULT
        st.error_message = detail
        return True

    def _finish_recording(self, recorder: Any, ended: RunPolicyEnded, s: _Settings) -> RunPolicyEnded:
        """Write the Ended and finish the file; a failure (never silent) makes an ok episode an error."""
        failure: "BaseException | None" = None
        _recording_hook(self.backend, "stop_recording")
        try:
            self._write_event(recorder, ended, s)
        except _RecordingFailed as exc:
            failure = exc.error
        try:
            recorder.close()
        except Exception as exc:
            failure = failure or exc
        # The file's own Ended says the frames handed over; the result says what a reader gets back.
        in_file = getattr(recorder, "frames", None)
        if isinstance(in_file, int) and not isinstance(in_file, bool) and in_file != ended.recorded_frames:
            ended = dataclasses.replace(ended, recorded_frames=in_file)
        if failure is None or ended.outcome == OUTCOME_ERROR:
            return ended
        return dataclasses.replace(
            ended, outcome=OUTCOME_ERROR, stopped_reason=STOPPED_ERROR,
            end_detail=f"recording failed at the end of the episode ({ended.stopped_reason}): "
                       f"{type(failure).__name__}: {failure}",
            error_type=type(failure).__name__, error_message=str(failure))

    def _ended(self, s: _Settings, lane: ObserverLane, pacer: DeadlinePacer, st: "_EpisodeState",
               pipelines: list, recording_path: str) -> RunPolicyEnded:
        tele = _merge_telemetry(pipelines)
        resolved = st.full + st.partial + st.none
        if not st.stopped_reason:  # an exit no handler classified (cannot happen short of a bug): say so
            st.finish(STOPPED_ERROR, OUTCOME_ERROR, "rollout ended without a stop reason")
        try:
            sim_time = float(self.backend.observe().get("sim_time_s", st.sim_time_s))
        except Exception:  # the robot is gone; report the last time seen
            sim_time = st.sim_time_s
        seq, mono, utc = lane.stamp()
        return RunPolicyEnded(
            run_id=lane.run_id, event_seq=seq, monotonic_ns=mono, utc_ns=utc,
            outcome=st.outcome, stopped_reason=st.stopped_reason, end_detail=st.end_detail,
            applied_actions=st.applied_actions, legacy_steps_used=st.legacy_steps_used,
            action_errors=tuple(st.action_errors),
            full_count=st.full, partial_count=st.partial, none_count=st.none, unknown_count=st.unknown,
            full_rate=st.full / resolved if resolved else 0.0,
            partial_rate=st.partial / resolved if resolved else 0.0,
            none_rate=st.none / resolved if resolved else 0.0,
            observer_failures=lane.run_failures, missed_deadlines=pacer.missed_deadlines,
            chunks_inferred=tele.chunks_inferred, prefetch_hits=tele.prefetch_hits,
            prefetch_blocks=tele.prefetch_blocks, inference_latency_p50_s=tele.latency_p50_s,
            inference_latency_max_s=tele.latency_max_s,
            elapsed_s=pacer.elapsed_s if pacer.started else 0.0, paused_s=pacer.paused_s,
            sim_time_s=sim_time, error_type=st.error_type, error_message=st.error_message,
            recording_path=recording_path, recorded_frames=st.recorded_frames)


_NO_CAMERAS: tuple = ((), (), ())

# While the loop holds (rollout/pipeline.py rule 4), look for verdicts, a stop and a silent driver this often.
_HOLD_POLL_S = 0.005


class _Sent:
    """A step whose action went out: what its event needs once its verdict is known."""

    __slots__ = ("index", "planned", "mono_ns", "deadline_missed", "elapsed_s")

    def __init__(self, index: int, planned: Any, mono_ns: int, deadline_missed: bool) -> None:
        self.index = index
        self.planned = planned
        self.mono_ns = mono_ns
        self.deadline_missed = deadline_missed
        self.elapsed_s = 0.0


def _abort_outcome(abort: BaseException) -> str:
    """Return the legacy hook outcome an abort stands for (the steps sent after the aborting one report it)."""
    if isinstance(abort, CooperativeStop):
        return HOOK_CANCELLED
    if isinstance(abort, _RecordingFailed):
        return HOOK_RECORDING_ERROR
    return HOOK_ERROR


class _StepFailed(Exception):
    """Internal: observing or inferring failed before the step's action was sent (nothing was sent)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _SetupFailed(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _recording_hook(backend: Any, name: str, *args: Any) -> None:
    """Call the backend's ``start_recording(recorder)`` / ``stop_recording()`` when it has them (cameras)."""
    hook = getattr(backend, name, None)
    if callable(hook):
        hook(*args)


class _EpisodeState:
    __slots__ = ("applied_actions", "legacy_steps_used", "action_errors", "full", "partial", "none", "unknown",
                 "onframe_failures", "unknown_key_steps", "recorded_frames", "sim_time_s", "stopped_reason",
                 "outcome", "end_detail", "error_type", "error_message")

    def __init__(self) -> None:
        self.applied_actions = 0
        self.legacy_steps_used = 0
        self.action_errors: list = []
        self.full = self.partial = self.none = self.unknown = 0
        self.onframe_failures = 0
        self.unknown_key_steps = 0
        self.recorded_frames = 0
        self.sim_time_s = 0.0
        self.stopped_reason = ""
        self.outcome = ""
        self.end_detail = ""
        self.error_type = ""
        self.error_message = ""

    def finish(self, reason: str, outcome: str, detail: str = "", error: "BaseException | None" = None) -> None:
        self.stopped_reason = reason
        self.outcome = outcome
        self.end_detail = detail
        if error is not None:
            self.error_type = type(error).__name__
            self.error_message = str(error)


def _merge_telemetry(pipelines: list) -> ChunkTelemetry:
    """One episode's chunk figures; a takeover restarts the pipeline, so sum counts and combine latencies."""
    parts = []
    for p in pipelines:
        try:
            parts.append(p.telemetry)
        except Exception:
            pass
    if not parts:
        return ChunkTelemetry(0, 0, 0, 0.0, 0.0)
    if len(parts) == 1:
        return parts[0]
    return ChunkTelemetry(
        chunks_inferred=sum(t.chunks_inferred for t in parts),
        prefetch_hits=sum(t.prefetch_hits for t in parts),
        prefetch_blocks=sum(t.prefetch_blocks for t in parts),
        latency_p50_s=statistics.median(t.latency_p50_s for t in parts if t.chunks_inferred) if any(
            t.chunks_inferred for t in parts) else 0.0,
        latency_max_s=max(t.latency_max_s for t in parts),
    )
