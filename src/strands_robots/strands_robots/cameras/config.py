"""The camera set: which cameras a station has, their size and rate, and how old a frame may be.

``config/cameras.yaml``::

    adapter: mujoco                 # camera adapter (strands_robots.cameras.adapter): mujoco, pattern, ...
    cameras:
      scene: {mjcf_camera: scene, width: 224, height: 224, fps: 15}
      wrist: {mjcf_camera: right/wrist, width: 224, height: 224, fps: 15, max_age_s: 0.5}

A camera's name is its topic name (``<ns>/<name>/image_raw``) and its observation key (``<name>.image``), so it
is a ROS name token. ``max_age_s`` is the stale bound (:mod:`strands_robots.cameras.frames`): a frame older than
it is never handed to a policy. It must be at least one frame period, or every frame between two renders would
be stale. Every value is checked here; a bad one is one :class:`CameraConfigError` line naming the field.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import yaml

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
SIZE_MIN, SIZE_MAX = 16, 4096
FPS_MIN, FPS_MAX = 0.1, 120.0
MAX_AGE_MAX_S = 60.0
DEFAULT_MAX_AGE_S = 0.5
JPEG_QUALITY_MIN, JPEG_QUALITY_MAX = 1, 95
DEFAULT_JPEG_QUALITY = 90
MAX_CAMERAS = 16
_CAMERA_KEYS = ("mjcf_camera", "width", "height", "fps", "max_age_s", "jpeg_quality")
_TOP_KEYS = ("adapter", "cameras")


class CameraConfigError(ValueError):
    """A camera configuration value is refused (one line naming the field, the value and what is allowed)."""


def default_config_path() -> str:
    """Return the package's ``config/cameras.yaml`` (installed or in the checkout: :mod:`strands_robots.package_files`).

    :raises CameraConfigError: the package's camera file is nowhere (the line names where it was looked for).
    """
    from strands_robots.package_files import PackageFileNotFound, config_path

    try:
        return config_path("cameras.yaml")
    except PackageFileNotFound as exc:
        raise CameraConfigError(str(exc)) from None


@dataclass(frozen=True)
class CameraConfig:
    """One camera.

    :param name: topic and observation name (``scene`` → ``<ns>/scene/image_raw``, ``scene.image``).
    :param mjcf_camera: the MJCF ``<camera name=...>`` it renders (simulated cameras; a real adapter may ignore
        it).
    :param width: image width in pixels.
    :param height: image height in pixels.
    :param fps: frames per second it renders (or a real camera delivers).
    :param max_age_s: a frame older than this is stale (never given to a policy).
    :param jpeg_quality: quality of its ``image_raw/compressed`` JPEG (1..95).
    """

    name: str
    mjcf_camera: str
    width: int
    height: int
    fps: float
    max_age_s: float = DEFAULT_MAX_AGE_S
    jpeg_quality: int = DEFAULT_JPEG_QUALITY

    def __post_init__(self) -> None:
        where = f"cameras.{self.name}" if isinstance(self.name, str) else "cameras"
        if not isinstance(self.name, str) or not NAME_PATTERN.match(self.name):
            raise CameraConfigError(f"camera name {self.name!r} refused: allowed: lower-case letters, digits and _, "
                                    "starting with a letter, at most 32 characters")
        if not isinstance(self.mjcf_camera, str) or not self.mjcf_camera.strip() or len(self.mjcf_camera) > 128:
            raise CameraConfigError(f"{where}.mjcf_camera {self.mjcf_camera!r} refused: allowed: the name of an MJCF "
                                    "camera (1..128 characters)")
        for field, value in (("width", self.width), ("height", self.height)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not SIZE_MIN <= value <= SIZE_MAX:
                raise CameraConfigError(f"{where}.{field} {value!r} refused: allowed: an integer in "
                                        f"[{SIZE_MIN}, {SIZE_MAX}] pixels")
        object.__setattr__(self, "width", int(self.width))
        object.__setattr__(self, "height", int(self.height))
        fps = _number(where, "fps", self.fps)
        if not FPS_MIN <= fps <= FPS_MAX:
            raise CameraConfigError(f"{where}.fps {self.fps!r} refused: allowed: [{FPS_MIN:g}, {FPS_MAX:g}] Hz")
        object.__setattr__(self, "fps", fps)
        age = _number(where, "max_age_s", self.max_age_s)
        if not (1.0 / fps) <= age <= MAX_AGE_MAX_S:
            raise CameraConfigError(f"{where}.max_age_s {self.max_age_s!r} refused: allowed: [{1.0 / fps:g} (one frame "
                                    f"period at {fps:g} fps), {MAX_AGE_MAX_S:g}] s")
        object.__setattr__(self, "max_age_s", age)
        q = self.jpeg_quality
        if isinstance(q, bool) or not isinstance(q, numbers.Integral) or not JPEG_QUALITY_MIN <= q <= JPEG_QUALITY_MAX:
            raise CameraConfigError(f"{where}.jpeg_quality {q!r} refused: allowed: an integer in "
                                    f"[{JPEG_QUALITY_MIN}, {JPEG_QUALITY_MAX}]")
        object.__setattr__(self, "jpeg_quality", int(q))

    @property
    def period_s(self) -> float:
        return 1.0 / self.fps


def _number(where: str, field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise CameraConfigError(f"{where}.{field} {value!r} refused: allowed: a finite number")
    return float(value)


@dataclass(frozen=True)
class CameraSet:
    """The configured cameras, in file order, and the adapter that delivers their frames."""

    adapter: str
    cameras: tuple[CameraConfig, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.adapter, str) or not self.adapter.strip() or len(self.adapter) > 200:
            raise CameraConfigError(f"adapter {self.adapter!r} refused: allowed: an adapter name, e.g. mujoco")
        names = [c.name for c in self.cameras]
        if len(set(names)) != len(names):
            raise CameraConfigError(f"cameras {names} refused: a name appears twice")
        if len(names) > MAX_CAMERAS:
            raise CameraConfigError(f"{len(names)} cameras refused: allowed: at most {MAX_CAMERAS}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.cameras)

    def camera(self, name: str) -> CameraConfig:
        for c in self.cameras:
            if c.name == name:
                return c
        raise CameraConfigError(f"no camera named {name!r}; cameras: {', '.join(self.names) or '(none)'}")

    def select(self, names: Iterable[str]) -> "CameraSet":
        """Return the set holding only ``names`` (in the given order); an empty selection keeps every camera.

        :raises CameraConfigError: a name is not configured.
        """
        wanted = [str(n) for n in names]
        if not wanted:
            return self
        return CameraSet(self.adapter, tuple(self.camera(n) for n in wanted))

    def with_adapter(self, adapter: str) -> "CameraSet":
        """Return the set with another adapter (empty: keep this one)."""
        return self if not adapter else CameraSet(adapter, self.cameras)


def parse_camera_set(data: Any, source: str = "camera config") -> CameraSet:
    """Build a :class:`CameraSet` from the parsed YAML mapping (see the module docstring).

    :raises CameraConfigError: unknown keys, missing fields or refused values (one line).
    """
    if not isinstance(data, Mapping):
        raise CameraConfigError(f"{source}: expected a mapping with 'adapter' and 'cameras', got "
                                f"{type(data).__name__}")
    unknown = sorted(set(map(str, data)) - set(_TOP_KEYS))
    if unknown:
        raise CameraConfigError(f"{source}: unknown keys {unknown}; allowed: {', '.join(_TOP_KEYS)}")
    cams = data.get("cameras") or {}
    if not isinstance(cams, Mapping):
        raise CameraConfigError(f"{source}: 'cameras' must map camera names to their settings")
    built = []
    for name, settings in cams.items():
        if not isinstance(settings, Mapping):
            raise CameraConfigError(f"{source}: cameras.{name} must be a mapping of "
                                    f"{', '.join(_CAMERA_KEYS)}")
        bad = sorted(set(map(str, settings)) - set(_CAMERA_KEYS))
        if bad:
            raise CameraConfigError(f"{source}: cameras.{name}: unknown keys {bad}; allowed: {', '.join(_CAMERA_KEYS)}")
        missing = [k for k in ("mjcf_camera", "width", "height", "fps") if k not in settings]
        if missing:
            raise CameraConfigError(f"{source}: cameras.{name}: missing {', '.join(missing)}")
        built.append(CameraConfig(name=name, **{k: settings[k] for k in _CAMERA_KEYS if k in settings}))
    return CameraSet(str(data.get("adapter", "mujoco")), tuple(built))


def load_camera_set(path: "str | None" = None) -> CameraSet:
    """Read a camera file (default: the package's ``config/cameras.yaml``, :func:`default_config_path`).

    :raises CameraConfigError: unreadable file or a refused value.
    """
    path = path or default_config_path()
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise CameraConfigError(f"camera config {path}: cannot be read: {type(exc).__name__}: {exc}") from None
    return parse_camera_set(data, f"camera config {path}")


def load_cameras(cameras_file: str, names: str) -> CameraSet:
    """Return the cameras a node runs: the file's (empty: the package's), only ``names`` (comma-separated) if given.

    :raises CameraConfigError: an unreadable file, a refused value, or a name the file does not configure.
    """
    cameras = load_camera_set(cameras_file or None)
    return cameras.select([n.strip() for n in names.split(",") if n.strip()])


def cameras_refusal(cameras_file: str, cameras: str) -> str:
    """Say in one line why a camera file (empty: the package's) or the cameras named from it are refused; "" if fine.

    The check the camera node makes at start (every value of the file, every name configured in it), made by the
    launch files before any node starts (launch_support.check_cameras).
    """
    path = cameras_file
    try:
        path = cameras_file or default_config_path()
        load_camera_set(path).select([n.strip() for n in cameras.split(",") if n.strip()])
    except CameraConfigError as exc:
        return f"camera file {path or 'config/cameras.yaml'} (cameras {cameras!r}): {exc}"
    return ""
