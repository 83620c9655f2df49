"""``strands-robots export lerobot RECORDING.mcap... -o DIR [--fps N]``: a LeRobotDataset v3 from our recordings.

Reads episode recordings (the rollout's ``record=True`` files) or a ``strands-robots record`` file of a whole
station with :func:`strands_robots.monitoring.report.load_recording` (episodes are the observer stream's runs)
and writes, as DESIGN.md §10 says: ``meta/info.json`` (codebase_version ``v3.0``), ``meta/stats.json``,
``meta/tasks.parquet``, ``meta/episodes/chunk-000/file-000.parquet`` and ``data/chunk-000/file-000.parquet``
(everything in one file of each: ``chunks_size`` and ``data_files_size_in_mb`` are the v3 defaults, not limits
this writer splits at).

Frames. Each episode is resampled to a constant rate (``--fps``, default the recording's control frequency): the
frame at ``t = k / fps`` is the latest control step at or before ``t`` (half a control period of tolerance), so at
the control frequency every step is one frame. A step's time is robot time (``sim_time_s``, relative to the first
step) when it increases step by step, else rollout time (``elapsed_s``) snapped to the control grid.
``observation.state`` is the step's observed ``<key>.pos`` per actuator key, ``action`` the emitted action (a key
the step did not emit keeps its last command, before any the observed position).

Control source (``control_source``: 0 policy, 1 operator). An operator takeover shows in a recording as a gap
between two steps in which the rollout clock stood still: the wall time between their sends (the ``action_commands``
log times) exceeds their ``elapsed_s`` difference by more than a control period, the step after it starts a new
chunk (``chunk_index`` 0: on resume the chunk in use is dropped) and did not miss its deadline (the loop's own hold,
the other reason the clock stands still, marks the next step ``deadline_missed`` and goes on with its chunk). Where
the recording holds the EpisodeResult (station recordings) and it says ``taken_over`` false, no frame is flagged.
The gap's wall time is added to the episode's time line where robot time did not advance over it (in-process
simulation); the frames inside it are flagged 1 and hold the measured joint positions at that wall time
(``joint_states`` of a station recording; else the last observation), the action equal to the state (what the
operator commanded is not recorded).

Cameras: ``<ns>/<camera>/image_raw/compressed`` (CompressedImage) become ``observation.images.<camera>`` features
of ``dtype: image`` with the encoded bytes in parquet (the image latest at or before the frame's wall time, the
one in force when the run started included; an image's time is the time of what it shows, its header stamp, where
the recording's commands carry send stamps on the same clock: :func:`strands_robots.monitoring.report._attach`;
no video encoder needed); with ``--video`` (PyAV) ``dtype: video``
features instead, one H.264 MP4 per camera (``videos/<key>/chunk-000/file-000.mp4``, every episode in it, one
frame per dataset frame) and each episode row's ``videos/<key>/{chunk_index, file_index, from_timestamp,
to_timestamp}``. A frame's wall time is its step's send time (inside a takeover, that plus the time since). Two
topics of one camera name in a run (two namespaces' ``scene``) are two cameras, named apart by their namespace
(``observation.images.<ns>.scene``, ``/`` written ``.``), and said on stderr; a camera feature not in every
episode is left out, said on stderr.

The frames before a camera's first image in the recording (a camera that came up, or that the recorder matched,
after the run started) are left out (their count is the episode row's ``frames_before_images``; the episode
starts at timestamp 0 with the first frame that has every image), said on stderr: a LeRobot frame holds every
feature, with no marker for a missing one, and a later image in those frames would show what the camera saw after
the step was sent.

Episodes with no control step (e.g. the start pose was never reached) have no frame and are left out; so are runs
the recording holds only part of (:mod:`~strands_robots.export.partial_runs`): from some step on (a recorder that
joined late missed their Started event and first steps) or up to some step (a recorder stopped, or killed: a file
cut short, without a summary, is read up to its last whole record; its complete runs are exported), each named on
stderr with the steps the file holds. Attempts that are not among the job's episodes are left out too, each named on
stderr: where the recordings hold the station's results (a whole station's recording: its ``job_status`` and
``episode_results``), a run with none is an attempt the station did not keep (one the operator discarded, or one a
station fault interrupted; its task ran again as a later episode), never an episode of the dataset. Each episode
row's ``episode_id`` is the station's (``ep_0003``): from its result, else from the name of a downloaded episode
file (``job recordings`` writes ``ep_0003.mcap``). Each episode row also carries ``task_id``, ``end_condition``,
``end_detail``, ``scored``, ``success``, ``score``, ``taken_over`` and ``outcome`` (the coverage bucket the job's
figures put it in: ``scored`` is an outcome of the success rate; ``taken_over``, ``faulted``, ``safety_stopped``,
``unscored`` are not; null where the recording has no EpisodeResult), ``run_id``, ``episode_id``,
``operator_frames`` and ``frames_before_images``.

The intervals are per task and per job, not per episode, so they are not columns of the episode table:
``meta/summary.json`` holds them (``station/summary.py``, as the station's status shows them: per task and for the
job, successes of trials with the 95 % Wilson interval, the mean score with its bootstrap interval, and coverage,
the episode ids in each bucket), computed over every run of the recordings with an EpisodeResult, exported or not.
It is plain JSON beside ``info.json`` (LeRobot's loader reads neither it nor the extra episode columns).
"""

