"""JPEG encoding and decoding of HWC uint8 RGB frames (Pillow), for ``image_raw/compressed`` and the relay."""

from __future__ import annotations

import io

import numpy as np


def encode(image: np.ndarray, quality: int = 90) -> bytes:
    """Return ``image`` (``(h, w, 3)`` uint8 RGB) as JPEG bytes at ``quality`` (1..95).

    :raises ValueError: not an ``(h, w, 3)`` uint8 array, or a quality outside 1..95.
    """
    from PIL import Image

    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"JPEG encoding needs an (h, w, 3) uint8 array, got "
                         f"{getattr(image, 'shape', None)} {getattr(image, 'dtype', type(image).__name__)}")
    if isinstance(quality, bool) or not 1 <= int(quality) <= 95:
        raise ValueError(f"JPEG quality {quality!r} refused: allowed: 1..95")
    out = io.BytesIO()
    Image.fromarray(image, "RGB").save(out, format="JPEG", quality=int(quality))
    return out.getvalue()


def decode(data: bytes) -> np.ndarray:
    """Return JPEG (or PNG) ``data`` as an ``(h, w, 3)`` uint8 RGB array.

    :raises ValueError: the bytes are not an image Pillow reads.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(bytes(data))) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"not a readable image ({len(data)} bytes): {exc}") from None
