"""How close the arms' tool points ended to the coloured object: the vision task's measure (MuJoCo kinematics).

:func:`object_distance` poses the bundled MJCF's arms from an observation's joint readings (``<arm>.<joint>.pos``)
and returns the smallest distance (m) from either arm's tool point (site ``<arm>/tcp``) to the centre of the
object, placed as :func:`~strands_robots.cameras.scene.object_position` places it for the task's parameters and
seed. :func:`with_object_distance` adds it to an observation as ``object_distance_m``, the key a task's
``success_when: "object_distance_m < 0.06"`` judges (the scripted operator, ``station.operator``).
"""

from __future__ import annotations

import threading
from typing import Any, Mapping, Optional

import numpy as np

from strands_robots.cameras.scene import object_position

__all__ = ["DISTANCE_KEY", "ObjectDistance", "object_distance", "with_object_distance"]

DISTANCE_KEY = "object_distance_m"
_ARMS = ("left", "right")
_lock = threading.Lock()
_model: Any = None


def _kinematics() -> Any:
    global _model
    import mujoco

    from strands_robots.arm.model import load_model

    with _lock:
        if _model is None:
            _model = load_model()
        return _model, mujoco


class ObjectDistance:
    """Measures :func:`object_distance` for one task and seed, again and again (the per-step judgement).

    The model's joint map, tool-point sites and the object's place are looked up once, and one ``MjData`` is
    reused: a measure costs one forward-kinematics pass. Not thread-safe (one per episode).
    """

    def __init__(self, task_params: "Optional[Mapping[str, Any]]", seed: "Optional[int]") -> None:
        model, mujoco = _kinematics()
        self._model, self._mujoco = model, mujoco
        self._data = mujoco.MjData(model)
        joints = []
        for jid in range(model.njnt):
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, jid) or ""
            if "/" in name:
                joints.append((name.replace("/", ".", 1) + ".pos", int(model.jnt_qposadr[jid])))
        self._joints = tuple(joints)
        sites = (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, f"{arm}/tcp") for arm in _ARMS)
        self._sites = tuple(sid for sid in sites if sid >= 0)
        self._target = np.asarray(object_position(task_params, seed), dtype=float)

    def __call__(self, observation: Mapping[str, Any]) -> Optional[float]:
        """Return the smallest tool-point-to-object distance (m), or None when the observation holds no joint."""
        data = self._data
        data.qpos[:] = self._model.qpos0
        found = False
        for key, address in self._joints:
            value = observation.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                data.qpos[address] = float(value)
                found = True
        if not found or not self._sites:
            return None
        self._mujoco.mj_kinematics(self._model, data)
        return min(float(np.linalg.norm(data.site_xpos[sid] - self._target)) for sid in self._sites)


def object_distance(observation: Mapping[str, Any], task_params: "Optional[Mapping[str, Any]]",
                    seed: "Optional[int]") -> Optional[float]:
    """Return the smallest tool-point-to-object distance (m), or None when the observation holds no joint."""
    return ObjectDistance(task_params, seed)(observation)


def with_object_distance(observation: Mapping[str, Any], task_params: "Optional[Mapping[str, Any]]",
                         seed: "Optional[int]") -> dict:
    """Return ``observation`` with ``object_distance_m`` (left out when it cannot be measured)."""
    out = dict(observation)
    distance = object_distance(observation, task_params, seed)
    if distance is not None:
        out[DISTANCE_KEY] = distance
    return out
