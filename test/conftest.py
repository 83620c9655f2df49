"""System-test set-up: the same DDS isolation as the package's test conftest.

Every pytest process gets its own ROS_DOMAIN_ID (1..100, seeded by the pid) and keeps discovery on this host,
set at import (before any test starts a node or a subprocess, which inherit it). Values already in the
environment win. The package's source tree goes first on PYTHONPATH, so the subprocesses import the code
under test rather than an older installed copy.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

PACKAGE_SRC = Path(__file__).resolve().parent.parent / "src" / "strands_robots"


def _ros_distro_is_humble() -> bool:
    """Humble predates ROS_AUTOMATIC_DISCOVERY_RANGE (Iron+); it only knows ROS_LOCALHOST_ONLY."""
    distro = os.environ.get("ROS_DISTRO", "")
    if distro:
        return distro == "humble"
    try:  # no sourced distro (the Kilted wheels in .venv): judge by rclpy's version, Humble's is 3.x
        from importlib.metadata import version

        return int(version("rclpy").split(".")[0]) < 4
    except Exception:
        return False


os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random(os.getpid()).randint(1, 100)))
if _ros_distro_is_humble():
    os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
else:
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
_path = os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.environ.get("PYTHONPATH") else []
if str(PACKAGE_SRC) not in _path:
    os.environ["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_SRC), *_path])
