"""The relay's settings: where it listens, its store, and the limits that keep one peer from freezing it.

``config/relay.yaml`` holds them under one top-level ``relay:`` mapping; ``strands-robots relay`` takes the same
values as flags (``--config FILE`` reads the file, and a flag given beside it wins). Every value is checked on
load and a refusal is one line naming the file, the key and the reason.

The limits (defaults in :class:`RelaySettings`):

- ``first_message_deadline_s``: a policy stream must send its first message (``attach`` / ``open``) within this
  time, else the relay ends it with DEADLINE_EXCEEDED naming the deadline;
- ``max_streams_per_token``: streams one token may hold open at once (job streams, policy sessions,
  ``serve_policy``); one more is refused with RESOURCE_EXHAUSTED naming the limit and its value;
- ``max_open_jobs_per_token`` and ``max_queued_episodes_per_token``: a team's jobs not yet ended, and the
  episodes those jobs still have to run; a submit past either is RESOURCE_EXHAUSTED naming the limit;
- ``keepalive_time_s`` / ``keepalive_timeout_s``: the relay pings every connection this often and drops one that
  does not answer in time (a peer that vanished without closing); ``max_connection_idle_s`` closes a
  connection with no call for that long;
- ``workers``: threads that run store calls (SQLite, PostgreSQL) off the relay's event loop; streams hold none.

No grpc, no yaml at import: pure data and checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, List

from strands_robots.wire.message_size import MAX_MESSAGE_BYTES

__all__ = ["RelayConfigError", "RelaySettings", "load_relay_settings", "settings_refusal", "limit_argv"]


class RelayConfigError(ValueError):
    """A relay config file or value is refused: the file, the key and the reason, in one line."""


@dataclass(frozen=True)
class RelaySettings:
    """Everything ``config/relay.yaml`` may set (each field's comment is its meaning)."""

    host: str = "127.0.0.1"           # listen address; loopback unless peers connect from elsewhere
    port: int = 0                     # 0: a port free at launch time
    store: str = ""                   # "": SQLite in the launch's private run dir
    poll_s: float = 0.2               # job streams re-read the store this often (s)
    workers: int = 8                  # threads running store calls off the event loop
    max_message_bytes: int = MAX_MESSAGE_BYTES  # largest message either way (policy observations)
    first_message_deadline_s: float = 5.0      # attach / open must come within this (s)
    max_streams_per_token: int = 32            # open streams per token
    max_open_jobs_per_token: int = 64          # jobs not ended per team
    max_queued_episodes_per_token: int = 20000  # episodes those jobs still have to run, per team
    keepalive_time_s: float = 20.0             # ping every connection this often (s)
    keepalive_timeout_s: float = 10.0          # drop a connection whose ping is unanswered this long (s)
    max_connection_idle_s: float = 600.0       # close a connection with no call for this long (s)
    web: str = ""                              # host:port of the web status page ("": none)
    max_recording_bytes: int = 1024 ** 3       # largest episode recording a station may upload (bytes)
    metrics: str = ""                          # host:port of the Prometheus /metrics page; "": none
    invitation_timeout_s: float = 7 * 24 * 3600.0  # a comparison's invited team accepts within this, else it ends (s)


_TYPES = {f.name: type(f.default) for f in fields(RelaySettings)}
#: (key, lowest allowed, why)
_MINIMUM = {
    "workers": (4, "at least 4 so one slow store call does not hold up the rest"),
    "max_message_bytes": (1024, ""),
    "max_streams_per_token": (1, ""),
    "max_open_jobs_per_token": (1, ""),
    "max_queued_episodes_per_token": (1, ""),
    "max_recording_bytes": (1024, ""),
}
_POSITIVE = ("poll_s", "first_message_deadline_s", "keepalive_time_s", "keepalive_timeout_s", "max_connection_idle_s",
             "invitation_timeout_s")


def _type_name(value: Any) -> str:
    return {bool: "a bool", int: "an integer", float: "a float", str: "a string"}.get(type(value),
                                                                                     type(value).__name__)


def settings_refusal(key: str, value: Any) -> str:
    """Say in one line why ``value`` is not a valid ``key``; "" when it is."""
    if key not in _TYPES:
        return f"unknown key {key!r} (known: {', '.join(_TYPES)})"
    kind = _TYPES[key]
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    else:
        ok = isinstance(value, kind) and not isinstance(value, bool)
    if not ok:
        return f"{key}: expected {_type_name(kind())}, got {_type_name(value)} {value!r}"
    if key == "host" and not value.strip():
        return "host: must be a host name or address, e.g. 127.0.0.1"
    if key == "port" and not 0 <= value <= 65535:
        return f"port: {value} is out of range [0, 65535] (0: a free port)"
    if key == "store" and value and not value.startswith(("sqlite:", "postgresql://", "postgres://")):
        return f"store: {value!r} is neither sqlite:PATH nor postgresql://... (empty: SQLite in the run dir)"
    if key == "metrics" and value and not _host_port(value):
        return f"metrics: {value!r} is not host:port (e.g. 127.0.0.1:9464; empty: no metrics port)"
    if key == "web" and value and not _host_port(value):
        return f"web: {value!r} is not host:port, e.g. 127.0.0.1:8080 (empty: no web status page)"
    if key in _POSITIVE and not value > 0:
        return f"{key}: must be greater than 0, got {value!r}"
    if key in _MINIMUM and value < _MINIMUM[key][0]:
        low, why = _MINIMUM[key]
        return f"{key}: must be >= {low}{f' ({why})' if why else ''}, got {value}"
    return ""


def _host_port(value: str) -> bool:
    host, sep, port = value.rpartition(":")
    return bool(sep and host.strip("[]") and port.isdigit() and 0 <= int(port) <= 65535)


def load_relay_settings(path: str) -> RelaySettings:
    """Read ``path`` (one top-level ``relay:`` mapping); :class:`RelayConfigError` names the key and the reason."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise RelayConfigError(f"relay config {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}:" if mark is not None else ""
        raise RelayConfigError(f"relay config {path}:{where} not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict) or set(data) != {"relay"} or not isinstance(data["relay"], dict):
        raise RelayConfigError(f"relay config {path}: expected one top-level mapping 'relay:'")
    body = data["relay"]
    for key in body:
        reason = settings_refusal(str(key), body[key])
        if reason:
            raise RelayConfigError(f"relay config {path}: relay: {reason}")
    return RelaySettings(**{k: (float(v) if _TYPES[k] is float else v) for k, v in body.items()})


#: settings passed to ``strands-robots relay`` as flags by :func:`limit_argv` (host, port and store are not)
_FLAGGED = ("poll_s", "workers", "max_message_bytes", "first_message_deadline_s", "max_streams_per_token",
            "max_open_jobs_per_token", "max_queued_episodes_per_token", "keepalive_time_s", "keepalive_timeout_s",
            "max_connection_idle_s", "max_recording_bytes")


def flag_of(key: str) -> str:
    """Return the command-line flag of a setting (``poll_s`` -> ``--poll-s``)."""
    return "--" + key.replace("_", "-")


def limit_argv(settings: RelaySettings) -> List[str]:
    """Return the relay's flags for every setting but host, port and store (what a launch passes on)."""
    out: List[str] = []
    for key in _FLAGGED:
        value = getattr(settings, key)
        out += [flag_of(key), f"{value:g}" if isinstance(value, float) else str(value)]
    return out
