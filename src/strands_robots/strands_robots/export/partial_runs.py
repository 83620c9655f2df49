"""Runs a recording holds only part of: a recorder that joined after the run started missed its beginning.

Reliable volatile topics deliver nothing a publisher sent before the recorder was matched, so a recorder started
(or matched) late holds a run from some step on, without its Started event: no robot, actuator keys or control
frequency, and a first step that is not step 0. Such a run is not an episode a dataset can hold (its first
frames, its task and its rate are not in the file); the export leaves it out and says which steps the file holds.
"""

from __future__ import annotations

from typing import Any

__all__ = ["missing_start"]


def missing_start(trace: Any) -> str:
    """Return why the recording does not hold ``trace`` (an ``EpisodeTrace`` with steps) from its start; "" if it does.

    E.g. ``run 76ec4feb: the recording holds steps 24-99 only (it began after the run started); left out``.
    """
    first, last = trace.steps[0].index, trace.steps[-1].index
    if trace.recorded_from_start:
        return ""
    episode = (trace.episode or {}).get("episode_id") or ""
    run = f"run {trace.run_id[:8]}" + (f" ({episode})" if episode else "")
    if trace.started:
        why = f"its steps 0-{first - 1} are missing"
    else:
        why = "it began after the run started" if first > 0 else "its Started event is not in it"
    return f"{run}: the recording holds steps {first}-{last} only ({why}); left out"
