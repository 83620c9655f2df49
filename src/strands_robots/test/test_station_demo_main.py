"""The main job end to end (``strands-robots up`` = ``make run``): the demo job through a local relay.

``station_demo.run_demo`` starts the relay, the arm driver, the camera node, the rollout node and the station
node as processes (its supervisor ends every one of them however the run ends), submits ``config/demo_job.yaml``
through the Evaluation Client and serves the demo policy through the relay. The proof that camera frames flow
and matter: the vision task (``reach_cube``: the policy finds the cube in ``scene.image``, decoded from the JPEG
the station sent) succeeds, and the same task with the scene camera covered (``reach_cube_blind``) does not.
"""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("grpc", reason="grpcio is not installed")


def test_make_run_succeeds_and_the_vision_task_needs_its_camera():
    from strands_robots import station_demo

    finals, lines = [], []
    code = station_demo.run_demo(namespace=f"demo_{uuid.uuid4().hex[:8]}", write=lines.append,
                                 on_final=finals.append, timeout_s=600.0)
    text = "\n".join(lines)
    assert code == 0 and finals, text
    final = finals[0]
    assert final.state == "SUCCEEDED", text
    kept = {}
    for e in final.episodes:  # the last episode of each task is the one kept (faults and discards run again)
        kept[e.task.task_id] = e
    reach, blind = kept["reach_cube"], kept["reach_cube_blind"]
    assert (reach.end_condition, reach.scored, reach.success) == ("timeout", True, True), (reach, text)
    assert (blind.end_condition, blind.scored, blind.success) == ("timeout", True, False), (blind, text)
    assert "[demo] stopped: relay exit 0, arm_driver exit 0, camera exit 0" in text, text
