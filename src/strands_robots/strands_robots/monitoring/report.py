"""``strands-robots report RECORDING.mcap``: a PNG per episode and one for the job, drawn from a recording.

With cameras recorded (CompressedImage topics), each episode also gets a contact sheet of its frames
(``<episode>_cameras.png``) and an MP4 per camera (``<episode>_<camera>.mp4``, PyAV), from
:mod:`~strands_robots.monitoring.camera_sheets`.

Reads either kind of recording — an episode file of the rollout (``record=True``: ``joint_states``,
``action_commands``, ``observer_events``) or a ``strands-robots record`` file of the whole station (every strands
topic) — by message type, not topic name, so any namespace works. Episodes are the observer stream's runs
(``run_id``); everything else is assigned to the run whose Started..Ended window (log time) holds it. A file cut
short (its writer was killed, or is still writing it: no summary, the last records incomplete) is read as far as its
records are whole; its runs say so (``EpisodeTrace.cut_short``), and the command says it in one line on stderr.

Each episode's files are named by its episode id (``ep_0003.png``, ``ep_0003_cameras.png``, ``ep_0003_scene.mp4``):
the station's, from its EpisodeResult in the recording (a whole station's recording), else the file's own name when
the file is one downloaded episode (``job recordings`` names them ``ep_0003.mcap``); a run neither names is
``run_<first 8 of its run id>``.

Per episode (``<episode id>.png``): one panel per arm with the commanded position of each joint
(dashed, the step's emitted action) against the measured one (solid: ``joint_states`` in the window, else the
``<key>.pos`` the step's observation carried); a panel of the step resolutions with the unresolved steps marked;
missed deadlines as vertical lines on every panel; the safety stop as a red line with every tripped check written
out; the end condition and the score in the title.

Job summary (``<stem>_job.png``; ``recordings_job.png`` for several files): a bar per episode (its score, or its
full-resolution rate when no score sheet was recorded), success rate and mean score in the title — computed over the
scored episodes that were not taken over, as spec/evaluation-status.txt counts them; below, the success rate and
mean score of the job and of each task with their intervals as error bars (``station/summary.py``: Wilson 95 % for
the rate, a seeded bootstrap for the score).

A comparison job's recording also gets ``<stem>_comparison.png``: each policy's success rate with its interval as an
error bar, each pair's paired difference with its Newcombe interval, the exact test's p, the detectable difference
and the stop rule's verdict (:mod:`~strands_robots.monitoring.comparison_plot`).

Every artist the tests look for carries a ``gid`` (``commanded:<key>``, ``measured:<key>``, ``unresolved``,
``missed_deadline``, ``safety_stop``, ``safety_checks``, ``episode:<id>``).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from strands_robots.conversions.messages import time_to_ns

__all__ = ["EpisodeTrace", "JobSummary", "load_recording", "job_summary", "episode_figure", "job_figure",
           "write_report", "main"]

_NS = 1e-9
_MCAP_MAGIC = b"\x89MCAP0\r\n"
#: the name ``job recordings`` gives a downloaded episode file (its episode id)
EPISODE_FILE = re.compile(r"^ep_\d{4,}$")
#: why a file without a summary is read only in part (a reader says it in one line)
CUT_SHORT = ("cut short: its writer stopped before finishing it (no summary; a file still being written looks the "
             "same); read up to its last whole record")


@dataclass
class StepPoint:
    t: float                       # seconds since the run's Started (log time)
    index: int
    resolution: str
    unresolved: tuple[str, ...]
    reasons: tuple[str, ...]
    deadline_missed: bool
    action: dict[str, float]
    observation: dict[str, float]
    log_ns: int = 0                # log time of the step's event
    elapsed_s: float = 0.0         # rollout time (excludes time the loop held or was taken over)
    sim_time_s: float = 0.0        # robot time reported with the observation
    chunk_index: int = 0           # index of the action within its chunk (0: a new chunk)


@dataclass
class EpisodeTrace:
    """One run of the observer stream with what the recording holds about it."""

    run_id: str
    start_ns: int
    started: bool = False  # the run's Started event is in the recording (a recorder that joined late missed it)
    robot_name: str = ""
    policy: str = ""
    instruction: str = ""
    episode_index: int = 0
    actuator_keys: tuple[str, ...] = ()
    control_frequency: float = 0.0
    end_ns: "int | None" = None
    steps: list[StepPoint] = field(default_factory=list)
    ended: "dict[str, Any] | None" = None
    measured: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    safety_checks: list[str] = field(default_factory=list)
    safety_t: "float | None" = None
    episode: "dict[str, Any] | None" = None   # the EpisodeResult of this run, when recorded
    # topic: (time ns, format, data), the frames inside the run's window; a frame's time is on the clock of
    # images_start_ns (:func:`_attach`): its header stamp where the run's commands carry send stamps, else its log time
    images: dict[str, list[tuple[int, str, bytes]]] = field(default_factory=dict)
    # topic: the camera's latest image from before the run's start (the one in force when the run began)
    images_at_start: dict[str, tuple[int, str, bytes]] = field(default_factory=dict)
    images_start_ns: int = 0  # the run's start on the images' clock (0: start_ns)
    # the rollout's own times of its Started and Ended events (ObserverEvent.utc_ns; 0: not recorded)
    start_utc_ns: int = 0
    end_utc_ns: int = 0
    action_ns: list[int] = field(default_factory=list)  # log times of the ActionCommands (episode file: send times)
    # the rollout's own send stamp (ActionCommand.sent, wall clock) per applied_action_index, where the command
    # carries one and the run's id (the command stream of a ROS recording; an episode file's commands have neither)
    action_sent_ns: dict[int, int] = field(default_factory=dict)
    # why the file holding the run ends early ("" when it is whole): a run without its Ended there was cut
    cut_short: str = ""
    source_path: "Path | None" = None  # the file the run's events came from
    file_episode_id: str = ""  # the episode id the file's name gives (a downloaded episode: ep_0003.mcap)

    @property
    def episode_id(self) -> str:
        """The station's id of this episode: its EpisodeResult's, else its file's name's; "" when neither says."""
        return str((self.episode or {}).get("episode_id") or self.file_episode_id)

    @property
    def label(self) -> str:
        """The episode id, or ``run_<first 8 of the run id>`` for a run no station result or file name names."""
        return self.episode_id or f"run_{self.run_id[:8]}"

    @property
    def recorded_from_start(self) -> bool:
        """Whether the recording holds the run from its start: its Started event and step 0 (when it has steps)."""
        return self.started and (not self.steps or self.steps[0].index == 0)

    @property
    def end_condition(self) -> str:
        if self.episode and self.episode.get("end_condition"):
            return str(self.episode["end_condition"])
        return str((self.ended or {}).get("stopped_reason", "") or "running")

    @property
    def score_text(self) -> str:
        ep = self.episode
        if not ep:
            return "not scored (no score sheet recorded)"
        if not ep.get("scored"):
            return "not scored"
        text = f"score {float(ep.get('score', 0.0)):.2f} ({'success' if ep.get('success') else 'failure'})"
        return text + (", taken over" if ep.get("taken_over") else "")

    @property
    def missed_deadline_times(self) -> list[float]:
        return [s.t for s in self.steps if s.deadline_missed]

    @property
    def unresolved_steps(self) -> list[StepPoint]:
        return [s for s in self.steps if s.resolution != "full"]


def _plain(value: Any) -> Any:
    """Return a decoded mcap_ros2 message as dicts/lists (its ``__slots__`` are its fields)."""
    slots = getattr(type(value), "__slots__", None)
    if slots and not isinstance(value, (str, bytes)):
        return {name: _plain(getattr(value, name)) for name in slots}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def load_recording(paths: "str | Path | Iterable[str | Path]",
                   notes: "list[str] | None" = None) -> tuple[list[EpisodeTrace], "dict | None"]:
    """Episodes (in Started order) and the last JobStatus (as a dict) from one or more MCAP files.

    :param notes: gets one line per file read only in part (cut short, or still being written).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    records: list[tuple[int, str, Any, str]] = []
    cut: list[str] = []
    file_of: dict[str, Path] = {}  # run id: the file its events came from (the first that has them)
    runs_in: dict[Path, set] = {}
    for path in paths:
        found, why = read_messages(Path(path))
        records.extend(found)
        runs_in[Path(path)] = {msg.run_id for _, kind, msg, _ in found if kind == "ObserverEvent"}
        for run_id in runs_in[Path(path)]:
            file_of.setdefault(run_id, Path(path))
        if why:
            cut.append(f"{Path(path).name} was {why}")
    if notes is not None:
        notes.extend(cut)
    records.sort(key=lambda r: r[0])
    runs: dict[str, EpisodeTrace] = {}
    order: list[EpisodeTrace] = []
    others: list[tuple[int, str, Any, str]] = []
    job: "dict | None" = None
    results: list[dict] = []
    for log_ns, kind, msg, topic in records:
        if kind == "ObserverEvent":
            _fold_event(runs, order, log_ns, msg)
        elif kind == "JobStatus":
            job = _plain(msg)
        elif kind == "EpisodeResult":
            results.append(_plain(msg))
        else:
            others.append((log_ns, kind, msg, topic))
    for trace in order:
        _attach(trace, others)
    by_run = {r.get("run_id"): r for r in results if r.get("run_id")}
    if job:
        by_run.update({e.get("run_id"): e for e in job.get("episodes", []) if e.get("run_id")})
    for trace in order:
        trace.episode = by_run.get(trace.run_id, trace.episode)
        trace.cut_short = "; ".join(cut)
        trace.source_path = file_of.get(trace.run_id)
        path = trace.source_path
        if path is not None and len(runs_in.get(path, ())) == 1 and EPISODE_FILE.match(path.stem):
            trace.file_episode_id = path.stem
    return order, job


