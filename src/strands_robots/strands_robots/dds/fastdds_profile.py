"""The project's Fast DDS profile: which file, under which variable, and when a process takes it.

Every strands_robots process that makes a ROS node (the node processes, whatever ``strands-robots up`` and the
launch files start, the command-line tools) calls :func:`use_project_profile` before ``rclpy.init``
(``ros/process.py``). The profile is ``fastdds.xml`` beside this module (``fastdds2.xml`` under Fast DDS 2's
element names); its comment and docs/restarts.md say what it sets and why: in short, user data and
discovery over UDP rather than Fast DDS's shared memory, so a process killed with SIGKILL and started again is
heard by the processes that outlived it within about a second.

The user's own Fast DDS settings win. Nothing is set when

- ``FASTDDS_DEFAULT_PROFILES_FILE`` or ``FASTRTPS_DEFAULT_PROFILES_FILE`` is set (to anything): that is the
  user's profile (Fast DDS 3 reads the first and still the second, Fast DDS 2 only the second);
- the working directory holds ``DEFAULT_FASTDDS_PROFILES.xml`` (``DEFAULT_FASTRTPS_PROFILES.xml`` for Fast DDS
  2), which Fast DDS loads by itself, after the file the variable names: it would be merged with ours;
- ``RMW_IMPLEMENTATION`` names a middleware other than Fast DDS (which would not read the file).

No ROS import: this decides from the environment only.
"""

from __future__ import annotations

import os
from typing import Dict, Mapping, MutableMapping, Optional

__all__ = ["PROFILE_VARIABLES", "fast_dds_2", "profile_variable", "profile_path", "project_profile_setting",
           "use_project_profile"]

# Fast DDS 3 (Kilted and later) reads the first and, with a deprecation warning, the second; Fast DDS 2 (Humble,
# Iron, Jazzy) only the second.
PROFILE_VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")
# The file each Fast DDS generation loads from the working directory by itself.
_CWD_PROFILES = {False: "DEFAULT_FASTDDS_PROFILES.xml", True: "DEFAULT_FASTRTPS_PROFILES.xml"}
_FAST_DDS_RMWS = ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")
_FAST_DDS_2_DISTROS = ("humble", "iron", "jazzy")
_HERE = os.path.dirname(os.path.abspath(__file__))


def fast_dds_2(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Tell whether this ROS's Fast DDS is 2.x (Humble, Iron, Jazzy) rather than 3.x (Kilted and later).

    A sourced distro says so in ``ROS_DISTRO``; without one (the PyPI wheels in a venv) rclpy's version does:
    Kilted's is 9.x, Jazzy's 7.x, Humble's 3.x. Read from the package metadata, so rclpy is not imported.
    """
    env = os.environ if environ is None else environ
    distro = env.get("ROS_DISTRO", "")
    if distro:
        return distro in _FAST_DDS_2_DISTROS
    try:
        from importlib.metadata import version

        return int(version("rclpy").split(".")[0]) < 9
    except Exception:
        return False


def profile_variable(environ: Optional[Mapping[str, str]] = None) -> str:
    """Name the variable this ROS's Fast DDS reads its profile file from."""
    return "FASTRTPS_DEFAULT_PROFILES_FILE" if fast_dds_2(environ) else "FASTDDS_DEFAULT_PROFILES_FILE"


def profile_path(environ: Optional[Mapping[str, str]] = None) -> str:
    """Path of the project's profile in this ROS's Fast DDS's element names."""
    return os.path.join(_HERE, "fastdds2.xml" if fast_dds_2(environ) else "fastdds.xml")


def project_profile_setting(environ: Mapping[str, str], cwd: str) -> Dict[str, str]:
    """Return the variable to set for the project's profile (``{name: path}``), or ``{}`` when the user's wins.

    :param environ: the process's environment.
    :param cwd: its working directory (where Fast DDS looks for its default file by itself).
    """
    if any(name in environ for name in PROFILE_VARIABLES):
        return {}
    rmw = environ.get("RMW_IMPLEMENTATION", "")
    if rmw and rmw not in _FAST_DDS_RMWS:
        return {}
    if os.path.exists(os.path.join(cwd, _CWD_PROFILES[fast_dds_2(environ)])):
        return {}
    return {profile_variable(environ): profile_path(environ)}


def use_project_profile(environ: Optional[MutableMapping[str, str]] = None,
                        cwd: Optional[str] = None) -> Dict[str, str]:
    """Set the project's profile in ``environ`` (``os.environ``) unless the user's wins; return what was set.

    Call before ``rclpy.init``: Fast DDS reads the variable when the process's first participant is made. The
    processes this one starts inherit it.
    """
    env = os.environ if environ is None else environ
    setting = project_profile_setting(env, os.getcwd() if cwd is None else cwd)
    env.update(setting)
    return setting
