"""Driver core on the MuJoCo arms: verdicts, leases, safety stops, observation, stepping."""

import math
import threading

import pytest

from strands_robots.arm.adapter import HardwareAdapter
from strands_robots.arm.backend import InProcessBackend
from strands_robots.arm.driver import DriverCore
from strands_robots.arm.mujoco_sim import MujocoArms
from strands_robots.arm.verdict import (
    REASON_ARM_STOPPED,
    REASON_NON_FINITE,
    REASON_NOT_LEASE_HOLDER,
    REASON_UNKNOWN_KEY,
)
from strands_robots.rollout.backend import RobotBackend


@pytest.fixture
def core():
    c = DriverCore.simulated()
    report = c.move_to_start_pose()
    assert report.reached, report.detail
    return c


def positions(c):
    return {k: v for k, v in c.observe().items() if k.endswith(".pos")}


def torque_trip(c):
    """From the start pose: a target 2.4 rad away on right.joint_4 over-torques the wrist at once."""
    verdict = c.send_action({"right.joint_4": -1.5})
    assert verdict.applied_keys == ("right.joint_4",)
    c.step(0.02)


def test_mujoco_arms_implement_the_hardware_adapter():
    assert isinstance(MujocoArms(), HardwareAdapter)


def test_action_keys_are_dot_separated_arm_joint():
    c = DriverCore.simulated()
    keys = c.action_keys()
    assert keys[:7] == ("left.joint_1", "left.joint_2", "left.joint_3", "left.joint_4", "left.joint_5",
                        "left.joint_6", "left.gripper")
    assert len(keys) == 14 and keys[-1] == "right.gripper"


def test_observe_has_pos_vel_effort_per_key_and_sim_time():
    c = DriverCore.simulated()
    obs = c.observe()
    for k in c.action_keys():
        assert {k + ".pos", k + ".vel", k + ".effort"} <= set(obs)
    assert obs["sim_time_s"] == 0.0
    c.step(0.01)
    assert c.observe()["sim_time_s"] == pytest.approx(0.01)
    assert all(type(v) is float for v in obs.values())


def test_step_advances_whole_physics_steps_and_carries_remainder():
    c = DriverCore.simulated()
    for _ in range(10):
        c.step(0.001)  # 1 kHz control on 500 Hz physics: one step every other call
    assert c.observe()["sim_time_s"] == pytest.approx(0.01)
    c.step(0.003)
    assert c.observe()["sim_time_s"] == pytest.approx(0.012)


def test_applied_target_moves_the_joint(core):
    before = positions(core)["left.joint_1.pos"]
    core.send_action({"left.joint_1": before + 0.2})
    core.step(0.5)
    assert positions(core)["left.joint_1.pos"] == pytest.approx(before + 0.2, abs=0.01)
    assert not core.stopped


def test_unknown_key_is_unresolved_with_reason(core):
    v = core.send_action({"left.joint_1": 0.05, "left.wrist": 0.1})
    assert v.applied_keys == ("left.joint_1",)
    assert v.reasons() == {"left.wrist": REASON_UNKNOWN_KEY}


def test_non_finite_value_never_moves_the_arm(core):
    before = positions(core)
    v = core.send_action({"right.joint_2": math.nan, "right.joint_3": math.inf})
    assert v.applied_keys == ()
    assert set(v.unresolved_reasons) == {REASON_NON_FINITE}
    core.step(0.2)
    after = positions(core)
    assert after["right.joint_2.pos"] == pytest.approx(before["right.joint_2.pos"], abs=5e-3)
    assert after["right.joint_3.pos"] == pytest.approx(before["right.joint_3.pos"], abs=5e-3)
    assert all(math.isfinite(x) for x in after.values())


def test_stale_lease_applies_nothing():
    valid = {"tok-1"}
    c = DriverCore.simulated(lease_validator=lambda token: token in valid)
    assert c.move_to_start_pose(lease_token="tok-1").reached  # the start pose honours the lease too
    before = positions(c)
    v = c.send_action({"left.joint_1": 0.5, "right.joint_1": -0.5}, lease_token="tok-0")
    assert v.applied_keys == ()
    assert v.reasons() == {"left.joint_1": REASON_NOT_LEASE_HOLDER, "right.joint_1": REASON_NOT_LEASE_HOLDER}
    c.step(0.3)
    after = positions(c)
    assert after["left.joint_1.pos"] == pytest.approx(before["left.joint_1.pos"], abs=5e-3)
    assert after["right.joint_1.pos"] == pytest.approx(before["right.joint_1.pos"], abs=5e-3)
    assert c.send_action({"left.joint_1": 0.1}, lease_token="tok-1").applied_keys == ("left.joint_1",)


