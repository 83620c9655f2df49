"""The command stream's rules in the driver core.

Stale and out-of-order commands apply nothing; every other command gets exactly the verdict the SendAction
path gives (same core code).
"""

import math

import pytest

from strands_robots.arm.command_auth import proves
from strands_robots.arm.command_stream import CommandSequencer, StreamCommand
from strands_robots.arm.driver import DriverCore
from strands_robots.arm.verdict import REASON_OUT_OF_ORDER, REASON_STALE


class Clock:
    def __init__(self, ns: int = 1_000_000_000) -> None:
        self.ns = ns

    def __call__(self) -> int:
        return self.ns


def _proven_by(token):
    """Return the driver node's proof check for a lease whose token is ``token``."""
    return lambda message, proof: proves(token, message, proof)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def core(clock):
    c = DriverCore.simulated(lease_validator=lambda t: t == "tok", clock_ns=clock,
                             command_proof_validator=_proven_by("tok"))
    assert c.move_to_start_pose(lease_token="tok").reached
    return c


def targets(core):
    return core.adapter.data.ctrl.copy()


def cmd(keys, values, step, run="run-a", token="tok", apply_by_ns=0):
    return StreamCommand.signed(keys, values, run, step, token, apply_by_ns)


def test_stale_command_applies_nothing_and_every_key_says_stale(core, clock):
    before = targets(core)
    late = cmd(["left.joint_1", "right.joint_2"], [0.1, 0.2], 0, apply_by_ns=clock.ns - 1)
    v = core.apply_command(late)
    assert v.error == "" and v.applied_keys == ()
    assert v.unresolved_keys == ("left.joint_1", "right.joint_2")
    assert v.unresolved_reasons == (REASON_STALE, REASON_STALE)
    assert (targets(core) == before).all(), "a stale command moved a target"


def test_command_due_now_or_without_deadline_applies(core, clock):
    assert core.apply_command(cmd(["left.joint_1"], [0.1], 0, apply_by_ns=clock.ns)).applied_keys == ("left.joint_1",)
    assert core.apply_command(cmd(["left.joint_1"], [0.2], 1, apply_by_ns=0)).applied_keys == ("left.joint_1",)
    assert targets(core)[0] == pytest.approx(0.2)


def test_older_or_repeated_step_of_a_run_is_out_of_order_and_holds(core):
    assert core.apply_command(cmd(["left.joint_1"], [0.3], 5)).applied_keys == ("left.joint_1",)
    before = targets(core)
    for step in (4, 5, 0):
        v = core.apply_command(cmd(["left.joint_1", "left.joint_2"], [0.0, 0.0], step))
        assert v.applied_keys == () and v.unresolved_reasons == (REASON_OUT_OF_ORDER,) * 2, step
    assert (targets(core) == before).all()
    assert core.apply_command(cmd(["left.joint_1"], [0.25], 6)).applied_keys == ("left.joint_1",)


def test_each_run_keeps_its_own_order(core):
    assert core.apply_command(cmd(["left.joint_1"], [0.3], 9, run="a")).applied_keys
    assert core.apply_command(cmd(["left.joint_1"], [0.2], 0, run="b")).applied_keys


def test_stale_is_checked_before_order(core, clock):
    assert core.apply_command(cmd(["left.joint_1"], [0.3], 5)).applied_keys
    v = core.apply_command(cmd(["left.joint_1"], [0.3], 3, apply_by_ns=clock.ns - 1))
    assert v.unresolved_reasons == (REASON_STALE,)


def test_a_foreign_token_cannot_advance_a_runs_step_and_lock_the_holder_out(core):
    v = core.apply_command(cmd(["left.joint_1"], [0.3], 10_000, token="not-mine"))
    assert v.unresolved_reasons == ("not_lease_holder",)
    assert core.apply_command(cmd(["left.joint_1"], [0.3], 1)).applied_keys == ("left.joint_1",)


def test_a_refused_step_does_not_block_a_retry_of_the_same_step(core):
    v = core.apply_command(cmd(["left.joint_1"], [9.0], 3))  # outside limits: nothing applied
    assert v.unresolved_reasons == ("outside_limits",)
    assert core.apply_command(cmd(["left.joint_1"], [0.1], 3)).applied_keys == ("left.joint_1",)