def read_messages(path: Path) -> "tuple[list[tuple[int, str, Any, str]], str]":
    """Return every message in ``path`` as ``(log ns, type name, decoded message, topic)``, and why it ends early.

    The messages in log-time order; the reason "" when the file is whole. A file whose writer was killed has no
    summary and ends inside a record: it is read from its start as far as its records are whole (an MCAP writer's
    complete chunks), the rest is lost.

    :raises McapError: the file is not an MCAP file, or a message cannot be decoded.
    """
    import struct

    from mcap.exceptions import DecoderNotFoundError, InvalidMagic, McapError
    from mcap.reader import NonSeekingReader, make_reader
    from mcap_ros2.decoder import DecoderFactory

    records: list[tuple[int, str, Any, str]] = []
    with open(path, "rb") as handle:
        magic = handle.read(len(_MCAP_MAGIC))
        if magic != _MCAP_MAGIC:
            raise InvalidMagic(magic)
        handle.seek(0)
        try:
            reader = make_reader(handle, decoder_factories=[DecoderFactory()])
            for schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=True):
                records.append((message.log_time, schema.name.split("/")[-1], decoded, channel.topic))
            return records, ""
        except (McapError, struct.error) as exc:
            if isinstance(exc, DecoderNotFoundError):
                raise
    records = []
    factory = DecoderFactory()
    decoders: dict[int, Any] = {}
    with open(path, "rb") as handle:
        messages = NonSeekingReader(handle).iter_messages(log_time_order=False)
        while True:
            try:
                schema, channel, message = next(messages)
            except StopIteration:
                break
            except (McapError, struct.error):  # the end of what was written
                break
            decoder = decoders.get(channel.id)
            if decoder is None:
                decoder = factory.decoder_for(channel.message_encoding, schema)
                if decoder is None:
                    raise McapError(f"no decoder for topic {channel.topic} ({channel.message_encoding})")
                decoders[channel.id] = decoder
            records.append((message.log_time, schema.name.split("/")[-1], decoder(message.data), channel.topic))
    records.sort(key=lambda r: r[0])
    return records, CUT_SHORT


