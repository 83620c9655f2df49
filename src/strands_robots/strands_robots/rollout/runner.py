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

This module opens and closes the run and each episode (Started, Ended, the recording); the steps between are
:class:`~strands_robots.rollout.episode_loop.EpisodeLoop`'s, phase by phase, and a step's completion (verdict,
legacy hook, RunPolicyStep) is :class:`~strands_robots.rollout.step_report.StepReporter`'s.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from strands_robots.policies.base import EndEpisode, Policy
from strands_robots.policies.registry import make_policy
from strands_robots.rollout.backend import RobotBackend
from strands_robots.rollout.chunks import ChunkPipeline
from strands_robots.rollout.episode_loop import EpisodeLoop
from strands_robots.rollout.episode_state import (
    DRIVER_FAULT,
    EpisodeState,
    HookAbort,
    RecordingFailed,
    SetupFailed,
    StepFailed,
    merge_telemetry,
    write_event,
)
from strands_robots.rollout.pacing import DeadlinePacer
from strands_robots.rollout.run_spec import (
    DEFAULT_INFERENCE_TIMEOUT_S,
    DEFAULT_MAX_ONFRAME_FAILURES,
    PreflightRefused,
    RunRefused,
    RunSpec,
    validate_run,
)
from strands_robots.rollout.step_report import FAIL_FAST_STEPS, UnknownActionKeys, classify_verdict
from strands_robots.rollout.stop import StopToken
from strands_robots.simulation.observers import (
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_OK,
    STOPPED_CANCELLED,
    STOPPED_ERROR,
    STOPPED_POLICY_COMPLETED,
    CooperativeStop,
    Observer,
    ObserverLane,
    RunPolicyEnded,
    RunPolicyStarted,
)
from strands_robots.station.success_judgement import SuccessWatch

__all__ = [
    "PolicyRunner", "PreflightRefused", "RunRefused", "RunSpec", "validate_run", "UnknownActionKeys",
    "classify_verdict", "FAIL_FAST_STEPS", "DEFAULT_MAX_ONFRAME_FAILURES", "DEFAULT_INFERENCE_TIMEOUT_S",
    "DRIVER_FAULT",
    "STATUS_SUCCESS", "STATUS_ERROR",
]

STATUS_SUCCESS = "success"
STATUS_ERROR = "error"

OnFrame = Callable[[int, Mapping[str, Any], Mapping[str, float]], Any]
StopWhen = Callable[[Mapping[str, Any]], bool]


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
            except SetupFailed as exc:  # before Started: no lifecycle for this episode
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
            raise SetupFailed(exc) from exc

        st = EpisodeState()
        st.success_watch = _success_watch(s, index)
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
                write_event(recorder, started)
            EpisodeLoop(self.backend, s, lane, pacer, recorder, st, pipelines, stop=self.stop,
                        clock_ns=self._clock_ns, pause_lock=self._pause_lock,
                        takeover_requested=lambda: self._pause_requested, make_pipeline=ChunkPipeline).run()
        except EndEpisode as exc:
            st.finish(STOPPED_POLICY_COMPLETED, OUTCOME_OK, str(exc))
        except CooperativeStop as exc:
            st.finish(STOPPED_CANCELLED, OUTCOME_CANCELLED, exc.reason)
        except HookAbort as exc:
            st.finish(STOPPED_ERROR, OUTCOME_ERROR, str(exc), exc.error)
        except StepFailed as exc:
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

    def _finish_recording(self, recorder: Any, ended: RunPolicyEnded, s: _Settings) -> RunPolicyEnded:
        """Write the Ended and finish the file; a failure (never silent) makes an ok episode an error."""
        failure: "BaseException | None" = None
        _recording_hook(self.backend, "stop_recording")
        try:
            write_event(recorder, ended)
        except RecordingFailed as exc:
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

    def _ended(self, s: _Settings, lane: ObserverLane, pacer: DeadlinePacer, st: EpisodeState,
               pipelines: list, recording_path: str) -> RunPolicyEnded:
        tele = merge_telemetry(pipelines)
        resolved = st.full + st.partial + st.none
        if not st.stopped_reason:  # an exit no handler classified (cannot happen short of a bug): say so
            st.finish(STOPPED_ERROR, OUTCOME_ERROR, "rollout ended without a stop reason")
        final: "Mapping[str, Any] | None" = None
        try:
            final = self.backend.observe()
            sim_time = float(final.get("sim_time_s", st.sim_time_s))
        except Exception:  # the robot is gone; report the last time seen
            sim_time = st.sim_time_s
        watch = st.success_watch
        end_keys, end_values = _end_inputs(watch, final)
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
            inference_latency_p99_s=tele.latency_p99_s, mean_observation_age_steps=st.mean_observation_age_steps,
            elapsed_s=pacer.elapsed_s if pacer.started else 0.0, paused_s=pacer.paused_s,
            sim_time_s=sim_time, error_type=st.error_type, error_message=st.error_message,
            recording_path=recording_path, recorded_frames=st.recorded_frames,
            success_when=watch.text if watch is not None else "",
            success_ever=bool(watch is not None and watch.ever),
            success_first_step=watch.first_step if watch is not None else -1,
            end_input_keys=end_keys, end_input_values=end_values)


def _success_watch(s: _Settings, index: int) -> Any:
    """Return the task's success predicate judged on every step of episode ``index`` (None when it has none)."""
    parameters = s.task_extra.get("parameters")
    if not isinstance(parameters, Mapping):
        return None
    return SuccessWatch.for_task(parameters, s.spec.episode_seed(index))


def _end_inputs(watch: Any, final: "Mapping[str, Any] | None") -> "tuple[tuple, tuple]":
    """Return the predicate's inputs on the final observation; none when it cannot be read (never fails the episode)."""
    if watch is None:
        return (), ()
    try:
        return watch.end(final)
    except Exception:  # a derived input that cannot be measured: the end judgement has no inputs
        return (), ()


def _recording_hook(backend: Any, name: str, *args: Any) -> None:
    """Call the backend's optional ``start_recording`` / ``stop_recording`` (its cameras' messages, over ROS)."""
    hook = getattr(backend, name, None)
    if callable(hook):
        hook(*args)