def test_failing_lease_check_is_a_coarse_error():
    def broken(token):
        raise RuntimeError("lease service down")

    c = DriverCore.simulated(lease_validator=broken)
    v = c.send_action({"left.joint_1": 0.1}, lease_token="x")
    assert v.is_coarse_error and "lease service down" in v.error
    assert c.status().coarse_errors == 1


def test_garbage_action_is_coarse_error(core):
    v = core.send_action(["left.joint_1", 0.1])
    assert v.is_coarse_error and v.applied_keys == () and v.unresolved_keys == ()


def test_safety_trip_names_every_tripped_check_in_spec_text_form(core):
    torque_trip(core)
    assert core.stopped
    checks = core.safety_checks()
    texts = [c.text() for c in checks]
    torque = [c for c in checks if (c.arm, c.joint, c.quantity) == ("right", "joint_4", "torque")]
    assert torque, texts
    assert abs(torque[0].value) > torque[0].limit == pytest.approx(4.5)
    for c in checks:  # every check reported is really over its limit
        assert abs(c.value) > abs(c.limit) or c.quantity == "position"
        assert c.text().startswith(f"{c.arm}: ")
    assert core.safety_stop_detail() == "; ".join(texts)
    assert "right: joint 4 reads -" in core.safety_stop_detail()


def test_sustained_torque_pressing_into_table_trips_several_joints(core):
    start = positions(core)["right.joint_2.pos"]
    for i in range(100):  # ramp the shoulder down so the gripper presses into the table
        core.send_action({"right.joint_2": min(1.7, start + 0.02 * (i + 1))})
        core.step(0.01)
        if core.stopped:
            break
    assert core.stopped
    tripped = {(c.joint, c.quantity) for c in core.safety_checks()}
    assert ("joint_2", "torque") in tripped


def test_trip_holds_the_arms(core):
    torque_trip(core)
    core.step(0.5)
    held = positions(core)
    core.step(0.5)
    after = positions(core)
    for k in held:
        assert after[k] == pytest.approx(held[k], abs=0.01)
    assert positions(core)["right.joint_4.pos"] > -1.0  # never got near the commanded -1.5


def test_stopped_arm_refuses_until_reset(core):
    torque_trip(core)
    v = core.send_action({"left.joint_1": 0.1, "right.joint_1": 0.1})
    assert v.applied_keys == ()
    assert v.reasons() == {"left.joint_1": REASON_ARM_STOPPED, "right.joint_1": REASON_ARM_STOPPED}
    core.step(1.0)
    assert core.stopped  # calm again, still stopped
    core.reset_safety()
    assert not core.stopped and core.safety_checks() == ()
    here = positions(core)["left.joint_1.pos"]
    assert core.send_action({"left.joint_1": here + 0.05}).applied_keys == ("left.joint_1",)


def test_reset_keeps_the_safety_stop_until_reset_safety(core):
    torque_trip(core)
    core.reset(seed=1)
    assert core.stopped and core.observe()["sim_time_s"] == 0.0
    core.reset_safety()
    assert not core.stopped


def test_mock_motion_within_limits_keeps_full_resolution(core):
    base = {k[:-4]: v for k, v in positions(core).items()}
    keys = core.action_keys()
    for step in range(100):  # 2 s of smooth motion at 50 Hz, every key, amplitude 0.2 rad
        t = step * 0.02
        action = {k: min(max(base[k] + 0.2 * math.sin(2 * math.pi * 0.5 * t + i), core.joint_specs()[k].lower),
                         core.joint_specs()[k].upper)
                  for i, k in enumerate(keys)}
        v = core.send_action(action)
        assert v.applied_keys == keys and v.unresolved_keys == (), (step, v)
        core.step(0.02)
    assert not core.stopped, core.safety_stop_detail()
    s = core.status()
    assert s.actions_applied == 100 and s.actions_refused == 0 and s.keys_applied == 1400


def test_status_counts_applied_and_refused(core):
    core.send_action({"left.joint_1": 0.0})
    core.send_action({"left.joint_1": 0.0, "x": 1.0})
    core.send_action("garbage")
    s = core.status()
    assert (s.actions_received, s.actions_applied, s.actions_refused) == (3, 1, 2)
    assert (s.keys_applied, s.keys_unresolved, s.coarse_errors) == (2, 1, 1)
    assert not s.stopped and s.checks == () and s.sim_time_s > 0


def test_send_action_from_another_thread_while_stepping_is_safe(core):
    errors = []

    def sender():
        try:
            for i in range(200):
                v = core.send_action({"left.joint_1": 0.001 * (i % 10)})
                assert v.applied_keys == ("left.joint_1",)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=sender)
    t.start()
    for _ in range(200):
        core.step(0.002)
    t.join()
    assert not errors
    assert core.status().actions_received == 200


