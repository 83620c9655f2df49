"""What every launch file of this package shares: one output policy, one way to end, one parameters-file check.

Imported by the files in ``launch/`` (``ros2 launch`` puts this package on the path), so none of them copies
another or loads a sibling file. Only ``end_launch_with`` needs ``launch`` itself, and imports it when called.
"""

from __future__ import annotations

import sys


class ProcessFailed(RuntimeError):
    """A launched process exited non-zero while the launch was not shutting down."""


class BadParametersFile(ValueError):
    """The parameters file given to the launch does not read as one (missing, not YAML, not node sections)."""


def end_launch_with(name: str, meaning: str):
    """Return an OnProcessExit callback: a clean exit ends the launch, a failed one makes it exit non-zero.

    ros2 launch exits non-zero only when an exception is raised inside it, so a failed exit raises. Nothing
    happens while the launch is already shutting down (Ctrl-C): a second Shutdown then is what made every
    Ctrl-C end in "Cannot shutdown a ROS adapter that is not running".
    """
    from launch.actions import Shutdown

    def on_exit(event, context):
        if context.is_shutdown:
            return None
        if event.returncode != 0:
            raise ProcessFailed(f"{name} exited with code {event.returncode} ({meaning})")
        return [Shutdown(reason=f"{name} finished")]

    return on_exit


def check_parameters_file(context, config_file):
    """Refuse a bad parameters file before any node starts: one error line naming the file, key and reason.

    Bad: missing, not YAML, not node sections, a parameter none of our nodes declares (a typo ROS ignores), or
    a value of the wrong type or out of range for the node that declares it.
    """
    from strands_robots.cli.parameters_file import parameters_file_refusal

    path = config_file.perform(context) if hasattr(config_file, "perform") else str(config_file)
    reason = parameters_file_refusal(path)
    if reason:
        raise BadParametersFile(reason)
    return []


def check_cameras(context, cameras, cameras_file):
    """Refuse a bad camera file or camera name before any node starts (one line: the file, the key, the reason)."""
    from strands_robots.cameras.config import cameras_refusal

    names = cameras.perform(context) if hasattr(cameras, "perform") else str(cameras)
    path = cameras_file.perform(context) if hasattr(cameras_file, "perform") else str(cameras_file)
    reason = cameras_refusal(path, names) if names.strip() else ""
    if reason:
        raise BadParametersFile(reason)
    return []


def output_options() -> dict:
    """Return the launch options for a node's output: unbuffered, with colour only on a terminal."""
    return {"output": "screen", "emulate_tty": sys.stdout.isatty(), "additional_env": {"PYTHONUNBUFFERED": "1"}}
