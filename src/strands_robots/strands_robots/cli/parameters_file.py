"""A ROS parameters file for our nodes, checked before any node starts (by the launch files and the CLI).

:func:`parameters_file_refusal` says in one line why a file is not one our nodes would start with: not a
parameters file (:func:`~strands_robots.ros.process.params_file_error`), a parameter none of our nodes
declares (:func:`unknown_parameters_error`, a typo ROS would ignore), or a value of the wrong type or out of range
for the node that declares it. The nodes' tables are imported on first use; none of them imports this module.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from strands_robots.ros.process import params_file_error

# Parameters every rclpy node has, whatever it declares.
STANDARD_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})


def node_parameter_names() -> dict:
    """Return the parameter names each strands_robots node declares, by node name (the default names)."""
    from strands_robots.nodes.rollout import params as rollout_params
    from strands_robots.nodes.station import node as station_node
    from strands_robots.nodes.arm_driver import params as driver_params

    return {
        "arm_driver": frozenset(driver_params.DEFAULTS),
        "rollout": frozenset(rollout_params.PARAMETERS),
        "station": frozenset(station_node.PARAMETERS),
    }


def unknown_parameters_error(path: str, known: "dict | None" = None) -> str:
    """Say in one line which parameter of ``path`` no node of ours declares (a typo ROS would ignore); "".

    Sections are matched to nodes by the last part of their name (``/**/rollout``, ``/strands/rollout``);
    sections of other nodes are left alone. Call it after :func:`params_file_error` found the file sound.
    """
    import yaml

    if known is None:
        try:
            known = node_parameter_names()
        except (ImportError, AttributeError):  # a node's table moved: the nodes still refuse bad values
            return ""
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    for section, body in data.items():
        name = str(section).rstrip("/").rsplit("/", 1)[-1]
        params = body.get("ros__parameters") if isinstance(body, dict) else None
        if name not in known or not isinstance(params, dict):
            continue
        allowed = known[name] | STANDARD_PARAMETERS
        for key in params:
            if key not in allowed and not str(key).startswith("qos_overrides."):
                close = sorted(k for k in allowed if _similar(str(key), k))
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                return f"parameters file {path}: {section}: unknown parameter {key!r}{hint}"
    return ""


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


# -- values, as each node would refuse them ------------------------------------------------------------------
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
    from strands_robots.nodes.arm_driver import params as driver_params

    reason = driver_params.value_refusal(name, value)
    if reason:
        return reason if reason.startswith(name) else f"{name}: {reason}"
    if name not in driver_params.RATE_RANGES:  # rates take integers too (dynamic typing)
        return _typed_refusal(name, value, driver_params.DEFAULTS[name])
    return ""


def _rollout_refusal(name: str, value: Any) -> str:
    from strands_robots.nodes.rollout.params import PARAMETERS, value_refusal

    default, _, extra = PARAMETERS[name]
    reason = _typed_refusal(name, value, default) or _range_refusal(name, value, extra)
    if reason:
        return reason
    reason = value_refusal(name, value)
    return f"{name}: {reason}" if reason and not reason.startswith(name) else reason


def _station_refusal(name: str, value: Any) -> str:
    from strands_robots.nodes.station.node import PARAMETERS

    reason = _typed_refusal(name, value, PARAMETERS[name][0])
    if reason:
        return reason
    if name == "operator" and value not in ("scripted", "manual", ""):
        return f"operator: must be scripted or manual, got {value!r}"
    if name == "profile" and value not in ("hardware", "simulated"):
        return f"profile: must be hardware or simulated, got {value!r}"
    if name == "station_id" and not value.strip():
        return "station_id: must be a non-empty string"
    if isinstance(value, float) and (not math.isfinite(value) or value < 0):
        return f"{name}: must be a finite number >= 0, got {value!r}"
    if name in ("lease_duration_s", "driver_ready_timeout_s") and not value > 0:
        return f"{name}: must be greater than 0, got {value!r}"
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
