"""System test: two relay processes on one PostgreSQL, the simulated station on relay A, the team on relay B.

The job runs to SUCCEEDED across the two relays; relay A is SIGKILLed mid-job: the station reconnects to B (its
credentials name both relays), the job finishes, and every invariant holds: each episode once, each task kept
once, the job terminal, the session's home on B, and nothing left running (every process ended by PID).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("psycopg", reason="psycopg is not installed")

from cluster_harness import (  # noqa: E402
    TERMINAL,
    TeamPolicy,
    pids_alive,
    serve_in_background,
    sigkill,
    start_cluster_relay,
    station_credentials,
    task,
    wait_status,
)
from test_relay_harness import free_port, postgres_server  # noqa: E402

from strands_robots.client import EvaluationClient  # noqa: E402
from strands_robots.cli.station_demo import LocalStation  # noqa: E402

JOB_TIMEOUT_S = 180.0
STALE_S = 1.5


def home_of(url: str, job_id: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT relay_id FROM policy_homes WHERE job_id = %s", (job_id,)).fetchone()
    return row[0] if row else ""


def test_a_job_spans_two_relays_and_survives_the_sigkill_of_the_station_s_relay(tmp_path):
    lines: list = []
    with postgres_server() as url:
        stack = LocalStation(str(tmp_path), namespace=f"cluster_station_{int(time.time())}",
                             out=lambda name, line: lines.append(f"[{name}] {line}"))
        clients, pids = [], []
        try:
            stack.write_tokens()
            port_a, port_b = free_port(), free_port()
            relay_a, a = start_cluster_relay(stack, "relay_a", port_a, url, STALE_S)
            relay_b, b = start_cluster_relay(stack, "relay_b", port_b, url, STALE_S)
            assert a.get("relay_id") and b.get("relay_id") and a["relay_id"] != b["relay_id"]
            # the station names A first: it attaches there, and moves to B when A dies
            station_credentials(stack, [f"127.0.0.1:{port_a}", f"127.0.0.1:{port_b}"])
            stack.start_nodes()
            pids = [relay_a.pid, relay_b.pid, stack.driver.pid, stack.rollout.pid, stack.station.pid]
            team = EvaluationClient(f"127.0.0.1:{port_b}", token=stack.client_token)  # the team uses B only
            clients.append(team)

            # 1. across relays, to SUCCEEDED
            first_job = team.submit_job(station_id=stack.station_id, tasks=[task("one")], episodes=1)
            first_policy = TeamPolicy()
            served = serve_in_background(team, first_job, first_policy)
            final = wait_status(team, first_job, lambda s: s.state in TERMINAL, JOB_TIMEOUT_S, lines)
            served["thread"].join(15.0)
            assert final.state == "SUCCEEDED", (final.message, "\n".join(lines[-80:]))
            assert served.get("final") is not None and served["final"].state == "SUCCEEDED"
            assert first_policy.episodes == ["ep_0000"], [(e.episode_id, e.end_condition, e.end_detail)
                                                          for e in final.episodes]
            assert home_of(url, first_job) in (a["relay_id"], b["relay_id"])

            # 2. relay A (the station's) SIGKILLed mid-job
            tasks = [task("x"), task("y"), task("z")]
            job_id = team.submit_job(station_id=stack.station_id, tasks=tasks, episodes=3)
            policy = TeamPolicy()
            policy.watch = "ep_0001"  # the job's second episode, mid-way
            served = serve_in_background(team, job_id, policy)
            assert policy.acting.wait(JOB_TIMEOUT_S), "\n".join(lines[-80:])
            sigkill(relay_a)
            killed_ms = int(time.time() * 1000)
            final = wait_status(team, job_id, lambda s: s.state in TERMINAL, JOB_TIMEOUT_S, lines)
            served["thread"].join(15.0)

            assert final.state == "SUCCEEDED", (final.message, "\n".join(lines[-80:]))
            ids = [e.episode_id for e in final.episodes]
            assert len(ids) == len(set(ids)), ids                                  # each episode once
            kept = [e for e in final.episodes if e.end_condition != "infrastructure_fault"]
            assert [e.task.task_id for e in kept] == ["x", "y", "z"]               # each task kept once
            lost = [e for e in final.episodes if e.end_condition == "infrastructure_fault"]
            # the episode running through A when it died, and only it, is a station fault; its task ran again
            assert [e.episode_id for e in lost] == ["ep_0001"], [(e.episode_id, e.end_detail) for e in lost]
            assert "policy" in lost[0].end_detail, lost[0].end_detail
            assert Counter(policy.episodes) == Counter(set(policy.episodes))        # the team saw each once
            assert set(ids) <= set(policy.episodes)
            assert final.episodes_total == 3
            # the station was heard after the kill (so through B), and the session's home is B now
            assert final.station_last_heard_unix_ms > killed_ms
            assert home_of(url, job_id) == b["relay_id"]
            assert served.get("final") is not None and served["final"].state == "SUCCEEDED", served.get("error")
            assert not served["thread"].is_alive()
            assert relay_a.poll() is not None and relay_b.poll() is None
        finally:
            for c in clients:
                c.close()
            stack.stop()  # every child by its PID (process group): SIGINT, SIGTERM, SIGKILL
        assert pids_alive(pids) == [], "processes left running"  # nothing left running