def _fold_event(runs: dict, order: list, log_ns: int, msg: Any) -> None:
    trace = runs.get(msg.run_id)
    if msg.kind == "started" or trace is None:
        trace = EpisodeTrace(run_id=msg.run_id, start_ns=log_ns)
        runs[msg.run_id] = trace
        order.append(trace)
    if msg.kind == "started" and msg.started:
        s = msg.started[0]
        trace.started = True
        trace.start_utc_ns = int(msg.utc_ns)
        trace.robot_name, trace.policy, trace.instruction = s.robot_name, s.policy, s.instruction
        trace.episode_index, trace.actuator_keys = int(s.episode_index), tuple(s.actuator_keys)
        trace.control_frequency = float(s.control_frequency)
    elif msg.kind == "step" and msg.step:
        s = msg.step[0]
        trace.steps.append(StepPoint(
            t=(log_ns - trace.start_ns) * _NS, index=int(s.applied_action_index), resolution=s.action_resolution,
            unresolved=tuple(s.unresolved_action_keys), reasons=tuple(s.unresolved_action_reasons),
            deadline_missed=bool(s.deadline_missed), action=dict(zip(s.action_keys, map(float, s.action_values))),
            observation=dict(zip(s.observation_keys, map(float, s.observation_values))),
            log_ns=log_ns, elapsed_s=float(s.elapsed_s), sim_time_s=float(s.sim_time_s),
            chunk_index=int(s.chunk_index)))
    elif msg.kind == "ended" and msg.ended:
        trace.ended = _plain(msg.ended[0])
        trace.end_ns = log_ns
        trace.end_utc_ns = int(msg.utc_ns)


