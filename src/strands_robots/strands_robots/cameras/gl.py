"""Which offscreen OpenGL renders here: EGL (Mesa, software-rendered on this machine), else OSMesa.

MuJoCo picks its GL context class once, when ``mujoco`` is first imported, from ``MUJOCO_GL``. The choice:

1. ``MUJOCO_GL`` set to ``egl`` or ``osmesa``: that one (the operator said so);
2. otherwise each of ``egl``, ``osmesa`` in turn is tried in a short child process (a failed EGL start can
   leave a process unable to try another platform, since PyOpenGL binds its platform once), and the first that
   makes a context current wins.

:func:`select` returns the choice and the one log line saying which and why; :func:`context_class` the
``GLContext`` class of that backend, which :mod:`strands_robots.cameras.render` hands to ``mujoco.Renderer``
also when ``mujoco`` was imported before the choice. No rclpy here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass

BACKENDS = ("egl", "osmesa")
_PROBE = ("import sys\nfrom mujoco.{b} import GLContext\nc = GLContext(8, 8)\nc.make_current()\nc.free()\n"
          "print('ok')\n")
_PROBE_TIMEOUT_S = 60.0


class NoOffscreenGL(RuntimeError):
    """Neither EGL nor OSMesa can make an OpenGL context here (the text says what each answered)."""


@dataclass(frozen=True)
class GLChoice:
    """The chosen backend and the log line saying so."""

    backend: str
    line: str


_lock = threading.Lock()
_choice: "GLChoice | None" = None


def probe(backend: str, timeout_s: float = _PROBE_TIMEOUT_S) -> str:
    """Try ``backend`` in a child process; return empty when it made a context current, else why not."""
    env = dict(os.environ, MUJOCO_GL=backend)
    env.pop("PYOPENGL_PLATFORM", None)
    try:
        # A session of its own: a terminal's Ctrl-C meant for the node must not fail the probe (and pick the
        # slower backend on the way out).
        out = subprocess.run([sys.executable, "-c", _PROBE.format(b=backend)], env=env, capture_output=True,
                             text=True, timeout=timeout_s, start_new_session=True)
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout_s:g} s"
    if out.returncode == 0 and out.stdout.strip().endswith("ok"):
        return ""
    last = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
    return last[:200]


def select() -> GLChoice:
    """Choose the backend once per process (see the module docstring) and set ``MUJOCO_GL`` to it.

    :raises NoOffscreenGL: neither backend works (or ``MUJOCO_GL`` names another one).
    """
    global _choice
    with _lock:
        if _choice is not None:
            return _choice
        asked = os.environ.get("MUJOCO_GL", "").strip().lower()
        if asked:
            if asked not in BACKENDS:
                raise NoOffscreenGL(f"MUJOCO_GL={asked!r} is not an offscreen backend; use egl or osmesa "
                                    "(or leave it unset to detect)")
            _choice = GLChoice(asked, f"offscreen rendering: {asked} (MUJOCO_GL={asked})")
            return _choice
        answers = []
        for backend in BACKENDS:
            why = probe(backend)
            if not why:
                tried = "; ".join(answers)
                _choice = GLChoice(backend, f"offscreen rendering: {backend} (detected"
                                            + (f"; {tried})" if tried else ")"))
                os.environ["MUJOCO_GL"] = backend
                return _choice
            answers.append(f"{backend} failed: {why}")
        raise NoOffscreenGL("no offscreen OpenGL: " + "; ".join(answers)
                            + " (Debian: apt-get install libegl1 libgl1-mesa-dri, or libosmesa6)")


def context_class(backend: str):
    """Return the ``GLContext`` class of ``backend`` (``mujoco.egl`` or ``mujoco.osmesa``)."""
    if backend == "egl":
        from mujoco.egl import GLContext
    elif backend == "osmesa":
        from mujoco.osmesa import GLContext
    else:
        raise NoOffscreenGL(f"unknown offscreen backend {backend!r}; use egl or osmesa")
    return GLContext
