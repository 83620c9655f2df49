"""No secret on the command line: a flag that would carry one is refused before parsing, saying where it goes.

A command line is readable by every user of the machine (``ps``, ``/proc/<pid>/cmdline``), so no command takes
a token as a value. The flags people reach for are refused by name, in one line naming the file or the
environment variable that takes the secret instead; the parsers are built with ``allow_abbrev=False``, so
``--token`` is never taken as an abbreviation of ``--token-file`` either.
"""

from __future__ import annotations

from typing import Optional, Sequence

__all__ = ["CLIENT_TOKEN_ENV", "STATION_TOKEN_ENV", "refusal"]

CLIENT_TOKEN_ENV = "STRANDS_ROBOTS_TOKEN"
STATION_TOKEN_ENV = "STRANDS_ROBOTS_STATION_TOKEN"

#: flag -> (the command it was meant for, the one-line refusal)
_REFUSED = {
    "--token": ("job", f"--token is refused: a token on the command line is readable by every user of this "
                       f"machine; use --token-file FILE (mode 0600) or set {CLIENT_TOKEN_ENV}"),
    "--station-token": ("up", f"--station-token is gone: a token on the command line is visible to every user of "
                              f"this machine; give --relay-credentials FILE (0600) or --relay ADDR with the token "
                              f"in {STATION_TOKEN_ENV}"),
}


def refusal(argv: Sequence[str]) -> Optional[str]:
    """Return ``"strands-robots <command>: <why>"`` for the first secret-carrying flag in ``argv``, else None."""
    for arg in argv:
        if arg == "--":
            break
        flag = arg.split("=", 1)[0]
        if flag in _REFUSED:
            command, why = _REFUSED[flag]
            return f"strands-robots {command}: {why}"
    return None
