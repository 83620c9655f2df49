"""Offscreen MuJoCo rendering of the configured cameras over a model and an MjData of the renderer's own.

One ``mujoco.Renderer`` per camera (its size). An OpenGL context is current on one thread at a time, so each
render binds its camera's context and releases it after: any thread may render, one at a time (the camera
node's render thread, or whichever thread runs an in-process rollout). Sites are not drawn. The scene flags
that cost most in software rendering (shadow maps, reflections, multisampling) are off: with Mesa's llvmpipe
they took a 224x224 frame from about 2 ms to about 100 ms here. The caller poses ``CameraRenderer.data``
(then :meth:`CameraRenderer.forward`) and asks for frames.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from strands_robots.cameras import gl
from strands_robots.cameras.config import CameraConfig


def _release_current(backend: str) -> None:
    """Make no OpenGL context current on this thread (so another thread may make one of ours current)."""
    if backend == "egl":
        import mujoco.egl as egl

        if egl.EGL_DISPLAY is not None:
            egl.EGL.eglMakeCurrent(egl.EGL_DISPLAY, egl.EGL.EGL_NO_SURFACE, egl.EGL.EGL_NO_SURFACE,
                                   egl.EGL.EGL_NO_CONTEXT)
    elif backend == "osmesa":
        import mujoco.osmesa as osm

        osm.osmesa.OSMesaMakeCurrent(None, None, osm.GL.GL_FLOAT, 0, 0)


def _use_context_class(backend: str) -> None:
    """Make ``mujoco.Renderer`` create ``backend`` contexts, whatever ``MUJOCO_GL`` was at ``import mujoco``."""
    from mujoco.rendering.classic import gl_context

    wanted = gl.context_class(backend)
    if getattr(gl_context, "GLContext", None) is not wanted:
        gl_context.GLContext = wanted


class CameraRenderer:
    """Renders the MJCF cameras named by ``cameras`` from the model at ``model_path``.

    :param cameras: the cameras (each names its MJCF camera and size).
    :param model_path: the MJCF (default: the bundled two-arm model).
    :raises ValueError: a camera's MJCF camera is not in the model.
    :raises NoOffscreenGL: no offscreen OpenGL here.
    """

    def __init__(self, cameras: Iterable[CameraConfig], model_path: "str | None" = None) -> None:
        import mujoco

        from strands_robots.arm.model import load_model
        from strands_robots.cameras.intrinsics import mjcf_fovy_deg

        self.gl = gl.select()
        _use_context_class(self.gl.backend)
        self._mujoco = mujoco
        self.model = load_model(model_path)
        self.data = mujoco.MjData(self.model)
        self._cameras = {c.name: c for c in cameras}
        m = self.model
        for c in self._cameras.values():
            mjcf_fovy_deg(m, c.mjcf_camera)  # refuses an unknown MJCF camera, naming the ones there are
        if self._cameras:
            m.vis.global_.offwidth = max(int(m.vis.global_.offwidth), *(c.width for c in self._cameras.values()))
            m.vis.global_.offheight = max(int(m.vis.global_.offheight), *(c.height for c in self._cameras.values()))
        m.vis.quality.offsamples = 0
        self._option = mujoco.MjvOption()
        self._option.sitegroup[:] = 0  # sites (the tool points) are markers, not things a camera sees
        self._renderers = {}
        try:
            for name, c in self._cameras.items():
                r = mujoco.Renderer(m, height=c.height, width=c.width)
                for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
                    r.scene.flags[flag] = 0
                self._renderers[name] = r
        except Exception:
            self.close()
            raise
        _release_current(self.gl.backend)  # each render binds its context and lets it go (any thread may render)
        mujoco.mj_forward(m, self.data)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._cameras)

    def forward(self) -> None:
        """Recompute positions after the caller changed ``data.qpos`` / ``data.mocap_pos``."""
        self._mujoco.mj_forward(self.model, self.data)

    def render(self, name: str) -> np.ndarray:
        """Return camera ``name``'s view of the current pose: a new ``(height, width, 3)`` uint8 array."""
        r = self._renderers[name]
        r.update_scene(self.data, camera=self._cameras[name].mjcf_camera, scene_option=self._option)
        context = getattr(r, "_gl_context", None)  # mujoco's own; bound for this call only, then released
        if context is None:
            return r.render()
        with context.as_current():
            return r.render()  # a fresh array per call

    def close(self) -> None:
        for r in self._renderers.values():
            try:
                r.close()
            except Exception:
                pass
        self._renderers = {}
