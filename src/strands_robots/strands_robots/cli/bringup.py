"""What ``rollout.launch.py`` (and the other launch files) need before any process starts.

* Every config file is checked on load, each refusal one line naming the file, the key and the reason:
  :func:`parameters_file_refusal` (a ROS parameters file: YAML, node sections, parameters our nodes declare, and
  each value's type and range as the node would refuse it), :func:`relay_config_refusal` (``config/relay.yaml``)
  and :func:`job_file_refusal` (a job file such as ``config/demo_job.yaml``).
* :func:`make_run_dir`: a private directory (mode 0700) with the relay's tokens made for this launch (files mode
  0600): one client token, one station token. Nothing secret is ever committed or passed on a command line;
  the processes get the paths of these files.
"""

from __future__ import annotations

import math
import os
import secrets
import tempfile
from dataclasses import dataclass
from typing import Any, Mapping, Optional

__all__ = ["BadConfigFile", "RelaySettings", "RunDir", "parameters_file_refusal", "relay_config_refusal",
           "job_file_refusal", "load_relay_config", "make_run_dir", "DEMO_CLIENT"]

DEMO_CLIENT = "demo"


class BadConfigFile(ValueError):
    """A config file given to a launch is refused: the file, the key and the reason, in one line."""


# -- ROS parameters files ---------------------------------------------------------------------------------------
def _type_name(value: Any) -> str:
    return {bool: "a bool", int: "an integer", float: "a float", str: "a string"}.get(type(value),
                                                                                     type(value).__name__)


def _typed_refusal(name: str, value: Any, default: Any) -> str:
    """Return the refusal ROS gives when a value of the wrong type overrides a statically typed parameter."""
    if type(value) is type(default):
        return ""
    if isinstance(default, float) and type(value) is int:
        return f"{name}: {value!r} is an integer, the parameter is a float (write {float(value)!r})"
    return f"{name}: expected {_type_name(default)}, got {_type_name(value)} {value!r}"


def _range_refusal(name: str, value: Any, extra: Mapping[str, Any]) -> str:
    for key in ("floating_point_range", "integer_range"):
        for limits in extra.get(key) or ():
            low, high = limits.from_value, limits.to_value
            if not (isinstance(value, (int, float)) and low <= value <= high):
                return f"{name}: {value!r} is out of range [{low:g}, {high:g}]"
    return ""


def _driver_refusal(name: str, value: Any) -> str:
    from strands_robots.nodes import driver_params

    reason = driver_params.value_refusal(name, value)
    if reason:
        return reason if reason.startswith(name) else f"{name}: {reason}"
    if name not in driver_params.RATE_RANGES:  # rates take integers too (dynamic typing)
        return _typed_refusal(name, value, driver_params.DEFAULTS[name])
    return ""


def _rollout_refusal(name: str, value: Any) -> str:
    from strands_robots.nodes.rollout_node import PARAMETERS, RolloutNode

    default, _, extra = PARAMETERS[name]
    reason = _typed_refusal(name, value, default) or _range_refusal(name, value, extra)
    if reason:
        return reason
    reason = RolloutNode._check(name, value)
    return f"{name}: {reason}" if reason and not reason.startswith(name) else reason


def _station_refusal(name: str, value: Any) -> str:
    from strands_robots.nodes.station_node import PARAMETERS

    reason = _typed_refusal(name, value, PARAMETERS[name][0])
    if reason:
        return reason
    if name == "operator" and value not in ("scripted", "manual"):
        return f"operator: must be scripted or manual, got {value!r}"
    if name == "station_id" and not value.strip():
        return "station_id: must be a non-empty string"
    if isinstance(value, float) and (not math.isfinite(value) or value < 0):
        return f"{name}: must be a finite number >= 0, got {value!r}"
    if name == "lease_duration_s" and not value > 0:
        return f"lease_duration_s: must be greater than 0, got {value!r}"
    if name in ("lease_priority", "action_horizon") and value < (1 if name == "action_horizon" else 0):
        return f"{name}: {value!r} is out of range"
    return ""


_REFUSALS = {"arm_driver": _driver_refusal, "rollout": _rollout_refusal, "station": _station_refusal}