def _attach(trace: EpisodeTrace, others: list) -> None:
    """Joint readings, camera frames (CompressedImage, by topic) and safety stops inside the run's window.

    Of each camera also the latest frame before the window, the one in force when the run started.

    The commands' send stamps go by the run's id instead, wherever their log times fall.

    Camera frames go by the time of what they show wherever the recording allows. A recording of live topics logs
    each message at its receipt, and a recorder that falls behind does so unevenly: a reliable topic's deep queue
    (the observer events, the commands) is taken seconds late while a sensor topic's few slots (the frames) stay
    near the present, so by log times the frames of a run's first seconds come before its Started event and
    before its first commands' send stamps. Where the run's commands carry send stamps (the rollout node's
    clock) that fall inside the run's own Started..Ended times (ObserverEvent.utc_ns: the node clock is the wall
    clock, no simulation time), a frame's header stamp is on the same clock (the camera node stamps with the
    rollout node's clock) and is its time, and the run's window is Started..Ended by those times. Otherwise (an
    episode file, whose frames are stamped in robot time and logged when the rollout took them; no send stamps)
    a frame's time is its log time.
    """
    end = trace.end_ns if trace.end_ns is not None else float("inf")
    frames: list[tuple[int, int, str, Any]] = []  # (log ns, header stamp ns, topic, msg)
    for log_ns, kind, msg, topic in others:
        if kind == "ActionCommand" and msg.run_id == trace.run_id and time_to_ns(msg.sent):
            # the run's own commands by their run_id, wherever their delivery put them: the first ones can reach
            # the recorder before the run's Started event does (another topic)
            trace.action_sent_ns[int(msg.step_index)] = time_to_ns(msg.sent)
        if kind == "CompressedImage":
            frames.append((log_ns, time_to_ns(msg.header.stamp), topic, msg))
            continue
        if not trace.start_ns <= log_ns <= end:
            continue
        t = (log_ns - trace.start_ns) * _NS
        if kind == "JointState":
            for name, position in zip(msg.name, msg.position):
                times, values = trace.measured.setdefault(name, ([], []))
                times.append(t)
                values.append(float(position))
        elif kind == "ActionCommand":
            trace.action_ns.append(log_ns)
        elif kind == "SafetyStop" and msg.stopped and trace.safety_t is None:
            trace.safety_t = t
            trace.safety_checks = [c.text for c in msg.checks] or [msg.detail]
    _attach_frames(trace, frames)
    if not trace.measured:  # no joint_states in the file: the observation each step was inferred from
        for s in trace.steps:
            for key, value in s.observation.items():
                if key.endswith(".pos"):
                    times, values = trace.measured.setdefault(key[:-4], ([], []))
                    times.append(s.t)
                    values.append(value)
    if trace.safety_t is None and trace.ended and trace.ended.get("stopped_reason") == "safety_stop":
        trace.safety_t = trace.steps[-1].t if trace.steps else 0.0
        detail = str(trace.ended.get("end_detail", ""))
        trace.safety_checks = [c.strip() for c in detail.split(";") if c.strip()]