from __future__ import annotations

import argparse
import bisect
import io
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from strands_robots.station.summary import disposition_of

__all__ = ["ExportRefused", "EpisodeFrames", "episode_frames", "export_lerobot", "main", "CODEBASE_VERSION",
           "CONTROL_POLICY", "CONTROL_OPERATOR", "camera_features"]

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 500
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
SUMMARY_PATH = "meta/summary.json"
CONTROL_POLICY = 0
CONTROL_OPERATOR = 1
NO_INSTRUCTION = "(no instruction recorded)"
MAX_FPS = 1000.0
_NS = 1e-9


class ExportRefused(ValueError):
    """The input cannot be exported as asked; nothing was written."""


@dataclass
class EpisodeFrames:
    """One episode resampled: per-frame arrays and what the episode row says."""

    timestamps: np.ndarray           # float64 [n], seconds from the episode's first frame
    state: np.ndarray                # float32 [n, d]
    action: np.ndarray               # float32 [n, d]
    control_source: np.ndarray       # int64 [n]
    step_index: np.ndarray           # int64 [n], the control step each frame was taken from
    images: dict[str, list[bytes]] = field(default_factory=dict)  # camera: encoded frame per frame
    image_formats: dict[str, str] = field(default_factory=dict)
    before_images: int = 0           # frames left out at the start: some camera had sent no image yet
    first_images: dict[str, int] = field(default_factory=dict)  # camera: frames before its first image


_IMAGE_SUFFIX = ("image_raw", "compressed")


def _camera_of(topic: str) -> "str | None":
    parts = [p for p in topic.split("/") if p]
    if len(parts) >= 3 and tuple(parts[-2:]) == _IMAGE_SUFFIX:
        return parts[-3]
    return None


def camera_features(topics: Sequence[str]) -> dict[str, str]:
    """Name the camera of each image topic: ``{camera name: topic}``.

    A camera name on one topic is the name (``/station/scene/image_raw/compressed``: ``scene``); on several
    (two namespaces' ``scene``) each is named apart by its whole path, ``/`` written ``.``
    (``station_a.scene``, ``station_b.scene``), never merged into one feature.
    """
    by_name: dict[str, list[str]] = {}
    for topic in sorted(topics):
        name = _camera_of(topic)
        if name is not None:
            by_name.setdefault(name, []).append(topic)
    out: dict[str, str] = {}
    for name, found in by_name.items():
        if len(found) == 1:
            out[name] = found[0]
            continue
        for topic in found:
            parts = [p for p in topic.split("/") if p][: -len(_IMAGE_SUFFIX)]
            out[".".join(parts)] = topic
    return out


