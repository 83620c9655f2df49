"""The chunk pipeline: turns a policy's action chunks into one planned action per control step.

Two modes, as spec/observer-lane.txt and DESIGN.md §5 "Rollout loop" describe them:

* **sync** — at a chunk boundary observe, infer (``policy.act``), then drain the chunk one action per call.
  Action ``i`` of the chunk carries the chunk-start snapshot, ``chunk_index == age_steps == i``. The ``act``
  runs on the pipeline's worker thread while the loop waits on it *and* on the stop token, so a cancel ends
  the wait at once even while a slow ``act`` blocks; that call is abandoned and its late result discarded.
  A policy declaring ``never_blocks`` (pure computation of microseconds: mock, replay, scripted) is called on
  the loop's own thread instead: the thread hand-off costs ~40 us (p99 ~300 us on a loaded machine) per
  chunk, which a 1 kHz loop cannot spare, and such an ``act`` has nothing to abandon.
* **async prefetch** — the first chunk of an episode is inferred synchronously (age = index). While a chunk
  of length ``L`` drains, the call that is about to return action ``k`` (the *prefetch point*) takes an
  observation snapshot and hands it to the one persistent worker thread, which runs ``policy.act``. At the
  boundary the new chunk is swapped in: a *prefetch hit* if it is ready, else a *prefetch block* (the loop
  waits, at most ``inference_timeout_s``, then :class:`InferenceTimeout`).

Observation age (authoritative, in control steps)
-------------------------------------------------

The snapshot taken at prefetch point ``k`` is taken *before* old action ``k`` is applied, so the old actions
``k .. L-1`` — ``L - k`` control attempts — all happen after it. Those attempts carry across the swap and
the new chunk's index is added: ``age_steps = (L - k) + j`` for new action ``j``.

Worked example, ``L = 8`` and prefetch point ``k = 3``::

    call  chunk  index  what happens in the call                      age  reused
      0     A      0    observe S0, infer A from S0 (sync, first)     0    False
      1     A      1                                                  1    True
      2     A      2                                                  2    True
      3     A      3    observe S1, start inferring B from S1         3    True
      4..7  A    4..7   (B infers on the worker)                    4..7   True
      8     B      0    swap in B (hit or block)                      5    False
      9     B      1                                                  6    True
     15     B      7                                                 12    True

S1 was taken before A[3] was applied; A[3..7] are the 8 - 3 = 5 attempts it carries, so B[j] has age 5 + j.
B[0] is the first action after the swap and is *not* marked reused even though its snapshot is already 5
steps old: ``is_chunk_reused`` is true only for a later action (index > 0) reusing the chunk-start snapshot,
and is therefore not authoritative freshness — ``age_steps`` is.

With ``refresh_every_step`` (an active recording) ``observe`` is called on every call, the fresh observation
is reported with age 0 and ``is_chunk_reused`` false; the actions still come from the chunk.

Adaptive prefetch point
-----------------------

The peer samples at half the chunk. Here every installed chunk chooses its prefetch point from the latencies
measured so far — from the first chunk on, whose own synchronous ``act`` already tells how long the next one
will take: ``k = L - (ceil(latency / period) + 1)`` clamped to ``[0, L - 1]``, where ``latency`` is the slowest
of the last few measured ``act`` latencies and the ``+ 1`` is a margin of one period (the sample's own step,
the worker's hand-off, jitter). ``period`` is the control period given to the pipeline (``period_s``: deadline
pacing); without one (fast mode) it is the shortest of the recent step intervals
(:meth:`ChunkPipeline.note_step_interval`). Both are the shortest a step can take, so a step that overran
(dropped deadlines) only leaves the prefetch more time and never moves the point later. With inference of
``n`` whole periods the point is ``L - n - 1`` (``L - ceil(n) - 1`` for a fraction): the latest sample, so the
freshest snapshot, that still lands before the boundary. When the inference takes the whole horizon or more
(``k`` would be below 0) the prefetch starts at the chunk start (``k = 0``) and every boundary still waits for
it: each such wait is a prefetch block. Until a latency and a period are known the point is ``L // 2``.
"""