def _on_the_node_clock(trace: EpisodeTrace) -> bool:
    """Tell whether the run's commands carry send stamps that fall inside its Started..Ended times (:func:`_attach`)."""
    sent = trace.action_sent_ns.values()
    return bool(sent) and 0 < trace.start_utc_ns <= min(sent) and max(sent) <= trace.end_utc_ns


def _attach_frames(trace: EpisodeTrace, frames: list) -> None:
    """Attach the run's camera frames by the time of what they show where the recording allows (:func:`_attach`)."""
    stamped = _on_the_node_clock(trace)
    start, end = (trace.start_utc_ns, trace.end_utc_ns) if stamped else (
        trace.start_ns, trace.end_ns if trace.end_ns is not None else float("inf"))
    trace.images_start_ns = start
    for log_ns, stamp_ns, topic, msg in sorted(frames, key=lambda f: f[1] if stamped and f[1] > 0 else f[0]):
        at = stamp_ns if stamped and stamp_ns > 0 else log_ns
        if at < start:
            trace.images_at_start[topic] = (at, str(msg.format), bytes(msg.data))
        elif at <= end:
            trace.images.setdefault(topic, []).append((at, str(msg.format), bytes(msg.data)))


@dataclass(frozen=True)
class JobSummary:
    """Per-episode bars and the job's figures (success rate and mean score over the counted episodes).

    ``figures`` is the station's summary of these episodes (``station/summary.py``: success k of n with its
    interval, mean score with its bootstrap interval, coverage; per task and for the job), drawn with error bars.
    """

    labels: tuple[str, ...]
    values: tuple[float, ...]          # score, or full rate when not scored
    scored: tuple[bool, ...]
    success: tuple[bool, ...]
    taken_over: tuple[bool, ...]
    end_conditions: tuple[str, ...]
    success_rate: "float | None"       # None: no episode counts (none scored, or all taken over)
    mean_score: "float | None"
    title: str
    figures: Any = None                # station.summary.JobSummary of the listed episodes


def _episode_view(row: tuple) -> Any:
    """Return an episode row as ``station.summary`` reads an ``EpisodeResult`` (the fields it needs)."""
    from types import SimpleNamespace

    label, value, scored, success, taken_over, end_condition, task_id = row
    return SimpleNamespace(episode_id=label, score=value if scored else 0.0, scored=scored, success=success,
                           taken_over=taken_over, end_condition=end_condition, task=SimpleNamespace(task_id=task_id))


def job_summary(traces: Sequence[EpisodeTrace], job: "dict | None") -> JobSummary:
    from strands_robots.station.summary import summarize

    rows = []
    if job and job.get("episodes"):
        for ep in job["episodes"]:
            rows.append((ep.get("episode_id", ""), float(ep.get("score", 0.0)), bool(ep.get("scored")),
                         bool(ep.get("success")), bool(ep.get("taken_over")), str(ep.get("end_condition", "")),
                         str((ep.get("task") or {}).get("task_id", ""))))
    else:
        for n, trace in enumerate(traces):
            ep = trace.episode or {}
            scored = bool(ep.get("scored"))
            value = float(ep.get("score", 0.0)) if scored else float((trace.ended or {}).get("full_rate", 0.0))
            rows.append((trace.episode_id or f"run {n} ({trace.run_id[:8]})", value, scored,
                         bool(ep.get("success")), bool(ep.get("taken_over")), trace.end_condition,
                         str((ep.get("task") or {}).get("task_id", ""))))
    counted = [r for r in rows if r[2] and not r[4]]
    success_rate = sum(r[3] for r in counted) / len(counted) if counted else None
    mean_score = sum(r[1] for r in counted) / len(counted) if counted else None
    figures = summarize([_episode_view(r) for r in rows])
    head = f"job {job.get('job_id')} {job.get('state')}" if job else "recording"
    rate = "n/a (nothing scored)" if success_rate is None else f"{success_rate:.0%}"
    mean = "n/a" if mean_score is None else f"{mean_score:.2f}"
    title = (f"{head}: {len(rows)} episode(s), success rate {rate}, mean score {mean}\n"
             f"over {len(counted)} scored episode(s) not taken over (hatched: taken over; gray: not scored)")
    return JobSummary(tuple(r[0] for r in rows), tuple(r[1] for r in rows), tuple(r[2] for r in rows),
                      tuple(r[3] for r in rows), tuple(r[4] for r in rows), tuple(r[5] for r in rows),
                      success_rate, mean_score, title, figures)


