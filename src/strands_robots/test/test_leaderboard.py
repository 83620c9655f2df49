"""Rankings through the relay: ended comparison jobs reported by a station, ranked per team, each team its own.

A seeded simulation with known truth: policies succeed independently with known rates, their comparison jobs'
terminal snapshots (built through the real statistics) are reported over gRPC as a station reports them, and
the team's leaderboard must rank them in the true order; another team's policies never appear.
"""

from __future__ import annotations

import itertools

import grpc
import pytest
from comparison_message import comparison_message, seeded_outcomes
from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, running_relay, yes_no_task

from strands_robots.client.cli.job_leaderboard import leaderboard_lines
from strands_robots.client import EvaluationClient, InvalidTask, pb
from strands_robots.wire.proto import station_service_pb2 as ss
from strands_robots.wire.proto import station_service_pb2_grpc as ss_grpc

STATION_MD = (("authorization", f"Bearer {STATION_TOKENS['sim_station']}"),)
TRUTH = {"steady": 0.85, "careful": 0.6, "hasty": 0.35}  # the true order: steady, careful, hasty


def _ended_comparison(client, stub, slots, blocks, seed, state="SUCCEEDED"):
    """Submit a job, and report its end as the station would: the comparison of ``slots`` over seeded blocks."""
    job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2 * blocks)
    status = pb.JobStatus(job_id=job_id, station_id="sim_station", state=state, episodes_total=2 * blocks,
                          updated_unix_ms=1_800_000_000_000 + seed, sequence=1)
    status.comparison.CopyFrom(comparison_message(seeded_outcomes(TRUTH[slots[0]], TRUTH[slots[1]], blocks, seed),
                                                  slots=slots))
    reply = stub.ReportStatus(ss.ReportStatusRequest(station_id="sim_station", snapshots=[status]),
                              metadata=STATION_MD, timeout=10)
    assert not reply.refused, reply.refused
    return job_id, status


@pytest.fixture
def relay(tmp_path):
    with running_relay(tmp_path) as relay, grpc.insecure_channel(relay.target) as channel:
        yield relay, ss_grpc.StationStub(channel)


def test_a_teams_policies_are_ranked_in_their_true_order_with_intervals(relay):
    server, stub = relay
    with EvaluationClient(server.target, token=CLIENT_TOKENS["team_a"]) as client:
        for n, pair in enumerate(itertools.permutations(TRUTH, 2)):  # every pair, in both slot orders
            _ended_comparison(client, stub, pair, blocks=40, seed=n)
        board = client.leaderboard("demo")
    assert [e.policy for e in board.entries] == ["steady", "careful", "hasty"]
    assert [e.rank for e in board.entries] == [1, 2, 3]
    assert (board.blocks, board.jobs, board.confidence) == (240, 6, 0.95)
    for entry in board.entries:
        assert entry.low < entry.log_strength < entry.high
        assert entry.wins + entry.losses + entry.ties == entry.comparisons == 160  # 4 jobs of 40 blocks
        assert entry.jobs == 4
    assert board.entries[0].low > board.entries[2].high  # the far ends are told apart
    text = "\n".join(leaderboard_lines(board))
    assert "suite demo: 3 policies ranked over 240 complete blocks of 6 comparison jobs" in text


def test_another_teams_policies_are_invisible(relay):
    server, stub = relay
    with EvaluationClient(server.target, token=CLIENT_TOKENS["team_a"]) as team_a, \
            EvaluationClient(server.target, token=CLIENT_TOKENS["team_b"]) as team_b:
        _ended_comparison(team_a, stub, ("steady", "hasty"), blocks=20, seed=1)
        _ended_comparison(team_b, stub, ("steady", "careful"), blocks=30, seed=2)  # team b's own "steady"
        _ended_comparison(team_b, stub, ("careful", "hasty"), blocks=30, seed=3)
        board_a, board_b = team_a.leaderboard("demo"), team_b.leaderboard("demo")
    assert sorted(e.policy for e in board_a.entries) == ["hasty", "steady"]
    assert (board_a.blocks, board_a.jobs) == (20, 1)
    assert all(e.comparisons == 20 for e in board_a.entries)  # none of team b's 60 blocks
    assert sorted(e.policy for e in board_b.entries) == ["careful", "hasty", "steady"]
    assert (board_b.blocks, board_b.jobs) == (60, 2)


def test_a_repeated_end_report_counts_its_blocks_once_and_a_running_job_none(relay):
    server, stub = relay
    with EvaluationClient(server.target, token=CLIENT_TOKENS["team_a"]) as client:
        _, status = _ended_comparison(client, stub, ("steady", "careful"), blocks=15, seed=4)
        again = stub.ReportStatus(ss.ReportStatusRequest(station_id="sim_station", snapshots=[status]),
                                  metadata=STATION_MD, timeout=10)
        assert again.stale == 1
        _ended_comparison(client, stub, ("steady", "hasty"), blocks=15, seed=5, state="RUNNING")
        board = client.leaderboard("demo")
    assert (board.blocks, board.jobs) == (15, 1)
    assert sorted(e.policy for e in board.entries) == ["careful", "steady"]


def test_no_comparison_yet_gives_no_entries_and_says_why(relay):
    server, _ = relay
    with EvaluationClient(server.target, token=CLIENT_TOKENS["team_a"]) as client:
        board = client.leaderboard("demo")
    assert list(board.entries) == [] and board.blocks == 0
    assert "no ranking yet: 0 policies" in board.note
    assert "note: no ranking yet" in "\n".join(leaderboard_lines(board))


@pytest.mark.parametrize("suite", ["", "a" * 65, "../etc", "de mo"])
def test_a_bad_suite_id_is_refused_naming_the_rule(relay, suite):
    server, _ = relay
    with EvaluationClient(server.target, token=CLIENT_TOKENS["team_a"]) as client:
        with pytest.raises(InvalidTask, match="is not a suite id"):
            client.leaderboard(suite)