from __future__ import annotations

import math
import queue
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from strands_robots.arm.lookahead import LOOKAHEAD_MAX_POINTS
from strands_robots.policies.base import NEVER_BLOCKS, Policy
from strands_robots.simulation.observers import CooperativeStop

# The prefetch point covers the slowest of the last this many act latencies (and uses the shortest of as many
# step intervals when no period is given), plus a margin of this many control periods.
_RECENT = 8
_MARGIN_PERIODS = 1
# Name of the worker thread, so a leak would be visible in threading.enumerate().
WORKER_THREAD_NAME = "strands-chunk-prefetch"

_EMPTY_TWICE = "policy returned an empty action chunk twice"


class InferenceTimeout(RuntimeError):
    """The loop waited longer than ``inference_timeout_s`` for a chunk from the worker."""


@dataclass(frozen=True)
class PlannedAction:
    """One action to apply this control step, with the observation it stands on.

    ``observation`` is the snapshot the chunk was inferred from (or, with ``refresh_every_step``, the
    observation fetched for this step). ``age_steps`` is the authoritative number of control steps applied
    since that observation was taken; ``is_chunk_reused`` is true only for an action at index > 0 reusing
    the chunk-start snapshot. ``lookahead`` is the rest of the chunk after this action (at most
    :data:`~strands_robots.arm.lookahead.LOOKAHEAD_MAX_POINTS`), which the command stream carries on so hardware
    that takes trajectories gets the chunk as one.
    """

    action: Mapping[str, float]
    observation: Mapping[str, Any]
    chunk_index: int
    is_chunk_reused: bool
    age_steps: int
    lookahead: "tuple[Mapping[str, float], ...]" = ()


def percentile_99(values: "list | tuple") -> float:
    """Return the 99th percentile of ``values`` (linear interpolation, numpy's default); 0.0 for none."""
    if not values:
        return 0.0
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), 99))


@dataclass(frozen=True)
class ChunkTelemetry:
    """Chunk and inference figures of one episode (the RunPolicyEnded prefetch telemetry)."""

    chunks_inferred: int  # act() calls that returned a non-empty chunk
    prefetch_hits: int  # async: chunk ready at the boundary
    prefetch_blocks: int  # async: the loop waited at the boundary (a timeout counts too)
    latency_p50_s: float  # median act() latency, every call (empty chunks and raises included)
    latency_max_s: float  # slowest act() latency
    latency_p99_s: float = 0.0  # 99th percentile act() latency
    latencies_s: tuple = ()  # every act() latency, in call order (so a takeover's pipelines combine exactly)


class _Job:
    """One inference handed to the worker: its snapshot in, its chunk or exception out."""

    __slots__ = ("observation", "done", "chunk", "error")

    def __init__(self, observation: Mapping[str, Any]) -> None:
        self.observation = observation
        self.done = threading.Event()
        self.chunk: list[Mapping[str, float]] | None = None
        self.error: BaseException | None = None


class _Prefetch:
    """A job in flight with where its snapshot was taken, for the age it will carry."""

    __slots__ = ("job", "sample_index", "old_chunk_len")

    def __init__(self, job: _Job, sample_index: int, old_chunk_len: int) -> None:
        self.job = job
        self.sample_index = sample_index
        self.old_chunk_len = old_chunk_len


_STOP = object()