def _send_ns(trace: Any) -> list[int]:
    """Return when each step's action was sent: the rollout's send stamps (``ActionCommand.sent``) for every step.

    Else the ``action_commands`` log times (an episode file stamps them at the send), else the step events' (made after
    the verdict). A ROS recording's log times are its delivery times: their jitter can hide a short takeover.
    """
    stamped = trace.action_sent_ns
    if stamped and all(s.index in stamped for s in trace.steps):
        return [stamped[s.index] for s in trace.steps]
    if len(trace.action_ns) == len(trace.steps):
        return list(trace.action_ns)
    return [s.log_ns for s in trace.steps]


def _on_the_grid(elapsed: Sequence[float], period: float) -> list[float]:
    """Snap rollout times (taken after each send, so with its jitter) to the control grid, a period apart at least.

    A step that ran late (missed deadlines) keeps its later slot: the frames before it hold the previous step.
    """
    out: list[float] = []
    for e in elapsed:
        slot = round((e - elapsed[0]) / period) * period
        out.append(slot if not out else max(out[-1] + period, slot))
    return out


def _step_times(trace: Any, taken_over: "bool | None") -> tuple[list[float], list[bool]]:
    """Each step's time on the episode's line and whether a takeover gap precedes it."""
    steps = trace.steps
    sent = _send_ns(trace)
    sim = [s.sim_time_s for s in steps]
    use_sim = len(steps) > 1 and all(b > a for a, b in zip(sim, sim[1:]))
    period = 1.0 / trace.control_frequency
    base = sim if use_sim else _on_the_grid([s.elapsed_s for s in steps], period)
    times = [0.0]
    gaps = [False]
    inserted = 0.0
    for prev, step, s_prev, s, b_prev, b in zip(steps, steps[1:], sent, sent[1:], base, base[1:]):
        wall = (s - s_prev) * _NS
        held = wall - (step.elapsed_s - prev.elapsed_s)
        gap = taken_over is not False and held > period and not step.deadline_missed and step.chunk_index == 0
        if gap:
            inserted += max(0.0, wall - (b - b_prev))
        gaps.append(gap)
        times.append(b - base[0] + inserted)
    return times, gaps


def _measured_at(trace: Any, key: str, t: float) -> "float | None":
    series = trace.measured.get(key)
    if not series or not series[0]:
        return None
    n = bisect.bisect_right(series[0], t) - 1
    return series[1][n] if n >= 0 else None


