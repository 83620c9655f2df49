"""System-test set-up: the same DDS isolation as the package's test conftest.

Every pytest process (and pytest-xdist worker) gets its own ROS_DOMAIN_ID and keeps discovery on this host,
set at import (before any test starts a node or a subprocess, which inherit it). Values already in the
environment win. The package's source tree goes first on PYTHONPATH, so the subprocesses import the code
under test rather than an older installed copy.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

PACKAGE_SRC = Path(__file__).resolve().parent.parent / "src" / "strands_robots"
sys.path.insert(0, str(PACKAGE_SRC / "test"))  # the package tests' shared harness

from fast_tests import ignore_in_fast_run  # noqa: E402
from rerun_reasons import register as register_rerun_reasons  # noqa: E402
from ros_harness import isolate_dds  # noqa: E402

isolate_dds()
# gRPC's fork support off before any test module imports grpc (strands_robots/__init__.py says why): the tests
# fork restarts beside busy relay channels, and with it a restarted process could die before its exec.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


def pytest_configure(config):
    """Every rerun's reason printed at the end of the run (rerun_reasons.py)."""
    register_rerun_reasons(config)


def pytest_ignore_collect(collection_path, config):
    """``make test-fast``: no system test (fast_tests.py)."""
    return True if ignore_in_fast_run(collection_path, system_tests=True) else None
_path = os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.environ.get("PYTHONPATH") else []
if str(PACKAGE_SRC) not in _path:
    os.environ["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_SRC), *_path])


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker hook reads the marks into the node ids
def pytest_collection_modifyitems(config, items):
    """With pytest-xdist workers: a group per file (or per shared session fixture), longest first (xdist_groups.py)."""
    from xdist_groups import assign

    assign(items)


@pytest.fixture(scope="session")
def demo_main_job(tmp_path_factory):
    """The main job run once to its end with its recording (``up --record``), a listener and a late recorder.

    For the test of what its user sees and the tests that read its recording (demo_main_job.py): the job is some
    25 s of real episodes, run once for all of them. Skips when rclpy cannot be imported.
    """
    pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
    pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
    from demo_main_job import run_demo_main_job

    return run_demo_main_job(tmp_path_factory.mktemp("main_job"))
