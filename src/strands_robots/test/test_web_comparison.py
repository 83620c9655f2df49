"""The web page's comparison section and leaderboard over real HTTP, on a real store filled as the relay fills it.

The comparison messages are built through the real statistics (comparison_message.py); the leaderboard's blocks
are kept by the relay's own code (``comparison_blocks.keep_ended``) from ended jobs' snapshots.
"""

from __future__ import annotations

import contextlib
import html
import re

import pytest

pytest.importorskip("aiohttp", reason="the web status page needs aiohttp (requirements/python.txt)")
pytest.importorskip("jinja2", reason="the web status page needs Jinja2 (requirements/python.txt)")

from comparison_message import comparison_message, seeded_outcomes  # noqa: E402
from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS  # noqa: E402
from web_helpers import Http  # noqa: E402

from strands_robots.client import pb  # noqa: E402
from strands_robots.relay import comparison_blocks  # noqa: E402
from strands_robots.relay.auth import TokenBook  # noqa: E402
from strands_robots.relay.sqlite_store import SqliteStore  # noqa: E402
from strands_robots.relay.store import JobRecord, Snapshot  # noqa: E402
from strands_robots.relay.web.server import WebStatusServer  # noqa: E402
from strands_robots.stats.sequential import StopRule  # noqa: E402


@contextlib.contextmanager
def _page(tmp_path):
    store = SqliteStore(str(tmp_path / "relay.db"))
    book = TokenBook(CLIENT_TOKENS, STATION_TOKENS)
    web = WebStatusServer(store, lambda: book, "127.0.0.1:0", poll_s=0.05)
    port = web.start()
    try:
        yield store, port
    finally:
        web.stop()
        store.close()


def _job(store, job_id, comparison, client="team_a", state="RUNNING", at=1):
    request = pb.SubmitJobRequest(station_id="sim_station", episodes=200, job_id=job_id)
    job = JobRecord(job_id=job_id, client_id=client, station_id="sim_station", request=request.SerializeToString(),
                    submitted_unix_ms=at, episodes_total=200, client_job_id=job_id)
    store.create_job(job)
    status = pb.JobStatus(job_id=job_id, station_id="sim_station", state=state, episodes_total=200,
                          updated_unix_ms=1_800_000_000_000 + at, sequence=1)
    status.comparison.CopyFrom(comparison)
    store.put_snapshot(Snapshot(job_id=job_id, updated_unix_ms=status.updated_unix_ms, state=state,
                                payload=status.SerializeToString(), sequence=1))
    return job


def test_the_job_page_shows_each_policys_interval_bar_the_paired_difference_and_the_verdict(tmp_path):
    msg = comparison_message(seeded_outcomes(0.9, 0.3, 60, seed=1), rule=StopRule(max_blocks=60))
    with _page(tmp_path) as (store, port):
        _job(store, "ab-1", msg, state="SUCCEEDED")
        http = Http(port)
        http.sign_in(CLIENT_TOKENS["team_a"])
        status, _, page = http.get("/jobs/ab-1")
    assert status == 200 and 'id="comparison"' in page
    text = html.unescape(page)
    for figures in msg.figures:
        row = re.search(rf'<tr id="slot-{figures.slot}">(.*?)</tr>', text, re.S).group(1)
        assert f"{figures.success.successes}/{figures.success.trials} = " in row
        whiskers = [float(x) for x in re.findall(r'<line x1="([\d.]+)"', row)]
        assert whiskers[0] == pytest.approx(200 * figures.success.low, abs=0.06)
        assert whiskers[2] == pytest.approx(200 * figures.success.high, abs=0.06)
    pair = msg.pairs[0]
    assert f"{pair.difference * 100:+.0f} pts [{pair.low * 100:+.0f}, {pair.high * 100:+.0f}] Newcombe 95 %" in text
    assert f"p = {pair.p_value:.3g}" in text
    assert re.search(r'id="comparison-verdict">a_better: a_better at block \d+', text)
    assert f"block {msg.stop.stopped_at_block}" in text


def test_a_running_blind_comparison_shows_blind_labels_and_never_a_slot_name(tmp_path):
    msg = comparison_message(seeded_outcomes(0.7, 0.4, 10, seed=2), revealed=False, rule=StopRule(max_blocks=40),
                             slots=("hidden_alpha", "hidden_beta"))
    with _page(tmp_path) as (store, port):
        _job(store, "ab-2", msg)
        http = Http(port)
        http.sign_in(CLIENT_TOKENS["team_a"])
        status, _, page = http.get("/jobs/ab-2")
    assert status == 200 and 'id="comparison-held"' in page
    assert "hidden_alpha" not in page and "hidden_beta" not in page
    assert page.count(">A success<") + page.count(">A failure<") == 10  # one A per block


