"""How ``make test`` shares the tests between its pytest-xdist workers (``--dist loadgroup``).

- Every test file is a group of its own: a file's tests and its module fixtures stay in one worker (``--dist
  loadfile``'s rule), and the files go to whichever worker is free. The system tests under ``test/`` too: each
  brings up and ends its own station stack, so two files never share one. A file whose tests share no process
  fixture may be split, a group per test (:data:`SPLIT`).
- Files that read one session fixture are one group (:data:`SHARED`), so the fixture runs once, not once per
  worker that happens to take one of them: the recorded main job is some 25 s of real episodes. So are files
  that build in one source directory.
- The groups start longest first (:data:`LONGEST`, then collection order), so the long system tests are not
  left for the end of a run where one of them would keep a single worker busy while the others are done.

pytest-xdist 3.8's loadgroup scheduler hands a worker its next group when the one it runs has at most two tests
left, in the order of the collected items; :func:`assign` marks the groups and orders the items.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SYSTEM_TESTS = ROOT / "test"
PACKAGE_TESTS = ROOT / "src" / "strands_robots" / "test"

# Files that share a session-scoped fixture: one group each, named for the fixture.
SHARED = {
    # the main job, run once and recorded: what its user sees, and the report and export of its recording
    "test/test_station_demo_main.py": "demo_main_job",
    "test/test_report_main_job_recording.py": "demo_main_job",
    "test/test_export_lerobot_main_job.py": "demo_main_job",
    # each pip-installs clients/python from its directory, whose build/ and egg-info each removes afterwards
    "src/strands_robots/test/test_client_venv.py": "client_dist_install",
    "src/strands_robots/test/test_openpi_client_venv.py": "client_dist_install",
    "test/test_teams_page.py": "client_dist_install",
}

# Files whose tests share no process fixture (each starts and ends its own processes): every test is a group of its
# own, so the file's long run is shared between the workers instead of holding one of them.
SPLIT = frozenset({"test/test_system_up.py", "test/test_station_interval_coverage.py"})

# The longest groups, longest first: seconds each took in three-worker runs on this 2-core machine (2026-12-05),
# every group of 5 s or more. Only the order matters; a group missing here starts after these, in collection
# order (the system tests under test/ last), so a long one left out ends a run alone. A split file's tests start
# with its rank.
LONGEST = {
    "client_dist_install": 195,  # the teams page test: a bare venv, a station, two jobs, an openpi server
    "test/test_station_chaos.py": 125,  # with the camera node among its targets: 116-171 s alone here
    "test/test_station_interval_coverage.py": 100,  # 27 tests of 2 000 simulated jobs each, 7-40 s apiece
    "test/test_system_up.py": 75,
    "demo_main_job": 60,
    "test/test_station_relay_jobs.py": 52,
    "test/test_station_preflight.py": 45,
    "test/test_rescore_main_job_recording.py": 40,
    "test/test_station_crash.py": 51,
    "src/strands_robots/test/test_rollout_node.py": 36,
    "test/test_restart_reconnect.py": 35,
    "test/test_station_authority.py": 29,
    "src/strands_robots/test/test_arm_driver_node.py": 27,
    "src/strands_robots/test/test_export_lerobot_recorded_station.py": 33,  # one-worker runs, 2026-12-06
    "src/strands_robots/test/test_stream_hook_aborts.py": 22,
    "src/strands_robots/test/test_rollout_cameras.py": 18,
    "src/strands_robots/test/test_rollout_faults.py": 18,
    "src/strands_robots/test/test_station_goal_race.py": 17,
    "src/strands_robots/test/test_rollout_node_processes.py": 17,
    "test/test_demo_job_cli.py": 16,
    "test/test_station_netns.py": 16,
    "src/strands_robots/test/test_station_node.py": 14,
    "src/strands_robots/test/test_relay_liveness.py": 13,
    "test/test_relay_cluster_failover.py": 13,
    "src/strands_robots/test/test_camera_node.py": 12,
    "src/strands_robots/test/test_station_goal_faults.py": 12,
    "src/strands_robots/test/test_relay_cluster_forwarding.py": 10,
    "src/strands_robots/test/test_command_stream.py": 9,
    "src/strands_robots/test/test_process.py": 9,
    "test/test_station_policy_gate.py": 9,
    "src/strands_robots/test/test_action_client.py": 7,
    "src/strands_robots/test/test_foxglove_live.py": 7,
    "test/test_station_recordings.py": 10,
    "src/strands_robots/test/test_driver_process.py": 7,
    "src/strands_robots/test/test_relay_fault.py": 6,
    "src/strands_robots/test/test_relay_operations.py": 6,
    "test/test_station_recordings_restart.py": 6,
    "src/strands_robots/test/test_client_submit.py": 6,
    "src/strands_robots/test/test_relay_recordings.py": 6,
    "src/strands_robots/test/test_monitor_widget.py": 6,
    "src/strands_robots/test/test_relay_submit.py": 6,
    "src/strands_robots/test/test_record_cameras.py": 6,
    "src/strands_robots/test/test_web_status_page.py": 5,
    "src/strands_robots/test/test_rollout_camera_recording.py": 5,
    "src/strands_robots/test/test_station_procedure.py": 5,
    "src/strands_robots/test/test_web_browser.py": 5,
    "src/strands_robots/test/test_station_goal_retry.py": 5,
}


def group_of(path: Path, test: str = "") -> str:
    """Return the xdist group of test ``test`` of the file at ``path``.

    The file's path from the repository root, its shared fixture's name, or (a :data:`SPLIT` file) ``path::test``.
    """
    path = Path(path).resolve()
    try:
        name = path.relative_to(ROOT).as_posix()
    except ValueError:  # a file outside the repository (pytester's): a group of its own
        return str(path)
    if name in SPLIT and test:
        return f"{name}::{test}"
    return SHARED.get(name, name)


def start_rank(group: str) -> float:
    """Where ``group`` starts: the longest first (a negative of its seconds), the rest after them."""
    return -LONGEST.get(group.split("::")[0], 0)


def assign(items) -> None:
    """Mark each collected item with its group (an item already in a group keeps it); longest groups first."""
    groups = {}
    for item in items:
        marker = item.get_closest_marker("xdist_group")
        if marker is None:
            group = group_of(Path(str(item.path)), item.name)
            item.add_marker(pytest.mark.xdist_group(group))
        else:
            group = marker.args[0] if marker.args else marker.kwargs.get("name", "")
        groups[item.nodeid] = group
    items.sort(key=lambda item: start_rank(groups[item.nodeid]))  # stable: a file's own order is kept
