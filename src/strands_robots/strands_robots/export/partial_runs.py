"""Runs a recording holds only part of: its beginning or its end is not in the file.

Reliable volatile topics deliver nothing a publisher sent before the recorder was matched, so a recorder started
(or matched) late holds a run from some step on, without its Started event: no robot, actuator keys or control
frequency, and a first step that is not step 0. A recorder stopped (or killed: the file is cut short, read up to
its last whole record) while a run went on holds it up to some step, without its Ended event: no end condition,
and steps that may be missing at the end. Neither is an episode a dataset can hold (its first frames, its task
and its rate, or how it ended, are not in the file); the export leaves it out and says which steps the file holds.
"""

from __future__ import annotations

from typing import Any

__all__ = ["missing_end", "missing_start"]


def _run(trace: Any) -> str:
    episode = (trace.episode or {}).get("episode_id") or ""
    return f"run {trace.run_id[:8]}" + (f" ({episode})" if episode else "")


def missing_start(trace: Any) -> str:
    """Return why the recording does not hold ``trace`` (an ``EpisodeTrace`` with steps) from its start; "" if it does.

    E.g. ``run 76ec4feb: the recording holds steps 24-99 only (it began after the run started); left out``.
    """
    first, last = trace.steps[0].index, trace.steps[-1].index
    if trace.recorded_from_start:
        return ""
    run = _run(trace)
    if trace.started:
        why = f"its steps 0-{first - 1} are missing"
    else:
        why = "it began after the run started" if first > 0 else "its Started event is not in it"
    return f"{run}: the recording holds steps {first}-{last} only ({why}); left out"


def missing_end(trace: Any) -> str:
    """Return why the recording does not hold ``trace`` (with steps) to its end (its Ended); "" if it does.

    E.g. ``run 76ec4feb: the recording holds steps 0-41 only (station.mcap was cut short: its writer stopped
    before finishing it (no summary); its Ended is not in it); left out``.
    """
    if trace.ended is not None:
        return ""
    first, last = trace.steps[0].index, trace.steps[-1].index
    why = f"{trace.cut_short}; its Ended is not in it" if trace.cut_short else "it stopped before the run ended"
    return f"{_run(trace)}: the recording holds steps {first}-{last} only ({why}); left out"
