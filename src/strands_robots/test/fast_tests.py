"""``make test-fast``: the core unit tests alone, picked by what a test file's source says it needs.

With ``STRANDS_ROBOTS_TEST_FAST=1`` both conftests ignore every test file that starts processes or needs ROS,
DDS, a network server, a browser, a venv or another test module's harness (its source names one of
:data:`NEEDS_MORE`), and every system test under ``test/``. What is left are the ROS-free cores (the rollout
loop, the driver core, the station procedure, validation, conversions without DDS): under a minute here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

FAST_ENV = "STRANDS_ROBOTS_TEST_FAST"
NEEDS_MORE = re.compile(
    r"rclpy|subprocess|Popen|multiprocessing|ros_context|ros_harness|dds_echo|launch|postgres|chromium|selenium"
    r"|venv|grpc|relay_harness|spawn|monitor_helpers|recorder_lines|rqt|^from test_\w+ import|^import test_\w+",
    re.M)


def fast_only() -> bool:
    return os.environ.get(FAST_ENV, "") not in ("", "0")


def is_core_test_file(path: Path) -> bool:
    """Tell whether the test file at ``path`` is a core unit test (its source names nothing in NEEDS_MORE)."""
    try:
        return NEEDS_MORE.search(path.read_text(encoding="utf-8")) is None
    except OSError:
        return False


def ignore_in_fast_run(path: Path, system_tests: bool = False) -> bool:
    """Tell ``pytest_ignore_collect`` to skip ``path``: in a fast run, every system test and non-core test file."""
    if not fast_only() or not (path.name.startswith("test_") and path.suffix == ".py"):
        return False
    return system_tests or not is_core_test_file(path)
