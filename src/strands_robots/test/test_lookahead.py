"""A streamed command's lookahead: the chunk's next steps, sent on as one trajectory only where every rule allows.

No ROS here. The driver core with hardware that takes trajectories (an in-memory stand-in recording what it is
asked) and with hardware that does not; the rules of :mod:`strands_robots.arm.lookahead`; the signature covering
the lookahead. The same path against a real joint_trajectory_controller: test_ros2_control.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from strands_robots.arm.adapter import JointReadings
from strands_robots.arm.command_auth import command_message
from strands_robots.arm.command_stream import StreamCommand
from strands_robots.arm.config import DriverConfig
from strands_robots.arm.driver import DriverCore
from strands_robots.arm.lease import LeaseManager
from strands_robots.arm.lookahead import (
    LOOKAHEAD_MAX_POINTS,
    LookaheadError,
    flatten,
    plan_lookahead,
    split_points,
)
from strands_robots.arm.model import actuator_key
from strands_robots.arm.verdict import REASON_NOT_LEASE_HOLDER, REASON_OUTSIDE_LIMITS

PERIOD_NS = 20_000_000
KEYS = ("left.joint_1", "left.joint_2")


class Arms:
    """In-memory arms; ``takes_trajectories`` as given. Every command and trajectory asked for is recorded."""

    def __init__(self, keys, takes_trajectories: bool, horizon_s: float = 0.2) -> None:
        self._keys = tuple(keys)
        self.pos = np.zeros(len(self._keys))
        self.calls: list = []
        self.timestep_s = 0.01
        self.takes_trajectories = takes_trajectories
        self.trajectory_horizon_s = horizon_s

    def arm_names(self):
        return ("left", "right")

    def joint_names(self, arm):
        return tuple(k.split(".", 1)[1] for k in self._keys if k.startswith(arm + "."))

    def keys(self):
        return self._keys

    def read(self):
        return JointReadings(self._keys, self.pos, np.zeros(len(self._keys)), np.zeros(len(self._keys)), 0.0)

    def command(self, targets):
        self.calls.append(("command", dict(targets)))

    def command_trajectory(self, points, period_s):
        self.calls.append(("trajectory", [dict(p) for p in points], period_s))

    def hold(self, arms=None):
        self.calls.append(("hold", arms))

    def step(self, dt):
        pass

    def reset(self, seed=None):
        pass

    def time_s(self):
        return 0.0


def core_with(takes_trajectories: bool, horizon_s: float = 0.2):
    config = DriverConfig.default()
    keys = [actuator_key(a.name, j.name) for a in config.arms for j in config.arms[0].joints]
    arms = Arms(keys, takes_trajectories, horizon_s)
    leases = LeaseManager()
    token = leases.acquire("rollout", 10, 30.0).token
    core = DriverCore(arms, config, lease_validator=leases.validate, clock_ns=lambda: 0,
                      command_proof_validator=leases.verify)
    return core, arms, token


def command(token, values, ahead, step=0, period_ns=PERIOD_NS, keys=KEYS):
    flat = [v for point in ahead for v in point]
    return StreamCommand.signed(keys, values, "run-1", step, token, 0, flat, period_ns if flat else 0)


# -- the driver core ------------------------------------------------------------------------------------------------
def test_a_step_and_its_lookahead_reach_trajectory_hardware_as_one_trajectory_of_every_point():
    core, arms, token = core_with(True)
    ahead = [(0.02, 0.01), (0.04, 0.02), (0.06, 0.03)]
    verdict = core.apply_command(command(token, (0.0, 0.0), ahead))
    assert verdict.applied_keys == KEYS and not verdict.unresolved_keys
    kind, points, period = arms.calls[-1]
    assert kind == "trajectory" and period == pytest.approx(0.02)
    assert [tuple(p[k] for k in KEYS) for p in points] == [(0.0, 0.0), *ahead]
    assert core.lookahead_counts == (3, 0, "")


def test_hardware_that_takes_no_trajectories_gets_the_step_alone():
    core, arms, token = core_with(False)
    verdict = core.apply_command(command(token, (0.1, 0.2), [(0.12, 0.22), (0.14, 0.24)]))
    assert verdict.applied_keys == KEYS
    assert arms.calls == [("command", {"left.joint_1": 0.1, "left.joint_2": 0.2})]


def test_a_point_the_per_key_rules_refuse_never_reaches_the_controller_nor_any_after_it():
    core, arms, token = core_with(True)
    # left.joint_2's range ends at 1.8: the third point is outside it; the fourth would be fine again
    ahead = [(0.02, 1.76), (0.04, 1.79), (0.06, 1.9), (0.08, 1.79)]
    core.apply_command(command(token, (0.0, 1.74), ahead))
    kind, points, _ = arms.calls[-1]
    assert kind == "trajectory"
    assert [p["left.joint_2"] for p in points] == [1.74, 1.76, 1.79]
    assert core.lookahead_counts[1:] == (1, f"point 3: left.joint_2 {REASON_OUTSIDE_LIMITS}")


def test_a_point_the_envelope_would_trip_on_for_speed_never_reaches_the_controller():
    core, arms, token = core_with(True)
    limit = core.envelope.limits("left.joint_1").velocity  # 3.0 rad/s less the 10 % margin
    fast = 0.02 * limit * 1.1
    core.apply_command(command(token, (0.0, 0.0), [(0.02, 0.0), (0.02 + fast, 0.0), (0.03, 0.0)]))
    _, points, _ = arms.calls[-1]
    assert [p["left.joint_1"] for p in points] == [0.0, 0.02]
    assert "left.joint_1 would move at" in core.lookahead_counts[2] and "over the envelope's" in \
        core.lookahead_counts[2]


def test_no_point_is_due_past_the_drivers_silence_bound():
    core, arms, token = core_with(True, horizon_s=0.1)  # 5 periods of 20 ms: the step and 4 points after it
    ahead = [(0.01 * (i + 1), 0.0) for i in range(LOOKAHEAD_MAX_POINTS)]
    core.apply_command(command(token, (0.0, 0.0), ahead))
    _, points, period = arms.calls[-1]
    assert len(points) == 5 and len(points) * period <= 0.1 + 1e-9
    assert "past the driver's silence bound of 0.1 s" in core.lookahead_counts[2]


def test_a_step_with_a_refused_key_goes_out_alone():
    core, arms, token = core_with(True)
    verdict = core.apply_command(command(token, (0.0, 9.0), [(0.02, 0.0)]))
    assert verdict.unresolved_reasons == (REASON_OUTSIDE_LIMITS,)
    assert arms.calls == [("command", {"left.joint_1": 0.0})]


def test_a_stopped_arm_gets_no_trajectory_at_all():
    core, arms, token = core_with(True)
    core.stop("lease lost")
    arms.calls.clear()
    verdict = core.apply_command(command(token, (0.0, 0.0), [(0.02, 0.0)]))
    assert set(verdict.unresolved_reasons) == {"arm_stopped"}
    assert arms.calls == []


def test_a_lookahead_changed_in_transit_applies_nothing():
    core, arms, token = core_with(True)
    signed = command(token, (0.0, 0.0), [(0.02, 0.0), (0.04, 0.0)])
    for changed in (signed.__class__(**{**signed.__dict__, "lookahead": (0.02, 0.0, 0.5, 0.0)}),
                    signed.__class__(**{**signed.__dict__, "lookahead_period_ns": PERIOD_NS * 5})):
        verdict = core.apply_command(changed)
        assert verdict.unresolved_reasons == (REASON_NOT_LEASE_HOLDER,) * 2
    assert arms.calls == []
    assert core.apply_command(signed).applied_keys == KEYS  # the command as signed applies


@pytest.mark.parametrize("flat, period_ns, why", [
    ([0.1], PERIOD_NS, "not a whole number of points of 2 keys"),
    ([0.0, 0.0] * (LOOKAHEAD_MAX_POINTS + 1), PERIOD_NS, f"at most {LOOKAHEAD_MAX_POINTS} are allowed"),
    ([0.0, 0.0], 0, "lookahead_period > 0"),
])
def test_a_malformed_lookahead_is_a_clear_error_and_nothing_moves(flat, period_ns, why):
    core, arms, token = core_with(True)
    cmd = StreamCommand.signed(KEYS, (0.0, 0.0), "run-1", 0, token, 0, flat, period_ns)
    verdict = core.apply_command(cmd)
    assert verdict.is_coarse_error and verdict.error.startswith("lookahead refused: ") and why in verdict.error
    assert arms.calls == []
    assert core.status().coarse_errors == 1


def test_an_out_of_order_or_stale_command_sends_no_lookahead_either():
    core, arms, token = core_with(True)
    assert core.apply_command(command(token, (0.0, 0.0), [(0.02, 0.0)], step=5)).applied_keys == KEYS
    arms.calls.clear()
    verdict = core.apply_command(command(token, (0.1, 0.0), [(0.12, 0.0)], step=4))
    assert verdict.unresolved_reasons == ("out_of_order",) * 2 and arms.calls == []


# -- the rules --------------------------------------------------------------------------------------------------------
def test_split_points_reads_the_flattened_points_in_key_order():
    assert split_points(KEYS, (1.0, 2.0, 3.0, 4.0), PERIOD_NS) == ((1.0, 2.0), (3.0, 4.0))
    assert split_points(KEYS, (), 0) == ()
    with pytest.raises(LookaheadError, match="needs keys"):
        split_points((), (1.0,), PERIOD_NS)


def test_flatten_takes_the_next_actions_with_this_steps_keys_up_to_the_bound():
    rest = [{"a": 1.0, "b": 2.0}, {"b": 4.0, "a": 3.0}, {"a": 5.0}, {"a": 6.0, "b": 7.0}]
    assert flatten(("a", "b"), rest) == [1.0, 2.0, 3.0, 4.0]  # ends before the action of other keys
    many = [{"a": float(i)} for i in range(LOOKAHEAD_MAX_POINTS + 5)]
    assert flatten(("a",), many) == [float(i) for i in range(LOOKAHEAD_MAX_POINTS)]
    bad = flatten(("a",), [{"a": "fast"}, {"a": True}])
    assert all(math.isnan(v) for v in bad) and len(bad) == 2


def test_a_non_finite_point_ends_the_trajectory_naming_the_rule():
    from strands_robots.arm.model import JointSpec

    specs = {"a.j": JointSpec("j", -1.0, 1.0, 3.0, 1.0)}
    plan = plan_lookahead({"a.j": 0.0}, ("a.j",), [(0.01,), (math.nan,), (0.02,)], 0.02, specs, {"a.j": 2.7}, (),
                          1.0)
    assert [p["a.j"] for p in plan.points] == [0.01]
    assert plan.cut == "point 2: a.j non_finite"


def test_the_signed_bytes_cover_the_lookahead_and_its_period():
    base = command_message("r", 1, 2, KEYS, (0.0, 0.0), (0.1, 0.2), PERIOD_NS)
    assert base != command_message("r", 1, 2, KEYS, (0.0, 0.0), (0.1, 0.3), PERIOD_NS)
    assert base != command_message("r", 1, 2, KEYS, (0.0, 0.0), (0.1, 0.2), PERIOD_NS + 1)
    assert base != command_message("r", 1, 2, KEYS, (0.0, 0.0))
    # moving a value from the step into the lookahead is another command, never the same bytes
    assert command_message("r", 1, 2, ("a",), (0.1,), (0.2,), 1) != command_message("r", 1, 2, ("a", "b"), (0.1, 0.2))