class ChunkPipeline:
    """Plans one action per control step from a policy's chunks (sync or async prefetch).

    :param policy: the episode's policy (already reset); in async mode every ``act`` runs on one worker.
    :param action_horizon: maximum actions used from one chunk; longer chunks are truncated.
    :param async_prefetch: prefetch the next chunk on the worker thread while the current one drains.
    :param inference_timeout_s: async mode: the longest the loop waits for a chunk before
        :class:`InferenceTimeout`. A synchronous ``act`` on the caller thread (sync mode) cannot be
        interrupted, so there it is not enforced.
    :param refresh_every_step: observe on every call and report age 0 (active recording).
    :param stop: the rollout's stop token: a stop requested while the loop waits for an inference (sync, or an
        async block) raises :class:`CooperativeStop` at once; the ``act`` in flight is abandoned.
    :param clock: seconds clock timing each ``act`` (tests inject one).
    :param period_s: the control period when the loop is paced (the prefetch point counts the measured latency
        in these periods from the first chunk on); None in fast mode, where the recent step intervals stand in.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        action_horizon: int,
        async_prefetch: bool,
        inference_timeout_s: float,
        refresh_every_step: bool = False,
        stop: Any = None,
        clock: Callable[[], float] = time.perf_counter,
        period_s: "float | None" = None,
    ) -> None:
        if isinstance(action_horizon, bool) or not isinstance(action_horizon, int) or action_horizon < 1:
            raise ValueError(f"action_horizon must be an integer >= 1, got {action_horizon!r}")
        if not (isinstance(inference_timeout_s, (int, float)) and math.isfinite(inference_timeout_s)
                and inference_timeout_s > 0):
            raise ValueError(f"inference_timeout_s must be a finite number > 0, got {inference_timeout_s!r}")
        if period_s is not None and not (isinstance(period_s, (int, float)) and not isinstance(period_s, bool)
                                         and math.isfinite(period_s) and period_s > 0):
            raise ValueError(f"period_s must be a finite number > 0 or None, got {period_s!r}")
        self._policy = policy
        self._horizon = action_horizon
        self._async = bool(async_prefetch)
        self._timeout_s = float(inference_timeout_s)
        self._refresh = bool(refresh_every_step)
        # Sync calls of a policy that declares it never blocks run inline (see the module docstring).
        self._inline = not self._async and getattr(policy, NEVER_BLOCKS, False) is True

        self._chunk: list[Mapping[str, float]] = []
        self._chunk_observation: Mapping[str, Any] = {}
        self._next_index = 0
        self._base_age = 0  # age of the chunk's snapshot when its action 0 is applied
        self._prefetch_index = 0
        self._prefetch: _Prefetch | None = None

        # Written by the worker (latencies) and read by the loop: one lock for the figures.
        self._lock = threading.Lock()
        self._latencies: list[float] = []
        self._period_s = None if period_s is None else float(period_s)
        self._intervals: deque[float] = deque(maxlen=_RECENT)
        self._chunks_inferred = 0
        self._hits = 0
        self._blocks = 0

        self._clock = clock
        self._stop = stop
        # Set by the worker when a job is done and by the stop token on a request: the loop waits on this one.
        self._wake = threading.Event()
        self._abandoned = False  # a job was left running (stop or timeout): close() does not wait for it

        self._closed = False
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        if not self._inline:
            self._worker = threading.Thread(target=self._work, name=WORKER_THREAD_NAME, daemon=True)
            self._worker.start()
        if stop is not None:
            stop.add_waker(self._wake)

    # ------------------------------------------------------------------ public API

    def next_action(self, observe: Callable[[], Mapping[str, Any]]) -> PlannedAction:
        """Return the action for this control step.

        ``observe`` is called only when a snapshot is needed (chunk start, prefetch point), or on every call
        with ``refresh_every_step``. Raises ``EndEpisode`` or the policy's own exception (in async mode at the
        swap where the failed chunk was due), :class:`InferenceTimeout`, or ``ValueError`` when the policy
        returns an empty chunk twice in a row.
        """
        if self._closed:
            raise RuntimeError("ChunkPipeline is closed")
        fresh = observe() if self._refresh else None

        if self._next_index >= len(self._chunk):
            if self._prefetch is not None:
                self._swap_in_prefetched(observe, fresh)
            else:
                self._infer_at_boundary(observe, fresh)

        index = self._next_index
        action = self._chunk[index]
        if self._async and self._prefetch is None and index == self._prefetch_index:
            snapshot = fresh if fresh is not None else observe()
            self._prefetch = _Prefetch(self._submit(snapshot), index, len(self._chunk))
        self._next_index = index + 1
        ahead = tuple(self._chunk[index + 1:index + 1 + LOOKAHEAD_MAX_POINTS])

        if fresh is not None:
            return PlannedAction(action, fresh, index, False, 0, ahead)
        return PlannedAction(action, self._chunk_observation, index, index > 0, self._base_age + index, ahead)

    def note_step_interval(self, seconds: float) -> None:
        """Record the interval from one control step's start to the next, so the prefetch point can adapt.

        The interval is the period when paced (more after dropped deadlines), not the step's own work time; the
        shortest recent one counts, and only when no ``period_s`` was given. Non-positive and non-finite values
        are ignored.
        """
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
            return
        with self._lock:
            self._intervals.append(float(seconds))

    note_step_duration = note_step_interval  # the earlier name; it was always meant as the interval

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def prefetch_pending(self) -> bool:
        """Async mode: a prefetch was submitted and not yet swapped in (done or not)."""
        return self._prefetch is not None

    @property
    def prefetch_ready(self) -> bool:
        """Async mode: a prefetched chunk is in flight and done (swapping now would be a hit)."""
        prefetch = self._prefetch
        return prefetch is not None and prefetch.job.done.is_set()

    @property
    def prefetch_index(self) -> int:
        """Async mode: the chunk index at which the current chunk samples the next chunk's observation."""
        return self._prefetch_index

    @property
    def telemetry(self) -> ChunkTelemetry:
        with self._lock:
            latencies = list(self._latencies)
            return ChunkTelemetry(
                chunks_inferred=self._chunks_inferred,
                prefetch_hits=self._hits,
                prefetch_blocks=self._blocks,
                latency_p50_s=statistics.median(latencies) if latencies else 0.0,
                latency_max_s=max(latencies) if latencies else 0.0,
                latency_p99_s=percentile_99(latencies),
                latencies_s=tuple(latencies),
            )

    def close(self) -> None:
        """Stop the worker thread; idempotent.

        Waits for an ``act`` in flight at most ``inference_timeout_s`` (its result is discarded). Python
        cannot interrupt a call stuck beyond that; the worker is a daemon and exits as soon as it returns.
        """
        if self._closed:
            return
        self._closed = True
        self._prefetch = None
        if self._stop is not None:
            self._stop.remove_waker(self._wake)
        if self._worker is None:
            return
        self._jobs.put(_STOP)
        if not self._abandoned:  # an abandoned act may never return; the daemon worker exits when it does
            self._worker.join(timeout=self._timeout_s + 1.0)

    def __enter__(self) -> "ChunkPipeline":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ chunk boundaries

    def _infer_at_boundary(self, observe: Callable[[], Mapping[str, Any]], fresh: Mapping[str, Any] | None) -> None:
        """Infer synchronously: first chunk of an episode, every chunk in sync mode, the empty re-query."""
        snapshot = fresh if fresh is not None else observe()
        chunk = self._infer_now(snapshot)
        if not chunk:
            # One synchronous re-query (on this step's observation when it is refreshed every step).
            if fresh is None:
                snapshot = observe()
            chunk = self._infer_now(snapshot)
            if not chunk:
                raise ValueError(_EMPTY_TWICE)
        self._install(chunk, snapshot, base_age=0)

    def _swap_in_prefetched(self, observe: Callable[[], Mapping[str, Any]], fresh: Mapping[str, Any] | None) -> None:
        prefetch, self._prefetch = self._prefetch, None
        assert prefetch is not None
        job = prefetch.job
        if job.done.is_set():
            with self._lock:
                self._hits += 1
        else:
            with self._lock:
                self._blocks += 1
            if not self._wait(job, self._timeout_s):
                raise InferenceTimeout(
                    f"policy inference did not finish within {self._timeout_s:g} s of waiting at the chunk "
                    f"boundary")
        if job.error is not None:
            raise job.error
        if not job.chunk:
            # One synchronous re-query: a fresh observation, inferred now; empty again is an error.
            snapshot = fresh if fresh is not None else observe()
            chunk = self._infer_now(snapshot)
            if not chunk:
                raise ValueError(_EMPTY_TWICE)
            self._install(chunk, snapshot, base_age=0)
            return
        self._install(job.chunk, job.observation, base_age=prefetch.old_chunk_len - prefetch.sample_index)

    def _install(self, chunk: list[Mapping[str, float]], snapshot: Mapping[str, Any], *, base_age: int) -> None:
        self._chunk = chunk
        self._chunk_observation = snapshot
        self._next_index = 0
        self._base_age = base_age
        self._prefetch_index = self._choose_prefetch_index(len(chunk))

    def _choose_prefetch_index(self, length: int) -> int:
        with self._lock:
            latency = max(self._latencies[-_RECENT:]) if self._latencies else None
            period = self._period_s if self._period_s is not None else min(self._intervals, default=None)
        if latency is None or period is None:
            return length // 2
        # The 1e-9: float noise in a clock difference must not add a period to a latency of whole periods.
        steps_needed = math.ceil(latency / period - 1e-9) + _MARGIN_PERIODS
        return min(max(length - steps_needed, 0), length - 1)

    # ------------------------------------------------------------------ inference

    def _infer_now(self, snapshot: Mapping[str, Any]) -> list[Mapping[str, float]]:
        """Infer and wait for the chunk.

        On the worker: unbounded in sync mode, bounded by the timeout in async mode; a stop ends the wait either
        way. A ``never_blocks`` policy in sync mode is called right here.
        """
        if self._inline:
            return self._act(snapshot)
        job = self._submit(snapshot)
        if not self._wait(job, self._timeout_s if self._async else None):
            raise InferenceTimeout(f"policy inference did not finish within {self._timeout_s:g} s")
        if job.error is not None:
            raise job.error
        return job.chunk or []

    def _wait(self, job: _Job, timeout_s: "float | None") -> bool:
        """Wait until ``job`` is done (True) or ``timeout_s`` passed (False; the job is abandoned).

        :raises CooperativeStop: a stop was requested first; the job is abandoned, its result discarded.
        """
        wake = self._wake
        stop = self._stop
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            wake.clear()  # cleared before the checks, so a set between check and wait is never lost
            if job.done.is_set():
                return True
            if stop is not None and stop.requested:
                self._abandoned = True
                raise CooperativeStop(stop.reason or "cancelled")
            if deadline is None:
                wake.wait()
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._abandoned = True
                    return False
                wake.wait(remaining)

    def _act(self, snapshot: Mapping[str, Any]) -> list[Mapping[str, float]]:
        """One timed ``policy.act``; the chunk truncated to the action horizon."""
        clock = self._clock
        start = clock()
        try:
            result: Sequence[Mapping[str, float]] | None = self._policy.act(snapshot)
        finally:
            self._record_latency(clock() - start)
        chunk = [] if result is None else list(result)[: self._horizon]
        if chunk:
            with self._lock:
                self._chunks_inferred += 1
        return chunk

    def _record_latency(self, seconds: float) -> None:
        with self._lock:
            self._latencies.append(seconds)

    def _submit(self, snapshot: Mapping[str, Any]) -> _Job:
        job = _Job(snapshot)
        self._jobs.put(job)
        return job

    def _work(self) -> None:
        """Run queued inferences in order until told to stop (the one worker thread)."""
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            try:
                job.chunk = self._act(job.observation)
            except BaseException as exc:  # noqa: BLE001 - handed to the loop, re-raised at the swap
                job.error = exc
            finally:
                job.done.set()
                self._wake.set()