def parameters_file_refusal(path: str) -> str:
    """Say in one line why ``path`` is not a parameters file our nodes would start with; "" when it is.

    Missing, not YAML, not node sections, a parameter none of our nodes declares, or a value of the wrong type
    or out of range for the node that declares it (``/**/rollout: control_frequency: 50 is an integer, ...``).
    """
    import yaml

    from strands_robots.nodes.process import STANDARD_PARAMETERS, params_file_error, unknown_parameters_error

    reason = params_file_error(path) or unknown_parameters_error(path)
    if reason:
        return reason
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    for section, body in data.items():
        name = str(section).rstrip("/").rsplit("/", 1)[-1]
        params = body.get("ros__parameters") if isinstance(body, dict) else None
        if name not in _REFUSALS or not isinstance(params, dict):
            continue
        for key, value in params.items():
            if key in STANDARD_PARAMETERS or str(key).startswith("qos_overrides."):
                continue
            reason = _REFUSALS[name](str(key), value)
            if reason:
                return f"parameters file {path}: {section}: {reason}"
    return ""


# -- the relay's config -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RelaySettings:
    """``config/relay.yaml``: where the relay a launch starts listens and keeps its store."""

    host: str = "127.0.0.1"
    port: int = 0                 # 0: a port free at launch time
    store: str = ""               # "": SQLite in the launch's private run dir
    poll_s: float = 0.2
    workers: int = 96
    max_message_bytes: int = 16 * 1024 * 1024


_RELAY_FIELDS = {"host": str, "port": int, "store": str, "poll_s": float, "workers": int, "max_message_bytes": int}


def _relay_field_refusal(key: str, value: Any) -> str:
    kind = _RELAY_FIELDS[key]
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
    if key == "store" and value and not (value.startswith("sqlite:") or value.startswith("postgresql://")):
        return f"store: {value!r} is neither sqlite:PATH nor postgresql://... (empty: SQLite in the run dir)"
    if key == "poll_s" and not value > 0:
        return f"poll_s: must be greater than 0, got {value!r}"
    if key == "workers" and value < 4:
        return f"workers: must be >= 4 (every open stream holds a thread), got {value}"
    if key == "max_message_bytes" and value < 1024:
        return f"max_message_bytes: must be >= 1024, got {value}"
    return ""


def load_relay_config(path: str) -> RelaySettings:
    """Read ``path`` (a top-level ``relay:`` mapping); :class:`BadConfigFile` names the key and the reason."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise BadConfigFile(f"relay config {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}:" if mark is not None else ""
        raise BadConfigFile(f"relay config {path}:{where} not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict) or set(data) != {"relay"} or not isinstance(data["relay"], dict):
        raise BadConfigFile(f"relay config {path}: expected one top-level mapping 'relay:'")
    body = data["relay"]
    for key in body:
        if key not in _RELAY_FIELDS:
            raise BadConfigFile(f"relay config {path}: relay: unknown key {key!r} (known: "
                                f"{', '.join(_RELAY_FIELDS)})")
        reason = _relay_field_refusal(key, body[key])
        if reason:
            raise BadConfigFile(f"relay config {path}: relay: {reason}")
    values = {k: (float(v) if _RELAY_FIELDS[k] is float else v) for k, v in body.items()}
    return RelaySettings(**values)


def relay_config_refusal(path: str) -> str:
    """Say in one line why ``path`` is not a relay config; "" when it is."""
    try:
        load_relay_config(path)
    except BadConfigFile as exc:
        return str(exc)
    return ""


def job_file_refusal(path: str) -> str:
    """Say in one line why ``path`` is not a job file (the task index, the field, the reason); "" when it is."""
    from strands_robots.station.job import JobSpecError
    from strands_robots.station.job_file import load_job_file

    try:
        load_job_file(path)
    except OSError as exc:
        return f"job file {path}: {exc.strerror or exc}"
    except (JobSpecError, ValueError) as exc:
        return f"job file {path}: {exc}"
    return ""


# -- the run dir ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunDir:
    """A launch's private files: ``path`` (0700), ``tokens`` (the relay's), one token file per side (0600)."""

    path: str
    tokens: str
    client_token_file: str
    station_token_file: str
    store: str


def _write_private(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def make_run_dir(station_id: str, *, client_id: str = DEMO_CLIENT, parent: Optional[str] = None) -> RunDir:
    """Make a private run dir with fresh tokens for one client and one station (see the module docstring)."""
    import yaml

    path = tempfile.mkdtemp(prefix="strands_launch_", dir=parent)  # mode 0700
    client, station = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    tokens = os.path.join(path, "tokens.yaml")
    _write_private(tokens, yaml.safe_dump({"clients": {client_id: client}, "stations": {station_id: station}}))
    client_file, station_file = os.path.join(path, "client_token"), os.path.join(path, "station_token")
    _write_private(client_file, client)
    _write_private(station_file, station)
    return RunDir(path=path, tokens=tokens, client_token_file=client_file, station_token_file=station_file,
                  store=f"sqlite:{os.path.join(path, 'relay.sqlite')}")
