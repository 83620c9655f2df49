"""A station's relay credentials: its start-time configuration, read once from a private file.

The relay endpoint and the station's token belong to the station's start-time configuration only. They are read
from one YAML file when a process starts (the station node, the rollout node's relay policy provider,
``strands-robots up``), never from a goal, a topic or a run-time parameter, so nothing on the ROS domain can
redirect a rollout to another relay or make it read a file of its choosing. A read-only parameter may name the
file; nothing else exposes its content.

The file (mode 0600 or stricter, owned by whoever runs the station)::

    target: relay.example.org:50051      # host:port of the relay (a list of them is accepted too)
    station_id: lab_station_1            # the station this token belongs to
    token_file: station.token            # a file holding the token (0600 too), relative to this file, or:
    token: <the token itself>
    root_certificates: ca.pem            # optional: TLS with this CA bundle (relative to this file)

A file readable or writable by group or others is refused with one line naming the file and its mode, as ssh
refuses a private key; so are a file another user owns, a file in a directory another user may write (unless its
sticky bit protects the file, as in ``/tmp``), anything that is not a regular file, and a file larger than its
bound (the rules are :mod:`strands_robots.client.credential_files`'). ``root_certificates`` may be readable by
others but not writable by them (it decides whom the station trusts). Any other problem is one line too
(:class:`CredentialsError`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Tuple

from strands_robots.client.credential_files import (
    MAX_CERTIFICATE_FILE_BYTES,
    MAX_SECRET_FILE_BYTES,
    CredentialFileError,
    read_private_file,
    read_trusted_file,
)

__all__ = ["CredentialsError", "RelayCredentials", "check_private_file", "load_relay_credentials", "read_secret",
           "read_private_text"]

_KEYS = frozenset({"target", "station_id", "token", "token_file", "root_certificates"})


class CredentialsError(CredentialFileError):
    """A credentials file is missing, not private, malformed or incomplete (one line, naming the file)."""


@dataclass(frozen=True)
class RelayCredentials:
    """What a station needs to reach its relay (never logged: ``repr`` hides the token)."""

    targets: Tuple[str, ...]
    station_id: str
    token: str
    root_certificates: Optional[bytes] = None
    source: str = ""

    @property
    def target(self) -> str:
        """The first relay address."""
        return self.targets[0]

    def __repr__(self) -> str:
        return (f"RelayCredentials(targets={self.targets!r}, station_id={self.station_id!r}, token=<hidden>, "
                f"tls={self.root_certificates is not None}, source={self.source!r})")


def check_private_file(path: "str | os.PathLike[str]", what: str = "credentials file") -> Path:
    """Return ``path`` when it may hold a secret (see :func:`read_private_text`); else raise.

    :raises CredentialsError: one line naming the file and the rule it breaks.
    """
    read_private_text(path, what)
    return Path(path)


def read_private_text(path: "str | os.PathLike[str]", what: str = "credentials file",
                      max_bytes: int = MAX_SECRET_FILE_BYTES) -> str:
    """Return the text (UTF-8) of a private file.

    It must be yours or root's, mode 0600 or stricter, in a directory only you may change, a regular file of at
    most ``max_bytes``.

    :raises CredentialsError: one line naming the file and the rule it breaks.
    """
    try:
        data = read_private_file(path, what, max_bytes)
    except CredentialFileError as exc:
        raise CredentialsError(str(exc), exc.errno, exc.strerror) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CredentialsError(f"{what} {os.fspath(path)!r}: not UTF-8 text ({exc.reason} at byte {exc.start})") \
            from None


def read_secret(path: "str | os.PathLike[str]", what: str = "token file") -> str:
    """Return the first line of a private file, stripped; refuse a file others may read, or an empty one."""
    p = Path(path)
    text = read_private_text(p, what)
    lines = text.strip().splitlines()
    secret = lines[0].strip() if lines else ""
    if not secret:
        raise CredentialsError(f"{what} {str(p)!r} is empty")
    return secret


def load_relay_credentials(path: "str | os.PathLike[str]") -> RelayCredentials:
    """Read and check a relay credentials file (see the module docstring).

    :raises CredentialsError: one line naming the file and what is wrong.
    """
    import yaml

    p = Path(path)
    text = read_private_text(p)
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CredentialsError(f"credentials file {str(p)!r}: not readable YAML: {first}") from None
    if not isinstance(data, dict):
        raise CredentialsError(f"credentials file {str(p)!r}: expected a mapping of {sorted(_KEYS)}")
    unknown = sorted(set(map(str, data)) - _KEYS)
    if unknown:
        raise CredentialsError(f"credentials file {str(p)!r}: unknown key(s) {unknown}; known: {sorted(_KEYS)}")
    raw_targets = data.get("target")
    targets = tuple(raw_targets) if isinstance(raw_targets, list) else (raw_targets,)
    if not targets or not all(isinstance(t, str) and ":" in t and t.strip() == t and t for t in targets):
        raise CredentialsError(f"credentials file {str(p)!r}: target must be host:port (or a list of them)")
    station_id = data.get("station_id")
    if not isinstance(station_id, str) or not station_id:
        raise CredentialsError(f"credentials file {str(p)!r}: station_id must be a non-empty string")
    token, token_file = data.get("token"), data.get("token_file")
    if (token is None) == (token_file is None):
        raise CredentialsError(f"credentials file {str(p)!r}: give exactly one of token and token_file")
    if token_file is not None:
        if not isinstance(token_file, str) or not token_file:
            raise CredentialsError(f"credentials file {str(p)!r}: token_file must be a path")
        token = read_secret(p.parent / token_file)
    elif not isinstance(token, str) or not token.strip():
        raise CredentialsError(f"credentials file {str(p)!r}: token must be a non-empty string")
    roots: Optional[bytes] = None
    ca = data.get("root_certificates")
    if ca is not None:
        if not isinstance(ca, str) or not ca:
            raise CredentialsError(f"credentials file {str(p)!r}: root_certificates must be a path")
        try:
            roots = read_trusted_file(p.parent / ca, "root_certificates", MAX_CERTIFICATE_FILE_BYTES)
        except CredentialFileError as exc:
            raise CredentialsError(f"credentials file {str(p)!r}: {exc}", exc.errno, exc.strerror) from None
    return RelayCredentials(targets=targets, station_id=station_id, token=str(token).strip(),
                            root_certificates=roots, source=str(p))
