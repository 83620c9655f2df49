"""VisionReachPolicy: finds the red cube in the scene camera's image (numpy, no ML) and reaches toward it.

A policy that can only do its task by looking: the cube's place is never in the observation's numbers (it varies
with the task's ``object_x`` / ``object_y`` and the seed, :mod:`strands_robots.cameras.scene`), only in the
pixels of ``<camera>.image``. On its first observation it:

1. finds the cube: the pixels that are clearly red (``r > 80`` and more than three times ``g`` and ``b``: not
   the right arm's orange); the centroid of those near their median (JPEG ringing strays left out), when at
   least :data:`MIN_PIXELS` are found (:func:`find_object`);
2. casts the centroid's ray from the calibrated scene camera (:data:`SCENE_CAMERA`, the demo station's MJCF
   ``scene`` camera: pose and ``fovy``; the image may be any size, the intrinsics scale with it) onto the
   plane of the cube's top (:func:`pixel_to_table`);
3. picks the arm whose base is nearer and solves its joint targets so the tool point (``<arm>/tcp``) ends just
   above the cube (:func:`reach_joints`: base yaw toward it, a planar shoulder/elbow/wrist solution with the
   wrist clear of the cable bracket);
4. ramps that arm's joints from where they are to those targets over ``ramp_s`` (every other key held).

When no red is seen (a covered lens: ``camera_cover``) it holds every joint where it is, so the task fails.
It is the ``scripted`` provider's mode ``vision_reach`` (options ``camera``, ``ramp_s``, ``end_after_steps``,
``action_horizon``), so a job file selects it per task with ``policy.mode: vision_reach``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence, Tuple

import numpy as np

from strands_robots.policies import options as opt
from strands_robots.policies.base import EndEpisode

__all__ = ["VisionReachPolicy", "find_object", "pixel_to_table", "reach_joints", "SCENE_CAMERA", "MIN_PIXELS"]

#: The demo station's scene camera (arm/assets/two_arms.xml ``scene``): position (m), MJCF xyaxes, fovy (deg).
SCENE_CAMERA = {"pos": (1.5, 0.0, 1.2), "xyaxes": (0.0, 1.0, 0.0, -1.0, 0.0, 1.2), "fovy_deg": 45.0}
MIN_PIXELS = 3             # at 96x96 a JPEG frame keeps about 4 clearly red pixels of the cube
BLOB_RADIUS_PX = 12       # the cube's blob around the red pixels' median, in pixels of a 224-wide image
TABLE_Z = 0.025           # the plane of the cube's centre: its visible faces (top and front) centre near it
TCP_Z = 0.055             # where the tool point goes: just above the cube's top
ARM_BASE_Y = {"left": 0.3, "right": -0.3}
SHOULDER_Z = 0.13         # joint_2 above the table (base 0.06 + link_1 0.07)
UPPER, FORE, TOOL = 0.25, 0.2, 0.19   # joint_2 -> joint_3 -> joint_4 -> tcp (m)
WRIST_MAX = 1.25          # joint_4 stays below the cable bracket (~1.4 rad)
_LIMITS = {"joint_1": (-2.8, 2.8), "joint_2": (-1.8, 1.8), "joint_3": (-2.4, 2.4), "joint_4": (-2.0, WRIST_MAX)}
PROVIDER = "scripted"


def find_object(image: np.ndarray) -> Optional[Tuple[float, float]]:
    """Return the red object's pixel centroid ``(u, v)`` (u right, v down) in an HWC uint8 image, or None."""
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] < 3:
        return None
    rgb = image[..., :3].astype(np.int16)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    mask = (r > 80) & (r > 3 * g) & (r > 3 * b)  # the cube's red, not the right arm's orange (r ~ 2 g)
    count = int(mask.sum())
    if count < MIN_PIXELS:
        return None
    vs, us = np.nonzero(mask)
    # The cube is one blob; JPEG ringing turns a few dark orange pixels elsewhere "red": keep the pixels near the
    # median (robust to those), then take their centroid.
    mu, mv = np.median(us), np.median(vs)
    radius = max(3.0, BLOB_RADIUS_PX * image.shape[1] / 224.0)
    near = (np.abs(us - mu) <= radius) & (np.abs(vs - mv) <= radius)
    if int(near.sum()) < MIN_PIXELS:
        return None
    return float(us[near].mean()), float(vs[near].mean())


