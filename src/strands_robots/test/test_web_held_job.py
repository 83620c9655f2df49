"""The status page says until when a held comparison waits, the same deadline the relay's gRPC status gives.

A real relay (``RelayServer`` on loopback, its SQLite store, the test's clock) with its page started as
``strands-robots relay --web`` starts it (``server._start_web``), read over real HTTP by both teams.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import html
import re

import pytest

pytest.importorskip("grpc", reason="grpcio is not installed")
pytest.importorskip("aiohttp", reason="the web status page needs aiohttp (requirements/python.txt)")

from test_relay_job_teams import BOUND_S, TOKENS, _submit, relay_of_three_teams  # noqa: E402
from web_helpers import Http  # noqa: E402

from strands_robots.relay.server import _start_web  # noqa: E402


def _web(relay):
    settings = dataclasses.replace(relay.server.settings, web="127.0.0.1:0")
    return _start_web(relay.server, relay.store, settings, argparse.Namespace(tls_cert=None, tls_key=None))


def _signed_in(port, team):
    http = Http(port)
    status, _, _ = http.sign_in(TOKENS[team])
    assert status in (302, 303), status
    return http


def _text(http, path):
    status, _, page = http.get(path)
    assert status == 200, (status, page[:500])
    return html.unescape(page)


def _grpc_until(message):
    return re.search(r"\(until (\S+)\)", message).group(1)


def test_the_page_shows_a_held_jobs_deadline_and_time_left_as_the_grpc_status_gives_it(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients):
        web = _web(relay)
        try:
            job = _submit(clients)
            submitted_ms = relay.clock.ms
            relay.clock.ms += 25 * 60_000 + 30_000  # 25.5 min later: 34.5 min left of the hour
            grpc_until = _grpc_until(clients["team_a"].get_status(job).message)
            expected = datetime.datetime.fromtimestamp(submitted_ms / 1000 + BOUND_S, datetime.timezone.utc)
            assert grpc_until == f"{expected:%Y-%m-%dT%H:%M:%SZ}"

            owner, invited = _signed_in(web.port, "team_a"), _signed_in(web.port, "team_b")
            page = _text(owner, f"/jobs/{job}")
            held = re.search(r'<dd id="held">(.*?)</dd>', page, re.S).group(1)
            assert "waiting for team(s) team_b to accept" in held
            assert f'datetime="{grpc_until}"' in held and f"{expected:%Y-%m-%d %H:%M:%S} UTC" in held
            assert re.search(r'<span id="held-left">in 34 min</span>', held), held
            assert f"(until {grpc_until})" in re.search(r'<dd id="message">(.*?)</dd>', page, re.S).group(1)
            # the invited team sees the same deadline, by the relay's id for the job
            relay_id = clients["team_b"].list_jobs().jobs[0].job_id
            assert f'datetime="{grpc_until}"' in _text(invited, f"/jobs/{relay_id}")
            listed = _text(owner, "/jobs")
            row = re.search(rf'<tr [^>]*data-job="{re.escape(job)}">(.*?)</tr>', listed, re.S).group(1)
            assert f'<time datetime="{grpc_until}">' in row and "(in 34 min)" in row, row

            relay.clock.ms += 34 * 60_000 + 29_999  # 1 ms before the bound
            assert "in less than a minute" in _text(owner, f"/jobs/{job}")
            relay.clock.ms += 1  # the bound: the page ends the job on read, with the relay's own words
            page = _text(invited, f"/jobs/{relay_id}")
            assert re.search(r'id="state" class="state-cancelled">CANCELLED', page) and 'id="held"' not in page
            assert relay.store.get_snapshot(relay_id).state == "CANCELLED"  # the page's read ended it
            final = clients["team_a"].get_status(job)
            assert final.state == "CANCELLED" and final.message.startswith("the invitation to team(s) team_b expired")
            assert final.message in page
        finally:
            web.stop()


def test_a_job_every_team_accepted_shows_no_deadline(tmp_path):
    with relay_of_three_teams(tmp_path) as (relay, clients):
        web = _web(relay)
        try:
            job = _submit(clients)
            clients["team_b"].accept(job)
            page = _text(_signed_in(web.port, "team_a"), f"/jobs/{job}")
            assert 'id="held"' not in page and "until" not in re.search(r'<dd id="message">(.*?)</dd>', page,
                                                                          re.S).group(1)
        finally:
            web.stop()
