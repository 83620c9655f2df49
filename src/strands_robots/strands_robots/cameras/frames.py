"""The latest frame of each camera, its age, and the stale rule.

A frame carries the stamp it was taken at, on the clock of whoever reads it (in process: robot time; over ROS:
the image header's stamp, the node clock). At observation time ``now``::

    age = now - stamp
    stale when age > max_age_s (the camera's bound, config/cameras.yaml), or when no frame has come at all

A stale frame is handled as a stale joint reading is (:mod:`strands_robots.rollout.driver_watch` rule 1): the
observation is refused (:class:`CameraStale`, naming the camera, the age and the bound), so it never reaches a
policy or a recording, and the episode ends as an error. An observation holds, per camera ``<name>``:

- ``<name>.image``: the frame, an ``(height, width, 3)`` uint8 array (HWC, RGB);
- ``<name>.image_age_s``: its age at observation time (s, >= 0);
- ``<name>.image_stamp_ns``: its stamp (ns, int).

Observer events carry each camera's stamp and its age in control steps, never pixels (:func:`event_fields`).
No rclpy here.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, MutableMapping

import numpy as np

from strands_robots.cameras.config import CameraConfig

IMAGE_SUFFIX = ".image"
AGE_SUFFIX = ".image_age_s"
STAMP_SUFFIX = ".image_stamp_ns"
_NS = 1_000_000_000


class CameraStale(RuntimeError):
    """A camera's latest frame is older than its bound, or it has sent none (the text names the camera)."""


@dataclass(frozen=True)
class Frame:
    """One frame: the image and the stamp it was taken at (ns)."""

    image: np.ndarray
    stamp_ns: int


def stale_reason(camera: str, age_s: float, max_age_s: float) -> str:
    """Return why a frame of age ``age_s`` must not be used (the stale rule), else empty."""
    if age_s <= max_age_s:
        return ""
    return f"camera {camera} stale: its latest frame is {age_s:.3f} s old (limit {max_age_s:g} s)"


class LatestFrames:
    """The newest frame per camera, written by whoever receives frames and read by the control thread.

    :param cameras: the cameras whose frames every observation must hold.
    """

    def __init__(self, cameras: Iterable[CameraConfig]) -> None:
        self._cameras = tuple(cameras)
        self._lock = threading.Lock()
        self._frames: dict[str, Frame] = {}
        self._arrived = threading.Condition(self._lock)
        self._floor_ns = -(2**63)
        self.refused = {c.name: 0 for c in self._cameras}  # frames the receiver could not use, per camera

    @property
    def cameras(self) -> tuple[CameraConfig, ...]:
        return self._cameras

    def put(self, name: str, image: np.ndarray, stamp_ns: int) -> None:
        """Keep ``image`` as camera ``name``'s latest frame.

        A stamp older than the kept frame's, or than the floor :meth:`discard_before` set, is ignored.
        """
        with self._lock:
            old = self._frames.get(name)
            if stamp_ns < self._floor_ns:
                return
            if old is None or stamp_ns >= old.stamp_ns:
                self._frames[name] = Frame(image, int(stamp_ns))
                self._arrived.notify_all()

    def get(self, name: str) -> "Frame | None":
        with self._lock:
            return self._frames.get(name)

    def clear(self) -> None:
        with self._lock:
            self._frames.clear()

    def discard_before(self, stamp_ns: int) -> None:
        """Forget every frame stamped before ``stamp_ns`` and ignore such frames from now on (a new scene)."""
        with self._lock:
            self._floor_ns = int(stamp_ns)
            for name in [n for n, f in self._frames.items() if f.stamp_ns < self._floor_ns]:
                del self._frames[name]

    def wait_all(self, timeout_s: float) -> bool:
        """Wait until every camera has a frame (at most ``timeout_s``); True when they all have one."""
        with self._lock:
            return self._arrived.wait_for(lambda: all(c.name in self._frames for c in self._cameras),
                                          timeout=max(0.0, float(timeout_s)))

    def add_to(self, observation: MutableMapping[str, Any], now_ns: int) -> None:
        """Add every camera's frame, age and stamp to ``observation`` (see the module docstring).

        :raises CameraStale: a camera has no frame, or its latest one is older than its bound.
        """
        with self._lock:
            frames = dict(self._frames)
        for cam in self._cameras:
            frame = frames.get(cam.name)
            if frame is None:
                raise CameraStale(f"camera {cam.name} stale: no frame has arrived (limit {cam.max_age_s:g} s)")
            age_s = max(0.0, (int(now_ns) - frame.stamp_ns) / _NS)
            why = stale_reason(cam.name, age_s, cam.max_age_s)
            if why:
                raise CameraStale(why)
            observation[cam.name + IMAGE_SUFFIX] = frame.image
            observation[cam.name + AGE_SUFFIX] = age_s
            observation[cam.name + STAMP_SUFFIX] = frame.stamp_ns


def age_steps(age_s: float, period_s: float) -> int:
    """Return a frame age as whole control periods (0 while younger than one period)."""
    if not period_s > 0 or not math.isfinite(age_s):
        return 0
    return max(0, int(math.floor(age_s / period_s + 1e-9)))


def event_fields(observation: Mapping[str, Any], cameras: "tuple[str, ...]", observation_age_steps: int,
                 period_s: float) -> tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]:
    """Return ``(camera_names, camera_stamp_ns, camera_age_steps)`` of a step's observation, for its event.

    ``cameras``: the names whose frames the observation should hold (the backend's ``camera_names``); one
    absent from it is left out. A camera's age in steps is the observation's own age (a reused chunk-start
    observation is older) plus its frame's age when observed, in whole control periods.
    """
    names: list[str] = []
    stamps: list[int] = []
    ages: list[int] = []
    for name in cameras:
        stamp = observation.get(name + STAMP_SUFFIX)
        if stamp is None:
            continue
        names.append(name)
        stamps.append(int(stamp))
        ages.append(int(observation_age_steps) + age_steps(float(observation.get(name + AGE_SUFFIX, 0.0)), period_s))
    return tuple(names), tuple(stamps), tuple(ages)
