"""The test run's own rules: each pytest-xdist worker's DDS domain, and which files ``make test-fast`` keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from fast_tests import FAST_ENV, ignore_in_fast_run, is_core_test_file
from ros_harness import dds_profile, profile_variable, worker_domain
from xdist_groups import LONGEST, ROOT, SHARED, assign, group_of

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


def test_every_file_is_its_own_group_and_files_sharing_a_session_fixture_share_one():
    system = group_of(ROOT / "test" / "test_station_chaos.py")
    assert system == "test/test_station_chaos.py"
    assert group_of(ROOT / "test" / "test_system_up.py") != system  # system tests spread over the workers too
    assert group_of(HERE / "test_chunks.py") == "src/strands_robots/test/test_chunks.py"
    up = ROOT / "test" / "test_system_up.py"  # split: a group per test, each with the file's rank
    assert group_of(up, "test_a") == "test/test_system_up.py::test_a" != group_of(up, "test_b")
    assert (group_of(ROOT / "test" / "test_report_main_job_recording.py")
            == group_of(ROOT / "test" / "test_export_lerobot_main_job.py")
            == group_of(ROOT / "test" / "test_station_demo_main.py") == "demo_main_job")


def test_the_longest_groups_are_handed_out_first_and_a_files_own_order_is_kept():
    class Item:
        def __init__(self, path, name):
            self.path, self.name, self.nodeid, self.markers = ROOT / path, name, f"{path}::{name}", []

        def get_closest_marker(self, name):
            return next((m for m in self.markers if m.name == name), None)

        def add_marker(self, marker):
            self.markers.append(marker.mark)

    items = [Item("src/strands_robots/test/test_chunks.py", "a"), Item("test/test_station_crash.py", "b"),
             Item("src/strands_robots/test/test_chunks.py", "c"), Item("test/test_station_relay_jobs.py", "d"),
             Item("test/test_station_crash.py", "e"), Item("test/test_system_up.py", "f")]
    assert LONGEST["test/test_system_up.py"] > LONGEST["test/test_station_relay_jobs.py"] > \
        LONGEST["test/test_station_crash.py"] > LONGEST.get("src/strands_robots/test/test_chunks.py", 0)
    assign(items)
    assert [i.nodeid.split("::")[1] for i in items] == ["f", "d", "b", "e", "a", "c"]
    assert [i.get_closest_marker("xdist_group").args[0] for i in items][:3] == [
        "test/test_system_up.py::f", "test/test_station_relay_jobs.py", "test/test_station_crash.py"]
    assert all(path in SHARED.values() or (ROOT / path).is_file() for path in LONGEST), "a stale name"


def test_the_tests_run_with_the_projects_dds_profile():
    import os

    # set at conftest import (isolate_dds), for this process and what it starts, under this Fast DDS's name: the
    # profile every node process takes (test_fastdds_profile.py pins what it holds)
    assert os.environ[profile_variable()] == dds_profile()
    source = Path(__file__).resolve().parents[1] / "strands_robots" / "dds" / Path(dds_profile()).name
    assert Path(dds_profile()).read_bytes() == source.read_bytes()  # the package's file, wherever it is imported from


@pytest.mark.parametrize("distro, name", [("humble", "FASTRTPS_DEFAULT_PROFILES_FILE"),
                                          ("jazzy", "FASTRTPS_DEFAULT_PROFILES_FILE"),
                                          ("kilted", "FASTDDS_DEFAULT_PROFILES_FILE"),
                                          ("rolling", "FASTDDS_DEFAULT_PROFILES_FILE")])
def test_the_profile_goes_where_the_distros_fast_dds_reads_it(monkeypatch, distro, name):
    monkeypatch.setenv("ROS_DISTRO", distro)
    assert profile_variable() == name
