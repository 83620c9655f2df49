"""Moving to and checking the start pose (simulated time)."""

import pytest

from strands_robots.arm.driver import DriverCore


def test_settles_at_start_pose():
    c = DriverCore.simulated()
    report = c.move_to_start_pose()
    assert report.reached, report.detail
    assert report.max_error <= c.config.start_pose.position_tolerance_rad
    assert 0.0 < report.elapsed_s <= c.config.start_pose.timeout_s
    obs = c.observe()
    for key, target in c.config.start_pose.pose.items():
        assert obs[key + ".pos"] == pytest.approx(target, abs=0.02)
    assert not c.stopped


def test_start_pose_unreached_when_timeout_too_short():
    c = DriverCore.simulated()
    report = c.move_to_start_pose(timeout_s=0.05)
    assert not report.reached
    assert report.elapsed_s == pytest.approx(0.05, abs=0.011)
    assert report.max_error > 0.02
    assert "not settled within 0.05 s" in report.detail


def test_start_pose_with_custom_pose_and_tolerance():
    c = DriverCore.simulated()
    pose = {k: 0.0 for k in c.action_keys()}
    pose["left.joint_1"] = 0.3
    report = c.move_to_start_pose(pose, tolerance=0.01, timeout_s=2.0)
    assert report.reached, report.detail
    assert c.observe()["left.joint_1.pos"] == pytest.approx(0.3, abs=0.01)


def test_start_pose_outside_limits_is_refused_without_moving():
    c = DriverCore.simulated()
    report = c.move_to_start_pose({"left.gripper": 2.0})
    assert not report.reached and "outside" in report.detail
    assert c.observe()["sim_time_s"] == 0.0


def test_start_pose_refused_while_safety_stopped():
    c = DriverCore.simulated()
    assert c.move_to_start_pose().reached
    c.send_action({"right.joint_4": -1.5})
    c.step(0.02)
    assert c.stopped
    report = c.move_to_start_pose()
    assert not report.reached and report.detail.startswith("arms are safety-stopped: right: joint 4 reads")


def test_cancelled_move_ends_at_once_and_holds_the_arms():
    c = DriverCore.simulated()
    calls = []

    def should_stop():
        calls.append(1)
        return "cancelled" if len(calls) > 10 else ""

    report = c.move_to_start_pose(should_stop=should_stop)
    assert not report.reached and report.detail == "cancelled"
    assert len(calls) == 11
    here = c.observe()
    c.step(0.5)
    after = c.observe()
    for key in c.action_keys():  # held where it was: no further ramp toward the pose
        assert after[key + ".pos"] == pytest.approx(here[key + ".pos"], abs=0.02), key


def test_progress_reports_every_joint_ramp_then_settle():
    c = DriverCore.simulated()
    seen = []
    report = c.move_to_start_pose(on_progress=seen.append)
    assert report.reached
    assert seen[0].phase == "ramp" and seen[-1].phase == "settle"
    assert seen[0].keys == tuple(c.config.start_pose.pose)
    assert len(seen[-1].errors) == len(seen[-1].keys)
    assert seen[-1].max_error == pytest.approx(report.max_error)
    assert seen[-1].elapsed_s == pytest.approx(report.elapsed_s)
    assert max(seen[-1].errors) == pytest.approx(seen[-1].max_error)


def test_a_bad_tolerance_is_refused_before_anything_moves():
    c = DriverCore.simulated()
    before = c.adapter.data.ctrl.copy()
    report = c.move_to_start_pose(tolerance=-1.0)
    assert not report.reached and "position_tolerance_rad must be a finite number > 0" in report.detail
    assert (c.adapter.data.ctrl == before).all() and c.adapter.time_s() == 0.0
