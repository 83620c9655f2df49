"""The test run's own rules: each pytest-xdist worker's DDS domain, and which files ``make test-fast`` keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from fast_tests import FAST_ENV, ignore_in_fast_run, is_core_test_file
from ros_harness import worker_domain

HERE = Path(__file__).resolve().parent


def test_each_worker_gets_a_domain_of_its_own_that_no_run_uses_as_its_base():
    assert worker_domain(48, "gw0") == 48 and worker_domain(48, "master") == 48
    firsts = {worker_domain(d, "gw1") for d in range(0, 101)}
    assert len(firsts) == 101 and firsts.isdisjoint(range(0, 101))  # never another run's own domain
    assert all(101 <= worker_domain(d, "gw1") <= 232 for d in range(1, 101))
    assert worker_domain(48, "gw1") == 148
    for d in range(0, 101):
        domains = [worker_domain(d, f"gw{i}") for i in range(4)]
        assert len(set(domains)) == 4, (d, domains)
        assert all(0 <= x <= 232 for x in domains), (d, domains)


def test_fast_run_keeps_core_files_and_ignores_process_and_system_tests(monkeypatch, tmp_path):
    assert is_core_test_file(HERE / "test_chunks.py")
    assert not is_core_test_file(HERE / "test_process.py")  # starts node processes
    assert not is_core_test_file(HERE / "test_monitor_cameras.py")  # another test module's camera process
    core = tmp_path / "test_core.py"
    core.write_text("import numpy\n\ndef test_x():\n    assert numpy.zeros(1)[0] == 0\n")
    monkeypatch.delenv(FAST_ENV, raising=False)
    assert not ignore_in_fast_run(HERE / "test_process.py")  # not a fast run: everything is collected
    monkeypatch.setenv(FAST_ENV, "1")
    assert ignore_in_fast_run(HERE / "test_process.py")
    assert not ignore_in_fast_run(core)
    assert ignore_in_fast_run(core, system_tests=True)
    assert not ignore_in_fast_run(tmp_path / "helpers.py")  # not a test file: left to pytest


@pytest.mark.parametrize("line", ["import rclpy", "from test_camera_node import CameraProcess",
                                  "proc = subprocess.run(['x'])"])
def test_one_line_naming_a_process_or_ros_makes_a_file_not_core(tmp_path, line):
    path = tmp_path / "test_t.py"
    path.write_text(f"{line}\n")
    assert not is_core_test_file(path)
