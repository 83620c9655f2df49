"""What the monitor shows, folded from the station's streams — plain Python, no ROS and no Qt.

The widget hands it what arrives (observer events as the core dataclasses, everything else as the message's dict
form, ``strands_robots.conversions.introspection.msg_to_dict``) and reads back rows and lines to display. Folding rules:

- **Observer stream.** One :class:`RunView` per ``run_id``: a step table (the latest ``max_rows`` steps), the
  resolution breakdown (full / partial / none / unknown), observation age (last, mean, max), steps that ran after
  a missed deadline, legacy hook outcomes, and from the Ended event the observer failures and the result.
- **Gaps.** ``event_seq`` is dense and 0-based per run. An event above the next expected seq is a gap (the
  missing range is kept, and their number counted as lost); a run first seen above 0 lost its beginning; one below
  is out of order. ``dropped_before`` (events the publisher itself dropped) is counted separately.
- **Job.** The latest JobStatus snapshot wins; ``episode_results`` are kept once each (episode id, run id).
- **Safety.** The latest SafetyStop with every check's text; every stop that engaged is kept in order. A clear
  is wanted (:meth:`MonitorModel.safety_clear_wanted`) while the job says it waits for an operator to clear
  the stop, or the driver's stop is in force: the widget's "Clear safety stop" button then asks for it.
- **Lease and driver.** The latest LeaseState and DriverStatus.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["StepRow", "RunView", "MonitorModel", "STEP_COLUMNS", "EPISODE_COLUMNS", "SAFETY_WAIT_PREFIX"]

# The job message of a station whose next episode waits for an operator's clear (station.safety_gate says it so).
SAFETY_WAIT_PREFIX = "waiting for an operator to clear the safety stop"

RESOLUTIONS = ("full", "partial", "none", "unknown")
STEP_COLUMNS = ("step", "resolution", "unresolved (reason)", "obs age", "late", "hook", "chunk", "t (s)")
EPISODE_COLUMNS = ("episode", "end condition", "scored", "success", "score", "taken over", "detail")


@dataclass(frozen=True)
class StepRow:
    index: int
    resolution: str
    unresolved: str          # "key (reason), ..."; the coarse error for an unknown step
    observation_age: int
    deadline_missed: bool
    hook: str
    chunk_index: int
    elapsed_s: float

    def cells(self) -> tuple[str, ...]:
        return (str(self.index), self.resolution, self.unresolved, str(self.observation_age),
                "late" if self.deadline_missed else "", self.hook, str(self.chunk_index), f"{self.elapsed_s:.2f}")


@dataclass
class RunView:
    run_id: str
    robot_name: str = ""
    policy: str = ""
    instruction: str = ""
    total_steps: int = 0
    started: bool = False
    rows: deque = field(default_factory=lambda: deque(maxlen=500))
    resolutions: Counter = field(default_factory=Counter)
    hooks: Counter = field(default_factory=Counter)
    steps: int = 0
    late_steps: int = 0
    age_last: int = 0
    age_max: int = 0
    age_sum: int = 0
    next_seq: int = 0
    gaps: list = field(default_factory=list)       # (first missing seq, last missing seq)
    lost: int = 0
    out_of_order: int = 0
    dropped_by_publisher: int = 0
    ended: "dict[str, Any] | None" = None

    @property
    def age_mean(self) -> float:
        return self.age_sum / self.steps if self.steps else 0.0

    @property
    def full_rate(self) -> "float | None":
        """Return full / (full + partial + none); unknown steps are not counted (as RunPolicyEnded.full_rate)."""
        known = sum(self.resolutions[r] for r in ("full", "partial", "none"))
        return self.resolutions["full"] / known if known else None


def _unresolved_text(step: Any) -> str:
    if step.action_resolution == "unknown":
        return step.action_error or "unknown"
    return ", ".join(f"{k} ({r})" for k, r in zip(step.unresolved_action_keys, step.unresolved_action_reasons))


class MonitorModel:
    """The monitor's state. Thread-safe, though the widget only calls it on the GUI thread."""

    def __init__(self, max_rows: int = 500, max_runs: int = 50) -> None:
        self._lock = threading.RLock()
        self.max_rows = max_rows
        self.max_runs = max_runs  # older runs are forgotten (a station runs for days)
        self.runs: dict[str, RunView] = {}
        self.run_order: list[str] = []
        self.job: "dict[str, Any] | None" = None
        self.results: list[dict[str, Any]] = []
        self.safety: "dict[str, Any] | None" = None
        self.safety_history: list[dict[str, Any]] = []
        self.lease: "dict[str, Any] | None" = None
        self.driver: "dict[str, Any] | None" = None
        self.replies: list[str] = []
        self.events = 0

    # -- folding ----------------------------------------------------------------------------------------------
    def _run(self, run_id: str) -> RunView:
        view = self.runs.get(run_id)
        if view is None:
            view = RunView(run_id, rows=deque(maxlen=self.max_rows))
            self.runs[run_id] = view
            self.run_order.append(run_id)
            while len(self.run_order) > self.max_runs:
                self.runs.pop(self.run_order.pop(0), None)
        return view

    def on_event(self, event: Any, dropped_before: int = 0) -> None:
        """One observer event (``RunPolicyStarted`` / ``RunPolicyStep`` / ``RunPolicyEnded``)."""
        with self._lock:
            self.events += 1
            view = self._run(event.run_id)
            seq = int(event.event_seq)
            if seq > view.next_seq:
                view.gaps.append((view.next_seq, seq - 1))
                view.lost += seq - view.next_seq
            elif seq < view.next_seq:
                view.out_of_order += 1
            view.next_seq = max(view.next_seq, seq + 1)
            view.dropped_by_publisher += int(dropped_before)
            kind = type(event).__name__
            if kind == "RunPolicyStarted":
                view.started = True
                view.robot_name, view.policy = event.robot_name, event.policy
                view.instruction, view.total_steps = event.instruction, int(event.total_steps)
            elif kind == "RunPolicyStep":
                view.steps += 1
                view.resolutions[event.action_resolution] += 1
                view.hooks[event.legacy_hook_outcome] += 1
                age = int(event.observation_age_steps)
                view.age_last, view.age_sum, view.age_max = age, view.age_sum + age, max(view.age_max, age)
                view.late_steps += bool(event.deadline_missed)
                view.rows.append(StepRow(int(event.applied_action_index), event.action_resolution,
                                         _unresolved_text(event), age, bool(event.deadline_missed),
                                         event.legacy_hook_outcome, int(event.chunk_index), float(event.elapsed_s)))
            elif kind == "RunPolicyEnded":
                view.ended = {name: getattr(event, name) for name in (
                    "outcome", "stopped_reason", "end_detail", "applied_actions", "observer_failures",
                    "missed_deadlines", "full_rate", "unknown_count", "error_type", "error_message")}

    def on_job_status(self, status: Mapping[str, Any]) -> None:
        with self._lock:
            self.job = dict(status)

    def on_episode_result(self, result: Mapping[str, Any]) -> None:
        with self._lock:
            key = (result.get("episode_id"), result.get("run_id"))
            if all((r.get("episode_id"), r.get("run_id")) != key for r in self.results):
                self.results.append(dict(result))

    def on_safety_stop(self, stop: Mapping[str, Any]) -> None:
        with self._lock:
            was_stopped = bool(self.safety and self.safety.get("stopped"))
            self.safety = dict(stop)
            if stop.get("stopped") and not was_stopped:
                self.safety_history.append(dict(stop))

    def on_lease_state(self, lease: Mapping[str, Any]) -> None:
        with self._lock:
            self.lease = dict(lease)

    def on_driver_status(self, status: Mapping[str, Any]) -> None:
        with self._lock:
            self.driver = dict(status)

    def on_reply(self, service: str, ok: bool, message: str) -> None:
        """Keep the answer of an operator service call (or why it could not be made)."""
        with self._lock:
            self.replies.append(f"{service}: {'ok' if ok else 'refused'}{' — ' + message if message else ''}")

    # -- reading ----------------------------------------------------------------------------------------------
    @property
    def current(self) -> "RunView | None":
        with self._lock:
            return self.runs[self.run_order[-1]] if self.run_order else None

    def total_lost(self) -> int:
        with self._lock:
            return sum(v.lost for v in self.runs.values())

    def step_rows(self, run_id: "str | None" = None) -> list[StepRow]:
        with self._lock:
            view = self.runs.get(run_id) if run_id else self.current
            return list(view.rows) if view else []

    def summary_lines(self, run_id: "str | None" = None) -> list[str]:
        """Return the current run's figures, as the widget's summary panel shows them."""
        with self._lock:
            view = self.runs.get(run_id) if run_id else self.current
            if view is None:
                return ["no observer events yet"]
            rate = view.full_rate
            lines = [
                f"run {view.run_id} ({view.robot_name or '?'}, {view.policy or '?'})"
                + ("" if view.started else " — Started not seen"),
                f"steps {view.steps}/{view.total_steps or '?'}: "
                + ", ".join(f"{r} {view.resolutions[r]}" for r in RESOLUTIONS)
                + (f"; full rate {rate:.1%}" if rate is not None else ""),
                f"observation age: last {view.age_last}, mean {view.age_mean:.2f}, max {view.age_max} steps",
                f"missed deadlines: {view.late_steps} late steps"
                + (f", {view.ended['missed_deadlines']} deadlines dropped" if view.ended else ""),
                "hook outcomes: " + (", ".join(f"{k} {n}" for k, n in sorted(view.hooks.items())) or "none yet"),
                f"observer failures: {view.ended['observer_failures'] if view.ended else 'reported at the end'}",
                f"event_seq gaps: {len(view.gaps)} ({view.lost} events lost)"
                + "".join(f"; missing {a}" + (f"..{b}" if b != a else "") for a, b in view.gaps[-5:])
                + (f"; {view.out_of_order} out of order" if view.out_of_order else "")
                + (f"; publisher dropped {view.dropped_by_publisher}" if view.dropped_by_publisher else ""),
            ]
            if view.ended:
                e = view.ended
                lines.append(f"ended: {e['outcome']}, {e['stopped_reason']}"
                             + (f" — {e['end_detail']}" if e["end_detail"] else "")
                             + (f" ({e['error_type']}: {e['error_message']})" if e["error_type"] else ""))
            return lines

    def safety_lines(self) -> list[str]:
        with self._lock:
            stop = self.safety
            if stop is None:
                return ["no safety state received"]
            if not stop.get("stopped"):
                head = "arms running (no safety stop in force)"
                if self.safety_history:
                    head += f"; {len(self.safety_history)} earlier stop(s)"
                return [head]
            checks = stop.get("checks") or []
            lines = [f"SAFETY STOP in force: {len(checks)} check(s) tripped"]
            for c in checks:
                lines.append(f"  {c.get('text')}  [{c.get('quantity')} {float(c.get('value') or 0.0):+.3g} "
                             f"{c.get('unit')}, limit {float(c.get('limit') or 0.0):.3g}]")
            if not checks and stop.get("detail"):
                lines.append(f"  {stop['detail']}")
            return lines

    def safety_clear_wanted(self) -> str:
        """Why an operator's clear is wanted now (the job's wait, else the stop in force); empty when it is not."""
        with self._lock:
            message = str((self.job or {}).get("message") or "")
            if message.startswith(SAFETY_WAIT_PREFIX):
                return message
            if self.safety and self.safety.get("stopped"):
                return f"safety stop in force: {self.safety.get('detail') or 'no detail'}"
            return ""

    def lease_text(self) -> str:
        with self._lock:
            lease = self.lease
            if lease is None:
                return "lease: unknown"
            text = f"lease: {lease.get('state')}"
            if lease.get("holder"):
                text += f", holder {lease['holder']} (priority {lease.get('priority')})"
            if lease.get("previous_holder"):
                text += f", previously {lease['previous_holder']}"
            return text

    def driver_text(self) -> str:
        with self._lock:
            d = self.driver
            if d is None:
                return "driver: unknown"
            return (f"driver: {d.get('hardware')} {'active' if d.get('active') else 'inactive'}"
                    f"{', STOPPED' if d.get('stopped') else ''}, sim time {float(d.get('sim_time_s', 0.0)):.2f} s")

    def job_text(self) -> str:
        with self._lock:
            job = self.job
            if job is None:
                return "job: none reported"
            done = len(job.get("episodes") or [])
            progress = _stopped_early(job, done) or f"{done}/{job.get('episodes_total')} episodes"
            text = f"job {job.get('job_id')}: {job.get('state')}, {progress}"
            return text + (f" — {job['message']}" if job.get("message") else "")

    def episode_rows(self) -> list[tuple[str, ...]]:
        """Return the job's episodes (the latest snapshot), else the episode results seen on the topic."""
        with self._lock:
            episodes = (self.job or {}).get("episodes") or self.results
            rows = []
            for e in episodes:
                scored = bool(e.get("scored"))
                rows.append((str(e.get("episode_id", "")), str(e.get("end_condition", "")),
                             "yes" if scored else "no", ("yes" if e.get("success") else "no") if scored else "",
                             f"{float(e.get('score', 0.0)):.2f}" if scored else "",
                             "yes" if e.get("taken_over") else "", str(e.get("end_detail", ""))))
            return rows


def _stopped_early(job: Mapping[str, Any], done: int) -> str:
    """``14 episodes, stopped at block 7 of 12: a_better`` for a comparison its stop rule ended early, else "".

    The same words as the Evaluation Client's ``comparison_view.early_stop_text`` (this plugin does not import
    the strands_robots package): "14/24 episodes" would read as a job cut short.
    """
    comparison = (job.get("comparison") or [None])[0] or {}
    stop = (comparison.get("stop") or [None])[0] or {}
    stopped = stop.get("stopped_at_block") or []
    if not stopped or done >= int(job.get("episodes_total") or 0):
        return ""
    return (f"{done} episode{'s' if done != 1 else ''}, stopped at block {stopped[0]} of {stop.get('max_blocks')}: "
            f"{stop.get('verdict')}")