PER_KEY_CASES = {
    "full": (["left.joint_1", "right.joint_2"], [0.1, 0.2], "tok"),
    "partial": (["left.joint_1", "left.joint_9", "right.joint_4", "right.gripper", "torso"],
                [0.1, 0.0, 2.5, math.nan, 1.0], "tok"),
    "foreign token": (["left.joint_1", "left.joint_9"], [0.2, 0.0], "f" * 32),
    "empty token": (["left.joint_1"], [0.2], ""),
    "infinite": (["left.joint_2"], [math.inf], "tok"),
    "duplicate keys": (["left.joint_1", "left.joint_1"], [0.1, 0.2], "tok"),
    "length mismatch": (["left.joint_1"], [0.1, 0.2], "tok"),
    "empty": ([], [], "tok"),
}


@pytest.mark.parametrize("case", sorted(PER_KEY_CASES))
def test_stream_gives_the_service_paths_verdict_for_every_per_key_case(case, clock):
    keys, values, token = PER_KEY_CASES[case]
    service = DriverCore.simulated(lease_validator=lambda t: t == "tok", clock_ns=clock)
    stream = DriverCore.simulated(lease_validator=lambda t: t == "tok", clock_ns=clock,
                                  command_proof_validator=_proven_by("tok"))
    by_service = service.execute(keys, values, token)
    by_stream = stream.apply_command(StreamCommand.signed(keys, values, "r", 0, token, clock.ns + 10**9))
    assert by_stream == by_service
    assert (service.adapter.data.ctrl == stream.adapter.data.ctrl).all()


def test_stopped_arm_gives_arm_stopped_over_the_stream(core):
    assert core.apply_command(cmd(["right.joint_4"], [-1.5], 0)).applied_keys == ("right.joint_4",)
    core.step(0.02)
    assert core.stopped
    v = core.apply_command(cmd(["left.joint_1", "right.joint_2"], [0.0, 0.6], 1))
    assert v.unresolved_reasons == ("arm_stopped", "arm_stopped")


def test_sequencer_forgets_old_runs_but_keeps_recent_ones():
    seq = CommandSequencer(lambda: 0)
    for i in range(200):
        seq.record_applied(StreamCommand((), (), f"run-{i}", 5))
    assert seq.last_applied("run-199") == 5
    assert seq.last_applied("run-0") is None


def test_commands_outside_an_episode_have_no_order_but_can_be_stale(core, clock):
    for value in (0.1, 0.05, 0.1):  # the same step 0 again and again, as `ros2 topic pub` sends it
        assert core.apply_command(cmd(["left.joint_1"], [value], 0, run="")).applied_keys == ("left.joint_1",)
    v = core.apply_command(cmd(["left.joint_1"], [0.2], 0, run="", apply_by_ns=clock.ns - 1))
    assert v.unresolved_reasons == (REASON_STALE,)


def test_status_counts_stale_and_out_of_order_commands(core, clock):
    assert core.apply_command(cmd(["left.joint_1"], [0.1], 3)).applied_keys
    core.apply_command(cmd(["left.joint_1"], [0.1], 2))
    core.apply_command(cmd(["left.joint_1"], [0.1], 4, apply_by_ns=clock.ns - 1))
    core.apply_command(cmd(["left.joint_1"], [0.1], 1))
    s = core.status()
    assert (s.commands_stale, s.commands_out_of_order) == (1, 2)
    assert s.actions_refused == 3 and s.actions_applied == 1


def test_a_command_carries_no_token_and_one_changed_after_signing_applies_nothing(core):
    keys = ("left.joint_1",)
    signed = cmd(keys, (0.1,), 0)
    assert "tok" not in repr(signed) and signed.lease_proof and signed.lease_proof != "tok"
    before = targets(core)
    tampered = StreamCommand(signed.keys, (0.4,), signed.run_id, signed.step_index, signed.lease_proof,
                             signed.apply_by_ns)
    v = core.apply_command(tampered)
    assert v.applied_keys == () and v.unresolved_reasons == ("not_lease_holder",)
    assert (targets(core) == before).all()
    # a refused command does not advance the run's order: the genuine one still applies
    assert core.apply_command(signed).applied_keys == keys


def test_a_command_signed_with_another_token_or_unsigned_applies_nothing(core):
    before = targets(core)
    for command in (cmd(("left.joint_1",), (0.1,), 0, token="not-tok"), cmd(("left.joint_1",), (0.1,), 1, token="")):
        v = core.apply_command(command)
        assert v.applied_keys == () and v.unresolved_reasons == ("not_lease_holder",)
    assert (targets(core) == before).all()


def test_without_a_proof_check_a_leased_core_applies_no_streamed_command(clock):
    c = DriverCore.simulated(lease_validator=lambda t: t == "tok", clock_ns=clock)
    v = c.apply_command(cmd(("left.joint_1",), (0.1,), 0))
    assert v.applied_keys == () and v.unresolved_reasons == ("not_lease_holder",)
