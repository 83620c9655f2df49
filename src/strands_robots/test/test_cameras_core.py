"""Camera core without OpenGL.

The config's checks, intrinsics, the object's place, the stale rule, the stamp of a frame that mirrors the arms,
JPEG, and the adapter chosen by name (the pattern adapter).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from strands_robots.cameras import adapter, jpeg
from strands_robots.cameras.config import (
    CameraConfig,
    CameraConfigError,
    CameraSet,
    load_camera_set,
    parse_camera_set,
)
from strands_robots.cameras.frames import CameraStale, LatestFrames, age_steps, event_fields, stale_reason
from strands_robots.cameras.intrinsics import from_fovy
from strands_robots.cameras.mirror_stamp import frame_stamp_ns, joint_state_ns
from strands_robots.cameras.scene import REGION, SceneParameterError, object_position


def test_the_bundled_camera_file_has_a_scene_and_a_wrist_camera():
    cams = load_camera_set()
    assert cams.names == ("scene", "wrist")
    assert cams.camera("scene").mjcf_camera == "scene"
    assert cams.camera("wrist").mjcf_camera == "right/wrist"
    assert (cams.camera("wrist").width, cams.camera("wrist").height, cams.camera("wrist").fps) == (224, 224, 15.0)


@pytest.mark.parametrize("settings, field", [
    ({"mjcf_camera": "scene", "width": 8, "height": 224, "fps": 15}, "width"),
    ({"mjcf_camera": "scene", "width": 224, "height": 224, "fps": 0}, "fps"),
    ({"mjcf_camera": "scene", "width": 224, "height": 224, "fps": 15, "max_age_s": 0.01}, "max_age_s"),
    ({"mjcf_camera": "scene", "width": 224, "height": 224, "fps": 15, "jpeg_quality": 100}, "jpeg_quality"),
    ({"mjcf_camera": "scene", "width": 224, "height": 224, "fps": 15, "exposure": 3}, "exposure"),
    ({"width": 224, "height": 224, "fps": 15}, "mjcf_camera"),
])
def test_a_bad_camera_value_is_refused_in_one_line_naming_it(settings, field):
    with pytest.raises(CameraConfigError) as err:
        parse_camera_set({"adapter": "mujoco", "cameras": {"scene": settings}})
    text = str(err.value)
    assert field in text and "\n" not in text


def test_a_camera_name_that_is_no_ros_name_token_is_refused():
    with pytest.raises(CameraConfigError, match="camera name"):
        CameraConfig("Scene/Top", "scene", 224, 224, 15)


def test_intrinsics_follow_the_pinhole_formula_of_fovy():
    k = from_fovy(45.0, 640, 480)
    assert k.fx == k.fy == pytest.approx(240.0 / math.tan(math.radians(22.5)))
    assert (k.cx, k.cy) == (319.5, 239.5)
    assert k.fovy_deg == pytest.approx(45.0)
    assert k.k[8] == 1.0 and k.p[3] == 0.0 and k.d == (0.0,) * 5


def test_the_object_moves_with_the_seed_and_follows_the_task_parameters():
    a = object_position({}, 1)
    b = object_position({}, 2)
    assert a != b
    assert object_position({}, 1) == a  # a pure function of its arguments
    for (x, y, _z) in (a, b):
        assert REGION["object_x"][0] <= x <= REGION["object_x"][1]
        assert REGION["object_y"][0] <= y <= REGION["object_y"][1]
    placed = object_position({"parameters": {"object_x": "0.3", "object_y": "-0.1"}}, 7)
    assert placed[:2] == (0.3, -0.1)
    half = object_position({"object_y": 0.2}, 1)
    assert half[1] == 0.2 and half[0] == a[0]  # the other coordinate is still the seed's


def test_an_object_outside_the_region_is_refused():
    with pytest.raises(SceneParameterError, match=r"object_x='2\.0' refused"):
        object_position({"object_x": "2.0"}, 0)


def _cams(*names, fps=10.0, max_age_s=0.25):
    return CameraSet("pattern", tuple(CameraConfig(n, n, 32, 24, fps, max_age_s) for n in names))


def test_a_frame_older_than_its_bound_is_refused_naming_the_camera_and_the_age():
    frames = LatestFrames(_cams("scene").cameras)
    image = np.zeros((24, 32, 3), np.uint8)
    frames.put("scene", image, 1_000_000_000)
    obs: dict = {}
    frames.add_to(obs, 1_250_000_000)  # exactly at the bound: still fresh
    assert obs["scene.image"] is image and obs["scene.image_age_s"] == pytest.approx(0.25)
    assert obs["scene.image_stamp_ns"] == 1_000_000_000
    fresh_keys = set(obs)
    obs = {"left.joint_1.pos": 0.0}
    with pytest.raises(CameraStale, match=r"camera scene stale: its latest frame is 0\.251 s old \(limit 0\.25 s\)"):
        frames.add_to(obs, 1_251_000_000)
    assert set(obs) == {"left.joint_1.pos"}  # nothing of the stale frame entered the observation
    assert fresh_keys == {"scene.image", "scene.image_age_s", "scene.image_stamp_ns"}


def test_a_camera_that_never_sent_a_frame_is_stale():
    frames = LatestFrames(_cams("scene", "wrist").cameras)
    frames.put("scene", np.zeros((24, 32, 3), np.uint8), 0)
    with pytest.raises(CameraStale, match="camera wrist stale: no frame"):
        frames.add_to({}, 0)
    assert stale_reason("wrist", 0.1, 0.25) == ""


def test_event_fields_carry_stamps_and_ages_in_steps_not_pixels():
    obs = {"scene.image": np.zeros((2, 2, 3), np.uint8), "scene.image_age_s": 0.045, "scene.image_stamp_ns": 42,
           "wrist.image": np.zeros((2, 2, 3), np.uint8), "wrist.image_age_s": 0.0, "wrist.image_stamp_ns": 43}
    names, stamps, ages = event_fields(obs, ("scene", "wrist"), 3, 0.02)
    assert names == ("scene", "wrist") and stamps == (42, 43) and ages == (3 + 2, 3)
    assert age_steps(0.04, 0.02) == 2 and age_steps(0.0399, 0.02) == 1


def test_jpeg_round_trip_keeps_the_image_close():
    yy, xx = np.mgrid[0:96, 0:128]
    img = np.stack([xx * 2, yy * 2, (xx + yy)], axis=-1).astype(np.uint8)  # smooth: JPEG keeps it close
    data = jpeg.encode(img, 90)
    assert data[:2] == b"\xff\xd8"
    back = jpeg.decode(data)
    assert back.shape == img.shape and back.dtype == np.uint8
    assert np.abs(back.astype(int) - img.astype(int)).mean() < 3
    with pytest.raises(ValueError, match="uint8"):
        jpeg.encode(img.astype(np.float32))
    with pytest.raises(ValueError, match="not a readable image"):
        jpeg.decode(b"not a jpeg")


def test_the_pattern_adapter_is_chosen_by_name_and_its_frames_change():
    cams = _cams("scene", "wrist")
    source = adapter.load(cams, adapter="pattern")
    assert type(source).__name__ == "PatternCameras"
    first = source.render("scene")
    second = source.render("scene")
    assert first.shape == (24, 32, 3) and first.dtype == np.uint8
    assert not np.array_equal(first, second)
    assert source.intrinsics("wrist").fovy_deg == pytest.approx(60.0)


def test_an_unknown_adapter_is_refused_listing_the_known_ones():
    with pytest.raises(adapter.CameraAdapterError, match=r"unknown camera adapter 'nope'.*mujoco, pattern"):
        adapter.load(_cams("scene"), adapter="nope")


def test_frames_of_an_old_scene_are_discarded_and_late_ones_ignored():
    frames = LatestFrames(_cams("scene").cameras)
    frames.put("scene", np.zeros((24, 32, 3), np.uint8), 100)
    frames.discard_before(200)
    assert frames.get("scene") is None
    frames.put("scene", np.ones((24, 32, 3), np.uint8), 150)  # rendered before the scene changed: ignored
    assert frames.get("scene") is None and not frames.wait_all(0.0)
    frames.put("scene", np.ones((24, 32, 3), np.uint8), 200)
    assert frames.get("scene").stamp_ns == 200 and frames.wait_all(0.0)


def plugged_in(config, model_path=None):
    """Build a plug-in camera source, as a camera package's entry point names it (the pattern, renamed)."""
    from strands_robots.cameras.pattern import PatternCameras

    source = PatternCameras(config)
    source.plugged_in = True
    return source


