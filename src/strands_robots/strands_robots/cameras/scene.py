"""The coloured object on the table: where it stands, from the task's parameters and the episode's seed.

:func:`object_position` is a pure function. Task parameters (text or numbers, as a station task carries them):

- ``object_x``, ``object_y`` (m): where the object stands; each within :data:`REGION`;
- a coordinate not given is drawn from the seed, uniformly over :data:`REGION` (``numpy.random.default_rng``),
  so the same seed always puts it in the same place and another seed elsewhere; no seed: the region's centre;
- ``camera_cover`` (comma-separated camera names): those cameras' lenses are covered, their frames black
  (:func:`covered_cameras`; the ``mujoco`` source renders them so).

The object is the MJCF's mocap body ``object`` (a red cube, visual only: it collides with nothing, so the arms'
dynamics are the same wherever it stands); :func:`place_object` moves it in an ``MjData``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import numpy as np

OBJECT_BODY = "object"
OBJECT_HALF_SIZE_M = 0.025
# x forward from the arms' bases, y to the left (left arm at y=+0.3, right at y=-0.3); within both arms' reach.
REGION = {"object_x": (0.25, 0.45), "object_y": (-0.3, 0.3)}
PARAMETER_KEYS = tuple(REGION)
#: The task parameters a scene is laid out from (what a station sends a simulated camera node per episode).
SCENE_KEYS = PARAMETER_KEYS + ("camera_cover",)


class SceneParameterError(ValueError):
    """A scene task parameter is refused (one line: key, value, allowed range)."""


def _coordinate(key: str, value: Any) -> float:
    lo, hi = REGION[key]
    try:
        x = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        x = math.nan
    if isinstance(value, bool) or not math.isfinite(x) or not lo <= x <= hi:
        raise SceneParameterError(f"{key}={value!r} refused: allowed: a number in [{lo:g}, {hi:g}] m")
    return x


def object_position(task_params: "Optional[Mapping[str, Any]]", seed: "Optional[int]") -> tuple[float, float, float]:
    """Return the object's ``(x, y, z)`` (m, world frame; z: resting on the table) for a task and a seed.

    :raises SceneParameterError: ``object_x`` / ``object_y`` not a number inside :data:`REGION`.
    """
    params = dict(task_params or {})
    if isinstance(params.get("parameters"), Mapping):  # a station task dict: its parameters
        params = dict(params["parameters"])
    if seed is None:
        drawn = [sum(REGION[k]) / 2.0 for k in PARAMETER_KEYS]
    else:
        rng = np.random.default_rng(int(seed))
        drawn = [float(rng.uniform(*REGION[k])) for k in PARAMETER_KEYS]
    xy = [_coordinate(k, params[k]) if params.get(k) not in (None, "") else d for k, d in zip(PARAMETER_KEYS, drawn)]
    return (xy[0], xy[1], OBJECT_HALF_SIZE_M)


def covered_cameras(task_params: "Optional[Mapping[str, Any]]") -> frozenset:
    """Return the cameras whose lens the task covers (``camera_cover``: comma-separated names; absent: none)."""
    params = dict(task_params or {})
    if isinstance(params.get("parameters"), Mapping):
        params = dict(params["parameters"])
    text = params.get("camera_cover")
    if not isinstance(text, str) or not text.strip():
        return frozenset()
    return frozenset(part.strip() for part in text.split(",") if part.strip())


def place_object(model, data, position: "tuple[float, float, float]") -> None:
    """Move the mocap body ``object`` of ``model`` to ``position`` in ``data`` (call ``mj_forward`` after).

    :raises ValueError: the model has no mocap body ``object``.
    """
    import mujoco

    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, OBJECT_BODY)
    mocap = int(model.body_mocapid[bid]) if bid >= 0 else -1
    if mocap < 0:
        raise ValueError(f"the MJCF has no mocap body {OBJECT_BODY!r} to place")
    data.mocap_pos[mocap] = position
