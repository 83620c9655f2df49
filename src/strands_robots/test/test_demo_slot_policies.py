"""The demo comparison's two policies: the same vision policy, one of them never shown a camera frame.

``make run``'s comparison serves slot ``vision`` and slot ``blind`` with ``policies.demo.demo_slot_policies``: the
blind one must not find the cube that the seeing one finds in the very same observation.
"""

from __future__ import annotations

import numpy as np

from strands_robots.client import pb
from strands_robots.policies.demo import DemoPolicy, demo_slot_policies


def _observation():
    image = np.zeros((96, 96, 3), dtype=np.uint8)
    image[40:50, 60:70] = (220, 20, 20)  # a red cube in the scene camera's frame
    return {"scene.image": image, "right.joint_1.pos": 0.0}


def _looked(policy: DemoPolicy):
    policy.reset(pb.Task(task_id="reach_cube_quick", instruction="reach toward the red cube"))
    policy.act(_observation())
    return policy.inner._vision.seen  # where the vision policy placed the cube (None: it saw none)


def test_the_first_slot_sees_the_cube_and_every_other_slot_is_blind_to_the_same_frame():
    policies = demo_slot_policies("scripted", {"mode": "vision_reach"}, ("vision", "blind", "also_blind"))
    assert list(policies) == ["vision", "blind", "also_blind"]
    assert [p.blind for p in policies.values()] == [False, True, True]
    assert _looked(policies["vision"]) is not None  # the cube's place on the table, from the frame
    assert _looked(policies["blind"]) is None and _looked(policies["also_blind"]) is None


def test_demo_job_refuses_a_comparison_over_the_stations_ros_service_before_anything_is_sent(capsys):
    """Over ``--ros`` one policy runs in the station: a comparison's slots are served only through a relay."""
    from strands_robots.cli import demo_job
    from strands_robots.cli.station_demo import default_demo_compare

    assert demo_job.main(["--ros", "--namespace", "nowhere", "--job-file", default_demo_compare()]) == 2
    assert "is a comparison job (compare: slots vision, blind): its slots are served through a relay, run it with " \
           "--relay" in capsys.readouterr().err
