"""The status page's sessions, sign-in forms and sign-in limit (pure, a fake clock): expiry, bounds, CSRF, buckets."""

from __future__ import annotations

import itertools

import pytest

from strands_robots.relay.auth import Principal
from strands_robots.relay.web.sessions import SessionTable, SignInForms, SignInLimiter

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


def test_ids_and_csrf_tokens_are_fresh_random_values_and_a_new_sign_in_ends_the_browsers_earlier_session():
    table = SessionTable()
    earlier = table.sign_in(TEAM, "tok")
    signed = table.sign_in(TEAM, "tok", replacing=earlier.session_id)
    assert signed.session_id != earlier.session_id and signed.csrf != earlier.csrf
    assert len(signed.session_id) == 64 and len(signed.csrf) == 64  # 32 random bytes, hex
    assert table.get(earlier.session_id) is None
    assert "tok" not in signed.session_id


def test_a_sign_in_form_is_good_once_with_its_own_cookie_until_it_expires_and_nothing_is_stored_per_form():
    clock = Clock()
    forms = SignInForms(max_age_s=600, clock=clock)
    kept = forms.issue()
    for _ in range(10000):  # a flood of forms: nothing is kept for any of them
        forms.issue()
    assert len(forms) == 0
    other = forms.issue()
    assert not forms.redeem(kept.csrf, other.cookie)  # another form's cookie
    assert forms.redeem(kept.csrf, kept.cookie)
    assert not forms.redeem(kept.csrf, kept.cookie)  # one attempt per form
    assert len(forms) == 1
    clock.t += 599
    assert forms.redeem(other.csrf, other.cookie)  # still within its 600 s
    late = forms.issue()
    clock.t += 601
    assert not forms.redeem(late.csrf, late.cookie)  # expired
    assert len(forms) == 0  # the sent forms' nonces are forgotten once they could not come back anyway


@pytest.mark.parametrize("tamper", ["mac", "issued", "nonce", "empty", "other process"])
def test_a_sign_in_form_not_signed_by_this_process_is_refused(tamper):
    forms = SignInForms(clock=Clock())
    form = forms.issue()
    issued, nonce, mac = form.csrf.split(".")
    csrf, cookie = {
        "mac": (f"{issued}.{nonce}.{'0' * len(mac)}", form.cookie),
        "issued": (f"{int(issued) + 1000}.{nonce}.{mac}", form.cookie),  # extended by a second: the mac says no
        "nonce": (f"{issued}.{'f' * len(nonce)}.{mac}", "f" * len(nonce)),
        "empty": ("", ""),
        "other process": (SignInForms(clock=Clock()).issue().csrf, form.cookie),
    }[tamper]
    assert not forms.redeem(csrf, cookie)
    assert forms.redeem(form.csrf, form.cookie)  # the genuine one is still good


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
