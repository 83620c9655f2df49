"""The vision task: a policy that can only reach the red cube by finding it in ``scene.image``.

In process, over the real MuJoCo arms and the real offscreen renders: the scripted provider's ``vision_reach``
mode finds the cube, reaches toward it, and the scripted operator's predicate (``object_distance_m < 0.06``,
measured from the final joint readings) says success; with the scene camera covered (``camera_cover: scene``)
the same task fails.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from strands_robots.cameras.config import load_camera_set
from strands_robots.cameras.reach import DISTANCE_KEY, object_distance, with_object_distance
from strands_robots.cameras.scene import covered_cameras
from strands_robots.policies.registry import make_policy
from strands_robots.policies.vision_reach import SCENE_CAMERA, find_object, pixel_to_table, reach_joints
from strands_robots.simulation import Simulation
from strands_robots.station.success_predicate import parse_success_predicate

THRESHOLD = 0.06
SUCCESS = f"{DISTANCE_KEY} < {THRESHOLD}"


def test_the_calibration_is_the_mjcf_scene_camera():
    from xml.etree import ElementTree

    from strands_robots.arm.model import MODEL_PATH

    cam = next(c for c in ElementTree.parse(MODEL_PATH).iter("camera") if c.get("name") == "scene")
    assert tuple(float(v) for v in cam.get("pos").split()) == SCENE_CAMERA["pos"]
    assert tuple(float(v) for v in cam.get("xyaxes").split()) == SCENE_CAMERA["xyaxes"]
    assert float(cam.get("fovy")) == SCENE_CAMERA["fovy_deg"]


def test_find_object_needs_red_and_ignores_orange_and_black():
    image = np.zeros((64, 64, 3), dtype=np.uint8)
    assert find_object(image) is None  # a covered lens
    image[10:20, 30:40] = (204, 102, 51)  # the right arm's orange
    assert find_object(image) is None
    image[40:44, 5:9] = (230, 25, 25)
    assert find_object(image) == (6.5, 41.5)


def test_the_inverse_kinematics_puts_the_tool_point_where_asked():
    import mujoco

    from strands_robots.arm.model import load_model

    model = load_model()
    data = mujoco.MjData(model)
    for x, y in ((0.25, -0.3), (0.45, 0.3), (0.35, 0.0), (0.3, -0.2)):
        arm = "left" if y >= 0 else "right"
        joints = reach_joints(x, y, arm)
        assert joints is not None and joints["joint_4"] <= 1.25
        data.qpos[:] = 0.0
        for name, value in joints.items():
            data.qpos[model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"{arm}/{name}")]] = value
        mujoco.mj_kinematics(model, data)
        tcp = data.site_xpos[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, f"{arm}/tcp")]
        assert math.dist(tcp[:2], (x, y)) < 1e-6 and tcp[2] == pytest.approx(0.055, abs=1e-6)


def test_the_centre_pixel_ray_meets_the_table_below_the_cameras_axis():
    x, y = pixel_to_table(111.5, 111.5, 224, 224, z=0.0)
    assert y == pytest.approx(0.0, abs=1e-9)
    # The optical axis from (1.5, 0, 1.2) along -(0, -1.2, 1)/|.| * ... meets z=0 at x = 1.5 - 1.2 * 1.2.
    assert x == pytest.approx(1.5 - 1.2 * 1.2, abs=1e-6)


@pytest.mark.parametrize("fmt, quality, size", [("png", 90, (224, 224)), ("jpeg", 90, (224, 224)),
                                                ("jpeg", 50, (224, 224)), ("jpeg", 90, (96, 96))])
def test_the_cube_is_found_within_a_centimetre_in_frames_as_the_relay_delivers_them(fmt, quality, size):
    from strands_robots.cameras.mujoco_cameras import MujocoCameras
    from strands_robots.client.images import decode_image, encode_image

    source = MujocoCameras(load_camera_set().select(["scene"]))
    try:  # the arms at the station's start pose; JPEG ringing must not pull the centroid off the cube
        source.pose({f"{arm}.{k}": v for arm in ("left", "right")
                     for k, v in {"joint_2": 0.4, "joint_3": 1.0, "joint_4": 0.9, "gripper": 0.3}.items()})
        for x, y in ((0.4, -0.15), (0.25, -0.3), (0.45, 0.3), (0.3, 0.1)):
            source.set_scene({"object_x": x, "object_y": y}, None)
            frame = decode_image(encode_image(source.render("scene"), fmt, quality, size=size))
            found = find_object(frame)
            assert found is not None, (x, y)
            # within a centimetre at 224 px; a pixel is ~1.2 cm of table at 96 px
            assert math.dist(pixel_to_table(*found, size[0], size[1]), (x, y)) < 0.012 * 224 / size[0] + 0.005, \
                (x, y, found)
    finally:
        source.close()


def test_covered_cameras_reads_the_task_parameter():
    assert covered_cameras({"camera_cover": "scene, wrist"}) == {"scene", "wrist"}
    assert covered_cameras({"parameters": {"camera_cover": "scene"}}) == {"scene"}
    assert covered_cameras({}) == frozenset()


@pytest.mark.parametrize("place", [{"object_x": "0.42", "object_y": "-0.18"}, {"object_x": "0.3", "object_y": "0.25"}])
def test_the_vision_task_succeeds_with_the_camera_and_fails_with_it_covered(place):
    predicate = parse_success_predicate(SUCCESS)
    sim = Simulation.with_robot("alice", cameras=load_camera_set().select(["scene"]))
    results = {}
    for covered in (False, True):
        params = dict(place, **({"camera_cover": "scene"} if covered else {}))
        policy = make_policy("scripted", {"mode": "vision_reach"})
        captured = []

        def observer(event, captured=captured):
            if type(event).__name__ == "RunPolicyStep":
                captured.append(event)

        out = sim.run_policy("alice", policy, n_steps=125, control_frequency=50.0, fast_mode=True,
                             task={"task_id": "reach_cube", "parameters": params}, observer=observer)
        assert out["status"] == "success", out
        final = sim.robot("alice").backend.observe()
        judged = with_object_distance(final, params, None)
        results[covered] = (judged[DISTANCE_KEY], predicate(None, judged), policy._vision.seen)
    (d_seen, ok_seen, seen), (d_covered, ok_covered, seen_covered) = results[False], results[True]
    assert seen is not None and math.dist(seen, (float(place["object_x"]), float(place["object_y"]))) < 0.01
    assert ok_seen and d_seen < THRESHOLD, results
    assert seen_covered is None and not ok_covered and d_covered > 2 * THRESHOLD, results


def test_object_distance_is_none_without_joint_readings_and_grows_with_the_objects_offset():
    assert object_distance({"step": 1}, {}, None) is None
    home = {f"{arm}.joint_{i}.pos": 0.0 for arm in ("left", "right") for i in range(1, 7)}
    near = object_distance(home, {"object_x": "0.25", "object_y": "0.3"}, None)
    far = object_distance(home, {"object_x": "0.45", "object_y": "0.3"}, None)
    assert near < far


def test_the_scripted_operator_judges_object_distance_m_from_the_final_joints_of_a_real_rollout():
    from strands_robots.station.episodes import JobRunner
    from strands_robots.station.inprocess import InProcessRobot
    from strands_robots.station.job_file import job_spec_from_mapping
    from strands_robots.station.record import JobRecord
    from strands_robots.station.scripted_operator import ScriptedOperator

    def run(bound):
        spec = job_spec_from_mapping({
            "job_id": "vision-op", "client_id": "team", "station_id": "sim", "episodes_total": 1, "duration_s": 0.5,
            "policy": {"provider": "scripted", "config": {"mode": "torque_ramp", "target": 1.0}},
            "tasks": [{"task_id": "t", "instruction": "hold", "scoring": [
                {"name": "near", "question": "Near?", "answer_type": "yes_no", "max_points": 1,
                 "success_answer": "yes"}],
                "parameters": {"object_x": "0.4", "object_y": "-0.15", "success_when": f"{DISTANCE_KEY} < {bound}"}}]})
        return JobRunner(JobRecord(spec), InProcessRobot(), ScriptedOperator()).run().episodes[0]

    # At the start pose the right tool point is ~0.29 m from the cube: within 0.5 m, not within 0.1 m.
    near, far = run(0.5), run(0.1)
    assert near.scored and near.success, near
    assert far.scored and not far.success, far