def episode_frames(trace: Any, fps: float, keys: Sequence[str],
                   cameras: "Mapping[str, str] | Sequence[str]" = ()) -> EpisodeFrames:
    """Resample one recorded episode (an :class:`~strands_robots.monitoring.report.EpisodeTrace`) to ``fps``.

    ``cameras``: the camera features to fill, ``{name: image topic}`` (a sequence of names: each name's topic by
    :func:`camera_features`). The frames before every camera's first image are left out (module docstring).
    """
    if not isinstance(cameras, Mapping):
        named = camera_features(list(trace.images))
        cameras = {cam: named[cam] for cam in cameras}
    ep = trace.episode or {}
    taken_over = bool(ep["taken_over"]) if "taken_over" in ep else None
    times, gaps = _step_times(trace, taken_over)
    tolerance = 0.5 / trace.control_frequency
    n = int(math.floor((times[-1] + tolerance) * fps + 1e-9)) + 1
    d = len(keys)
    state = np.zeros((n, d), dtype=np.float32)
    action = np.zeros((n, d), dtype=np.float32)
    source = np.zeros(n, dtype=np.int64)
    step_of = np.zeros(n, dtype=np.int64)
    stamps = np.arange(n, dtype=np.float64) / fps
    # the command in force at each step: a key the step did not emit keeps its last one
    commanded: list[list[float]] = []
    last: dict[str, float] = {}
    for s in trace.steps:
        last.update({k: v for k, v in s.action.items() if k in keys})
        commanded.append([last.get(k, s.observation.get(f"{k}.pos", math.nan)) for k in keys])
    topics = dict(cameras)
    # each camera's images from the one in force when the run started (recorded before it) on
    recorded = {cam: ([trace.images_at_start[topic]] if topic in trace.images_at_start else []) + trace.images[topic]
                for cam, topic in topics.items()}
    image_times = {cam: [r[0] for r in recorded[cam]] for cam in topics}
    image_index = {cam: np.zeros(n, dtype=np.int64) for cam in topics}
    sent = _send_ns(trace)
    seen_ns = -(2**63)  # the latest wall time so far: a frame never shows an image older than the one before
    for k in range(n):
        t = stamps[k]
        j = max(0, bisect.bisect_right(times, t + tolerance) - 1)
        step = trace.steps[j]
        operator = j + 1 < len(times) and gaps[j + 1] and t > times[j] + tolerance
        wall_ns = sent[j] + (int((t - times[j]) / _NS) if operator else 0)
        step_of[k] = j
        if operator:
            source[k] = CONTROL_OPERATOR
            rel = (wall_ns - trace.start_ns) * _NS
            for i, key in enumerate(keys):
                value = _measured_at(trace, key, rel)
                state[k, i] = value if value is not None else step.observation.get(f"{key}.pos", math.nan)
            action[k] = state[k]
        else:
            state[k] = [step.observation.get(f"{key}.pos", math.nan) for key in keys]
            action[k] = commanded[j]
        seen_ns = max(seen_ns, wall_ns)
        for cam in topics:  # the latest image at or before the frame's wall time; -1: none yet
            image_index[cam][k] = bisect.bisect_right(image_times[cam], seen_ns) - 1
    # Before a camera's first image (the recording has none from before the frame: the camera came up, or the
    # recorder matched it, after the run started) a frame has no image of it, and a later one would show what the
    # camera saw after the step: those first frames are left out; the episode starts at 0 with the first that
    # has all.
    first_images = {cam: int((idx < 0).sum()) for cam, idx in image_index.items()}
    before = max(first_images.values(), default=0)
    images = {cam: [recorded[cam][int(m)][2] for m in image_index[cam][before:]] for cam in topics}
    formats = {cam: recorded[cam][0][1] for cam in topics}
    return EpisodeFrames(stamps[: n - before], state[before:], action[before:], source[before:], step_of[before:],
                         images, formats, before, first_images)


