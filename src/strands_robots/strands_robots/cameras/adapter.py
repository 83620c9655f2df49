"""The camera adapter API: what delivers frames for the configured cameras, found through an entry-point group.

A camera source implements :class:`CameraSource`. It is built by a factory ``(cameras: CameraSet,
model_path: str | None) -> CameraSource``, named by the camera node's ``adapter`` parameter (or the camera
file's ``adapter``) and resolved, in order, as the arm hardware adapters are (:mod:`strands_robots.arm.hardware`):

1. a built-in name: ``mujoco`` (offscreen renders of the MJCF cameras, :mod:`~strands_robots.cameras.mujoco_cameras`)
   or ``pattern`` (a generated test pattern, no OpenGL, :mod:`~strands_robots.cameras.pattern`);
2. an entry point of the group ``strands_robots.cameras`` (how a real camera's package plugs in:
   ``entry_points={"strands_robots.cameras": ["my_cam = my_pkg.cam:cameras"]}``);
3. ``module:attribute``, a factory importable by path (tests and experiments).

A simulated source mirrors the arms (:meth:`CameraSource.pose`, from the driver's joint readings) and the scene
(:meth:`CameraSource.set_scene`); a real camera ignores both. No rclpy here.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping, Optional, Protocol, runtime_checkable

import numpy as np

from strands_robots.cameras.config import CameraConfigError, CameraSet
from strands_robots.cameras.intrinsics import Intrinsics

ENTRY_POINT_GROUP = "strands_robots.cameras"
BUILTIN = {
    "mujoco": "strands_robots.cameras.mujoco_cameras:cameras",
    "pattern": "strands_robots.cameras.pattern:cameras",
}


class CameraAdapterError(CameraConfigError):
    """The named camera adapter cannot be found or built (the reason says which and why)."""


@runtime_checkable
class CameraSource(Protocol):
    """Frames of the configured cameras."""

    def names(self) -> tuple[str, ...]:
        """Return the cameras it delivers, in configuration order."""

    def intrinsics(self, name: str) -> Intrinsics:
        """Return camera ``name``'s intrinsics at its configured size."""

    def pose(self, positions: Mapping[str, float]) -> None:
        """Pose the simulated arms: joint positions (rad) by actuator key (``left.joint_1`` ...); real: no-op."""

    def set_scene(self, task_params: "Optional[Mapping[str, Any]]", seed: "Optional[int]") -> None:
        """Lay out the scene for a task and a seed (simulation: the object's place); real: no-op."""

    def render(self, name: str) -> np.ndarray:
        """Return camera ``name``'s current frame, a new ``(height, width, 3)`` uint8 RGB array."""

    def close(self) -> None:
        """Release what it holds (GL contexts, devices)."""


def _import(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _entry_points() -> tuple:
    from importlib.metadata import entry_points

    try:
        return tuple(entry_points(group=ENTRY_POINT_GROUP))
    except Exception:
        return ()


def available() -> tuple[str, ...]:
    """Built-in names and the entry points of the group, for refusal messages."""
    return tuple(sorted(set(BUILTIN) | {ep.name for ep in _entry_points()}))


def resolve(name: str) -> Callable[[CameraSet, "str | None"], Any]:
    """Return the factory named ``name`` (see the module docstring for the order).

    :raises CameraAdapterError: unknown name, or the factory cannot be imported.
    """
    if not isinstance(name, str) or not name.strip():
        raise CameraAdapterError("camera adapter must name an adapter, e.g. 'mujoco' or 'pattern'")
    name = name.strip()
    try:
        if name in BUILTIN:
            return _import(BUILTIN[name])
        for ep in _entry_points():
            if ep.name == name:
                return ep.load()
        if ":" in name:
            return _import(name)
    except (ImportError, AttributeError) as exc:
        raise CameraAdapterError(f"camera adapter {name!r} cannot be loaded: {type(exc).__name__}: {exc}") from exc
    raise CameraAdapterError(f"unknown camera adapter {name!r}: not built in, not an entry point of "
                             f"{ENTRY_POINT_GROUP!r} (known: {', '.join(available())}) and not module:factory")


def load(cameras: CameraSet, model_path: "str | None" = None, adapter: str = "") -> CameraSource:
    """Build the camera source for ``cameras`` with ``adapter`` (empty: the set's own adapter).

    :raises CameraAdapterError: unknown adapter, the factory failed, or it built no camera source for every
        configured camera.
    """
    name = adapter or cameras.adapter
    factory = resolve(name)
    try:
        built = factory(cameras, model_path)
    except CameraConfigError:
        raise
    except Exception as exc:
        raise CameraAdapterError(f"camera adapter {name!r} failed to start: {type(exc).__name__}: {exc}") from exc
    if not isinstance(built, CameraSource):
        raise CameraAdapterError(f"camera adapter {name!r} built a {type(built).__name__}, not a CameraSource")
    missing = [n for n in cameras.names if n not in built.names()]
    if missing:
        built.close()
        raise CameraAdapterError(f"camera adapter {name!r} does not deliver cameras {missing}")
    return built
