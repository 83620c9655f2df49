"""The built-in ``mujoco`` camera adapter: offscreen renders of the MJCF cameras over a mirror of the arms.

The source holds a model and an MjData of its own (never the driver's): :meth:`MujocoCameras.pose` copies the
joint positions it is given into it, :meth:`MujocoCameras.set_scene` places the object
(:mod:`strands_robots.cameras.scene`), and forward kinematics poses the bodies, the wrist camera with its link.
So rendering runs wherever the source lives (the camera node's process) and never inside the physics step.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from strands_robots.cameras.config import CameraSet
from strands_robots.cameras.intrinsics import Intrinsics, from_mjcf
from strands_robots.cameras.render import CameraRenderer
from strands_robots.cameras.scene import covered_cameras, object_position, place_object


def cameras(config: CameraSet, model_path: "str | None" = None) -> "MujocoCameras":
    """Build the ``mujoco`` camera source for ``config`` (entry point of ``strands_robots.cameras``)."""
    return MujocoCameras(config, model_path)


class MujocoCameras:
    """Renders the configured MJCF cameras (implements :class:`~strands_robots.cameras.adapter.CameraSource`).

    Not thread-safe: pose and render from one thread at a time.
    """

    mirrors_arms = True
    """Its frames show the arms as last posed: a caller should pose it from real joint readings before using them."""

    def __init__(self, config: CameraSet, model_path: "str | None" = None) -> None:
        import mujoco

        from strands_robots.arm.model import mjcf_name

        self._config = config
        self._renderer = CameraRenderer(config.cameras, model_path)
        m = self._renderer.model
        self._qadr: dict[str, int] = {}
        for jid in range(m.njnt):
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, jid) or ""
            if "/" in name and m.jnt_type[jid] == mujoco.mjtJoint.mjJNT_HINGE:
                self._qadr[name] = int(m.jnt_qposadr[jid])
        self._mjcf_name = mjcf_name
        self._intrinsics = {c.name: from_mjcf(m, c.mjcf_camera, c.width, c.height) for c in config.cameras}
        self.object_position = object_position(None, None)
        place_object(m, self._renderer.data, self.object_position)
        self._renderer.forward()
        self._dirty = False

    @property
    def gl_line(self) -> str:
        """The log line saying which offscreen OpenGL renders."""
        return self._renderer.gl.line

    @property
    def model(self):
        return self._renderer.model

    def names(self) -> tuple[str, ...]:
        return self._config.names

    def intrinsics(self, name: str) -> Intrinsics:
        return self._intrinsics[name]

    def pose(self, positions: Mapping[str, float]) -> None:
        qpos = self._renderer.data.qpos
        for key, value in positions.items():
            adr = self._qadr.get(self._mjcf_name(key)) if "." in key else None
            if adr is not None:
                qpos[adr] = float(value)
        self._dirty = True

    def set_scene(self, task_params: "Optional[Mapping[str, Any]]", seed: "Optional[int]") -> None:
        """Place the object for the task and seed; cover the lens of the task's ``camera_cover`` cameras."""
        self.object_position = object_position(task_params, seed)
        self.covered = covered_cameras(task_params)
        place_object(self._renderer.model, self._renderer.data, self.object_position)
        self._dirty = True

    covered: frozenset = frozenset()
    """Cameras whose lens the task covers: they render black frames (of their size) until the next scene."""

    def render(self, name: str) -> np.ndarray:
        if name in self.covered:
            c = self._config.camera(name)
            return np.zeros((c.height, c.width, 3), dtype=np.uint8)
        if self._dirty:
            self._renderer.forward()
            self._dirty = False
        return self._renderer.render(name)

    def close(self) -> None:
        self._renderer.close()