def _image_shape(data: bytes) -> list[int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        channels = len(image.getbands())
    return [height, width, channels]


def _stats(values: np.ndarray) -> dict[str, list]:
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    return {"mean": values.mean(axis=0).tolist(), "std": values.std(axis=0).tolist(),
            "min": values.min(axis=0).tolist(), "max": values.max(axis=0).tolist(), "count": [int(len(values))]}


def _load(paths: Sequence[Path], say: Callable[[str], None]) -> list[Any]:
    from strands_robots.export.partial_runs import missing_end, missing_start
    from strands_robots.monitoring.report import load_recording

    traces = []
    for path in paths:  # one file at a time: a file that is not a recording is named
        if not path.is_file():
            raise ExportRefused(f"no such file: {path}")
        notes: list[str] = []
        try:
            found, _job = load_recording(path, notes)
        except Exception as exc:
            raise ExportRefused(f"{path} is not a recording MCAP ({type(exc).__name__}: {exc})") from exc
        found = [t for t in found if t.steps]
        if not found:
            raise ExportRefused(f"{path} holds no recorded episode (no observer step events)")
        said = False
        for trace in found:
            trace.source_path = path
            reason = missing_start(trace) or missing_end(trace)
            if reason:
                say(f"{path.name}: {reason}")
                said = said or bool(notes and notes[0] in reason)
            else:
                traces.append(trace)
        if notes and not said:  # cut short (or still being written) after its last whole run: said once
            say(f"{notes[0]}; its whole runs are exported")
    if not traces:
        raise ExportRefused("no run is recorded from its start to its end (each one named above); nothing to "
                            "export")
    if any(_station_id(t) for t in traces):  # the station's results are recorded: a run without one is not kept
        for trace in [t for t in traces if not _station_id(t) and not t.file_episode_id]:
            say(f"{trace.source_path.name}: run {trace.run_id[:8]}: not one of the job's episodes (the recording "
                "holds no station result for it: an attempt the operator discarded or a station fault interrupted, "
                "its task ran again); left out")
            traces.remove(trace)
        if not traces:
            raise ExportRefused("no run in the recordings is one of the job's episodes (each one named above); "
                                "nothing to export")
    return traces


def _station_id(trace: Any) -> str:
    """Return the episode id of the station's result for the run ("" for none, or the rollout's own result)."""
    return str((trace.episode or {}).get("episode_id") or "")


def _cameras(traces: Sequence[Any], say: Callable[[str], None]) -> list[str]:
    """Return the camera features of the dataset: those of every run (:func:`camera_features`); say the others."""
    per_run = []
    for trace in traces:
        named = camera_features(list(trace.images))
        per_run.append(set(named))
        apart = {name: topic for name, topic in named.items() if "." in name}
        if apart:
            say(f"{trace.source_path.name}: run {trace.run_id[:8]}: one camera name on several topics, named apart: "
                + ", ".join(f"{topic} as observation.images.{name}" for name, topic in sorted(apart.items())))
    common = set.intersection(*per_run) if per_run else set()
    for name in sorted(set.union(*per_run) - common if per_run else ()):
        missing = [t.run_id[:8] for t, names in zip(traces, per_run) if name not in names]
        say(f"camera {name} is not in every run (not in run {', '.join(missing)}); left out of the dataset")
    return sorted(common)


def _write_video(path: Path, frames: Sequence[bytes], fps: float) -> None:
    """Encode the camera's JPEG frames, one video frame each, as H.264 (yuv420p, a key frame every 2)."""
    from fractions import Fraction

    import av

    from strands_robots.cameras.jpeg import decode

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        first = decode(frames[0])
        stream.height, stream.width = first.shape[0], first.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.options = {"g": "2", "crf": "18"}
        for data in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(decode(data), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def export_lerobot(paths: Sequence["str | Path"], out_dir: "str | Path", fps: "float | None" = None,
                   video: bool = False, say: "Callable[[str], None] | None" = None) -> dict:
    """Write the dataset into ``out_dir`` (absent or empty); returns its ``info.json`` content.

    A run the recording holds only from some step on is left out, and ``say`` (default: a line on stderr) is told
    which steps the file holds (:mod:`~strands_robots.export.partial_runs`).

    :raises ExportRefused: a path is not a recording or holds no episode, no run is recorded from its start,
        recordings have different control frequencies or actuator keys and no ``fps`` is given, ``fps`` is not
        in (0, 1000], ``out_dir`` is not empty, or ``video`` is asked without PyAV.
    """
    if say is None:
        def say(line: str) -> None:
            print(f"strands-robots export lerobot: {line}", file=sys.stderr)

    if video:
        try:
            import av  # noqa: F401
        except ImportError:
            raise ExportRefused("--video needs PyAV (pip install av); without it cameras are image features") from None
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportRefused(f"{out} exists and is not an empty directory; a dataset is never merged into another")
    if fps is not None and (not math.isfinite(fps) or not 0 < fps <= MAX_FPS):
        raise ExportRefused(f"--fps must be in (0, {MAX_FPS:g}], got {fps!r}")
    traces = _load([Path(p) for p in paths], say)
    rates = sorted({t.control_frequency for t in traces})
    if fps is None:
        if len(rates) > 1:
            listed = ", ".join(f"{r:g}" for r in rates)
            raise ExportRefused(f"the recordings have different control frequencies ({listed} Hz): pass --fps to "
                                f"resample them to one rate")
        fps = rates[0]
    key_sets = {tuple(t.actuator_keys) for t in traces}
    if len(key_sets) > 1:
        raise ExportRefused("the recordings drive different actuator keys; export them as separate datasets")
    keys = list(next(iter(key_sets)))
    if not keys:
        raise ExportRefused("the recording names no actuator keys in its Started event")
    cameras = _cameras(traces, say)

    task_of: dict[str, int] = {}
    episodes = []
    for trace in traces:
        named = camera_features(list(trace.images))
        frames = episode_frames(trace, fps, keys, {cam: named[cam] for cam in cameras})
        run = f"{trace.source_path.name}: run {trace.run_id[:8]}"
        if frames.before_images:
            late = ", ".join(f"{cam} ({k})" for cam, k in frames.first_images.items() if k)
            say(f"{run}: its first {frames.before_images} frames come before the first image of camera {late}; "
                "left out (a LeRobot frame holds every camera's image)")
        if not len(frames.timestamps):
            say(f"{run}: no frame has every camera's image; left out")
            continue
        task = trace.instruction or ((trace.episode or {}).get("task") or {}).get("instruction") or NO_INSTRUCTION
        task_of.setdefault(task, len(task_of))
        episodes.append((trace, task, frames))
    if not episodes:
        raise ExportRefused("no run has a frame with every camera's image (each one named above); nothing to export")

    columns: dict[str, list] = {name: [] for name in ("observation.state", "action", "control_source", "timestamp",
                                                      "frame_index", "episode_index", "index", "task_index")}
    columns.update({f"observation.images.{cam}": [] for cam in cameras})
    rows: dict[str, list] = {name: [] for name in (
        "episode_index", "tasks", "length", "data/chunk_index", "data/file_index", "dataset_from_index",
        "dataset_to_index", "meta/episodes/chunk_index", "meta/episodes/file_index", "run_id", "episode_id",
        "recording", "task_id", "end_condition", "end_detail", "scored", "success", "score", "taken_over",
        "outcome", "operator_frames", "frames_before_images")}
    per_episode_stats: list[dict[str, dict]] = []
    index = 0
    for e, (trace, task, frames) in enumerate(episodes):
        n = len(frames.timestamps)
        columns["observation.state"].append(frames.state)
        columns["action"].append(frames.action)
        columns["control_source"].append(frames.control_source)
        columns["timestamp"].append(frames.timestamps.astype(np.float32))
        columns["frame_index"].append(np.arange(n, dtype=np.int64))
        columns["episode_index"].append(np.full(n, e, dtype=np.int64))
        columns["index"].append(np.arange(index, index + n, dtype=np.int64))
        columns["task_index"].append(np.full(n, task_of[task], dtype=np.int64))
        for cam in cameras:
            columns[f"observation.images.{cam}"].extend({"bytes": b, "path": None} for b in frames.images[cam])
        ep = trace.episode
        rows["episode_index"].append(e)
        rows["tasks"].append([task])
        rows["length"].append(n)
        rows["data/chunk_index"].append(0)
        rows["data/file_index"].append(0)
        rows["dataset_from_index"].append(index)
        rows["dataset_to_index"].append(index + n)
        rows["meta/episodes/chunk_index"].append(0)
        rows["meta/episodes/file_index"].append(0)
        rows["run_id"].append(trace.run_id)
        rows["episode_id"].append(trace.episode_id)
        rows["recording"].append(trace.source_path.name)
        rows["end_condition"].append(trace.end_condition)
        detail = ep["end_detail"] if ep and "end_detail" in ep else (trace.ended or {}).get("end_detail", "")
        rows["end_detail"].append(str(detail))  # the station's words when it recorded the result
        for name, kind in (("scored", bool), ("success", bool), ("score", float), ("taken_over", bool)):
            rows[name].append(kind(ep[name]) if ep and name in ep else None)
        rows["task_id"].append(str(((ep or {}).get("task") or {}).get("task_id", "")))
        rows["outcome"].append(disposition_of(_result_view(trace)).value if ep else None)
        rows["operator_frames"].append(int(frames.control_source.sum()))
        rows["frames_before_images"].append(int(frames.before_images))
        per_episode_stats.append({name: _stats(columns[name][-1]) for name in (
            "observation.state", "action", "control_source", "timestamp", "frame_index", "episode_index",
            "index", "task_index")})
        index += n

    fps_out: "int | float" = int(fps) if float(fps).is_integer() else float(fps)
    numeric = {name: np.concatenate(values) for name, values in columns.items()
               if not name.startswith("observation.images.")}
    features: dict[str, dict] = {
        "observation.state": {"dtype": "float32", "shape": [len(keys)], "names": keys},
        "action": {"dtype": "float32", "shape": [len(keys)], "names": keys},
        "control_source": {"dtype": "int64", "shape": [1], "names": None},
    }
    for cam in cameras:
        first = columns[f"observation.images.{cam}"][0]["bytes"]
        shape = _image_shape(first)
        features[f"observation.images.{cam}"] = {"dtype": "image", "shape": shape,
                                                 "names": ["height", "width", "channels"]}
        if video:
            features[f"observation.images.{cam}"] = {
                "dtype": "video", "shape": [shape[0], shape[1], 3], "names": ["height", "width", "channels"],
                "info": {"video.height": shape[0], "video.width": shape[1], "video.codec": "h264",
                         "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "video.fps": fps_out,
                         "video.channels": 3, "has_audio": False}}
    features.update({
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    })

    out.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any] = {}
    for name, spec in features.items():
        if spec["dtype"] == "video":
            _write_video(out / VIDEO_PATH.format(video_key=name, chunk_index=0, file_index=0),
                         [c["bytes"] for c in columns[name]], fps)
        elif spec["dtype"] == "image":
            arrays[name] = pa.array(columns[name], type=pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
        elif spec["shape"] == [1]:
            arrays[name] = pa.array(numeric[name], type=pa.from_numpy_dtype(np.dtype(spec["dtype"])))
        else:
            flat = pa.array(numeric[name].reshape(-1), type=pa.float32())
            arrays[name] = pa.FixedSizeListArray.from_arrays(flat, spec["shape"][0])
    total = index
    (out / "data/chunk-000").mkdir(parents=True)
    (out / "meta/episodes/chunk-000").mkdir(parents=True)
    pq.write_table(pa.table(arrays), out / DATA_PATH.format(chunk_index=0, file_index=0))

    episode_columns = {name: pa.array(values) for name, values in rows.items()}
    for name, spec in features.items():
        if spec["dtype"] == "video":
            episode_columns[f"videos/{name}/chunk_index"] = pa.array([0] * len(episodes), type=pa.int64())
            episode_columns[f"videos/{name}/file_index"] = pa.array([0] * len(episodes), type=pa.int64())
            episode_columns[f"videos/{name}/from_timestamp"] = pa.array(
                [i / fps for i in rows["dataset_from_index"]], type=pa.float64())
            episode_columns[f"videos/{name}/to_timestamp"] = pa.array(
                [i / fps for i in rows["dataset_to_index"]], type=pa.float64())
    episode_columns["tasks"] = pa.array(rows["tasks"], type=pa.list_(pa.string()))
    for name in ("scored", "success", "taken_over"):
        episode_columns[name] = pa.array(rows[name], type=pa.bool_())
    episode_columns["score"] = pa.array(rows["score"], type=pa.float64())
    for name in per_episode_stats[0]:
        for stat in ("min", "max", "mean", "std", "count"):
            episode_columns[f"stats/{name}/{stat}"] = pa.array([s[name][stat] for s in per_episode_stats],
                                                               type=pa.list_(pa.int64() if stat == "count"
                                                                             else pa.float64()))
    pq.write_table(pa.table(episode_columns), out / "meta/episodes/chunk-000/file-000.parquet")

    tasks = sorted(task_of, key=task_of.get)
    pq.write_table(pa.Table.from_pydict({"task_index": pa.array([task_of[t] for t in tasks], type=pa.int64()),
                                         "task": pa.array(tasks, type=pa.string())}).replace_schema_metadata(
        {b"pandas": json.dumps({"index_columns": ["task"], "column_indexes": [], "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
             "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object",
             "metadata": None}], "pandas_version": "2.2.3"}).encode()}), out / "meta/tasks.parquet")

    stats = {name: _stats(values) for name, values in numeric.items()}
    (out / "meta/stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": traces[0].robot_name or "unknown",
        "total_episodes": len(episodes),
        "total_frames": total,
        "total_tasks": len(tasks),
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILES_SIZE_IN_MB,
        "video_files_size_in_mb": VIDEO_FILES_SIZE_IN_MB,
        "fps": fps_out,
        "splits": {"train": f"0:{len(episodes)}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if video and cameras else None,  # None: no video features
        "features": features,
    }
    (out / "meta/info.json").write_text(json.dumps(info, indent=4) + "\n")
    (out / SUMMARY_PATH).write_text(json.dumps(summary_mapping(traces), indent=2) + "\n")
    return info


def _result_view(trace: Any) -> Any:
    """Return the run's EpisodeResult (a plain mapping in the recording) as ``station.summary`` reads one."""
    from types import SimpleNamespace

    ep = trace.episode or {}
    scored = bool(ep.get("scored"))
    return SimpleNamespace(episode_id=str(trace.episode_id or trace.run_id), scored=scored,
                           success=bool(ep.get("success")), score=float(ep.get("score", 0.0)) if scored else 0.0,
                           taken_over=bool(ep.get("taken_over")),
                           end_condition=str(ep.get("end_condition") or trace.end_condition),
                           task=SimpleNamespace(task_id=str((ep.get("task") or {}).get("task_id", ""))))


def _figures_mapping(figures: Any) -> dict:
    rate, score = figures.success, figures.score
    return {
        "success": {"successes": rate.successes, "trials": rate.trials, "rate": rate.rate, "low": rate.low,
                    "high": rate.high, "method": rate.method.value, "confidence": rate.confidence,
                    "note": rate.note},
        "score": {"n": score.n, "mean": score.mean, "low": score.low, "high": score.high,
                  "method": score.method.value if score.method else None, "confidence": score.confidence,
                  "n_resamples": score.n_resamples, "seed": score.seed, "note": score.note},
        "coverage": {d.value: list(figures.coverage.ids(d)) for d in figures.coverage.counts()},
    }


def summary_mapping(traces: Sequence[Any]) -> dict:
    """Return ``meta/summary.json``: the job's figures over the runs with an EpisodeResult (``station/summary.py``)."""
    from strands_robots.station.summary import summarize

    figures = summarize([_result_view(t) for t in traces if _station_id(t)])
    return {"basis": "the runs in these recordings that carry the station's EpisodeResult (discarded and "
                     "interrupted episodes have none and are not counted here)",
            "job": _figures_mapping(figures),
            "tasks": {t.task_id: _figures_mapping(t) for t in figures.tasks}}


DESCRIPTION = ("A LeRobotDataset v3 (meta/ and data/ parquet files, cameras as images or H.264 video) from "
               "episode recordings or a whole-station strands-robots record file.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the export's arguments to ``parser`` (``strands-robots export lerobot``'s and this module's own)."""
    parser.add_argument("recordings", nargs="+", help="episode MCAP files or directories of them")
    parser.add_argument("-o", "--output-dir", required=True, help="the dataset directory (absent or empty)")
    parser.add_argument("--fps", type=float, default=None,
                        help="frame rate to resample to, in Hz (default: the recordings' control frequency)")
    parser.add_argument("--video", action="store_true",
                        help="cameras as H.264 video features (needs PyAV) instead of image features")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strands-robots export lerobot", description=DESCRIPTION)
    add_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """0 with the dataset's figures printed; 2 with one line on stderr when the input is refused."""
    paths: list[Path] = []
    for given in map(Path, args.recordings):  # a directory: its episode files, in name (= episode) order
        paths.extend(sorted(given.glob("*.mcap")) if given.is_dir() else [given])
    try:
        if not paths:
            raise ExportRefused(f"no .mcap file in {', '.join(args.recordings)}")
        info = export_lerobot(paths, args.output_dir, args.fps, video=args.video)
    except ExportRefused as exc:
        print(f"strands-robots export lerobot: {exc}".replace("\n", " "), file=sys.stderr)
        return 2
    print(f"{args.output_dir}: {info['total_episodes']} episode(s), {info['total_frames']} frames at "
          f"{info['fps']:g} fps, {info['total_tasks']} task(s)")
    return 0


def main(argv: "Sequence[str] | None" = None) -> int:
    """0 with the dataset's figures printed; 2 with one line on stderr when the input is refused."""
    return run(build_parser().parse_args(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