def _arm_of(key: str) -> str:
    return key.split(".", 1)[0] if "." in key else ""


def episode_figure(trace: EpisodeTrace) -> Any:
    """Draw the episode's figure (a matplotlib ``Figure``; no pyplot state)."""
    from matplotlib.figure import Figure

    keys = list(trace.actuator_keys) or sorted({k for s in trace.steps for k in s.action} | set(trace.measured))
    arms = sorted({_arm_of(k) for k in keys}) or [""]
    fig = Figure(figsize=(11, 3.0 * len(arms) + 2.4), layout="constrained")
    axes = fig.subplots(len(arms) + 1, 1, sharex=True, height_ratios=[3] * len(arms) + [1.2])
    colors = [f"C{i}" for i in range(10)]
    for ax, arm in zip(axes, arms):
        arm_keys = [k for k in keys if _arm_of(k) == arm]
        for n, key in enumerate(arm_keys):
            color = colors[n % len(colors)]
            commanded = [(s.t, s.action[key]) for s in trace.steps if key in s.action]
            if commanded:
                ax.plot([c[0] for c in commanded], [c[1] for c in commanded], linestyle="--", color=color,
                        linewidth=1.0, gid=f"commanded:{key}", label=f"{key.split('.', 1)[-1]} commanded")
            if key in trace.measured:
                times, values = trace.measured[key]
                ax.plot(times, values, linestyle="-", color=color, linewidth=1.4, gid=f"measured:{key}",
                        label=f"{key.split('.', 1)[-1]} measured")
        ax.set_ylabel(f"{arm or 'joints'} position (rad)")
        ax.legend(loc="upper left", fontsize=6, ncol=4)
    timeline = axes[-1]
    levels = {"full": 0, "partial": 1, "none": 2, "unknown": 3}
    timeline.set_yticks(list(levels.values()), list(levels))
    timeline.set_ylim(-0.5, 3.5)
    bad = trace.unresolved_steps
    if trace.steps:
        good = [s for s in trace.steps if s.resolution == "full"]
        timeline.scatter([s.t for s in good], [0] * len(good), s=4, color="C2", gid="resolved", label="full")
    if bad:
        timeline.scatter([s.t for s in bad], [levels.get(s.resolution, 3) for s in bad], marker="x", color="C3",
                         s=24, gid="unresolved", label=f"unresolved ({len(bad)} steps)")
    for ax in axes:
        for n, t in enumerate(trace.missed_deadline_times):
            ax.axvline(t, color="orange", linewidth=0.8, alpha=0.8, gid="missed_deadline",
                       label=f"missed deadline ({len(trace.missed_deadline_times)})" if n == 0 and ax is timeline
                       else None)
        if trace.safety_t is not None:
            ax.axvline(trace.safety_t, color="red", linewidth=2.0, gid="safety_stop",
                       label="safety stop" if ax is timeline else None)
    timeline.set_xlabel("time since the episode started (s)")
    timeline.legend(loc="upper left", fontsize=6, ncol=4)
    if trace.safety_checks:
        text = "SAFETY STOP\n" + "\n".join(trace.safety_checks)
        axes[0].text(0.99, 0.97, text, transform=axes[0].transAxes, ha="right", va="top", fontsize=8,
                     color="darkred", gid="safety_checks",
                     bbox={"boxstyle": "round", "facecolor": "mistyrose", "edgecolor": "red"})
    ended = trace.ended or {}
    counts = (f"full {ended.get('full_count', 0)} / partial {ended.get('partial_count', 0)} / none "
              f"{ended.get('none_count', 0)} / unknown {ended.get('unknown_count', 0)}, missed deadlines "
              f"{ended.get('missed_deadlines', len(trace.missed_deadline_times))}") if ended else "no Ended event"
    episode = trace.episode_id or f"episode {trace.episode_index}"
    partial = "" if trace.recorded_from_start or not trace.steps else \
        f" — partial recording: steps {trace.steps[0].index}-{trace.steps[-1].index} only"
    fig.suptitle(f"{trace.robot_name or 'robot'} {episode} (run {trace.run_id[:8]}, "
                 f"{trace.policy or 'policy'}) — end: {trace.end_condition} — {trace.score_text}{partial}\n{counts}",
                 fontsize=10)
    return fig