def test_in_process_backend_drives_the_core(core):
    backend = InProcessBackend(core)
    assert isinstance(backend, RobotBackend)
    assert backend.action_keys() == core.action_keys()
    t0 = backend.observe()["sim_time_s"]
    backend.advance(0.02)
    assert backend.observe()["sim_time_s"] == pytest.approx(t0 + 0.02)
    assert backend.safety_stop_detail() == ""
    backend.send_action({"right.joint_4": -1.5})
    backend.advance(0.02)
    assert backend.safety_stop_detail() == "; ".join(c.text() for c in core.safety_checks()) != ""
    backend.reset(seed=0)
    assert backend.observe()["sim_time_s"] == 0.0


def test_in_process_backend_sends_its_lease_token():
    c = DriverCore.simulated(lease_validator=lambda tok: tok == "good")
    b = InProcessBackend(c, lease_token="bad")
    assert b.send_action({"left.joint_1": 0.0}).unresolved_reasons == (REASON_NOT_LEASE_HOLDER,)
    b.lease_token = "good"
    assert b.send_action({"left.joint_1": 0.0}).applied_keys == ("left.joint_1",)


def test_reset_with_noise_is_seeded():
    import dataclasses

    from strands_robots.arm.config import DriverConfig

    cfg = dataclasses.replace(DriverConfig.default(), reset_noise_rad=0.05)
    a, b = DriverCore.simulated(cfg), DriverCore.simulated(cfg)
    a.reset(seed=7)
    b.reset(seed=7)
    assert positions(a) == positions(b)
    b.reset(seed=8)
    assert positions(a) != positions(b)


def test_ramping_joint_4_onto_the_forearm_bracket_trips_its_torque_limit(core):
    """What the scripted torque_ramp policy does: ramp right.joint_4 to its upper limit over 50 actions."""
    q0 = core.observe()["right.joint_4.pos"]
    for i in range(150):
        core.send_action({"right.joint_4": q0 + (2.0 - q0) * min(1.0, (i + 1) / 50)})
        core.step(0.02)
        if core.stopped:
            break
    assert core.stopped
    checks = core.safety_checks()
    assert [(c.arm, c.joint, c.quantity) for c in checks] == [("right", "joint_4", "torque")]
    assert checks[0].value > checks[0].limit == pytest.approx(4.5)
    assert checks[0].text().startswith("right: joint 4 reads +")
    assert core.observe()["right.joint_4.pos"] < 1.6  # stopped by the bracket, far from the 2.0 target


# -- clearing a safety stop needs the lease holder --------------------------------------------
def _leased_core():
    from strands_robots.arm.lease import LeaseManager

    leases = LeaseManager()
    c = DriverCore.simulated(lease_validator=leases.validate, lease_refusal=leases.refusal)
    grant = leases.acquire("worker", 1, 10.0)
    assert c.move_to_start_pose(lease_token=grant.token).reached
    return c, leases, grant.token


def test_reset_safety_is_refused_without_the_lease_holders_token():
    c, leases, token = _leased_core()
    assert c.send_action({"right.joint_4": -1.5}, token).applied_keys == ("right.joint_4",)
    c.step(0.02)
    assert c.stopped
    detail = c.safety_stop_detail()
    for wrong in ("", "f" * 32):
        refused = c.reset_safety(wrong)
        assert refused.refused and not refused.ok
        assert refused.message.startswith("refused: not the lease holder: ")
        assert c.stopped and c.safety_stop_detail() == detail, "a refused reset touched the stop"
    c.step(2.0)  # let the held arm come to rest inside the envelope
    operator = leases.acquire("operator", 9, 10.0)  # an operator claims the lease at a higher priority first
    assert operator.granted
    assert c.reset_safety(token).refused  # the worker's token was revoked with the claim
    cleared = c.reset_safety(operator.token)
    assert cleared.ok and cleared.message.startswith("safety stop cleared (was: right: joint 4 reads")
    assert not c.stopped


def test_start_pose_with_a_foreign_token_never_moves_the_arms():
    c, leases, token = _leased_core()
    c.send_action({"left.joint_1": 0.2}, token)
    c.step(0.5)
    assert not c.stopped
    before = c.adapter.data.ctrl.copy()
    report = c.move_to_start_pose(lease_token="f" * 32)
    assert not report.reached and report.detail == "not the lease holder: unknown lease token"
    assert (c.adapter.data.ctrl == before).all()
    assert report.elapsed_s == 0.0


def test_start_pose_stops_when_the_lease_is_lost_mid_move():
    c, leases, token = _leased_core()
    c.send_action({"left.joint_1": 0.2}, token)
    c.step(1.0)
    assert not c.stopped
    steps = []

    def advance(dt):
        c.step(dt)
        steps.append(dt)
        if len(steps) == 5:
            leases.acquire("operator", 9, 10.0)  # takes control mid-move

    report = c.move_to_start_pose(lease_token=token, advance=advance)
    assert not report.reached and report.detail == "lease lost during the move"
    assert len(steps) == 5
