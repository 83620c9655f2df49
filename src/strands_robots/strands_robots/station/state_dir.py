"""Where a station keeps its jobs across runs: one directory per station AND per relay it takes jobs from.

A station's persisted jobs (``station.persistence``) belong to the relay that handed them out: only that relay
knows them, serves their policy sessions and takes their snapshots. So a station's state is kept per station id
and per relay::

    $XDG_STATE_HOME/strands_robots/<station_id>/relay-<relay>-<hash>     # jobs from the relay <relay>
    $XDG_STATE_HOME/strands_robots/<station_id>/submit_job                # jobs from the submit_job service

``XDG_STATE_HOME`` defaults to ``~/.local/state`` (the XDG base directory spec). ``<relay>`` is the relay's
identity as the station reaches it (its address, or every address of a cluster: the credentials file's
``target``), made file-name safe, and ``<hash>`` the first 12 hex digits of its SHA-256 (two addresses that read
alike stay apart). A station restarted against the same relay resumes its jobs there (finished episodes are not
run again, episode ids are not reused); the same station against another relay starts with none of them, so a job
is never resumed where no relay knows it.

A run that starts its own relay (``rollout.launch.py``, ``strands-robots up`` without ``--relay``) keeps its
station's state in the run's own private directory instead, with the relay's store: both go together.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Optional, Sequence, Union

__all__ = ["SUBMIT_JOB_DIR", "relay_key", "state_base", "station_state_dir"]

SUBMIT_JOB_DIR = "submit_job"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_KEY_TEXT_MAX = 64


def state_base() -> str:
    """``$XDG_STATE_HOME/strands_robots`` (``~/.local/state/strands_robots`` when the variable is unset or empty)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "strands_robots")


def relay_key(relay: Union[str, Sequence[str]]) -> str:
    """Return the directory name of a relay's state: ``relay-<address, file-name safe>-<12 hex of its SHA-256>``.

    :param relay: the relay's address (``host:port``), or a cluster's addresses (order does not matter).
    :raises ValueError: no address.
    """
    targets = [relay] if isinstance(relay, str) else list(relay)
    targets = sorted({t.strip() for text in targets for t in text.split(",") if t.strip()})
    if not targets:
        raise ValueError("a relay needs an address to name its state directory")
    identity = ",".join(targets)
    text = _UNSAFE.sub("_", identity).strip("._-")[:_KEY_TEXT_MAX] or "relay"
    return f"relay-{text}-{hashlib.sha256(identity.encode('utf-8')).hexdigest()[:12]}"


def station_state_dir(station_id: str, relay: Optional[Union[str, Sequence[str]]] = None,
                      base: Optional[str] = None) -> str:
    """Return the state directory of ``station_id`` taking jobs from ``relay`` (None: from ``submit_job``).

    :param base: the directory the stations' state goes under (default :func:`state_base`).
    :raises ValueError: a station id that cannot name a directory (empty, a path separator, ``.``/``..``).
    """
    if not station_id or "/" in station_id or "\\" in station_id or station_id in (".", ".."):
        raise ValueError(f"station id {station_id!r} cannot name a state directory")
    leaf = SUBMIT_JOB_DIR if relay is None else relay_key(relay)
    return os.path.join(base or state_base(), station_id, leaf)
