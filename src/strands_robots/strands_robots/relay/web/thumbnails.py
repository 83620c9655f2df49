"""A camera thumbnail of an episode: the first camera frame in the recording the station uploaded to the relay.

The station's episode recording (MCAP, ``ros2msg``/CDR) holds each camera's ``sensor_msgs/CompressedImage`` (JPEG or
PNG); the first one is the thumbnail, sent as the camera encoded it (no re-encoding). What it is comes from its
bytes (JPEG's and PNG's signatures), not its ``format`` text: image_transport writes that as ``"<raw encoding>;
<codec> compressed <encoding>"`` (the camera node's ``"rgb8; jpeg compressed bgr8"``), other writers as the codec
alone (``"jpeg"``). The recording is read in order from the store's chunks, never whole: reading stops at the first
frame, or after :data:`MAX_SCAN_BYTES` (a recording with no camera has no thumbnail). Results are kept per recording
(its SHA-256) in a small LRU, so a page re-rendered for every update reads each recording once.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from typing import Callable, Optional, Tuple

#: how far into a recording a camera frame is looked for
MAX_SCAN_BYTES = 64 * 1024 * 1024
#: content type by the encoded image's first bytes (its signature)
_SIGNATURES = ((b"\xff\xd8\xff", "image/jpeg"), (b"\x89PNG\r\n\x1a\n", "image/png"))


def image_type(data: bytes) -> Optional[str]:
    """Return the content type of an encoded image (JPEG or PNG) by its signature; None for anything else."""
    head = bytes(data[:8])
    return next((kind for signature, kind in _SIGNATURES if head.startswith(signature)), None)


class _Chunks(io.RawIOBase):
    """The recording's chunks as one forward-only stream (``read_chunk(seq)`` -> bytes or None), bounded."""

    def __init__(self, read_chunk: Callable[[int], Optional[bytes]], chunks: int, limit: int) -> None:
        self._read_chunk, self._chunks, self._limit = read_chunk, chunks, limit
        self._seq, self._buffer, self._given = 0, b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, out) -> int:
        while not self._buffer and self._seq < self._chunks and self._given < self._limit:
            self._buffer = self._read_chunk(self._seq) or b""
            self._seq += 1
        n = min(len(out), len(self._buffer), max(0, self._limit - self._given))
        out[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        self._given += n
        return n


def first_frame(read_chunk: Callable[[int], Optional[bytes]], chunks: int,
                limit: int = MAX_SCAN_BYTES) -> Optional[Tuple[str, bytes]]:
    """Return (content type, encoded bytes) of the recording's first camera frame, or None when there is none."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    stream = io.BufferedReader(_Chunks(read_chunk, chunks, limit), buffer_size=1 << 20)
    try:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        for schema, _channel, _message, decoded in reader.iter_decoded_messages(log_time_order=False):
            if schema is not None and schema.name.split("/")[-1] == "CompressedImage":
                kind = image_type(decoded.data)
                if kind is not None:
                    return kind, bytes(decoded.data)
    except (McapError, EOFError, ValueError, KeyError):  # cut at the scan limit, or not an MCAP this reads
        return None
    return None


class ThumbnailCache:
    """Thumbnails by recording (job, episode, SHA-256), at most ``size`` kept; None (no frame) is kept too."""

    def __init__(self, size: int = 128) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: "OrderedDict[tuple, Optional[Tuple[str, bytes]]]" = OrderedDict()

    def get(self, key: tuple, make: Callable[[], Optional[Tuple[str, bytes]]]) -> Optional[Tuple[str, bytes]]:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value
