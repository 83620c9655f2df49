"""A SIGKILLed and restarted process of a station is heard by its peers again, both ways, within a bound.

The station's processes run as ``strands-robots up`` runs them (``restart_probe.ProbedStation``: relay, arm driver,
camera node, rollout node, station node, a job waiting for its policy) with a probe node in this process as the
peer that outlives every restart. Each process is SIGKILLed and started again; the probe must get an answer from
it (its request reached the restarted process, the answer came back), hear its periodic topic, and for the relay
get a team's answer and see the station heard again, all within ``BOUND_S``: a generous bound (the figures,
about a second to a few seconds here, are bench/restart_reconnect.py's).

The cause it guards against: Fast DDS's shared-memory transport, which the processes do not use (the
project's profile, strands_robots/dds/fastdds.xml): a peer could keep writing into the shared-memory port of the
killed process after the restarted one had made a new port under the same name, and then never reach it. The
first test pins that no process of the station maps a Fast DDS shared-memory port at all.
"""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

from restart_probe import NODES, TARGETS, ProbedStation  # noqa: E402

BOUND_S = 60.0
READY_S = 180.0  # every process started and heard once, however loaded the machine


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    station = ProbedStation(str(tmp_path_factory.mktemp("restart")), namespace=f"restart_{os.getpid()}")
    try:
        first = station.wait_all_heard(READY_S)
        assert all(v is not None for v in first.values()), (first, station.stack.tail())
        yield station
    finally:
        station.close()
        assert station.stack.left_running() == [], station.stack.left_running()


def shared_memory_ports(pid: int) -> list:
    """Return the Fast DDS shared-memory ports process ``pid`` has mapped (listening on or writing to)."""
    with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
        names = {line.split(None, 5)[-1].strip() for line in maps if "/dev/shm/" in line}
    return sorted(n for n in names if "/fastdds_port" in n or "/fastrtps_port" in n)


def test_no_process_of_the_station_talks_over_fast_dds_shared_memory(probed):
    pids = {name: probed.stack.proc(name).pid for name in NODES}
    pids["this test's probe"] = os.getpid()
    ports = {name: shared_memory_ports(pid) for name, pid in pids.items()}
    assert all(not p for p in ports.values()), ports


@pytest.mark.parametrize("target", TARGETS)
def test_a_sigkilled_and_restarted_process_is_heard_by_its_peers_both_ways(probed, target):
    started = time.monotonic()
    figures = probed.measure_restart(target, pause_s=0.3, timeout_s=BOUND_S)
    print(f"{target} restarted: " + ", ".join(f"{k} {v:.2f} s" if v is not None else f"{k} NOT within {BOUND_S:g} s"
                                               for k, v in figures.items()), flush=True)
    missing = [k for k, v in figures.items() if v is None]
    assert not missing, (target, figures, time.monotonic() - started, probed.stack.tail(60))
    if target != "relay":
        assert shared_memory_ports(probed.stack.proc(target).pid) == []
