"""What every durable file of the station shares: the error a write or a read raises, and the directory fsync.

The job store (:mod:`~strands_robots.station.persistence`) and the recordings pending upload
(:mod:`~strands_robots.station.pending_uploads`) write their files atomically (a temp file, flush + fsync,
``os.replace``, then the directory fsynced so the rename itself survives a crash) and refuse what they cannot
read with a :class:`PersistenceError` naming the file and why.
"""

from __future__ import annotations

import os

__all__ = ["PersistenceError", "fsync_directory"]


class PersistenceError(RuntimeError):
    """A job file could not be written or read; the message says which file and why."""


def fsync_directory(directory: "str | os.PathLike") -> None:
    """Flush a directory's entries (a rename or a new file in it) to disk; a filesystem that cannot is left be."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
