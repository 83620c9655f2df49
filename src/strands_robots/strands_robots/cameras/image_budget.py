"""What a task's image request costs the station, and whether it can be served: checked at submit, never at run time.

A relay policy's every observation carries the images its task asks for (:mod:`~strands_robots.cameras.request`),
rendered by the station's cameras, encoded on the station and sent in one relay message. A request that can never
be served must be refused when the job is submitted, naming why, not end every episode as the station's fault.
The rules, in order (:func:`image_request_refusal`):

1. **What the cameras render.** Every camera asked for is one the station's observations hold, at most at the
   size it renders (a policy wanting larger frames scales them itself; the station never invents pixels).
2. **What one message holds.** The images of one observation, each at its worst-case encoded size
   (:func:`worst_case_bytes`: uncompressible content), fit one relay message with room for the rest of the
   observation (:data:`OBSERVATION_MARGIN_BYTES`).
3. **What the station encodes in a control period.** Encoding them takes at most one control period, at the
   encoding rates of :data:`ENCODE_PIXELS_PER_S` (a sync rollout waits for the observation every chunk).

The relay knows only the sizes a request names (and its own message size); the station knows its cameras too:
both check what they know (:func:`image_request_refusal` with or without ``sizes``). Pure: no numpy, no Pillow.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, Tuple

from strands_robots.cameras.request import ImageRequest

__all__ = ["OBSERVATION_MARGIN_BYTES", "ENCODE_PIXELS_PER_S", "worst_case_bytes", "encode_seconds",
           "image_request_refusal"]

#: Room in one relay message for the rest of an observation (joint readings, ages, stamps, the task's keys).
OBSERVATION_MARGIN_BYTES = 64 * 1024
#: The encoding rate the station is held to, in pixels per second of rendered camera frames: half of what
#: ``bench/relay_image_bench.py`` measured for the demo cameras on a 2-core VM at load average 20 (JPEG q90 about
#: 134 Mpx/s, PNG about 25 Mpx/s, 2026-12-02), rounded down, so a request it admits is encoded in time on a busy
#: station too.
ENCODE_PIXELS_PER_S = {"jpeg": 60e6, "png": 12e6}
_HEADER_BYTES = 1024  # file signature, headers and trailer of one image, either format


def worst_case_bytes(width: int, height: int, fmt: str) -> int:
    """Return the most bytes one ``width`` x ``height`` RGB image takes encoded as ``fmt`` (jpeg or png).

    PNG: every row (a filter byte and 3 bytes a pixel) stored uncompressed (deflate's stored blocks: 5 bytes per
    65535), in chunks of 64 KiB (12 bytes each). JPEG (quality at most 95, chroma subsampled): uncompressible
    content takes well under the raw 3 bytes a pixel; bounded by the raw size.
    """
    raw = height * (3 * width + 1)
    if fmt == "png":
        return raw + 5 * (raw // 65535 + 1) + 12 * (raw // 65536 + 1) + _HEADER_BYTES
    return 3 * width * height + _HEADER_BYTES


def encode_seconds(pixels: int, fmt: str) -> float:
    """Return the time the station is allowed for encoding ``pixels`` as ``fmt`` (:data:`ENCODE_PIXELS_PER_S`)."""
    return pixels / ENCODE_PIXELS_PER_S[fmt]


def _size_text(size: Tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]}"


def image_request_refusal(request: ImageRequest, sizes: Optional[Mapping[str, Tuple[int, int]]],
                          control_frequency: float, max_message_bytes: int,
                          observed: Optional[Sequence[str]] = None) -> str:
    """Say why ``request`` cannot be served (the rules above); "" when it can.

    :param sizes: the cameras a request may name and the ``(width, height)`` each renders; None where they are
        not known (the relay): only the sizes the request names are checked then.
    :param control_frequency: the task's control rate (Hz).
    :param max_message_bytes: the largest relay message (the relay's ``max_message_bytes``).
    :param observed: the cameras every observation holds (what a request naming none gets); None: not known.
    """
    if request.cameras is None:  # every camera of the observation, at its own size
        known = observed is not None and sizes is not None
        wanted = [(name, sizes[name]) for name in observed if name in sizes] if known else []
    else:
        wanted = []
        for camera in request.cameras:
            rendered = None if sizes is None else sizes.get(camera.name)
            if sizes is not None and rendered is None:
                return (f"camera {camera.name!r} is not one of this station's cameras "
                        f"({', '.join(sizes) or 'it has none'})")
            if rendered is not None and camera.size is not None and (
                    camera.size[0] > rendered[0] or camera.size[1] > rendered[1]):
                return (f"{camera.name}:{_size_text(camera.size)} asks for more than camera {camera.name} renders "
                        f"({_size_text(rendered)}); ask for at most {_size_text(rendered)} (a policy needing larger "
                        f"frames scales them itself)")
            size = camera.size or rendered
            if size is not None:
                wanted.append((camera.name, size))
    if not wanted:
        return ""
    fmt = request.format
    names = ", ".join(f"{name} {_size_text(size)}" for name, size in wanted)
    total = sum(worst_case_bytes(w, h, fmt) for _, (w, h) in wanted)
    room = max_message_bytes - OBSERVATION_MARGIN_BYTES
    if total > room:
        return (f"one observation's images ({names} as {fmt}) can take {total} bytes encoded, more than the "
                f"{room} bytes a relay message of {max_message_bytes} bytes leaves for them; ask for fewer or "
                f"smaller images, or jpeg")
    pixels = sum(w * h for _, (w, h) in wanted)
    seconds = encode_seconds(pixels, fmt)
    period = 1.0 / control_frequency
    if seconds > period:
        return (f"encoding one observation's images ({names} as {fmt}, {pixels} pixels) takes about "
                f"{seconds * 1000:.1f} ms at the {ENCODE_PIXELS_PER_S[fmt] / 1e6:g} Mpx/s a station is held to, more "
                f"than one control period ({period * 1000:.1f} ms at {control_frequency:g} Hz); ask for fewer or "
                f"smaller images, jpeg, or a lower control_frequency")
    return ""
