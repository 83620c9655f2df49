"""The recording's file: the MCAP stream's sink (unbuffered, whole writes, cut back after a failure); the distro.

The ROS distro goes into a ``rosbag2`` metadata record under ``ROS_DISTRO``, where rosbag2's MCAP storage plugin
reads it (``ros2 bag info`` prints it): ``$ROS_DISTRO``, else derived from the installed rclpy's version (read from
package metadata; rclpy is never imported here).
"""

from __future__ import annotations

import errno
import importlib.metadata
import io
import os
from pathlib import Path
from typing import Any

__all__ = ["FileSink", "default_raw", "ros_distro", "METADATA_ROSBAG2", "METADATA_ROS_DISTRO_KEY"]

# rosbag2's MCAP storage plugin reads the distro from this metadata record and key.
METADATA_ROSBAG2 = "rosbag2"
METADATA_ROS_DISTRO_KEY = "ROS_DISTRO"
# rclpy major version -> distro, for when ROS_DISTRO is not set.
_RCLPY_DISTROS = {3: "humble", 7: "jazzy", 9: "kilted"}


def ros_distro() -> str:
    """Return the ROS distro: ``$ROS_DISTRO``, else from the installed rclpy's major version, else unknown."""
    distro = os.environ.get("ROS_DISTRO", "").strip()
    if distro:
        return distro
    try:
        major = int(importlib.metadata.version("rclpy").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError, IndexError):
        return "unknown"
    return _RCLPY_DISTROS.get(major, "unknown")


class FileSink:
    """The file the MCAP writer writes into: unbuffered, every write whole or an OSError, position tracked.

    Unbuffered so that what the writer handed over is in the OS when a write returns (a full disk surfaces at
    the write that fails, not later), and so the file can be cut back to a known offset after a failure
    without a buffer flushing stale bytes behind the cut.
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._pos = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        done = 0
        while done < total:
            n = self._raw.write(view[done:])
            if n is None or n <= 0:  # a short write of nothing: the device is full
                raise OSError(errno.ENOSPC, "no space left on device (short write)")
            done += n
            self._pos += n
        return total

    def tell(self) -> int:
        return self._pos

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self._raw.fileno()

    def truncate_to(self, offset: int) -> None:
        os.ftruncate(self._raw.fileno(), offset)
        self._raw.seek(offset)
        self._pos = offset

    def close(self) -> None:
        self._raw.close()


def default_raw(path: Path) -> Any:
    return io.FileIO(path, "xb")
