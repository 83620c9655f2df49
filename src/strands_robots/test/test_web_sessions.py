"""The status page's sessions and sign-in limit (pure, a fake clock): expiry, bounds, CSRF, the token buckets."""

from __future__ import annotations

import itertools

import pytest

from strands_robots.relay.auth import Principal
from strands_robots.relay.web.sessions import SessionTable, SignInLimiter

TEAM = Principal("client", "team_a")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_session_ends_after_idle_s_without_a_request_and_after_max_age_s_whatever_its_use():
    clock = Clock()
    table = SessionTable(idle_s=60, max_age_s=300, clock=clock)
    idle = table.sign_in(TEAM, "tok")
    clock.t += 59
    assert table.get(idle.session_id) is idle  # touched: idle counts from now
    clock.t += 59
    assert table.get(idle.session_id) is idle
    clock.t += 61
    assert table.get(idle.session_id) is None
    busy = table.sign_in(TEAM, "tok")
    for _ in range(5):  # used every 59 s, still ends at 300 s
        clock.t += 59
        assert table.get(busy.session_id) is busy
    clock.t += 6
    assert table.get(busy.session_id) is None and len(table) == 0


def test_ids_and_csrf_tokens_are_fresh_random_values_and_a_pre_session_is_never_promoted():
    table = SessionTable()
    pre = table.pre_session()
    signed = table.sign_in(TEAM, "tok", replacing=pre.session_id)
    assert signed.session_id != pre.session_id and signed.csrf != pre.csrf
    assert len(signed.session_id) == 64 and len(signed.csrf) == 64  # 32 random bytes, hex
    assert table.get(pre.session_id) is None and pre.principal is None
    assert "tok" not in signed.session_id


def test_the_least_recently_used_session_ends_first_past_max_sessions():
    counter = itertools.count()
    table = SessionTable(max_sessions=3, token_hex=lambda n: f"{next(counter):0{2 * n}x}")
    a, b, c = (table.sign_in(TEAM, "tok") for _ in range(3))
    assert table.get(a.session_id) is a  # a used: b is now the oldest
    d = table.sign_in(TEAM, "tok")
    assert table.get(b.session_id) is None
    assert [table.get(s.session_id) for s in (a, c, d)] == [a, c, d]


@pytest.mark.parametrize("presented, ok", [("", False), ("0" * 64, False), ("x", False), (None, True)])
def test_csrf_tokens_must_match_exactly(presented, ok):
    session = SessionTable().sign_in(TEAM, "tok")
    assert session.csrf_matches(session.csrf if presented is None else presented) is ok


def test_sign_in_attempts_refill_at_the_rate_per_address_and_the_wait_is_said():
    clock = Clock()
    limiter = SignInLimiter(burst=3, per_minute=6.0, clock=clock)  # one attempt back every 10 s
    assert [limiter.allow("10.0.0.1")[0] for _ in range(4)] == [True, True, True, False]
    allowed, wait = limiter.allow("10.0.0.1")
    assert not allowed and wait == pytest.approx(10.0)
    assert limiter.allow("10.0.0.2")[0]  # another address has its own bucket
    clock.t += 10.0
    assert limiter.allow("10.0.0.1") == (True, 0.0)
    assert not limiter.allow("10.0.0.1")[0]


def test_attempts_over_all_addresses_are_bounded_too():
    clock = Clock()
    limiter = SignInLimiter(burst=2, per_minute=6.0, clock=clock)  # 16 over all addresses
    results = [limiter.allow(f"10.0.{i}.1")[0] for i in range(20)]
    assert results == [True] * 16 + [False] * 4


def test_only_max_addresses_are_remembered():
    clock = Clock()
    limiter = SignInLimiter(burst=1, per_minute=1.0, max_addresses=2, clock=clock)
    assert limiter.allow("a")[0] and limiter.allow("b")[0] and limiter.allow("c")[0]
    assert limiter.allow("a")[0]  # forgotten (oldest), so a full bucket again
    assert not limiter.allow("c")[0]
