"""ReplayPolicy: plays a recorded or hand-written action trajectory, then ends the episode.

Two sources:

- **CSV**: the header names the action keys (``left.joint_1,...``), one row per action; an optional ``t``
  column gives each row's time in seconds. An empty cell leaves that key out of that action.
- **MCAP** (ROS 2 CDR): every message on one topic (by default the recording's command topic:
  ``/action_commands`` or ``<namespace>/action_commands``, the live name the rollout records under; a recording
  naming it ``<namespace>/actions`` is read too) whose type has the parallel arrays
  ``string[] keys`` and ``float64[] values`` (``strands_robots_msgs/msg/ActionCommand``) is one action; its log
  time is its ``t``. Read with ``mcap_ros2``, so no ROS install is needed.

The whole trajectory is loaded when the policy is built, so a missing file or a malformed row fails before any
episode starts.
"""

from __future__ import annotations

import bisect
import csv
import math
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from strands_robots.policies import options as opt
from strands_robots.policies.base import EndEpisode

PROVIDER = "replay"

OPTIONS = frozenset({"path", "format", "topic", "timing"})

DEFAULT_TOPIC = "/action_commands"
# the command topic of an episode recording that does not use the live name
_OLDER_TOPIC = "/actions"
TIME_COLUMN = "t"
FORMATS = ("auto", "csv", "mcap")
TIMINGS = ("rows", "t")

# Tolerance when comparing a control step's time with a row's time, so 5 * 0.02 s still reaches a row at 0.1 s.
_TIME_EPS = 1e-9


