"""Lease holders are named by station, and only a claim of the same station preempts by priority (arm/lease.py)."""

from __future__ import annotations

import pytest

from strands_robots.arm.lease import STATE_HELD, LeaseManager, operator_holder, station_holder, station_of


class Clock:
    def __init__(self) -> None:
        self.t = 10.0

    def __call__(self) -> float:
        return self.t


def test_holder_names_carry_their_station():
    assert station_holder("lab_a") == "station:lab_a"
    assert operator_holder("ann", "lab_a") == "operator:ann@lab_a"
    assert station_of("station:lab_a") == "lab_a"
    assert station_of("operator:ann@lab_a") == "lab_a"
    assert station_of("operator:a@b@lab_a") == "lab_a"
    assert [station_of(n) for n in ("station", "rollout", "operator:ann", "maintenance")] == ["", "", "", ""]


def test_an_operator_of_the_same_station_preempts_its_rollout():
    leases = LeaseManager(clock=Clock())
    rollout = leases.acquire(station_holder("lab_a"), 10, 1.0)
    claim = leases.acquire(operator_holder("ann", "lab_a"), 100, 5.0)
    assert claim.granted and claim.revoked_holder == "station:lab_a"
    assert not leases.validate(rollout.token)
    assert "revoked by 'operator:ann@lab_a' (priority 100)" in leases.refusal(rollout.token)


@pytest.mark.parametrize("claimant", [station_holder("lab_b"), operator_holder("bob", "lab_b"), "maintenance"])
def test_another_station_never_revokes_a_lease_whatever_its_priority(claimant):
    leases = LeaseManager(clock=Clock())
    first = leases.acquire(station_holder("lab_a"), 10, 1.0)
    claim = leases.acquire(claimant, 1000, 1.0)
    assert not claim.granted
    assert "held by 'station:lab_a' (station 'lab_a')" in claim.message
    assert "never preempts another station's lease, whatever its priority" in claim.message
    assert leases.validate(first.token) and leases.state().holder == "station:lab_a"
    assert leases.state().state == STATE_HELD


def test_a_station_gets_the_arms_once_the_other_released_them():
    leases = LeaseManager(clock=Clock())
    first = leases.acquire(station_holder("lab_a"), 10, 1.0)
    assert not leases.acquire(station_holder("lab_b"), 10, 1.0).granted
    assert leases.release(first.token).ok
    second = leases.acquire(station_holder("lab_b"), 10, 1.0)
    assert second.granted and second.revoked_holder == ""


def test_names_of_no_station_keep_preempting_each_other_by_priority():
    leases = LeaseManager(clock=Clock())
    leases.acquire("rollout", 10, 1.0)
    claim = leases.acquire("maintenance", 50, 1.0)
    assert claim.granted and claim.revoked_holder == "rollout"
    assert not leases.acquire(station_holder("lab_a"), 100, 1.0).granted  # ... but never a station's claim
