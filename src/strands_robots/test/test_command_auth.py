"""The streamed command's lease proof: an HMAC keyed by the lease token, which itself is never published (no ROS)."""

from __future__ import annotations

import math

import pytest

from strands_robots.arm.command_auth import command_message, proves, sign
from strands_robots.arm.lease import LeaseManager

KEYS = ("left.joint_1", "right.gripper")
VALUES = (0.25, 0.01)


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _message(**changes):
    fields = dict(run_id="run-a", step_index=7, apply_by_ns=1_000_000_123, keys=KEYS, values=VALUES)
    fields.update(changes)
    return command_message(**fields)


def test_the_proof_does_not_contain_or_reveal_the_token():
    leases = LeaseManager()
    token = leases.acquire("rollout", 10, 5.0).token
    proof = sign(token, _message())
    assert len(proof) == 64 and token not in proof
    # the token is what renews, releases and resets: the proof does none of it
    assert not leases.validate(proof)
    assert not leases.renew(proof).ok
    assert not leases.release(proof).ok


@pytest.mark.parametrize("changed", [
    {"run_id": "run-b"},
    {"step_index": 8},
    {"apply_by_ns": 1_000_000_124},
    {"keys": ("left.joint_2", "right.gripper")},
    {"keys": ("right.gripper", "left.joint_1")},
    {"values": (0.25, 0.0100000001)},
    {"values": (0.25, math.nan)},
])
def test_a_command_changed_after_signing_is_not_proven(changed):
    token = "a" * 32
    proof = sign(token, _message())
    assert proves(token, _message(), proof)
    assert not proves(token, _message(**changed), proof)


def test_field_boundaries_are_unambiguous():
    # the same characters split differently between run id and key are different commands
    a = command_message("ab", 0, 0, ("c",), (1.0,))
    b = command_message("a", 0, 0, ("bc",), (1.0,))
    assert a != b
    assert command_message("", 0, 0, (), ()) != command_message("", 0, 1, (), ())


def test_a_proof_made_with_another_token_applies_nothing():
    leases = LeaseManager()
    leases.acquire("rollout", 10, 5.0)
    message = _message()
    assert not leases.verify(message, sign("f" * 32, message))
    assert not leases.verify(message, "")


def test_only_the_current_unexpired_lease_proves_a_command():
    clock = FakeClock()
    leases = LeaseManager(clock=clock)
    grant = leases.acquire("rollout", 10, 1.0)
    message = _message()
    proof = sign(grant.token, message)
    assert leases.verify(message, proof)
    clock.t += 1.5  # expired
    assert not leases.verify(message, proof)
    again = leases.acquire("rollout", 10, 1.0)
    assert not leases.verify(message, proof), "a proof made under an ended lease proves nothing under the next"
    assert leases.verify(message, sign(again.token, message))
    leases.revoke("revoked by operator")
    assert not leases.verify(message, sign(again.token, message))


def test_mismatched_keys_and_values_cannot_be_signed():
    with pytest.raises(ValueError, match="2 keys but 1 values"):
        command_message("r", 0, 0, KEYS, (1.0,))
    with pytest.raises(ValueError, match=">= 0"):
        command_message("r", -1, 0, (), ())


def test_no_token_signs_nothing():
    assert sign("", _message()) == ""
    assert not proves("", _message(), "")


def test_the_proof_is_hmac_sha256_hex_rfc4231_case_2():
    # RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?"
    assert sign("Jefe", b"what do ya want for nothing?") == (
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    assert proves("Jefe", b"what do ya want for nothing?",
                  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