def test_the_leaderboard_page_ranks_the_teams_own_policies_and_no_other_teams(tmp_path):
    with _page(tmp_path) as (store, port):
        comparison_blocks.ensure_tables(store)
        for n, (slots, rates) in enumerate(((("steady", "hasty"), (0.85, 0.3)), (("careful", "hasty"), (0.6, 0.3)),
                                            (("steady", "careful"), (0.85, 0.6)))):
            job = _job(store, f"ab-{n}", comparison_message(seeded_outcomes(*rates, 50, seed=n), slots=slots),
                       state="SUCCEEDED", at=n + 1)
            comparison_blocks.keep_ended(store, job)
        other = _job(store, "b-1", comparison_message(seeded_outcomes(0.9, 0.1, 30, seed=9),
                                                      slots=("rival_x", "rival_y")),
                     client="team_b", state="SUCCEEDED", at=9)
        comparison_blocks.keep_ended(store, other)
        a = Http(port)
        a.sign_in(CLIENT_TOKENS["team_a"])
        _, _, index = a.get("/leaderboard")
        status, _, board = a.get("/leaderboard/demo")
        b = Http(port)
        b.sign_in(CLIENT_TOKENS["team_b"])
        _, _, board_b = b.get("/leaderboard/demo")
        station = Http(port)
        station.sign_in(STATION_TOKENS["sim_station"])
        station_status, _, _ = station.get("/leaderboard/demo")
        bad_status, _, _ = a.get("/leaderboard/..%2Fetc")
    assert 'href="/leaderboard/demo"' in index and "150 complete blocks" in index
    assert status == 200
    ranked = re.findall(r'<tr id="policy-(\w+)"><td>(\d+)</td>', board)
    assert ranked == [("steady", "1"), ("careful", "2"), ("hasty", "3")]
    assert "rival_x" not in board and "rival_y" not in board
    assert "150 complete blocks of 3 comparison jobs" in board
    assert re.findall(r'<tr id="policy-(\w+)">', board_b) == ["rival_x", "rival_y"]
    assert "steady" not in board_b
    assert station_status == 404 and bad_status == 404


def test_a_comparison_between_two_teams_shows_to_both_and_ranks_the_others_policy_by_team(tmp_path):
    from strands_robots.job_model.team_job import team_job_from_mapping
    from strands_robots.relay import job_teams
    from strands_robots.wire.pb_model import suite_job_to_pb

    team_job = team_job_from_mapping({"station_id": "sim_station", "suite": "demo", "tasks": [
        {"task": "reach_cube", "trials": 30}], "compare": {"slots": ["vision", {"name": "theirs", "team": "team_b"}]}})
    request = pb.SubmitJobRequest(station_id="sim_station", episodes=team_job.episodes, job_id="ab-t",
                                  suite_job=suite_job_to_pb(team_job))
    with _page(tmp_path) as (store, port):
        held = JobRecord(job_id="ab-t", client_id="team_a", station_id="sim_station",
                         request=request.SerializeToString(), submitted_unix_ms=1, episodes_total=team_job.episodes)
        store.create_job(held)
        job_teams.invite(store, held)
        a, b = Http(port), Http(port)
        a.sign_in(CLIENT_TOKENS["team_a"])
        b.sign_in(CLIENT_TOKENS["team_b"])
        _, _, waiting = a.get("/jobs/ab-t")
        _, _, listed_b = b.get("/jobs")
        job_teams.respond(store, held, "team_b", True, "", 2, 60)
        status = pb.JobStatus(job_id="ab-t", station_id="sim_station", state="SUCCEEDED", updated_unix_ms=3,
                              sequence=4)
        status.comparison.CopyFrom(comparison_message(seeded_outcomes(0.9, 0.3, 30, seed=3),
                                                      slots=("vision", "theirs")))
        store.put_snapshot(Snapshot(job_id="ab-t", updated_unix_ms=3, state="SUCCEEDED",
                                    payload=status.SerializeToString(), sequence=4))
        comparison_blocks.keep_ended(store, held)
        page_status, _, page_b = b.get("/jobs/ab-t")
        _, _, board_b = b.get("/leaderboard/demo")
        _, _, board_a = a.get("/leaderboard/demo")
        outsider = Http(port)
        outsider.sign_in(STATION_TOKENS["other_station"])
        outsider_status, _, _ = outsider.get("/jobs/ab-t")
    assert "waiting for team(s) team_b to accept the invitation" in html.unescape(waiting)
    assert 'href="/jobs/ab-t"' in listed_b  # the invited team lists it
    assert page_status == 200 and 'id="comparison"' in page_b
    assert outsider_status == 404
    rows_b = re.findall(r'<tr id="policy-([\w/]+)"( class="others")?>', board_b)
    rows_a = re.findall(r'<tr id="policy-([\w/]+)"( class="others")?>', board_a)
    assert sorted(rows_b) == [("team_a/vision", ' class="others"'), ("theirs", "")]
    assert sorted(rows_a) == [("team_b/theirs", ' class="others"'), ("vision", "")]
    assert "another team&#39;s" in board_b or "another team's" in board_b
