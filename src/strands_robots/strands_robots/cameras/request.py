"""What a job's policy gets of the cameras through the relay: which cameras, at what size, encoded how.

A task says it in three task parameters (checked by :mod:`strands_robots.validation` at submit, by the relay,
the station and the rollout; a job file may set them once for every task, ``images:`` in
:mod:`strands_robots.station.job_file`):

- ``cameras``: comma-separated ``<camera>`` or ``<camera>:<width>x<height>``, e.g. ``scene:224x224,wrist``
  (a camera without a size goes at the size it is rendered); ``none``: no camera. Absent: every camera the
  station's observations hold, at their own size;
- ``image_format``: ``jpeg`` (default) or ``png``;
- ``image_quality``: the JPEG quality, 1..95 (default 90).

:func:`image_request` reads them; :func:`encode_observation` (the station's side of the relay,
``policies/relay.py``) replaces each ``<camera>.image`` the task asks for by an
:class:`~strands_robots.client.images.EncodedImage` at the asked size, and leaves out the image, age and stamp of
every camera it does not ask for. Importing this module loads neither numpy nor Pillow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from strands_robots.cameras.frames import AGE_SUFFIX, IMAGE_SUFFIX, STAMP_SUFFIX

__all__ = ["PARAM_CAMERAS", "PARAM_FORMAT", "PARAM_QUALITY", "PARAM_COVER", "CameraRequest", "ImageRequest",
           "CameraRequestError", "parse_cameras", "parse_camera_names", "image_request", "encode_observation",
           "SIZE_RANGE", "DEFAULT_QUALITY"]

PARAM_CAMERAS = "cameras"
PARAM_FORMAT = "image_format"
PARAM_QUALITY = "image_quality"
PARAM_COVER = "camera_cover"
SIZE_RANGE = (8, 4096)
DEFAULT_FORMAT = "jpeg"
DEFAULT_QUALITY = 90
NONE = "none"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_ENTRY = re.compile(r"([^:]+)(?::(\d+)x(\d+))?")
_IMAGE, _AGE, _STAMP = IMAGE_SUFFIX, AGE_SUFFIX, STAMP_SUFFIX  # the observation's camera keys (frames.py)


class CameraRequestError(ValueError):
    """A camera selection that cannot be read; the message says which entry and why."""


@dataclass(frozen=True)
class CameraRequest:
    """One camera the policy gets; ``size`` is ``(width, height)``, None for the size it is rendered at."""

    name: str
    size: Optional[Tuple[int, int]] = None


@dataclass(frozen=True)
class ImageRequest:
    """The cameras a task's policy gets (None: every camera of the observation, unresized) and their encoding."""

    cameras: Optional[Tuple[CameraRequest, ...]] = None
    format: str = DEFAULT_FORMAT
    quality: int = DEFAULT_QUALITY


def _name(text: str, what: str) -> str:
    if not _NAME.fullmatch(text):
        raise CameraRequestError(f"{what}: {text!r} is not a camera name (a letter, then letters, digits or _; "
                                 "at most 64)")
    return text


def parse_cameras(text: str) -> Tuple[CameraRequest, ...]:
    """Read a ``cameras`` value: ``none``, or comma-separated ``<camera>[:<width>x<height>]``.

    :raises CameraRequestError: an empty entry, a bad name or size, a size outside 8..4096, a camera named twice.
    """
    if not isinstance(text, str) or not text.strip():
        raise CameraRequestError(f"names no camera (write {NONE!r} for none, or e.g. 'scene:224x224,wrist')")
    if text.strip().lower() == NONE:
        return ()
    out, seen = [], set()
    lo, hi = SIZE_RANGE
    for raw in text.split(","):
        entry = raw.strip()
        match = _ENTRY.fullmatch(entry)
        if not entry or match is None:
            raise CameraRequestError(f"entry {entry!r}: expected <camera> or <camera>:<width>x<height>, "
                                     "e.g. scene:224x224")
        name = _name(match.group(1).strip(), f"entry {entry!r}")
        size = None
        if match.group(2) is not None:
            size = (int(match.group(2)), int(match.group(3)))
            if not all(lo <= d <= hi for d in size):
                raise CameraRequestError(f"entry {entry!r}: width and height must be in {lo}..{hi} pixels")
        if name in seen:
            raise CameraRequestError(f"camera {name!r} is named twice")
        seen.add(name)
        out.append(CameraRequest(name, size))
    return tuple(out)


def parse_camera_names(text: str) -> Tuple[str, ...]:
    """Read a comma-separated list of camera names (``camera_cover``); empty text: none."""
    if not isinstance(text, str):
        raise CameraRequestError("must be comma-separated camera names")
    if not text.strip():
        return ()
    return tuple(_name(part.strip(), "camera_cover") for part in text.split(","))


def image_request(parameters: "Optional[Mapping[str, Any]]") -> ImageRequest:
    """Return the :class:`ImageRequest` of a task's parameters (the three keys above; others ignored).

    :raises CameraRequestError: a value that cannot be read (validation refuses it at submit already).
    """
    params = dict(parameters or {})
    cameras = parse_cameras(str(params[PARAM_CAMERAS])) if PARAM_CAMERAS in params else None
    fmt = str(params.get(PARAM_FORMAT, DEFAULT_FORMAT)).strip().lower()
    if fmt not in ("jpeg", "png"):
        raise CameraRequestError(f"{PARAM_FORMAT}={fmt!r}: allowed: jpeg, png")
    try:
        quality = int(str(params.get(PARAM_QUALITY, DEFAULT_QUALITY)).strip())
    except ValueError:
        raise CameraRequestError(f"{PARAM_QUALITY}={params[PARAM_QUALITY]!r}: allowed: an integer in 1..95") from None
    if not 1 <= quality <= 95:
        raise CameraRequestError(f"{PARAM_QUALITY}={quality}: allowed: an integer in 1..95")
    return ImageRequest(cameras, fmt, quality)


def encode_observation(observation: Mapping[str, Any], request: ImageRequest) -> dict:
    """Return ``observation`` with its camera frames as the request asks (see the module docstring).

    :raises CameraRequestError: the request names a camera whose image the observation does not hold.
    """
    from strands_robots.client.images import encode_image

    present = [k[: -len(_IMAGE)] for k in observation if isinstance(k, str) and k.endswith(_IMAGE)]
    if request.cameras is None:
        wanted = {name: None for name in present}
    else:
        wanted = {c.name: c.size for c in request.cameras}
        missing = [name for name in wanted if name not in present]
        if missing:
            raise CameraRequestError(f"the task asks for camera(s) {', '.join(missing)}; this station's "
                                     f"observations hold {', '.join(present) or 'no camera'}")
    out = {}
    for key, value in observation.items():
        if isinstance(key, str):
            base = next((key[: -len(s)] for s in (_IMAGE, _AGE, _STAMP) if key.endswith(s)), None)
            if base in present and base not in wanted:
                continue
            if key.endswith(_IMAGE) and base in wanted:
                value = encode_image(value, request.format, request.quality, wanted[base], what=f"observation[{key!r}]")
        out[key] = value
    return out