def _camera_axes(camera: Mapping[str, Any]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    xy = np.asarray(camera["xyaxes"], dtype=float)
    x = xy[:3] / np.linalg.norm(xy[:3])
    y = xy[3:] - x * float(np.dot(xy[3:], x))
    y /= np.linalg.norm(y)
    return x, y, np.cross(x, y)


def pixel_to_table(u: float, v: float, width: int, height: int, z: float = TABLE_Z,
                   camera: Mapping[str, Any] = SCENE_CAMERA) -> Tuple[float, float]:
    """Return where the ray of pixel ``(u, v)`` of a ``width`` x ``height`` image meets the plane at height ``z``.

    The camera looks along its -z axis, x to the image's right, y up (MuJoCo's convention); square pixels, the
    vertical field of view ``fovy_deg``.
    """
    x_axis, y_axis, z_axis = _camera_axes(camera)
    f = (height / 2.0) / math.tan(math.radians(camera["fovy_deg"]) / 2.0)
    direction = (x_axis * ((u + 0.5) - width / 2.0) / f - y_axis * ((v + 0.5) - height / 2.0) / f - z_axis)
    origin = np.asarray(camera["pos"], dtype=float)
    if abs(direction[2]) < 1e-9:
        raise ValueError("the pixel's ray is parallel to the table")
    t = (z - origin[2]) / direction[2]
    point = origin + t * direction
    return float(point[0]), float(point[1])


def reach_joints(x: float, y: float, arm: str) -> Optional[dict]:
    """Return ``{joint_1..joint_4: rad}`` putting ``arm``'s tool point just above ``(x, y)``, or None out of reach.

    The wrist points as steeply down as the reach allows (from straight down toward horizontal), elbow up, and
    joint_4 stays below :data:`WRIST_MAX` (clear of the cable bracket).
    """
    dx, dy = x, y - ARM_BASE_Y[arm]
    yaw = math.atan2(dy, dx)
    r = math.hypot(dx, dy)
    for step in range(0, 91):
        phi = math.pi - math.radians(step)          # the tool's direction from vertical (pi: straight down)
        wr, wz = r - TOOL * math.sin(phi), TCP_Z - TOOL * math.cos(phi)
        dr, dz = wr, wz - SHOULDER_Z
        d = math.hypot(dr, dz)
        if d >= UPPER + FORE - 1e-6 or d <= abs(UPPER - FORE) + 1e-6:
            continue
        gamma = math.atan2(dr, dz)
        beta = math.acos((UPPER ** 2 + d ** 2 - FORE ** 2) / (2 * UPPER * d))
        elbow = math.acos((d ** 2 - UPPER ** 2 - FORE ** 2) / (2 * UPPER * FORE))
        shoulder = gamma - beta
        wrist = phi - shoulder - elbow
        joints = {"joint_1": yaw, "joint_2": shoulder, "joint_3": elbow, "joint_4": wrist}
        if all(lo <= joints[k] <= hi for k, (lo, hi) in _LIMITS.items()):
            return joints
    return None


class VisionReachPolicy:
    """Find the cube, reach toward it (see the module docstring).

    Options: ``camera`` (default ``scene``), ``ramp_s`` (default 1.5 s), ``end_after_steps`` (emit that many
    actions, then ``EndEpisode``), ``action_horizon``.
    """

    never_blocks = True

    def __init__(self, camera: str = "scene", ramp_s: float = 1.5, end_after_steps: Optional[int] = None,
                 action_horizon: Optional[int] = None) -> None:
        self.camera = str(camera)
        if not ramp_s > 0:
            raise ValueError(f"{PROVIDER} policy (vision_reach): ramp_s must be > 0")
        self.ramp_s = float(ramp_s)
        self._end_after = end_after_steps
        self._horizon = action_horizon
        self._task: Optional[Mapping[str, Any]] = None
        self.seen: Optional[Tuple[float, float]] = None  # the table point the cube was found at
        self.arm = ""

    def reset(self, task: Mapping[str, Any]) -> None:
        self._keys = opt.action_keys(PROVIDER, task)
        self._limits = opt.joint_limits(PROVIDER, task)
        self._chunk_len = opt.action_horizon(PROVIDER, self._horizon, task)
        self._ramp_steps = max(1, round(self.ramp_s * float(task.get("control_frequency") or 50.0)))
        self._task = task
        self._start: Optional[dict] = None
        self._goal: dict = {}
        self._k = 0
        self._emitted = 0
        self.seen, self.arm = None, ""

    def _plan(self, observation: Mapping[str, Any]) -> None:
        self._start = {k: opt.observed_position(observation, k, self._limits) for k in self._keys}
        self._k = 0
        self._goal = {}
        image = observation.get(f"{self.camera}.image")
        found = find_object(image) if isinstance(image, np.ndarray) else None
        if found is None:
            return
        h, w = image.shape[:2]
        x, y = pixel_to_table(found[0], found[1], w, h)
        self.seen = (x, y)
        arm = "left" if y >= 0.0 else "right"
        joints = reach_joints(x, y, arm)
        if joints is None:
            return
        self.arm = arm
        self._goal = {f"{arm}.{name}": value for name, value in joints.items() if f"{arm}.{name}" in self._start}

    def act(self, observation: Mapping[str, Any]) -> Sequence[Mapping[str, float]]:
        if self._task is None:
            raise RuntimeError("VisionReachPolicy.act called before reset(task)")
        n = self._chunk_len
        if self._end_after is not None:
            if self._emitted >= self._end_after:
                raise EndEpisode(f"vision_reach completed after {self._emitted} actions")
            n = min(n, self._end_after - self._emitted)
        if self._start is None or (not self._goal and self._k == 0):
            self._plan(observation)  # until the cube is seen, look again at every chunk
        assert self._start is not None
        chunk = []
        for _ in range(n):
            if self._goal:
                self._k += 1
            s = min(1.0, self._k / self._ramp_steps)
            s = s * s * (3.0 - 2.0 * s)  # smooth start and stop: no velocity step at either end
            action = dict(self._start)
            for key, target in self._goal.items():
                action[key] = self._start[key] + (target - self._start[key]) * s
            chunk.append(action)
        self._emitted += n
        return chunk

    def resume(self, observation: Mapping[str, Any]) -> None:
        if self._task is None:
            raise RuntimeError("VisionReachPolicy.resume called before reset(task)")
        self._start = None
