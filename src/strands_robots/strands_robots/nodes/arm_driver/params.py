"""The arm driver node's parameters: names, defaults, descriptors, and when each may change.

| parameter            | type   | changes                                                                   |
|----------------------|--------|---------------------------------------------------------------------------|
| hardware             | string | read-only (the adapter is built at configure)                             |
| config_file          | string | applies at configure: refused while configured (cleanup first)            |
| publish_clock        | bool   | applies at configure: refused while configured                            |
| require_lease        | bool   | safety: refused while active (deactivate first); every change is logged   |
| control_rate_hz      | double | applied at once                                                           |
| status_rate_hz       | double | applied at once                                                           |
| diagnostics_rate_hz  | double | applied at once                                                           |
| autostart            | bool   | read-only (main() reads it at start)                                      |

:func:`parameters_refusal` decides a set of run-time changes; :func:`default_config_path` is what an empty
``config_file`` reads.

Rates accept integers too (``-p control_rate_hz:=50``): they are declared with dynamic typing and checked here,
so no private rclpy state is touched to coerce an override.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Mapping, Optional

from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor

STATE_UNCONFIGURED = "unconfigured"
STATE_INACTIVE = "inactive"
STATE_ACTIVE = "active"

DEFAULTS: Mapping[str, Any] = {
    "hardware": "mujoco",
    "config_file": "",
    "publish_clock": False,
    "require_lease": True,
    "control_rate_hz": 200.0,
    "status_rate_hz": 2.0,
    "diagnostics_rate_hz": 1.0,
    "autostart": False,
}

RATE_RANGES: Mapping[str, tuple[float, float]] = {
    "control_rate_hz": (1.0, 2000.0),
    "status_rate_hz": (0.1, 50.0),
    "diagnostics_rate_hz": (0.1, 10.0),
}

# Changing these weakens (or could weaken) safety while the arms run.
SAFETY_PARAMETERS = ("require_lease",)
# These apply when the driver is configured; changing them later would be accepted and ignored.
CONFIGURE_PARAMETERS = ("config_file", "publish_clock")

_DESCRIPTIONS = {
    "hardware": "Hardware adapter: 'mujoco' (built in), an entry point of the group strands_robots.hardware, "
                "or module:factory. Read-only.",
    "config_file": "Driver config YAML (ratings, margins, start pose); empty: the package's config/arms.yaml "
                   "(hardware ros2_control: config/ros2_control/arms.yaml). Read at configure; refused while "
                   "configured.",
    "publish_clock": "Publish the robot (simulation) time on /clock, for nodes run with use_sim_time. Read at "
                     "configure; refused while configured.",
    "require_lease": "Apply commands and start-pose moves only with the current lease token. Refused while "
                     "active (safety); every change is logged.",
    "control_rate_hz": "joint_states publish rate in Hz; keep it equal to the rollout's control rate. Applied "
                       "at once.",
    "status_rate_hz": "driver_status heartbeat rate in Hz (also published on every change). Applied at once.",
    "diagnostics_rate_hz": "/diagnostics rate in Hz. Applied at once.",
    "autostart": "Configure and activate at start (main() only), without lifecycle tools. Read-only.",
}


def descriptor(name: str) -> ParameterDescriptor:
    d = ParameterDescriptor(description=_DESCRIPTIONS[name],
                            read_only=name in ("hardware", "autostart"))
    if name in RATE_RANGES:
        low, high = RATE_RANGES[name]
        d.dynamic_typing = True  # accept 50 as well as 50.0; the type is checked by refusal()
        d.floating_point_range = [FloatingPointRange(from_value=low, to_value=high, step=0.0)]
    return d


def value_refusal(name: str, value: Any) -> str:
    """Why ``value`` is not acceptable for ``name`` at all (empty when it is)."""
    if name in RATE_RANGES:
        low, high = RATE_RANGES[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{name} must be a number, got {type(value).__name__} {value!r}"
        if not math.isfinite(value) or not low <= value <= high:
            return f"{name} {value!r} is out of range [{low:g}, {high:g}]"
    elif name == "config_file":
        if not isinstance(value, str):
            return f"config_file must be a string, got {value!r}"
        if value and not os.path.isfile(value):
            return f"config_file: no such file: {value!r}"
    elif name in ("require_lease", "publish_clock", "autostart"):
        if not isinstance(value, bool):
            return f"{name} must be a bool, got {type(value).__name__} {value!r}"
    elif name == "hardware":
        if not isinstance(value, str) or not value.strip():
            return "hardware must name an adapter, e.g. 'mujoco'"
    return ""


def change_refusal(name: str, old: Any, new: Any, state: str) -> str:
    """Say why a run-time change of ``name`` from ``old`` to ``new`` is refused in lifecycle ``state``.

    Empty when allowed; the value itself is checked by :func:`value_refusal`.
    """
    reason = value_refusal(name, new)
    if reason or new == old:
        return reason
    if name in SAFETY_PARAMETERS and state == STATE_ACTIVE:
        return f"{name} is read-only while the driver is active (safety): deactivate the driver first"
    if name in CONFIGURE_PARAMETERS and state in (STATE_INACTIVE, STATE_ACTIVE):
        return f"{name} applies at configure: clean the driver up first"
    return ""


def parameters_refusal(changes: "list[tuple[str, Any]]", current: Callable[[str], Any], state: str, log: Any) -> str:
    """Say why a set of run-time changes ``(name, value)`` is refused in lifecycle ``state`` (empty: all allowed).

    The first refusal wins (none of the set applies then). Every attempt on a safety parameter is logged,
    accepted or refused, and any other refusal is logged too. Names the driver does not declare are skipped.

    :param current: the parameter's value now, by name.
    :param log: the node's logger.
    """
    for name, value in changes:
        if name not in DEFAULTS:
            continue
        old = current(name)
        reason = change_refusal(name, old, value, state)
        if name in SAFETY_PARAMETERS:  # every attempt on a safety parameter is logged
            log.warning(f"parameter {name}: {old!r} -> {value!r} " + (f"refused: {reason}" if reason else "accepted"))
        if reason:
            if name not in SAFETY_PARAMETERS:
                log.warning(f"parameter refused: {reason}")
            return reason
    return ""


# The package's arms file per hardware, when config_file is empty (other hardware: config/arms.yaml).
DEFAULT_CONFIG_BY_HARDWARE = {"ros2_control": "ros2_control/arms.yaml"}


def default_config_path(hardware: str = "mujoco") -> Optional[str]:
    """Return the package's arms file for ``hardware`` (:mod:`strands_robots.package_files`); None: there is none.

    ``config/arms.yaml``; for ``ros2_control`` ``config/ros2_control/arms.yaml`` (the demo description's joints and
    controllers). None leaves the driver its built-in default. The file is the one of the code that runs: an
    install's own, or the checkout's when running from the source tree (it matches that tree's MJCF).
    """
    from strands_robots.package_files import PackageFileNotFound, config_path

    try:
        return config_path(DEFAULT_CONFIG_BY_HARDWARE.get(hardware, "arms.yaml"))
    except PackageFileNotFound:
        return None