def test_a_camera_package_plugs_in_through_the_entry_point_group(tmp_path, monkeypatch):
    import importlib

    dist = tmp_path / "acme_camera-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-camera\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{adapter.ENTRY_POINT_GROUP}]\nacme = {__name__}:plugged_in\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert "acme" in adapter.available()
    source = adapter.load(_cams("scene"), adapter="acme")
    assert getattr(source, "plugged_in", False) and source.render("scene").shape == (24, 32, 3)


S = 1_000_000_000


def test_a_mirrored_frame_carries_its_joint_states_stamp_never_a_later_one_and_none_past_the_bound():
    joint = joint_state_ns(100 * S, 100 * S + 5_000_000)  # stamped by the driver: its stamp, not its receipt
    assert joint == 100 * S
    assert frame_stamp_ns(joint, 100 * S + 300_000_000, max_age_s=0.5) == 100 * S  # drawn 0.3 s later
    assert frame_stamp_ns(joint, 100 * S + 500_000_000, max_age_s=0.5) == 100 * S  # at the bound: still drawn
    assert frame_stamp_ns(joint, 100 * S + 500_000_001, max_age_s=0.5) is None  # past it: nothing drawn
    assert frame_stamp_ns(102 * S, 101 * S, max_age_s=0.5) == 101 * S  # a driver clock ahead: never the future
    assert joint_state_ns(0, 77 * S) == 77 * S  # a driver that does not stamp: when the state came


def test_a_frozen_joint_stream_makes_the_stale_rule_refuse_what_it_drew():
    cams = parse_camera_set({"cameras": {"wrist": {"mjcf_camera": "right/wrist", "width": 16, "height": 16,
                                                   "fps": 15, "max_age_s": 0.5}}})
    cam = cams.camera("wrist")
    frames = LatestFrames(cams.cameras)
    last_joint = 50 * S
    drawn = []
    for k in range(30):  # the renderer goes on at 15 fps after the last joint state
        now = last_joint + k * S // 15
        stamp = frame_stamp_ns(last_joint, now, cam.max_age_s)
        if stamp is not None:
            drawn.append(stamp)
            frames.put("wrist", np.zeros((16, 16, 3), np.uint8), stamp)
    assert drawn == [last_joint] * 8  # 0.5 s of frames, all of the last state
    obs: dict = {}
    frames.add_to(obs, last_joint + S // 2)
    with pytest.raises(CameraStale, match="camera wrist stale"):
        frames.add_to({}, last_joint + 2 * S)  # the frozen arms are never shown as fresh