def job_figure(summary: JobSummary) -> Any:
    from matplotlib.figure import Figure

    groups = _figure_groups(summary.figures)
    fig = Figure(figsize=(max(6.0, 0.7 * len(summary.labels) + 3, 1.2 * len(groups) + 4), 8.0 if groups else 4.5),
                 layout="constrained")
    axes = fig.subplots(2, 1, height_ratios=[1.1, 1]) if groups else [fig.subplots()]
    ax = axes[0]
    for n, label in enumerate(summary.labels):
        scored, taken = summary.scored[n], summary.taken_over[n]
        color = "lightgray" if not scored else ("C2" if summary.success[n] else "C3")
        ax.bar(n, summary.values[n], color=color, hatch="//" if taken else None, edgecolor="black",
               gid=f"episode:{label}")
        ax.text(n, summary.values[n] + 0.02, summary.end_conditions[n], ha="center", fontsize=7, rotation=90)
    ax.set_xticks(range(len(summary.labels)), summary.labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.35)
    ax.set_ylabel("score (gray: not scored, full-resolution rate)")
    ax.set_title(summary.title, fontsize=9)
    if groups:
        _rates_panel(axes[1], groups, summary.figures)
    return fig


def _figure_groups(figures: Any) -> list:
    """``(label, figures)`` for the job and, with more than one task, each task; none without figures."""
    if figures is None:
        return []
    groups = [("all tasks", figures)]
    if len(figures.tasks) > 1:
        groups += [(t.task_id or "(no task id)", t) for t in figures.tasks]
    return groups


