"""An MJCF camera's vertical field of view and image size as the numbers of a ``sensor_msgs/CameraInfo``.

MuJoCo renders a pinhole camera with a symmetric frustum: square pixels, the principal point in the middle of
the image, no distortion. With ``fovy`` the full vertical angle::

    fx = fy = (height / 2) / tan(fovy / 2)
    cx = (width - 1) / 2,  cy = (height - 1) / 2     (pixel centres at integer coordinates, as ROS and OpenCV
                                                     count them; the same matrix as dm_control's Camera.matrix)

``K = [fx 0 cx; 0 fy cy; 0 0 1]``, ``P = [K | 0]``, ``R = I``, ``D = 0`` (``plumb_bob``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DISTORTION_MODEL = "plumb_bob"


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics of one camera at one image size."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @property
    def k(self) -> tuple[float, ...]:
        """Row-major 3x3 camera matrix (CameraInfo.k)."""
        return (self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0)

    @property
    def p(self) -> tuple[float, ...]:
        """Row-major 3x4 projection matrix (CameraInfo.p), a monocular camera: ``[K | 0]``."""
        return (self.fx, 0.0, self.cx, 0.0, 0.0, self.fy, self.cy, 0.0, 0.0, 0.0, 1.0, 0.0)

    @property
    def r(self) -> tuple[float, ...]:
        """Rectification rotation (CameraInfo.r): the identity."""
        return (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)

    @property
    def d(self) -> tuple[float, ...]:
        """Distortion (CameraInfo.d, plumb_bob): none."""
        return (0.0, 0.0, 0.0, 0.0, 0.0)

    @property
    def fovy_deg(self) -> float:
        """The vertical field of view these numbers stand for (degrees)."""
        return math.degrees(2.0 * math.atan((self.height / 2.0) / self.fy))


def from_fovy(fovy_deg: float, width: int, height: int) -> Intrinsics:
    """Return the intrinsics of a camera with vertical field of view ``fovy_deg`` rendering ``width x height``.

    :raises ValueError: ``fovy_deg`` outside (0, 180) or a size below 1.
    """
    fovy = float(fovy_deg)
    if not 0.0 < fovy < 180.0 or not math.isfinite(fovy):
        raise ValueError(f"fovy {fovy_deg!r} refused: allowed: (0, 180) degrees")
    if width < 1 or height < 1:
        raise ValueError(f"image size {width}x{height} refused: allowed: at least 1x1")
    f = (height / 2.0) / math.tan(math.radians(fovy) / 2.0)
    return Intrinsics(int(width), int(height), f, f, (width - 1) / 2.0, (height - 1) / 2.0)


def mjcf_fovy_deg(model, camera: str) -> float:
    """Return the ``fovy`` (degrees) of the MJCF camera ``camera`` of a compiled ``mujoco.MjModel``.

    :raises ValueError: the model has no such camera.
    """
    import mujoco

    cid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    if cid < 0:
        names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(model.ncam)]
        raise ValueError(f"the MJCF has no camera {camera!r}; cameras: {', '.join(map(str, names)) or '(none)'}")
    return float(model.cam_fovy[cid])


def from_mjcf(model, camera: str, width: int, height: int) -> Intrinsics:
    """Return the intrinsics of MJCF camera ``camera`` rendered at ``width x height``."""
    return from_fovy(mjcf_fovy_deg(model, camera), width, height)