@dataclass(frozen=True)
class Trajectory:
    """Actions in order, and each one's time in seconds from the first (``None`` when the source has none)."""

    actions: tuple[dict[str, float], ...]
    times: tuple[float, ...] | None

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key that appears in any action, in first-seen order."""
        seen: dict[str, None] = {}
        for action in self.actions:
            seen.update(dict.fromkeys(action))
        return tuple(seen)


def load_csv(path: str | os.PathLike[str]) -> Trajectory:
    """Read a CSV trajectory: header = action keys (plus optional ``t``), one action per row.

    :raises ValueError: no header, duplicate columns, a non-numeric cell, decreasing ``t``, or no rows.
    """
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise ValueError(f"replay policy: {path} has no header row of action keys")
        columns = [name.strip() for name in header]
        if len(set(columns)) != len(columns) or "" in columns:
            raise ValueError(f"replay policy: {path} header has empty or duplicate columns: {columns}")
        time_col = columns.index(TIME_COLUMN) if TIME_COLUMN in columns else None
        actions: list[dict[str, float]] = []
        times: list[float] = []
        for line_no, row in enumerate(reader, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) > len(columns):
                raise ValueError(
                    f"replay policy: {path}:{line_no} has {len(row)} cells for {len(columns)} columns"
                )
            action: dict[str, float] = {}
            for col, cell in enumerate(row):
                cell = cell.strip()
                if not cell:
                    if col == time_col:
                        raise ValueError(f"replay policy: {path}:{line_no} has an empty {TIME_COLUMN} cell")
                    continue
                try:
                    value = float(cell)
                except ValueError:
                    raise ValueError(
                        f"replay policy: {path}:{line_no} column {columns[col]!r} is not a number: {cell!r}"
                    ) from None
                if col == time_col:
                    times.append(value)
                else:
                    action[columns[col]] = value
            actions.append(action)
    if not actions:
        raise ValueError(f"replay policy: {path} has no action rows")
    return Trajectory(tuple(actions), _relative_times(path, times) if time_col is not None else None)


def _actions_topic(path: Any, reader: Any) -> str:
    """Return the recording's command topic: ``/action_commands``, else the one ``<ns>/action_commands``.

    A recording with neither is read on its ``/actions`` (or one ``<ns>/actions``), the commands of an episode
    recording that does not use the live name.
    """
    summary = reader.get_summary()
    topics = sorted({c.topic for c in summary.channels.values()}) if summary else []
    for name in (DEFAULT_TOPIC, _OLDER_TOPIC):
        if name in topics:
            return name
        candidates = [t for t in topics if t.endswith(name)]
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            raise ValueError(f"replay policy: {path} has several command topics ({', '.join(candidates)}); "
                             "give the option 'topic'")
    raise ValueError(f"replay policy: {path} has no messages on topic {DEFAULT_TOPIC} (nor <namespace>"
                     f"{DEFAULT_TOPIC}, nor <namespace>{_OLDER_TOPIC}); its topics: "
                     f"{', '.join(topics) or 'none'}")


def load_mcap(path: str | os.PathLike[str], topic: "str | None" = None) -> Trajectory:
    """Read every message on ``topic`` (fields ``keys`` and ``values``) of a ROS 2 MCAP file, in log-time order.

    :param topic: the topic to read; ``None``: ``/action_commands``, else the file's one
        ``<namespace>/action_commands`` topic (or a recording's ``<namespace>/actions``).
    :raises ValueError: no message on ``topic`` (listing the topics the file has), a message without the
        parallel arrays, or arrays of different lengths.
    """
    # Imported here: only MCAP replays need them.
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    actions: list[dict[str, float]] = []
    times_ns: list[int] = []
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        if topic is None:
            topic = _actions_topic(path, reader)
        for schema, _channel, message, msg in reader.iter_decoded_messages(topics=[topic], log_time_order=True):
            try:
                keys, values = list(msg.keys), list(msg.values)
            except AttributeError:
                raise ValueError(
                    f"replay policy: {path} topic {topic} has type {schema.name if schema else '?'}, "
                    "which lacks the parallel arrays 'string[] keys' and 'float64[] values'"
                ) from None
            if len(keys) != len(values):
                raise ValueError(
                    f"replay policy: {path} topic {topic} message {len(actions)} has {len(keys)} keys "
                    f"but {len(values)} values"
                )
            actions.append({str(k): float(v) for k, v in zip(keys, values)})
            times_ns.append(message.log_time)
        if not actions:
            summary = reader.get_summary()
            topics = sorted(c.topic for c in summary.channels.values()) if summary else []
            raise ValueError(
                f"replay policy: {path} has no messages on topic {topic}; "
                f"its topics: {', '.join(topics) or 'none'}"
            )
    return Trajectory(tuple(actions), _relative_times(path, [(t - times_ns[0]) * 1e-9 for t in times_ns]))


def _relative_times(path: Any, times: Sequence[float]) -> tuple[float, ...]:
    if any(not math.isfinite(t) for t in times):
        raise ValueError(f"replay policy: {path} has a non-finite time")
    if any(b < a for a, b in zip(times, times[1:])):
        raise ValueError(f"replay policy: {path} times must not decrease")
    start = times[0] if times else 0.0
    return tuple(t - start for t in times)


class ReplayPolicy:
    """Plays a trajectory chunk by chunk; raises ``EndEpisode`` once it is exhausted.

    Config options:

    - ``path`` (required): the CSV or MCAP file.
    - ``format`` (``auto`` | ``csv`` | ``mcap``, default ``auto``: by the file's suffix, ``.mcap`` or else CSV).
    - ``topic`` (str): the MCAP topic to read; default ``/action_commands``, else the file's one
      ``<ns>/action_commands`` (or a recording's ``<ns>/actions``).
    - ``timing`` (``rows`` | ``t``, default ``rows``): ``rows`` plays one row per control step, whatever the
      recorded times; ``t`` follows the recorded times at the task's ``control_frequency`` (each step plays the
      latest row at or before its time, so rows repeat or are skipped) and needs times (a ``t`` column or MCAP).
    - ``action_horizon`` (int >= 1): chunk length; default the task's ``action_horizon``, else 8.

    Every episode (``reset``) replays from the start. After a takeover (``resume``) the replay continues where
    it stopped: the trajectory is the command, not a function of the arm's state.
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        cfg = opt.check_options(PROVIDER, config, OPTIONS)
        path = cfg.get("path")
        if not path:
            raise ValueError(f"{PROVIDER} policy: option 'path' (a .csv or .mcap trajectory) is required")
        fmt = str(cfg.get("format", "auto")).lower()
        if fmt not in FORMATS:
            raise ValueError(f"{PROVIDER} policy: format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        timing = str(cfg.get("timing", "rows")).lower()
        if timing not in TIMINGS:
            raise ValueError(f"{PROVIDER} policy: timing must be one of {', '.join(TIMINGS)}, got {timing!r}")
        self._horizon = opt.optional_int(PROVIDER, "action_horizon", cfg.get("action_horizon"), minimum=1)
        if fmt == "auto":
            fmt = "mcap" if os.fspath(path).lower().endswith(".mcap") else "csv"
        if fmt == "mcap":
            topic = cfg.get("topic")
            self.trajectory = load_mcap(path, None if topic is None else str(topic))
        else:
            self.trajectory = load_csv(path)
        if timing == "t" and self.trajectory.times is None:
            raise ValueError(f"{PROVIDER} policy: timing 't' needs a '{TIME_COLUMN}' column in {path}")
        self._timing = timing
        self._task: Mapping[str, Any] | None = None
        self._step = 0

    def reset(self, task: Mapping[str, Any]) -> None:
        """Rewind to the first action; takes ``action_horizon`` and ``control_frequency`` from the task."""
        self._chunk_len = opt.action_horizon(PROVIDER, self._horizon, task)
        self._dt = opt.control_period(PROVIDER, task)
        self._step = 0
        self._task = task

    never_blocks = True  # plays recorded actions from memory (policies.base.NEVER_BLOCKS)

    def act(self, observation: Mapping[str, Any]) -> Sequence[Mapping[str, float]]:
        """Return the next ``action_horizon`` actions (fewer at the end). The observation is not used.

        :raises EndEpisode: the trajectory is exhausted.
        """
        if self._task is None:
            raise RuntimeError("ReplayPolicy.act called before reset(task)")
        actions = self.trajectory.actions
        if self._timing == "rows":
            start = self._step
            chunk = actions[start : start + self._chunk_len]
            if not chunk:
                raise EndEpisode(f"replay finished: all {len(actions)} actions played")
            self._step += len(chunk)
            # Copies: a consumer that edits an action must not change the next episode's replay.
            return [dict(a) for a in chunk]
        times = self.trajectory.times
        assert times is not None
        end_time = times[-1]
        out: list[dict[str, float]] = []
        for _ in range(self._chunk_len):
            now = self._step * self._dt
            if now > end_time + _TIME_EPS:
                break
            out.append(dict(actions[bisect.bisect_right(times, now + _TIME_EPS) - 1]))
            self._step += 1
        if not out:
            raise EndEpisode(f"replay finished: {end_time:.3f} s of actions played")
        return out

    def resume(self, observation: Mapping[str, Any]) -> None:
        """After a takeover: continue the trajectory from where it stopped."""
        if self._task is None:
            raise RuntimeError("ReplayPolicy.resume called before reset(task)")
