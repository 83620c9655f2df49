"""The web page's episode thumbnail: the first camera frame of a recording, whatever its ``format`` text says.

The recordings are written as the station writes them (``web_helpers.camera_recording``: CompressedImage frames of
the scene camera behind other messages); the camera node's ``format`` is image_transport's
``"rgb8; jpeg compressed bgr8"``, so what a frame is comes from its bytes.
"""

from __future__ import annotations

import io

import pytest

pytest.importorskip("mcap_ros2", reason="mcap-ros2-support is not installed (requirements/python.txt)")

from web_helpers import camera_jpeg, camera_recording  # noqa: E402

from strands_robots.conversions.camera import COMPRESSED_FORMAT  # noqa: E402
from strands_robots.relay.web.thumbnails import first_frame, image_type  # noqa: E402


def _chunks(path, size=4096):
    data = path.read_bytes()
    pieces = [data[i:i + size] for i in range(0, len(data), size)]
    return (lambda seq: pieces[seq] if seq < len(pieces) else None), len(pieces)


@pytest.mark.parametrize("image_format", [COMPRESSED_FORMAT, "jpeg", "", "bgr8; jpeg compressed bgr8"])
def test_the_first_jpeg_frame_is_the_thumbnail_whatever_its_format_text(tmp_path, image_format):
    first = camera_recording(tmp_path / "ep.mcap", frames=3, padding_messages=20, image_format=image_format)
    assert first_frame(*_chunks(tmp_path / "ep.mcap")) == ("image/jpeg", first)


def test_a_png_frame_is_served_as_png_and_bytes_that_are_no_image_give_no_thumbnail():
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 6), (10, 20, 30)).save(out, format="PNG")
    assert image_type(out.getvalue()) == "image/png"
    assert image_type(camera_jpeg()) == "image/jpeg"
    assert image_type(b"GIF89a....") is None and image_type(b"") is None
