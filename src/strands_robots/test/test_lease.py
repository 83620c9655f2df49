"""LeaseManager: grants, heartbeats, revocation by priority, and which tokens may command (no ROS)."""

from __future__ import annotations

import threading

import pytest

from strands_robots.arm.lease import (
    STATE_EXPIRED,
    STATE_FREE,
    STATE_HELD,
    STATE_REVOKED,
    LeaseManager,
)


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def leases(clock: FakeClock) -> LeaseManager:
    return LeaseManager(clock=clock)


def test_stale_lease_token_is_refused_after_expiry(leases, clock):
    grant = leases.acquire("worker", 1, 2.0)
    assert grant.granted and grant.token and grant.lease_id
    assert grant.expires_at == pytest.approx(102.0)
    clock.advance(1.999)
    assert leases.validate(grant.token)
    clock.advance(0.001)
    assert not leases.validate(grant.token)
    snap = leases.state()
    assert snap.state == STATE_EXPIRED
    assert snap.holder == "worker" and snap.previous_holder == "worker"
    renewal = leases.renew(grant.token)
    assert not renewal.ok and "expired" in renewal.message
    # anyone may claim after expiry, even with a lower priority
    assert leases.acquire("other", 0, 1.0).granted


def test_higher_priority_claim_revokes_holder(leases):
    worker = leases.acquire("worker", 1, 10.0)
    operator = leases.acquire("operator", 5, 10.0)
    assert operator.granted
    assert operator.revoked_holder == "worker"
    assert operator.token != worker.token and operator.lease_id != worker.lease_id
    assert not leases.validate(worker.token)
    assert leases.validate(operator.token)
    snap = leases.state()
    assert (snap.state, snap.holder, snap.priority, snap.previous_holder) == (STATE_HELD, "operator", 5, "worker")
    renewal = leases.renew(worker.token)
    assert not renewal.ok
    assert renewal.message == "lease was revoked by 'operator' (priority 5)"


def test_equal_priority_claim_is_refused_while_held(leases):
    first = leases.acquire("worker", 3, 10.0)
    for holder, priority in (("rival", 3), ("rival", 2), ("worker", 3)):
        refused = leases.acquire(holder, priority, 10.0)
        assert not refused.granted and not refused.token
        assert "held by 'worker' (priority 3)" in refused.message
        assert "priority > 3" in refused.message
    assert leases.validate(first.token)
    assert leases.state().holder == "worker"


def test_renew_extends_expiry(leases, clock):
    grant = leases.acquire("worker", 1, 1.0)
    clock.advance(0.9)
    renewal = leases.renew(grant.token)
    assert renewal.ok and renewal.expires_at == pytest.approx(101.9)
    clock.advance(0.9)
    assert leases.validate(grant.token)  # would have expired at 101.0 without the heartbeat
    renewal = leases.renew(grant.token, duration_s=5.0)  # a new length sticks for later heartbeats
    assert renewal.ok and renewal.expires_at == pytest.approx(106.8)
    clock.advance(4.0)
    assert leases.renew(grant.token).expires_at == pytest.approx(110.8)
    assert leases.state().expires_at == pytest.approx(110.8)
    assert not leases.renew(grant.token, duration_s=float("nan")).ok


def test_released_token_no_longer_validates(leases):
    grant = leases.acquire("worker", 1, 10.0)
    released = leases.release(grant.token)
    assert released.ok
    assert not leases.validate(grant.token)
    assert leases.state().state == STATE_FREE
    again = leases.release(grant.token)
    assert not again.ok and again.message == "lease was released"
    assert not leases.renew(grant.token).ok
    assert leases.acquire("next", 0, 1.0).granted


def test_foreign_token_is_refused(leases):
    grant = leases.acquire("worker", 1, 10.0)
    for token in ("", "0" * 32, grant.token[:-1], grant.token + "0", grant.lease_id, None):
        assert not leases.validate(token)
    assert leases.refusal("deadbeef") == "unknown lease token"
    assert not leases.release("deadbeef").ok
    assert not leases.renew("deadbeef").ok
    assert leases.validate(grant.token)


def test_validate_without_any_lease_is_false(leases):
    assert leases.state().state == STATE_FREE
    assert not leases.validate("")
    assert not leases.validate("abc")


def test_revoke_without_new_holder_reports_revoked(leases):
    grant = leases.acquire("worker", 1, 10.0)
    assert leases.revoke("revoked: driver cleaned up")
    snap = leases.state()
    assert (snap.state, snap.previous_holder) == (STATE_REVOKED, "worker")
    assert not leases.validate(grant.token)
    assert leases.renew(grant.token).message == "lease was revoked: driver cleaned up"
    assert not leases.revoke()


@pytest.mark.parametrize("holder,priority,duration", [
    ("", 1, 1.0), ("w", 1, 0.0), ("w", 1, -1.0), ("w", 1, float("inf")), ("w", 1.5, 1.0), ("w", True, 1.0),
])
def test_invalid_claims_are_refused_with_reason(leases, holder, priority, duration):
    grant = leases.acquire(holder, priority, duration)
    assert not grant.granted and grant.message


def test_concurrent_claims_grant_exactly_one(leases):
    results = []
    barrier = threading.Barrier(8)

    def claim(i):
        barrier.wait()
        results.append(leases.acquire(f"w{i}", 1, 10.0).granted)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]


# -- bounded lease lengths ---------------------------------------------------------------------
def test_a_lease_longer_than_the_maximum_is_refused_with_reason():
    leases = LeaseManager(clock=lambda: 0.0)
    grant = leases.acquire("worker", 1, 1e12)
    assert not grant.granted and grant.token == ""
    assert grant.message == "duration_s 1e+12 exceeds the longest lease, 60 s (keep control by renewing)"
    assert leases.state().state == "free"
    assert leases.acquire("worker", 1, leases.max_duration_s).granted


def test_renewal_longer_than_the_maximum_is_refused_and_keeps_the_lease():
    now = [0.0]
    leases = LeaseManager(clock=lambda: now[0], max_duration_s=10.0)
    grant = leases.acquire("worker", 1, 5.0)
    renewal = leases.renew(grant.token, duration_s=11.0)
    assert not renewal.ok and "exceeds the longest lease, 10 s" in renewal.message
    now[0] = 4.9
    assert leases.validate(grant.token)
    now[0] = 5.0
    assert not leases.validate(grant.token)


def test_maximum_lease_length_must_be_positive():
    with pytest.raises(ValueError, match="max_duration_s"):
        LeaseManager(max_duration_s=0.0)
