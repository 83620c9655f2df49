"""The station reads the cameras the rollout node observes (its ``cameras`` parameter) for the compatibility gate.

A rollout node just started can be in the graph before its answers reach the station: a lost reply. The question
is asked again within the bound, so one lost answer never makes the gate compare a policy with "no cameras".
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.srv", reason="strands_robots_msgs is not built (colcon build)")

from rclpy.task import Future  # noqa: E402

from strands_robots.nodes.station import policy as station_policy  # noqa: E402
from strands_robots.nodes.station.policy import StationPolicyCalls  # noqa: E402


class ParameterClient:
    """``get_parameters`` whose first ``lost`` answers never come; later ones are answered on another thread."""

    def __init__(self, lost: int, cameras: str = "scene,wrist") -> None:
        self.lost = lost
        self.cameras = cameras
        self.asked = 0

    def wait_for_services(self, timeout_sec: float) -> bool:
        return True

    def get_parameters(self, names):
        assert names == ["cameras"]
        self.asked += 1
        future = Future()
        if self.asked > self.lost:
            value = SimpleNamespace(string_value=self.cameras)
            threading.Timer(0.01, future.set_result, args=(SimpleNamespace(values=[value]),)).start()
        return future


def calls(client) -> StationPolicyCalls:
    port = StationPolicyCalls()
    port._rollout_params = client
    return port


def test_a_lost_answer_is_asked_again_and_the_cameras_are_read(monkeypatch):
    monkeypatch.setattr(station_policy, "_PARAMETERS_RETRY_S", 0.05)
    client = ParameterClient(lost=2)
    assert calls(client).observed_cameras() == ("scene", "wrist")
    assert client.asked == 3


def test_no_answer_within_the_bound_is_not_known(monkeypatch):
    monkeypatch.setattr(station_policy, "_PARAMETERS_RETRY_S", 0.05)
    monkeypatch.setattr(station_policy, "_PARAMETERS_TIMEOUT_S", 0.3)
    client = ParameterClient(lost=10**6)
    started = time.monotonic()
    assert calls(client).observed_cameras() is None  # the gate then uses the station's own cameras parameter
    assert time.monotonic() - started < 2.0 and client.asked >= 3


def test_a_rollout_node_with_no_cameras_says_so():
    assert calls(ParameterClient(lost=0, cameras="")).observed_cameras() == ()