def _rates_panel(ax: Any, groups: list, figures: Any) -> None:
    """Success rate and mean score per group, each with its interval as an error bar."""
    from strands_robots.station.summary import coverage_text

    width = 0.38
    labeled = set()
    for n, (label, f) in enumerate(groups):
        for offset, value, low, high, color, kind in (
                (-width / 2, f.success.rate, f.success.low, f.success.high, "C0", "rate"),
                (width / 2, f.score.mean, f.score.low, f.score.high, "C1", "score")):
            if value is None:
                ax.text(n + offset, 0.02, "n/a", ha="center", fontsize=7, rotation=90)
                continue
            ax.bar(n + offset, value, width, color=color, alpha=0.7, gid=f"{kind}:{label}",
                   label=None if kind in labeled else {"rate": "success rate", "score": "mean score"}[kind])
            labeled.add(kind)
            if low is not None and high is not None:
                ax.errorbar(n + offset, value, yerr=[[value - low], [high - value]], fmt="none", ecolor="black",
                            capsize=4, gid=f"{kind}_interval:{label}")
        ax.text(n, 1.04, f"{f.success.successes}/{f.success.trials}", ha="center", fontsize=8)
    ax.set_xticks(range(len(groups)), [g[0] for g in groups], rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("rate / score")
    if labeled:
        ax.legend(loc="upper right", fontsize=7)
    rate = figures.success
    method = f"{rate.method.label} {rate.confidence * 100:g} %" if rate.has_interval else "no outcomes"
    ax.set_title(f"error bars: success rate {method} interval, mean score {figures.score.confidence * 100:g} % "
                 f"bootstrap interval\ncoverage {coverage_text(figures.coverage)} (listed episodes)", fontsize=8)


def camera_outputs(trace: EpisodeTrace, base: Path, video: bool = True) -> list[Path]:
    """Write the episode's contact sheet (``<base>_cameras.png``) and an MP4 per camera (``<base>_<camera>.mp4``)."""
    from strands_robots.monitoring.camera_sheets import contact_sheet, write_video
    from strands_robots.monitoring.recorded_frames import camera_of

    frames = {camera_of(topic): items for topic, items in sorted(trace.images.items()) if items}
    if not frames:
        return []
    sheet, _ = contact_sheet(frames, trace.images_start_ns or trace.start_ns)
    written = [base.with_name(base.name + "_cameras.png")]
    sheet.save(written[0])
    if video:
        for camera, items in frames.items():
            target = base.with_name(f"{base.name}_{camera}.mp4")
            write_video(target, items)
            written.append(target)
    return written


def video_available() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def write_report(paths: Sequence["str | Path"], out_dir: "str | Path", video: "bool | None" = None,
                 notes: "list[str] | None" = None) -> list[Path]:
    """Write the PNGs (and the cameras' sheets and MP4s); the paths written: episodes, the job's, a comparison's.

    :param video: an MP4 per camera and episode; ``None``: when PyAV is installed.
    :param notes: gets one line per file read only in part (:func:`load_recording`).
    """
    traces, job = load_recording(paths, notes)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(paths[0]).stem if len(paths) == 1 else "recordings"
    video = video_available() if video is None else video
    written = []
    used: set = set()
    for trace in traces:
        name = trace.label if trace.label not in used else f"{trace.label}_{trace.run_id[:8]}"  # two jobs' ep_0003
        used.add(name)
        target = out / f"{name}.png"
        episode_figure(trace).savefig(target, dpi=110)
        written.append(target)
        written.extend(camera_outputs(trace, target.with_suffix(""), video))
    target = out / f"{stem}_job.png"
    job_figure(job_summary(traces, job)).savefig(target, dpi=110)
    written.append(target)
    from strands_robots.monitoring.comparison_plot import comparison_figure, comparison_from_recorded

    comparison = comparison_from_recorded(job)
    if comparison is not None:  # a comparison job: each policy's rate and the paired difference, with intervals
        target = out / f"{stem}_comparison.png"
        comparison_figure(comparison).savefig(target, dpi=110)
        written.append(target)
    return written


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strands-robots report",
        description="A PNG per episode and one for the job, drawn from recordings; with cameras recorded, each "
                    "episode's contact sheet of frames and an MP4 per camera.")
    parser.add_argument("recordings", nargs="+",
                        help="MCAP files or directories of them (one job's episodes, or one station recording)")
    parser.add_argument("-o", "--output-dir", default="", help="where the PNGs go (default: beside the first file)")
    parser.add_argument("--no-video", action="store_true", help="no MP4 per camera (the contact sheets only)")
    return parser


def main(argv: "Sequence[str] | None" = None) -> int:
    """0 with the PNG paths printed; 2 when a file is missing or holds no observer stream."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    paths: list[Path] = []
    for given in map(Path, args.recordings):  # a directory: its episode files, in name (= episode) order
        paths.extend(sorted(given.glob("*.mcap")) if given.is_dir() else [given])
    missing = [str(p) for p in paths if not p.is_file()] or ([] if paths else list(args.recordings))
    if missing:
        print(f"strands-robots report: no such file (or no .mcap in the directory): {', '.join(missing)}",
              file=sys.stderr)
        return 2
    try:
        video = False if args.no_video else video_available()
        if not args.no_video and not video:
            print("strands-robots report: no MP4s: PyAV is not installed (pip install av)", file=sys.stderr)
        notes: list[str] = []
        written = write_report(paths, args.output_dir or paths[0].parent, video, notes)
    except Exception as exc:  # not an MCAP file, a schema mcap_ros2 cannot read: say which and why
        print(f"strands-robots report: cannot read {', '.join(map(str, paths))}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 2
    for note in notes:  # a file cut short, or still being written: said, and what it holds is drawn
        print(f"strands-robots report: {note}", file=sys.stderr)
    if len(written) == 1:
        print(f"strands-robots report: no observer events in {', '.join(map(str, paths))}; wrote only "
              f"{written[0]}", file=sys.stderr)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
