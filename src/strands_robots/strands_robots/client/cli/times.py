"""How the command line prints a time: ISO 8601 UTC to the second, never raw unix milliseconds."""

from __future__ import annotations

import datetime

__all__ = ["iso_utc"]


def iso_utc(unix_ms: int) -> str:
    """Return ``unix_ms`` as ISO 8601 UTC to the second (``2026-12-06T14:42:41Z``); ``-`` for 0 (never set).

    :param unix_ms: milliseconds since the Unix epoch (a protobuf's ``*_unix_ms``).
    """
    if not unix_ms:
        return "-"
    moment = datetime.datetime.fromtimestamp(unix_ms / 1000.0, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
