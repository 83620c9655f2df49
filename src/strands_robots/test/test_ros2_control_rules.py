"""The ros2_control hardware's ROS-free rules: settings, joint mapping, commands, health, the stop latch.

No ROS here (these run in CI); the same rules against a real controller_manager: test_ros2_control.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from strands_robots.arm.adapter import JointReadings
from strands_robots.arm.config import ConfigError, DriverConfig
from strands_robots.arm.driver import CANCEL_REASON_MAX_CHARS, DriverCore, cancel_stop_reason
from strands_robots.arm.model import actuator_key
from strands_robots.arm.ros2_control import (
    MODE_TRAJECTORY,
    CommandTargets,
    ControllerHealth,
    JointMap,
    JointMapError,
    NamedState,
    Ros2ControlConfigError,
    Ros2ControlSettings,
    chunk_trajectory,
    STOP_BOUND_OK,
    STOP_BOUND_REFUSE,
    STOP_BOUND_WARN,
    duration_parts,
    forward_command,
    stop_bound,
    switch_bound_s,
    within_horizon,
)
from strands_robots.arm.safety import QUANTITY_STOP
from strands_robots.arm.verdict import REASON_ARM_STOPPED
from strands_robots.package_files import config_path

KEYS = ("left.joint_1", "left.joint_2", "right.joint_1", "right.joint_2")


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def settings(**kw):
    raw = {"controller": "fwd"}
    raw.update(kw)
    return Ros2ControlSettings.from_mapping(raw, KEYS)


# -- settings ---------------------------------------------------------------------------------------------------
def test_settings_map_every_key_by_default_and_resolve_names_in_the_controller_managers_namespace():
    s = settings(joints={"left.joint_1": "shoulder_l"})
    assert s.joints == {"left.joint_1": "shoulder_l", "left.joint_2": "left_joint_2",
                        "right.joint_1": "right_joint_1", "right.joint_2": "right_joint_2"}
    assert s.command_topic == "/fwd/commands"
    moved = s.with_controller_manager("/robot1")
    assert moved.controller_manager == "/robot1/controller_manager"
    assert moved.command_topic == "/robot1/fwd/commands"
    assert moved.controller_node == "/robot1/fwd"
    assert moved.joint_states_topic == "/joint_states"  # absolute: kept
    jtc = settings(mode=MODE_TRAJECTORY, controller="jtc").with_controller_manager("arm/controller_manager")
    assert jtc.command_topic == "/arm/jtc/joint_trajectory"
    assert s.with_controller_manager("") is s


@pytest.mark.parametrize("raw, words", [
    (None, "no ros2_control section"),
    ({"mode": "forward_command"}, "controller is required"),
    ({"controller": "c", "mode": "velocity"}, "mode must be one of"),
    ({"controller": "c", "joints": {"left.joint_9": "x"}}, "unknown station key"),
    ({"controller": "c", "joints": {"left.joint_1": "a", "left.joint_2": "a"}}, "both name joint 'a'"),
    ({"controller": "c", "joint_states_timeout_s": 0}, "joint_states_timeout_s must be a finite number > 0"),
    ({"controller": "c", "answer_timeout_s": math.inf}, "answer_timeout_s"),
    ({"controller": "c d"}, "without spaces"),
    ({"controller": "c", "colour": 1}, "unknown field"),
])
def test_bad_settings_are_refused_naming_the_field(raw, words):
    with pytest.raises(Ros2ControlConfigError, match=words):
        Ros2ControlSettings.from_mapping(raw, KEYS)


def test_the_shipped_ros2_control_arms_yaml_maps_every_driver_key_to_the_demo_urdfs_joints():
    config = DriverConfig.from_yaml(config_path("ros2_control/arms.yaml"))
    keys = [actuator_key(a.name, j.name) for a in config.arms for j in a.joints]
    s = Ros2ControlSettings.from_mapping(config.ros2_control, keys)
    urdf = open(config_path("ros2_control/two_arms.urdf")).read()
    controllers = open(config_path("ros2_control/controllers.yaml")).read()
    for joint in s.joints.values():
        assert f'<joint name="{joint}" type="revolute">' in urdf
        assert f'<joint name="{joint}">' in urdf  # its ros2_control interfaces
        assert joint in controllers
    assert config.timestep_s == pytest.approx(0.01)
    assert DriverConfig.from_yaml(config_path("arms.yaml")).ros2_control is None


def test_a_ros2_control_section_that_is_not_a_mapping_is_refused_by_the_driver_config():
    with pytest.raises(ConfigError, match="ros2_control must be a mapping"):
        DriverConfig.from_dict({"ros2_control": ["controller"]})


# -- joint mapping ------------------------------------------------------------------------------------------------
def test_joint_states_are_read_in_key_order_whatever_order_the_broadcaster_uses():
    m = JointMap(KEYS, settings().joints)
    names = ["right_joint_2", "extra_joint", "left_joint_1", "right_joint_1", "left_joint_2"]
    pos, vel, eff = m.read(names, [4.0, 9.0, 1.0, 3.0, 2.0], [0.4, 0.9, 0.1, 0.3, 0.2], [])
    assert pos.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert vel.tolist() == [0.1, 0.2, 0.3, 0.4]
    assert eff.tolist() == [0.0, 0.0, 0.0, 0.0]  # no efforts given


def test_joint_states_missing_a_mapped_joint_or_with_ragged_arrays_are_refused():
    m = JointMap(KEYS, settings().joints)
    with pytest.raises(JointMapError, match=r"lacks joint\(s\) \['right_joint_2'\]"):
        m.read(["left_joint_1", "left_joint_2", "right_joint_1"], [0, 0, 0], [], [])
    with pytest.raises(JointMapError, match="3 names but 2 positions"):
        m.read(["left_joint_1", "left_joint_2", "right_joint_1"], [0, 0], [], [])


def test_a_forward_command_lists_the_targets_in_the_controllers_joint_order():
    m = JointMap(KEYS, settings().joints)
    order = m.command_order(["right_joint_1", "left_joint_2", "right_joint_2", "left_joint_1"])
    targets = np.array([0.1, 0.2, 0.3, 0.4])  # key order
    assert forward_command(targets, order) == [0.3, 0.2, 0.4, 0.1]


@pytest.mark.parametrize("controller_joints, words", [
    (["left_joint_1", "left_joint_2", "right_joint_1"], r"not in the controller \['right_joint_2'\]"),
    (["left_joint_1", "left_joint_2", "right_joint_1", "right_joint_2", "torso"], r"not mapped \['torso'\]"),
    (["left_joint_1", "left_joint_1", "right_joint_1", "right_joint_2", "left_joint_2"], "a joint repeats"),
])
def test_a_controller_whose_joints_do_not_match_the_mapping_is_refused(controller_joints, words):
    m = JointMap(KEYS, settings().joints)
    with pytest.raises(JointMapError, match=words):
        m.command_order(controller_joints)


def test_a_chunk_becomes_one_trajectory_with_a_point_every_period_in_the_controllers_order():
    m = JointMap(KEYS, settings().joints)
    joints = ["left_joint_2", "left_joint_1", "right_joint_1", "right_joint_2"]
    order = m.command_order(joints)
    chunk = [np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.5, 0.6, 0.7, 0.8]), np.array([0.9, 1.0, 1.1, 1.2])]
    plan = chunk_trajectory(joints, chunk, order, 0.02)
    assert plan.joint_names == tuple(joints)
    assert plan.points == ((0.2, 0.1, 0.3, 0.4), (0.6, 0.5, 0.7, 0.8), (1.0, 0.9, 1.1, 1.2))
    assert plan.times_s == pytest.approx((0.02, 0.04, 0.06))
    assert duration_parts(plan.times_s[2]) == (0, 60_000_000)
    assert duration_parts(2.5) == (2, 500_000_000)
    with pytest.raises(ValueError):
        chunk_trajectory(joints, [], order, 0.02)
    with pytest.raises(ValueError):
        chunk_trajectory(joints, chunk, order, 0.0)


def test_a_chunk_of_actions_gives_every_steps_targets_each_on_top_of_the_one_before():
    t = CommandTargets()
    t.seed(np.array([1.0, 2.0, 3.0, 4.0]))
    steps = t.chunk([([0], [0.5]), ([1, 3], [0.6, 0.7]), ([0], [0.8])])
    assert [s.tolist() for s in steps] == [[0.5, 2.0, 3.0, 4.0], [0.5, 0.6, 3.0, 0.7], [0.8, 0.6, 3.0, 0.7]]
    assert t.values.tolist() == [0.8, 0.6, 3.0, 0.7]  # the targets end at the last step's
    steps[0][0] = 99.0  # each step is its own copy
    assert t.values[0] == 0.8
    with pytest.raises(ValueError):
        t.chunk([])
    # the chunk's steps become one trajectory: a point per action, due every control period
    m = JointMap(KEYS, settings().joints)
    joints = ["left_joint_2", "left_joint_1", "right_joint_1", "right_joint_2"]
    plan = chunk_trajectory(joints, steps, m.command_order(joints), 0.02)
    assert plan.points[2] == (0.6, 0.8, 3.0, 0.7) and plan.times_s == pytest.approx((0.02, 0.04, 0.06))


def test_targets_restart_from_the_measured_state_and_a_hold_takes_the_measured_positions():
    t = CommandTargets()
    t.seed(np.array([1.0, 2.0, 3.0, 4.0]))
    t.set([0, 3], [0.5, 0.7])
    assert t.values.tolist() == [0.5, 2.0, 3.0, 0.7]
    t.hold([2, 3], np.array([9.0, 9.1, 9.2, 9.3]))
    assert t.values.tolist() == [0.5, 2.0, 9.2, 9.3]


# -- health -------------------------------------------------------------------------------------------------------
def healthy(clock, **kw):
    h = ControllerHealth(settings(**kw), clock)
    h.joint_states()
    h.asked()
    h.answered([NamedState("joint_state_broadcaster", "active"), NamedState("fwd", "active"),
                NamedState("MockArm", "active", "hardware component")])
    return h


def test_no_fault_while_joint_states_are_fresh_and_the_controller_and_hardware_are_active():
    clock = Clock()
    h = healthy(clock)
    assert h.fault() == "" and h.refusal() == ""


def test_joint_states_older_than_the_bound_are_a_named_fault_and_fresh_ones_clear_it():
    clock = Clock()
    h = healthy(clock, joint_states_timeout_s=0.25)
    clock.t += 0.2
    assert h.fault() == ""
    clock.t += 0.1
    assert h.fault() == "joint_states on /joint_states stale: none for 0.30 s (limit 0.25 s)"
    h.joint_states()
    assert h.fault().startswith("checking the controller_manager that came back")  # until the driver checked it
    h.refuse_manager("")
    assert h.fault() == ""


def test_before_the_first_joint_states_the_arms_may_not_be_commanded():
    h = ControllerHealth(settings(), Clock())
    assert h.fault().startswith("no joint_states on /joint_states yet")


@pytest.mark.parametrize("states, fault", [
    ([NamedState("fwd", "inactive"), NamedState("Arm", "active", "hardware component")],
     "controller fwd is inactive in /controller_manager"),
    ([NamedState("jtc", "active"), NamedState("Arm", "active", "hardware component")],
     "controller fwd is not loaded in /controller_manager"),
    ([NamedState("fwd", "active"), NamedState("Arm", "finalized", "hardware component")],
     "hardware component Arm is finalized (controller_manager /controller_manager)"),
])
def test_a_controller_or_hardware_component_that_is_not_active_is_a_named_fault(states, fault):
    clock = Clock()
    h = healthy(clock)
    h.answered(states)
    assert h.fault() == fault
    assert h.refusal() == fault


def test_a_controller_manager_that_stops_answering_is_a_fault_after_the_answer_timeout():
    clock = Clock()
    h = healthy(clock, answer_timeout_s=1.0, joint_states_timeout_s=10.0)
    h.asked()
    clock.t += 0.9
    assert h.fault() == ""
    clock.t += 0.2
    assert h.fault() == "controller_manager /controller_manager does not answer (no state for 1.10 s)"
    h.answered([NamedState("fwd", "active")])
    h.refuse_manager("")  # the driver checked the controller_manager that answers again
    assert h.fault() == ""
    h.forget_states()
    assert "controller states not known yet" in h.fault()


def test_a_latched_stop_refuses_commands_and_makes_the_deactivated_controller_expected_until_cleared():
    clock = Clock()
    h = healthy(clock)
    assert h.latch("left: joint 4 reads +4.6 N*m")
    assert not h.latch("another reason")  # the first reason stays
    h.answered([NamedState("fwd", "inactive")])
    assert h.fault() == ""  # deactivated on purpose: not a fault
    assert h.refusal() == ("safety stop latched (left: joint 4 reads +4.6 N*m): the command controller is "
                           "deactivated")
    assert h.clear() == "left: joint 4 reads +4.6 N*m"
    assert h.fault() == "controller fwd is inactive in /controller_manager"  # still inactive after a clear: a fault
    h.answered([NamedState("fwd", "active")])
    h.refuse_manager("")  # checked again once that fault cleared
    assert h.refusal() == ""


# -- the driver core with hardware that latches stops ---------------------------------------------------------------
class LatchingArms:
    """In-memory arms with the optional members of real hardware: what the core asks of them is recorded."""

    stops_on_lease_loss = True
    stops_on_cancel = True

    def __init__(self, keys, timestep_s=0.01) -> None:
        self._keys = tuple(keys)
        self.pos = np.zeros(len(self._keys))
        self.calls: list = []
        self.resume_answer = ""
        self._fault = ""
        self.timestep_s = timestep_s

    def arm_names(self):
        return ("left", "right")

    def joint_names(self, arm):
        return tuple(k.split(".", 1)[1] for k in self._keys if k.startswith(arm + "."))

    def keys(self):
        return self._keys

    def read(self):
        return JointReadings(self._keys, self.pos, np.zeros(len(self._keys)), np.zeros(len(self._keys)), 0.0)

    def command(self, targets):
        if self._fault:
            raise RuntimeError(self._fault)
        self.calls.append(("command", dict(targets)))

    def hold(self, arms=None):
        self.calls.append(("hold", arms))

    def step(self, dt):
        pass

    def reset(self, seed=None):
        pass

    def time_s(self):
        return 0.0

    def fault(self):
        return self._fault

    def latch_stop(self, reason):
        self.calls.append(("latch_stop", reason))

    def resume(self):
        self.calls.append(("resume",))
        return self.resume_answer


def latching_core():
    config = DriverConfig.default()
    keys = [actuator_key(a.name, j.name) for a in config.arms for j in config.arms[0].joints]
    arms = LatchingArms(keys)
    return DriverCore(arms, config), arms


def test_an_envelope_trip_holds_then_latches_the_hardwares_stop_and_a_clear_resumes_it():
    core, arms = latching_core()
    arms.pos[arms.keys().index("left.joint_1")] = 3.0  # past 2.8 + 0.05
    core.step(0.01)
    assert arms.calls[0] == ("hold", ("left", "right"))
    assert arms.calls[1] == ("latch_stop", "left: joint 1 reads +3.0 rad")
    verdict = core.send_action({"right.joint_2": 0.5})
    assert verdict.unresolved_reasons == (REASON_ARM_STOPPED,)
    arms.pos[:] = 0.0
    reset = core.reset_safety()
    assert reset.ok and arms.calls[-1] == ("resume",)
    assert core.send_action({"right.joint_2": 0.5}).applied_keys == ("right.joint_2",)


def test_a_stop_no_reading_caused_latches_like_a_trip_and_names_its_reason():
    core, arms = latching_core()
    assert core.stops_on_lease_loss
    assert core.stop("lease of 'station:s1' expired")
    assert not core.stop("again")  # already stopped: one trip
    assert core.status().safety_trips == 1
    assert [c.quantity for c in core.safety_checks()] == [QUANTITY_STOP, QUANTITY_STOP]
    assert core.safety_stop_detail() == ("left: stopped: lease of 'station:s1' expired; "
                                         "right: stopped: lease of 'station:s1' expired")
    assert arms.calls == [("hold", ("left", "right")),
                          ("latch_stop", core.safety_stop_detail())]


def test_a_cancel_holds_then_latches_the_hardwares_stop_naming_the_holder_and_its_reason():
    core, arms = latching_core()
    assert core.stops_on_cancel
    assert core.cancel("station:s1", "the job\nwas cancelled")
    assert core.safety_stop_detail() == ("left: stopped: cancelled by 'station:s1': the job was cancelled; "
                                         "right: stopped: cancelled by 'station:s1': the job was cancelled")
    # the hold goes out before the hardware takes its command path down
    assert arms.calls == [("hold", ("left", "right")), ("latch_stop", core.safety_stop_detail())]
    assert core.send_action({"left.joint_1": 0.1}).unresolved_reasons == (REASON_ARM_STOPPED,)
    assert not core.cancel("station:s1", "again")  # one stop
    assert core.reset_safety().ok and arms.calls[-1] == ("resume",)


def test_a_cancels_reason_is_cut_to_its_bound_and_an_empty_one_still_stops():
    long = "x" * 5000
    text = cancel_stop_reason("station:s1", long)
    assert text.startswith("cancelled by 'station:s1': xxx") and text.endswith("\u2026")
    assert len(text) == len("cancelled by 'station:s1': ") + CANCEL_REASON_MAX_CHARS
    assert cancel_stop_reason("", "  ") == "cancelled: cancelled"


def test_a_cancel_on_arms_that_do_not_stop_on_one_is_a_plain_release():
    core, arms = latching_core()
    arms.stops_on_cancel = False
    assert not core.stops_on_cancel
    assert not core.cancel("station:s1", "the job was cancelled")
    assert not core.stopped and arms.calls == []


def test_a_clear_the_hardware_cannot_honour_keeps_the_stop_as_it_was():
    core, arms = latching_core()
    core.stop("lease of 'station:s1' revoked")
    before = core.safety_checks()
    arms.resume_answer = "switch_controller could not activate fwd: timeout"
    reset = core.reset_safety()
    assert not reset.ok
    assert reset.message == "safety stop not cleared: switch_controller could not activate fwd: timeout"
    assert core.stopped and core.safety_checks() == before
    assert core.send_action({"left.joint_1": 0.1}).unresolved_reasons == (REASON_ARM_STOPPED,)


def test_a_hardware_fault_makes_a_command_a_coarse_error_naming_it_and_nothing_is_sent():
    core, arms = latching_core()
    arms._fault = "controller fwd is inactive in /controller_manager"
    assert core.hardware_fault() == "controller fwd is inactive in /controller_manager"
    verdict = core.send_action({"left.joint_1": 0.1})
    assert verdict.error == "adapter command failed: RuntimeError: controller fwd is inactive in /controller_manager"
    assert not [c for c in arms.calls if c[0] == "command"]


# -- bring-up options ---------------------------------------------------------------------------------------------
def up_args(**kw):
    import argparse

    return argparse.Namespace(**{"hardware": None, "controller_manager": None, "arms_config": None, **kw})


def test_up_on_ros2_control_gives_the_driver_its_hardware_the_packages_arms_file_and_the_controller_manager():
    from strands_robots.arm.ros2_control import CONTROLLER_MANAGER_ENV
    from strands_robots.cli.up import arms_setup

    params, env, refusal = arms_setup(up_args(hardware="ros2_control", controller_manager="/robot1"))
    assert refusal == ""
    assert params == {"hardware": "ros2_control", "config_file": config_path("ros2_control/arms.yaml")}
    assert env == {CONTROLLER_MANAGER_ENV: "/robot1"}
    assert arms_setup(up_args()) == ({}, {}, "")  # the simulated arms: nothing added


def test_up_refuses_a_controller_manager_without_ros2_control_and_an_arms_file_that_is_not_there(tmp_path):
    from strands_robots.cli.up import arms_setup

    assert arms_setup(up_args(controller_manager="/robot1"))[2] == \
        "--controller-manager goes with --hardware ros2_control"
    missing = str(tmp_path / "nope.yaml")
    assert arms_setup(up_args(hardware="ros2_control", arms_config=missing))[2] == \
        f"--arms-config {missing}: no such file"


def test_the_driver_reads_the_ros2_control_arms_file_when_its_config_file_is_empty():
    from strands_robots.nodes.arm_driver.params import default_config_path

    assert default_config_path("ros2_control") == config_path("ros2_control/arms.yaml")
    assert default_config_path("mujoco") == config_path("arms.yaml")


# -- how fast a stop can take the command controller down -------------------------------------------------------------
def test_a_controller_manager_too_slow_for_one_control_period_is_refused_naming_both_numbers():
    verdict, message = stop_bound("/controller_manager", 100.0, 0.02)
    assert verdict == STOP_BOUND_REFUSE
    assert "runs at 100 Hz" in message and "up to 33 ms after the hold" in message
    assert "control period of 20 ms" in message and "cannot be done" in message and "at >= 429 Hz" in message
    assert stop_bound("/cm", 40.0, 0.02)[0] == STOP_BOUND_REFUSE


def test_a_controller_manager_that_leaves_the_driver_little_room_is_warned_and_a_fast_one_passes():
    verdict, message = stop_bound("/controller_manager", 200.0, 0.02)
    assert verdict == STOP_BOUND_WARN
    assert "runs at 200 Hz" in message and "up to 18 ms" in message and "control period of 20 ms" in message
    assert stop_bound("/controller_manager", 429.0, 0.02)[0] == STOP_BOUND_OK
    assert stop_bound("/controller_manager", 500.0, 0.02) == (
        STOP_BOUND_OK, "controller_manager /controller_manager runs at 500 Hz: a stop deactivates the command "
                       "controller up to 9 ms after the hold (two updates for the controller to apply the hold, "
                       "then the switch at the next), against a control period of 20 ms")
    assert stop_bound("/cm", 100.0, 0.1)[0] == STOP_BOUND_OK  # a 10 Hz station: 33 ms of 100


def test_an_update_rate_that_cannot_be_read_is_a_warning_not_a_pass():
    for rate in (float("nan"), 0.0, -5.0):
        verdict, message = stop_bound("/controller_manager", rate, 0.02)
        assert verdict == STOP_BOUND_WARN and "reports no update_rate" in message and ">= 429 Hz" in message


def test_the_demo_controllers_file_runs_fast_enough_for_the_demo_arms_control_period():
    import yaml

    controllers = yaml.safe_load(open(config_path("ros2_control/controllers.yaml")).read())
    rate = controllers["controller_manager"]["ros__parameters"]["update_rate"]
    config = DriverConfig.from_yaml(config_path("ros2_control/arms.yaml"))
    keys = [actuator_key(a.name, j.name) for a in config.arms for j in a.joints]
    settings = Ros2ControlSettings.from_mapping(config.ros2_control, keys)
    assert stop_bound(settings.controller_manager, float(rate), settings.trajectory_period_s)[0] == STOP_BOUND_OK
    # the broadcaster still publishes at the driver's control rate, a whole divisor of the controller_manager's
    jsb = controllers["joint_state_broadcaster"]["ros__parameters"]["update_rate"]
    assert rate % jsb == 0 and 1.0 / jsb == pytest.approx(config.timestep_s)


# -- a trajectory never reaches past the silence bound ----------------------------------------------------------------
def test_a_trajectory_keeps_the_points_due_within_the_silence_bound_and_always_the_first():
    assert within_horizon(11, 0.02, 0.2) == 10
    assert within_horizon(3, 0.02, 0.2) == 3
    assert within_horizon(5, 0.02, 0.05) == 2
    assert within_horizon(5, 0.5, 0.2) == 1  # the step itself always goes, as a one-point command would
    assert within_horizon(0, 0.02, 0.2) == 0


def test_the_silence_bound_is_read_from_the_section_and_checked():
    s = Ros2ControlSettings.from_mapping({"controller": "jtc", "mode": MODE_TRAJECTORY, "command_silence_s": 0.1},
                                         KEYS)
    assert s.command_silence_s == 0.1
    assert Ros2ControlSettings.from_mapping({"controller": "jtc"}, KEYS).command_silence_s == 0.2
    with pytest.raises(Ros2ControlConfigError, match="command_silence_s must be a finite number > 0"):
        Ros2ControlSettings.from_mapping({"controller": "jtc", "command_silence_s": 0}, KEYS)


def test_the_switch_waits_two_controller_manager_updates_after_the_hold():
    from strands_robots.arm.ros2_control import HOLD_LEAD_UNKNOWN_S, hold_lead_s

    assert hold_lead_s(500.0) == pytest.approx(0.007)
    assert hold_lead_s(100.0) == pytest.approx(0.023)
    assert hold_lead_s(float("nan")) == HOLD_LEAD_UNKNOWN_S == pytest.approx(0.023)
    # at the demo's rate the hold's lead and the switch's own update take 9 ms: under half a 20 ms control period
    assert switch_bound_s(500.0) == pytest.approx(0.009)


def test_a_controller_the_switch_just_reactivated_is_active_before_the_controller_managers_next_report():
    clock = Clock()
    s = Ros2ControlSettings.from_mapping({"controller": "fwd"}, KEYS)
    h = ControllerHealth(s, clock)
    h.joint_states()
    h.answered([NamedState("fwd", "inactive"), NamedState("jtc", "inactive"),
                NamedState("arm", "active", "hardware component")])
    h.latch("lease lost")
    assert h.fault() == ""  # inactive on purpose while the stop is latched
    h.switched("fwd", "active")  # switch_controller answered ok
    h.clear()
    assert h.fault() == "" and h.state_of("fwd") == "active" and h.state_of("jtc") == "inactive"
    h.forget_states()
    h.switched("fwd", "active")  # nothing known: a switch answer alone does not make the states known
    assert h.fault().endswith("controller states not known yet")


def test_a_hold_counts_as_applied_when_the_commands_equal_it_or_come_closer_and_never_while_they_move_away():
    from strands_robots.arm.ros2_control import HoldWatch

    hold = [0.30, -0.20, 1.00]
    # the commands lead the measured position the hold was taken at, and keep moving away until the hold lands
    w = HoldWatch(hold, after_ns=1_000)
    assert not w.observe([0.32, -0.20, 1.00], 1_002)
    assert not w.observe([0.34, -0.20, 1.00], 1_004)
    assert not w.observe([0.34, -0.20, 1.00], 1_006)  # a motion's last step: standing, not the hold
    assert w.observe([0.30, -0.20, 1.00], 1_008)  # the forward controller copied the hold
    assert w.snapshots == 4
    # joint limits let the command come back a little per update: closer than before is the hold applied
    w = HoldWatch(hold, after_ns=1_000)
    assert not w.observe([0.36, -0.20, 1.00], 1_002)
    assert w.observe([0.354, -0.20, 1.00], 1_004)
    # a first snapshot that is not the hold proves nothing; a malformed one is not counted
    w = HoldWatch(hold, after_ns=1_000)
    assert not w.observe([0.31, -0.20, 1.00], 1_002)
    assert not w.observe([0.30, -0.20], 1_004)
    assert not w.observe([float("nan"), -0.20, 1.00], 1_006)
    assert w.snapshots == 1
    # a standing arm on real hardware: the command sat a little off the measured position; the hold moves it there
    w = HoldWatch(hold, after_ns=1_000)
    assert not w.observe([0.3004, -0.2003, 1.0001], 1_002)
    assert not w.observe([0.3004, -0.2003, 1.0001], 1_004)
    assert w.observe([0.30, -0.20, 1.00], 1_006)


def test_snapshots_from_before_the_holds_joint_states_never_show_the_hold_though_the_commands_passed_through_it():
    from strands_robots.arm.ros2_control import HoldWatch

    # the arm moved up through 0.30 (measured at stamp 1_000, so the hold) and on; snapshots still in flight when the
    # stop latched show the commands coming to 0.30 and equal to it: the motion, not the hold
    w = HoldWatch([0.30], after_ns=1_000)
    assert not w.observe([0.294], 996)
    assert not w.observe([0.297], 998)
    assert not w.observe([0.300], 1_000)
    assert w.snapshots == 0
    assert not w.observe([0.303], 1_002)  # after the measurement: moving on, away from the hold
    assert not w.observe([0.306], 1_004)
    assert w.observe([0.300], 1_006)


def test_command_snapshots_read_the_controllers_interfaces_by_name_and_only_from_values_of_the_names_version():
    from strands_robots.arm.ros2_control import CommandSnapshots, command_interface_names

    wanted = command_interface_names(["left_joint_2", "left_joint_1"])
    assert wanted == ("command_interface.left_joint_2/position", "command_interface.left_joint_1/position")
    snaps = CommandSnapshots(wanted)
    assert not snaps.ready and snaps.read([1.0, 2.0], 1) is None
    names = ["state_interface.left_joint_1/position", "command_interface.left_joint_1/position",
             "command_interface.left_joint_1/position.is_limited", "command_interface.left_joint_2/position"]
    snaps.names(names, 7)
    assert snaps.ready and snaps.missing == ()
    got = snaps.read([0.5, 0.25, 0.0, -0.75], 7)
    assert got is not None and list(got) == [-0.75, 0.25]  # the controller's order, not the snapshot's
    assert snaps.read([0.5, 0.25, 0.0, -0.75], 8) is None  # values of other names: not read
    assert snaps.read([0.5, 0.25], 7) is None  # shorter than its names
    snaps.names(names[:3], 9)  # a controller_manager whose hardware has no such interface
    assert not snaps.ready and snaps.missing == ("command_interface.left_joint_2/position",)
    assert snaps.read([0.5, 0.25, 0.0], 9) is None


def test_the_switch_waits_for_the_hold_at_most_the_rest_of_the_control_period_and_never_less_than_the_lead():
    from strands_robots.arm.ros2_control import hold_confirm_bound_s, hold_lead_s

    # 20 ms period at 500 Hz: the switch's own update (2 ms) and the hold's delivery (3 ms) leave 15 ms
    assert hold_confirm_bound_s(500.0, 0.02) == pytest.approx(0.015)
    # a period too short for that: the lead the switch waits where the hold cannot be seen
    assert hold_confirm_bound_s(500.0, 0.008) == pytest.approx(hold_lead_s(500.0))
    assert hold_confirm_bound_s(float("nan"), 0.02) == pytest.approx(hold_lead_s(float("nan")))
    for rate in (100.0, 250.0, 500.0, 1000.0):
        for period in (0.01, 0.02, 0.05):
            bound = hold_confirm_bound_s(rate, period)
            assert bound >= hold_lead_s(rate)
            if hold_lead_s(rate) + 1.0 / rate <= period:  # a rate the driver takes: the switch lands in the period
                assert bound + 1.0 / rate <= period + 1e-12


def test_a_controller_manager_that_came_back_is_a_named_fault_until_checked_and_while_too_slow():
    from strands_robots.arm.ros2_control import CHECKING_MANAGER

    clock = Clock()
    h = healthy(clock)
    assert h.fault() == ""
    h.forget_states()  # the controller_manager went away
    assert h.fault().endswith("controller states not known yet")
    h.answered([NamedState("fwd", "active"), NamedState("arm", "active", "hardware component")])
    # back: no command until the driver has read its update rate and the controller's joints again
    assert h.fault().startswith(CHECKING_MANAGER) and "/controller_manager" in h.fault()
    assert h.refusal().startswith(CHECKING_MANAGER)
    h.refuse_manager("controller_manager /controller_manager runs at 50 Hz: it cannot be done in one control period")
    assert h.fault().startswith("controller_manager /controller_manager runs at 50 Hz")
    clock.t += 10.0  # stale joint_states: that controller_manager went away too; the next one is judged anew
    assert "stale" in h.fault()
    h.joint_states()
    assert h.fault().startswith(CHECKING_MANAGER)
    h.refuse_manager("")  # checked: fast enough
    assert h.fault() == ""


def test_a_trajectory_controllers_hold_is_due_one_controller_manager_update_later():
    from strands_robots.arm.ros2_control import hold_point_s

    assert hold_point_s(500.0) == pytest.approx(0.002)
    assert hold_point_s(100.0) == pytest.approx(0.01)
    assert hold_point_s(float("nan")) == pytest.approx(0.01) == hold_point_s(0.0)
    plan = chunk_trajectory(["j1", "j2"], [np.array([0.3, -0.2])], np.array([1, 0]), hold_point_s(500.0))
    assert plan.points == ((-0.2, 0.3),) and plan.times_s == pytest.approx((0.002,))


def test_the_real_stack_judge_of_hold_before_switch_says_unjudged_when_snapshots_around_the_hold_were_dropped():
    from ros2_control_harness import hold_before_switch

    ms = 1_000_000
    stop = -1 * ms
    up = [(0, -0.478), (2 * ms, -0.472), (4 * ms, -0.466), (6 * ms, -0.460)]
    # the hold (-0.472, where the joint was measured) came first: the command came back down, or reached it
    assert hold_before_switch(up + [(8 * ms, -0.466), (10 * ms, -0.466)], -0.472, 0.002, stop) is True
    assert hold_before_switch(up + [(8 * ms, -0.466), (10 * ms, -0.472)], -0.472, 0.002, stop) is True
    # deactivated first: the command only moved up, every update seen, and stood where the move had carried it
    assert hold_before_switch(up + [(8 * ms, -0.460), (10 * ms, -0.460)], -0.472, 0.002, stop) is False
    # the snapshot that would show the turn back is missing: no verdict either way
    dropped = [(0, -0.478), (2 * ms, -0.472), (8 * ms, -0.466), (10 * ms, -0.466)]
    assert hold_before_switch(dropped, -0.472, 0.002, stop) is None
    # so are the first ones after the stop: the command may have risen and come back before the first one seen
    late = [(12 * ms, -0.460), (14 * ms, -0.460), (16 * ms, -0.460)]
    assert hold_before_switch(late, -0.472, 0.002, stop) is None
    assert hold_before_switch(late, -0.472, 0.002, 11 * ms) is False
    assert hold_before_switch([], -0.472, 0.002, stop) is None
