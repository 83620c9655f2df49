"""Offscreen MuJoCo renders of the MJCF cameras.

The wrist view follows the arm, the scene view the object, and the CameraInfo numbers put the object where the
renderer draws it.
"""

from __future__ import annotations

import numpy as np
import pytest

from strands_robots.arm.model import ARM_NAMES
from strands_robots.cameras.adapter import load
from strands_robots.cameras.config import CameraConfig, CameraSet, load_camera_set
from strands_robots.cameras.intrinsics import mjcf_fovy_deg

START = {"joint_2": 0.4, "joint_3": 1.0, "joint_4": 0.9, "gripper": 0.3}


def _start_pose(**override):
    pose = {f"{a}.{j}": v for a in ARM_NAMES for j, v in START.items()}
    pose.update(override)
    return pose


@pytest.fixture(scope="module")
def source():
    src = load(load_camera_set(), adapter="mujoco")
    try:
        yield src
    finally:
        src.close()


def _diff(a, b) -> float:
    return float(np.abs(a.astype(int) - b.astype(int)).mean())


def test_the_wrist_frame_changes_when_the_arm_moves_and_not_otherwise(source):
    source.set_scene({}, 0)
    source.pose(_start_pose())
    before = source.render("wrist")
    again = source.render("wrist")
    source.pose(_start_pose(**{"right.joint_1": 0.6, "right.joint_4": 0.3}))
    moved = source.render("wrist")
    assert before.shape == (224, 224, 3) and before.dtype == np.uint8
    assert _diff(before, again) == 0.0  # the same pose renders the same frame
    assert _diff(before, moved) > 5.0


def test_the_scene_frame_changes_when_the_object_moves(source):
    source.pose(_start_pose())
    source.set_scene({}, 1)
    seed1 = source.render("scene")
    source.set_scene({}, 2)
    seed2 = source.render("scene")
    source.set_scene({"object_x": 0.45, "object_y": -0.3}, 1)
    placed = source.render("scene")
    source.set_scene({}, 1)
    seed1_again = source.render("scene")
    assert _diff(seed1, seed1_again) == 0.0
    assert _diff(seed1, seed2) > 0.05 and _diff(seed1, placed) > 0.05
    assert _red_centroid(seed1) != _red_centroid(seed2)


def _red_centroid(img):
    r, g, b = (img[..., i].astype(int) for i in range(3))
    mask = (r > 120) & (g < 60) & (b < 60)
    assert mask.sum() > 10, "the red object is not in view"
    ys, xs = np.nonzero(mask)
    return float(xs.mean()), float(ys.mean())


def test_camera_info_intrinsics_match_the_mjcf_fovy_and_project_the_object_where_it_is_drawn(source):
    import mujoco

    model = source.model
    cam = load_camera_set().camera("scene")
    k = source.intrinsics("scene")
    assert k.fovy_deg == pytest.approx(mjcf_fovy_deg(model, "scene")) == pytest.approx(45.0)
    assert (k.width, k.height, k.cx, k.cy) == (cam.width, cam.height, 111.5, 111.5)
    projected, drawn = [], []
    for seed in (3, 4, 5):
        source.set_scene({}, seed)
        img = source.render("scene")
        data = mujoco.MjData(model)
        data.mocap_pos[0] = source.object_position
        mujoco.mj_forward(model, data)
        cid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, "scene")
        # MuJoCo's camera looks down its -z with +y up; the optical frame (x right, y down, z forward) flips both.
        p = data.cam_xmat[cid].reshape(3, 3).T @ (np.asarray(source.object_position) - data.cam_xpos[cid])
        x, y, z = p[0], -p[1], -p[2]
        projected.append((k.fx * x / z + k.cx, k.fy * y / z + k.cy))
        drawn.append(_red_centroid(img))
    for (u, v), (cu, cv) in zip(projected, drawn):
        # The centre projects inside the drawn cube (its visible faces shift their centroid by a few pixels).
        assert abs(cu - u) < 4.0 and abs(cv - v) < 4.0, (u, v, cu, cv)
    for i in (1, 2):
        # Moving the object moves its image as the intrinsics say (the faces' shift cancels): within a pixel.
        du, dv = projected[i][0] - projected[0][0], projected[i][1] - projected[0][1]
        dcu, dcv = drawn[i][0] - drawn[0][0], drawn[i][1] - drawn[0][1]
        assert abs(du) + abs(dv) > 10.0
        assert abs(dcu - du) < 1.0 and abs(dcv - dv) < 1.0, (du, dv, dcu, dcv)


def test_a_camera_naming_no_mjcf_camera_is_refused_naming_the_cameras_there_are():
    cams = CameraSet("mujoco", (CameraConfig("top", "top_view", 64, 64, 10),))
    with pytest.raises(Exception, match=r"no camera 'top_view'; cameras: scene, right/wrist"):
        load(cams)


def test_a_source_made_on_one_thread_renders_on_another(source):
    import threading

    source.set_scene({}, 0)
    source.pose(_start_pose())
    here = source.render("scene")
    there: dict = {}

    def render() -> None:
        try:
            there["image"] = source.render("scene")
        except Exception as exc:  # kept for the assertion below
            there["error"] = exc

    worker = threading.Thread(target=render)
    worker.start()
    worker.join(60.0)
    assert "error" not in there, there.get("error")
    assert _diff(here, there["image"]) == 0.0
    assert _diff(here, source.render("scene")) == 0.0  # and back on the first thread
