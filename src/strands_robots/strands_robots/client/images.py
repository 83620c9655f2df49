"""Camera frames on the wire: an HWC uint8 array <-> JPEG or PNG bytes (``pb.EncodedImage``), numpy and Pillow.

Both ends of a policy session use it: the station encodes each ``<camera>.image`` it sends (resized to the size
the job asks for, :func:`encode_image`), the Evaluation Client decodes it back into a ``(height, width, 3)``
``uint8`` array (:func:`decode_image`) before ``Policy.act`` sees it. A decoded image whose size is not the one
the message declares is refused (a :class:`ImageCodecError` naming the key), never passed on reshaped.

Formats: ``jpeg`` (lossy, ``quality`` 1..95, Pillow's baseline encoder) and ``png`` (lossless, ``quality``
ignored). This module imports nothing from strands_robots.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

__all__ = ["EncodedImage", "ImageCodecError", "FORMATS", "JPEG_QUALITY_RANGE", "encode_image", "decode_image",
           "resize_image"]

FORMATS = ("jpeg", "png")
JPEG_QUALITY_RANGE = (1, 95)
_PIL_FORMAT = {"jpeg": "JPEG", "png": "PNG"}


class ImageCodecError(ValueError):
    """An image that cannot be encoded, or bytes that do not decode to the declared image."""


@dataclass(frozen=True)
class EncodedImage:
    """One encoded camera frame: ``format`` (jpeg or png), the file's bytes and the decoded size."""

    format: str
    data: bytes
    width: int
    height: int
    channels: int = 3


def _check_array(image: np.ndarray, what: str) -> None:
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ImageCodecError(f"{what}: an image is an (height, width, 3) uint8 array, got "
                              f"{getattr(image, 'shape', None)} {getattr(image, 'dtype', type(image).__name__)}")


def resize_image(image: np.ndarray, size: Optional[Tuple[int, int]], what: str = "image") -> np.ndarray:
    """Return ``image`` at ``size`` (``(width, height)``; None or its own size: unchanged), bilinear."""
    _check_array(image, what)
    if size is None or (image.shape[1], image.shape[0]) == (int(size[0]), int(size[1])):
        return image
    from PIL import Image

    resample = getattr(Image, "Resampling", Image).BILINEAR
    return np.asarray(Image.fromarray(image, "RGB").resize((int(size[0]), int(size[1])), resample), dtype=np.uint8)


def encode_image(image: np.ndarray, fmt: str = "jpeg", quality: int = 90,
                 size: Optional[Tuple[int, int]] = None, what: str = "image") -> EncodedImage:
    """Encode ``image`` (resized to ``size`` = ``(width, height)`` first, when given) as ``fmt``.

    :raises ImageCodecError: not an HWC uint8 RGB array, an unknown format, a JPEG quality outside 1..95.
    """
    from PIL import Image

    if fmt not in FORMATS:
        raise ImageCodecError(f"{what}: image format {fmt!r} refused: allowed: {', '.join(FORMATS)}")
    lo, hi = JPEG_QUALITY_RANGE
    if fmt == "jpeg" and (isinstance(quality, bool) or not isinstance(quality, int) or not lo <= quality <= hi):
        raise ImageCodecError(f"{what}: JPEG quality {quality!r} refused: allowed: an integer in {lo}..{hi}")
    frame = resize_image(image, size, what)
    out = io.BytesIO()
    options = {"quality": quality} if fmt == "jpeg" else {"compress_level": 1}
    Image.fromarray(np.ascontiguousarray(frame), "RGB").save(out, format=_PIL_FORMAT[fmt], **options)
    return EncodedImage(fmt, out.getvalue(), int(frame.shape[1]), int(frame.shape[0]), 3)


def decode_image(encoded: EncodedImage, what: str = "image") -> np.ndarray:
    """Return the ``(height, width, channels)`` uint8 array of ``encoded``.

    :raises ImageCodecError: an unknown format, bytes Pillow cannot read or of another format, or a decoded
        size other than the declared one.
    """
    from PIL import Image, UnidentifiedImageError

    if encoded.format not in FORMATS:
        raise ImageCodecError(f"{what}: image format {encoded.format!r} is not one of {', '.join(FORMATS)}")
    if encoded.channels != 3:
        raise ImageCodecError(f"{what}: {encoded.channels} channels declared; images have 3 (RGB)")
    try:
        with Image.open(io.BytesIO(bytes(encoded.data))) as img:
            if (img.format or "").upper() != _PIL_FORMAT[encoded.format]:
                raise ImageCodecError(f"{what}: declared {encoded.format} but the bytes are {img.format or 'unknown'}")
            array = np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise ImageCodecError(f"{what}: {len(encoded.data)} bytes are not a readable {encoded.format} image: "
                              f"{exc}") from None
    if array.shape != (encoded.height, encoded.width, 3):
        raise ImageCodecError(f"{what}: decoded to {array.shape[1]}x{array.shape[0]}, declared "
                              f"{encoded.width}x{encoded.height}")
    return array
