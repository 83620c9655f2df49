"""An episode's camera frames as a contact sheet (one PNG, a block of thumbnails per camera) and as an MP4 per camera.

Both take the frames as recorded (``(log ns, format, JPEG/PNG bytes)`` per topic, in log-time order, as
``report.load_recording`` attaches them to an episode). The sheet shows up to ``per_camera`` frames of each
camera, evenly spaced over the episode (the first and the last among them), ``columns`` to a row, each labelled
with its time since the episode started; :func:`sheet_layout` says which frames went where, so a reader (and a
test) can find each tile. The video holds every frame, at the camera's rate measured from the log times
(H.264, yuv420p, PyAV: the encoder comes with the ``av`` wheel).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = ["SheetLayout", "sheet_layout", "contact_sheet", "write_video", "frame_rate"]

PAD = 6
LABEL_H = 14
TITLE_H = 20
_NS = 1e-9

Frames = Sequence[tuple[int, str, bytes]]


@dataclass(frozen=True)
class SheetLayout:
    """Where each tile is: ``tiles[camera] = [(frame index, x, y), ...]``; the sheet's size and tile size."""

    width: int
    height: int
    tile_w: int
    tile_h: int
    tiles: dict[str, list[tuple[int, int, int]]]


def _chosen(count: int, per_camera: int) -> list[int]:
    """Return the indices of up to ``per_camera`` of ``count`` frames, evenly spaced, first and last included."""
    if count <= per_camera:
        return list(range(count))
    if per_camera == 1:
        return [0]
    return sorted({round(i * (count - 1) / (per_camera - 1)) for i in range(per_camera)})


def sheet_layout(counts: dict[str, int], tile: tuple[int, int], *, columns: int = 8,
                 per_camera: int = 24) -> SheetLayout:
    """Lay out the cameras' blocks (``counts[camera]`` frames each) with tiles of ``tile = (width, height)``."""
    tile_w, tile_h = tile
    width = PAD + columns * (tile_w + PAD)
    y = PAD
    tiles: dict[str, list[tuple[int, int, int]]] = {}
    for camera, count in counts.items():
        y += TITLE_H
        placed = []
        for n, index in enumerate(_chosen(count, per_camera)):
            row, col = divmod(n, columns)
            placed.append((index, PAD + col * (tile_w + PAD), y + row * (tile_h + LABEL_H + PAD)))
        rows = max(1, -(-len(placed) // columns))
        tiles[camera] = placed
        y += rows * (tile_h + LABEL_H + PAD)
    return SheetLayout(width, y + PAD, tile_w, tile_h, tiles)


def contact_sheet(frames: dict[str, Frames], start_ns: int, *, columns: int = 8, per_camera: int = 24,
                  tile_width: int = 160) -> "tuple[object, SheetLayout]":
    """Return the sheet (a Pillow RGB image) and its layout.

    Every tile is ``tile_width`` wide and as tall as the first camera's aspect ratio makes it (a camera of
    another shape is scaled to it).

    :raises ValueError: no camera has a frame, or a frame is not a readable image.
    """
    from PIL import Image, ImageDraw

    from strands_robots.cameras import jpeg

    frames = {camera: list(items) for camera, items in frames.items() if items}
    if not frames:
        raise ValueError("no camera frames to lay out")
    first = jpeg.decode(next(iter(frames.values()))[0][2])
    tile_h = max(1, round(tile_width * first.shape[0] / first.shape[1]))
    layout = sheet_layout({c: len(f) for c, f in frames.items()}, (tile_width, tile_h), columns=columns,
                          per_camera=per_camera)
    sheet = Image.new("RGB", (layout.width, layout.height), (32, 32, 32))
    draw = ImageDraw.Draw(sheet)
    for camera, placed in layout.tiles.items():
        items = frames[camera]
        title_y = placed[0][2] - TITLE_H if placed else PAD
        draw.text((PAD, title_y + 4), f"{camera}: {len(items)} frames", fill=(240, 240, 240))
        for index, x, y in placed:
            log_ns, _, data = items[index]
            thumb = Image.fromarray(jpeg.decode(data), "RGB").resize((tile_width, tile_h), Image.BILINEAR)
            sheet.paste(thumb, (x, y))
            draw.text((x, y + tile_h + 1), f"#{index} t={(log_ns - start_ns) * _NS:.2f} s", fill=(200, 200, 200))
    return sheet, layout


def frame_rate(log_ns: Sequence[int], default: float = 15.0) -> float:
    """Return the frames' rate from the median interval of their log times (``default`` for fewer than two)."""
    if len(log_ns) < 2:
        return default
    intervals = np.diff(np.asarray(log_ns, dtype=np.int64))
    median = float(np.median(intervals[intervals > 0])) if np.any(intervals > 0) else 0.0
    return round(1.0 / (median * _NS), 1) if median > 0 else default


def write_video(path: "str | Path", frames: Frames, fps: "float | None" = None) -> int:
    """Encode every frame, one video frame each, as H.264 MP4 (yuv420p); the frames written.

    :raises ImportError: PyAV is not installed. :raises ValueError: no frames, or a frame of another size.
    """
    import av

    from strands_robots.cameras import jpeg

    if not frames:
        raise ValueError("no frames to encode")
    rate = fps or frame_rate([f[0] for f in frames])
    first = jpeg.decode(frames[0][2])
    height, width = first.shape[:2]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(rate).limit_denominator(1001))
        stream.height, stream.width = height - height % 2, width - width % 2  # yuv420p: even sizes
        stream.pix_fmt = "yuv420p"
        for _, _, data in frames:
            image = jpeg.decode(data)
            if image.shape[:2] != (height, width):
                raise ValueError(f"{path.name}: a {image.shape[1]}x{image.shape[0]} frame among {width}x{height}")
            frame = av.VideoFrame.from_ndarray(image[: stream.height, : stream.width], format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
            written += 1
        for packet in stream.encode():
            container.mux(packet)
    return written
