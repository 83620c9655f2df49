"""The observer stream as a reader sees it: event_seq gaps per run and per-run figures, then lines of text.

:class:`StreamTracker` is the pure part (no ROS, no printing): it takes events (the core dataclasses of
``strands_robots.simulation.observers``) in arrival order and keeps, per ``run_id``, what arrived and what is
missing. The first event seen of a run sets its baseline: a reader that joins a run midway reports where it
joined, not a gap from event_seq 0. :class:`StreamPrinter` turns the same events into the lines
``strands-robots up`` and ``strands-robots echo`` print.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from strands_robots.simulation.observers import (
    RESOLUTION_UNKNOWN,
    RESOLUTIONS,
    RunPolicyEnded,
    RunPolicyStarted,
    RunPolicyStep,
)


@dataclass(frozen=True)
class Gap:
    """event_seq ``first`` .. ``last`` (inclusive) of ``run_id`` never arrived before ``seen`` did."""

    run_id: str
    first: int
    last: int
    seen: int

    @property
    def missing(self) -> int:
        return self.last - self.first + 1


@dataclass
class RunFigures:
    """What arrived of one run (``run_id``), and the figures a reader can work out from it."""

    run_id: str
    joined_at: int                      # event_seq of the first event seen (0 when Started was seen)
    started: Optional[RunPolicyStarted] = None
    ended: Optional[RunPolicyEnded] = None
    events: int = 0
    missing: int = 0                    # events never received (sum of the gaps)
    gaps: List[Gap] = field(default_factory=list)
    resolutions: Dict[str, int] = field(default_factory=dict)
    hook_outcomes: Dict[str, int] = field(default_factory=dict)
    steps: int = 0
    deadline_missed_steps: int = 0      # steps that ran after dropped deadlines
    observation_age_sum: int = 0
    observation_age_max: int = 0
    step_intervals_ns: List[int] = field(default_factory=list)
    _last_seq: int = -1
    _last_step_ns: Optional[int] = None

    @property
    def full_rate(self) -> float:
        """Full / (full + partial + none) over the steps seen; unknown steps are not in it (nan when none)."""
        known = sum(n for r, n in self.resolutions.items() if r != RESOLUTION_UNKNOWN)
        return self.resolutions.get("full", 0) / known if known else math.nan

    @property
    def observation_age_mean(self) -> float:
        return self.observation_age_sum / self.steps if self.steps else math.nan

    def interval_deviation_ms(self, quantile: float) -> float:
        """Return the ``quantile`` of |step interval - control period| in ms over consecutive steps seen.

        nan when the period is not known (Started was not seen) or fewer than two steps arrived.
        """
        if self.started is None or not self.step_intervals_ns or self.started.control_frequency <= 0:
            return math.nan
        period_ns = 1e9 / self.started.control_frequency
        deviations = sorted(abs(dt - period_ns) / 1e6 for dt in self.step_intervals_ns)
        index = min(len(deviations) - 1, max(0, math.ceil(quantile * len(deviations)) - 1))
        return deviations[index]


class StreamTracker:
    """Per-run bookkeeping of an observer stream; :meth:`add` returns the gap an event revealed, if any."""

    def __init__(self) -> None:
        self.runs: Dict[str, RunFigures] = {}
        self.order: List[str] = []
        self.events = 0

    @property
    def missing(self) -> int:
        return sum(run.missing for run in self.runs.values())

    @property
    def gaps(self) -> List[Gap]:
        return [gap for run_id in self.order for gap in self.runs[run_id].gaps]

    def add(self, event) -> Optional[Gap]:
        self.events += 1
        run = self.runs.get(event.run_id)
        if run is None:
            run = RunFigures(run_id=event.run_id, joined_at=event.event_seq, _last_seq=event.event_seq - 1)
            self.runs[event.run_id] = run
            self.order.append(event.run_id)
        run.events += 1
        gap = None
        expected = run._last_seq + 1
        if event.event_seq > expected:
            gap = Gap(event.run_id, expected, event.event_seq - 1, event.event_seq)
            run.gaps.append(gap)
            run.missing += gap.missing
        run._last_seq = max(run._last_seq, event.event_seq)
        if isinstance(event, RunPolicyStarted):
            run.started = event
        elif isinstance(event, RunPolicyStep):
            run.steps += 1
            run.resolutions[event.action_resolution] = run.resolutions.get(event.action_resolution, 0) + 1
            run.hook_outcomes[event.legacy_hook_outcome] = run.hook_outcomes.get(event.legacy_hook_outcome, 0) + 1
            run.deadline_missed_steps += int(bool(event.deadline_missed))
            run.observation_age_sum += event.observation_age_steps
            run.observation_age_max = max(run.observation_age_max, event.observation_age_steps)
            if run._last_step_ns is not None and gap is None:
                run.step_intervals_ns.append(event.monotonic_ns - run._last_step_ns)
            run._last_step_ns = event.monotonic_ns
        elif isinstance(event, RunPolicyEnded):
            run.ended = event
        return gap


def _fmt(value: float, spec: str = ".3f") -> str:
    return "-" if isinstance(value, float) and math.isnan(value) else format(value, spec)


def summary_line(run: RunFigures) -> str:
    """One line of per-run figures: resolution, deadlines, observation age, hook outcomes, what was missed."""
    counts = "/".join(str(run.resolutions.get(r, 0)) for r in RESOLUTIONS)
    hooks = ",".join(f"{k}:{v}" for k, v in sorted(run.hook_outcomes.items())) or "-"
    missed = run.ended.missed_deadlines if run.ended is not None else run.deadline_missed_steps
    end = f"outcome={run.ended.outcome} stopped_reason={run.ended.stopped_reason}" if run.ended else "not ended"
    joined = f" joined_at_event_seq={run.joined_at}" if run.joined_at else ""
    return (
        f"Summary  run_id={run.run_id} {end} steps_seen={run.steps} full/partial/none/unknown={counts} "
        f"full_rate={_fmt(run.full_rate)} missed_deadlines={missed} "
        f"interval_dev_p50/p99={_fmt(run.interval_deviation_ms(0.5))}/{_fmt(run.interval_deviation_ms(0.99))}ms "
        f"obs_age_mean/max={_fmt(run.observation_age_mean, '.2f')}/{run.observation_age_max} hooks={hooks} "
        f"events={run.events} lost={run.missing}{joined}"
    )


class StreamPrinter:
    """Formats observer events as progress lines and keeps a :class:`StreamTracker` of them.

    :param every_step: print every step (else one per ``progress_period_s``, and every step not resolved full).
    :param expected_episodes: how many episodes the caller asked for; Started lines then count them
        (``episode 2/2``) rather than repeat each goal's own ``episode_index/n_episodes``.
    :param mode: ``"lines"`` (everything), ``"gaps"`` (only gaps and where a run was joined) or ``"summary"``
        (one summary line per run as it ends).
    """

    def __init__(self, out=None, every_step: bool = False, progress_period_s: float = 1.0,
                 expected_episodes: int = 0, mode: str = "lines",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.every_step = every_step
        self.period = progress_period_s
        self.expected_episodes = expected_episodes
        self.mode = mode
        self.clock = clock
        self.tracker = StreamTracker()
        self.ended: list = []
        self.started = 0
        self._last_print: Optional[float] = None

    @property
    def events(self) -> int:
        return self.tracker.events

    @property
    def gaps(self) -> int:
        """Events lost (never received) over every run."""
        return self.tracker.missing

    def __call__(self, event) -> None:
        first_of_run = event.run_id not in self.tracker.runs
        gap = self.tracker.add(event)
        run = self.tracker.runs[event.run_id]
        if first_of_run and event.event_seq > 0 and self.mode != "summary":
            self._line(f"-- joined run_id={event.run_id} at event_seq {event.event_seq}")
        if gap is not None and self.mode != "summary":
            what = f"{gap.first}" if gap.missing == 1 else f"{gap.first}..{gap.last}"
            self._line(f"!! gap in {gap.run_id}: event_seq {what} missing ({gap.missing} lost), "
                       f"got {gap.seen}")
        if isinstance(event, RunPolicyStarted):
            self.started += 1
        elif isinstance(event, RunPolicyEnded):
            self.ended.append(event)
        if self.mode == "summary":
            if isinstance(event, RunPolicyEnded):
                self._line(summary_line(run))
            return
        if self.mode == "gaps":
            return
        if isinstance(event, RunPolicyStarted):
            self._line(self._started_line(event))
        elif isinstance(event, RunPolicyStep):
            now = self.clock()
            due = self._last_print is None or now - self._last_print >= self.period
            if self.every_step or event.action_resolution != "full" or due:
                self._last_print = now
                self._line(self._step_line(event, run))
        elif isinstance(event, RunPolicyEnded):
            self._line(self._ended_line(event))

    def finish(self) -> None:
        """At the end of the stream: summaries of runs that never ended (summary mode), the gap count."""
        if self.mode == "summary":
            for run_id in self.tracker.order:
                run = self.tracker.runs[run_id]
                if run.ended is None:
                    self._line(summary_line(run))
        if self.mode == "gaps":
            runs = len(self.tracker.order)
            self._line(f"-- {self.tracker.events} events of {runs} run(s), {len(self.tracker.gaps)} gap(s), "
                       f"{self.tracker.missing} lost")

    def _episode(self, event: RunPolicyStarted) -> Tuple[int, int]:
        if self.expected_episodes > 0:
            return self.started, self.expected_episodes
        return event.episode_index + 1, event.n_episodes

    def _started_line(self, event: RunPolicyStarted) -> str:
        k, n = self._episode(event)
        return (
            f"Started  run_id={event.run_id} robot={event.robot_name} policy={event.policy} "
            f"{event.control_frequency:g} Hz budget={event.total_steps} steps horizon={event.action_horizon} "
            f"async={event.async_rtc} episode {k}/{n}"
        )

    @staticmethod
    def _step_line(event: RunPolicyStep, run: RunFigures) -> str:
        extra = ""
        if event.unresolved_action_keys:
            pairs = ", ".join(f"{k}:{r}" for k, r in zip(event.unresolved_action_keys,
                                                         event.unresolved_action_reasons))
            extra = f" unresolved=[{pairs}]"
        if event.action_error:
            extra += f" error={event.action_error!r}"
        return (
            f"Step     #{event.applied_action_index:<6} t={event.elapsed_s:7.3f}s "
            f"sim={event.sim_time_s:7.3f}s {event.action_resolution:<7} age={event.observation_age_steps} "
            f"hook={event.legacy_hook_outcome} counts={dict(run.resolutions)}{extra}"
        )

    @staticmethod
    def _ended_line(event: RunPolicyEnded) -> str:
        detail = f" detail={event.end_detail!r}" if event.end_detail else ""
        err = f" error={event.error_type}: {event.error_message}" if event.error_type else ""
        recording = (f" recording={event.recording_path} ({event.recorded_frames} frames)"
                     if event.recording_path else "")
        return (
            f"Ended    run_id={event.run_id} outcome={event.outcome} stopped_reason={event.stopped_reason} "
            f"applied={event.applied_actions} full/partial/none/unknown="
            f"{event.full_count}/{event.partial_count}/{event.none_count}/{event.unknown_count} "
            f"missed_deadlines={event.missed_deadlines} observer_failures={event.observer_failures} "
            f"elapsed={event.elapsed_s:.3f}s{detail}{err}{recording}"
        )

    def _line(self, text: str) -> None:
        # One write per line (print writes the text and its newline separately): another thread printing at
        # the same time (a child's output) cannot land in the middle of it.
        out = self.out or sys.stdout
        out.write(text + "\n")
        out.flush()
