"""System test: the main job (``station_demo.run_demo``, what ``strands-robots up`` runs with no ``--relay``).

Runs ``python -m strands_robots.cli.station_demo`` as a subprocess in a session of its own, ended by its PID in
``finally``; its children (relay, arm driver, camera node, rollout, station) are found with ``ps --ppid``. The
whole main job runs once, recorded (conftest's ``demo_main_job``: the report and export tests read its file). What
is asserted is what a user sees: the exit code, the progress bar and the summary table; among its rows the
vision task (``reach_cube``: found in ``scene.image``, decoded from the JPEG the station sent through the relay)
succeeds and the same task with the scene camera covered (``reach_cube_blind``) does not.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
import uuid

import pytest
from demo_main_job import StationTopics
from watched_process import Command, cmdline, kill_all, wait_gone

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

TIMEOUT_S = 180.0


class Demo(Command):
    """``python -m strands_robots.cli.station_demo <args>``, its output collected."""

    def __init__(self, *args: str) -> None:
        super().__init__([sys.executable, "-m", "strands_robots.cli.station_demo", *args])


def test_main_job_runs_the_demo_end_to_end_with_a_progress_bar_and_the_summary_table(demo_main_job):
    """The launch scenario where ``launch`` is missing: SUCCEEDED, a gapless stream, exit codes, nothing left.

    The run is ``up --record FILE`` (conftest's ``demo_main_job``, which the report and export tests read too).
    """
    from strands_robots_msgs.msg import ObserverEvent

    run = demo_main_job
    out, lines = run.output, run.lines
    assert run.returncode == 0, out
    assert re.search(r"^\[demo\] recording to \S+main_job\.mcap$", out, re.M), out
    assert re.search(r"^\[#{3,}\.+\] 1/8 episodes", out, re.M), out
    assert re.search(r"^\[#{30}\] 8/8 episodes  SUCCEEDED", out, re.M), out
    header = next(i for i, line in enumerate(lines) if line.startswith("episode  end condition"))
    assert lines[header].split() == ["episode", "end", "condition", "scored", "success", "score", "taken", "over",
                                     "at_end", "ever", "p50_ms", "p99_ms", "obs_age", "missed"]
    rows = [line.split() for line in lines[header + 2:header + 10]]
    assert [(r[0], r[1], r[2], r[5]) for r in rows] == [
        ("ep_0000", "timeout", "yes", "no"),
        ("ep_0001", "policy_completed", "yes", "no"),
        ("ep_0002", "safety_stop", "yes", "no"),
        ("ep_0003", "timeout", "yes", "yes"),       # taken over, kept, left out of the rates
        ("ep_0005", "timeout", "yes", "yes"),       # ep_0004 was discarded; its task ran again
        ("ep_0006", "start_pose_unreached", "no", "no"),
        ("ep_0007", "timeout", "yes", "no"),        # reach_cube: the policy found the cube in scene.image
        ("ep_0008", "timeout", "yes", "no"),        # reach_cube_blind: the scene camera covered
    ], out[-3000:]
    assert (rows[6][3], rows[7][3]) == ("yes", "no"), out  # success: with its eyes, and without them
    # Both meanings of success where the task has a predicate (short_reach and blocked_start have none), and what
    # each rollout's score is read against; the start pose that never settled ran no rollout.
    assert [(r[6], r[7]) for r in rows] == [("yes", "yes"), ("-", "-"), ("no", "no"), ("yes", "yes"),
                                            ("yes", "yes"), ("-", "-"), ("yes", "yes"), ("no", "no")], out[-3000:]
    for r in rows[:5] + rows[6:]:
        p50, p99, age, missed = float(r[8]), float(r[9]), float(r[10]), int(r[11])
        assert 0 < p50 <= p99 and age >= 0 and missed >= 0, r
    assert rows[5][8:] == ["-", "-", "-", "-"], rows[5]
    # the figures with their intervals: 3 of 5 outcomes, 9 episodes attempted (ep_0004 discarded), every one named
    assert re.search(r"^job: success 3/5 = 60 % \[23 %, 88 %\] Wilson 95 %; mean score \d\.\d\d \[\d\.\d\d, \d\.\d\d\] "
                     r"bootstrap .*; coverage 5/9 scored \(1 discarded, 2 taken over, 1 unscored\)$", out, re.M), out
    # The station's own JobStatus says SUCCEEDED too, and each rollout is one gapless run with one Ended.
    main_job, compared_job = run.job_ids()
    statuses = run.statuses_of(main_job)
    assert statuses and statuses[-1].state == "SUCCEEDED", (statuses[-1:], out)
    by_run: dict = {}
    for event in run.events:
        by_run.setdefault(event.run_id, []).append(event)
    rolled = [e.run_id for e in statuses[-1].episodes if e.run_id]
    assert len(rolled) == 7 and set(rolled) <= set(by_run), (rolled, sorted(by_run))
    for run_id, run_events in by_run.items():
        seqs = [e.event_seq for e in run_events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), (run_id, seqs)
        assert [e.kind for e in run_events].count(ObserverEvent.KIND_ENDED) == 1, run_id
    # Every process exited 0 on the demo's stop, and none is left running.
    stopped = re.search(r"^\[demo\] stopped: (.*)$", out, re.M)
    assert stopped, out
    exits = dict(part.rsplit(" exit ", 1) for part in stopped.group(1).split(", "))
    assert exits == {"relay": "0", "arm_driver": "0", "camera": "0", "rollout": "0", "station": "0",
                     "recorder": "0"}, out
    assert len(run.children) >= 6 and run.left_running == [], (run.children, out)
    compared = run.statuses_of(compared_job)
    assert compared and compared[-1].state == "SUCCEEDED", (compared[-1:], out[-3000:])
    assert {e.run_id for e in compared[-1].episodes} <= set(by_run)


def test_main_job_then_compares_the_vision_policy_with_the_blind_one_and_stops_at_its_verdict(demo_main_job):
    """The comparison after the demo job: through the relay, each slot its own session; it stops early.

    ``reach_cube_quick`` needs the scene camera: the vision slot reaches the cube in every block, the blind slot in
    none, so the paired e-process separates them at block 7 (e-value 26.8 >= 1 / 0.05) of at most 12. The printed
    block order is the station's recorded one: each block's two episodes ran in that order, and the table's
    success column says which slot each was.
    """
    run = demo_main_job
    out = run.output
    assert run.returncode == 0, out[-4000:]
    start = out.index("[demo] comparison ")
    tail = out[start:]
    assert re.search(r"^\[demo\] comparison \S+: slot vision serves the scripted policy, blind the same policy never "
                     r"shown a camera frame", tail, re.M), tail
    found = re.search(r"^comparison on suite demo: 2 policies, (\d+) complete blocks \(vision, blind\)$", tail, re.M)
    assert found, tail
    blocks = int(found.group(1))
    assert re.search(rf"^  vision  success {blocks}/{blocks} = 100 % \[\d+ %, 100 %\] Wilson 95 %;", tail, re.M), tail
    assert re.search(rf"^  blind   success 0/{blocks} = 0 % \[0 %, \d+ %\] Wilson 95 %;", tail, re.M), tail
    assert re.search(r"^  vision - blind: \+100 pts \[\+\d+, \+100\] Newcombe 95 %; p = [\d.e-]+ \(exact McNemar\); "
                     r"detectable \d+ pts at 80 % power$", tail, re.M), tail
    assert re.search(rf"^    paired blocks: both 0, only vision {blocks}, only blind 0, neither 0$", tail, re.M), tail
    stop = re.search(r"^  stop rule: separated at alpha 0.05 within 12 blocks; stopped at block (\d+)$", tail, re.M)
    verdict = re.search(r"^    e-value ([\d.]+) \(separates at 20\); verdict (\w+)$", tail, re.M)
    assert stop and verdict, tail
    assert verdict.group(2) == "a_better" and int(stop.group(1)) == blocks == 7 and float(verdict.group(1)) >= 20
    # its progress says what it is: a job that stopped early, not 14 of 24 episodes
    assert re.search(rf"^\[#{{30}}\] {2 * blocks} episodes, stopped at block {blocks} of 12: a_better  SUCCEEDED  "
                     rf"completed: comparison", tail, re.M), tail
    assert re.search(rf"^job \S+ SUCCEEDED: completed: comparison of {blocks} complete blocks: a_better: vision is "
                     rf"better than blind .*; vision {blocks}/{blocks}, blind 0/{blocks}$", tail, re.M), tail
    # the blocks in the order they completed, each with the order its two episodes ran in and their outcomes
    order = re.findall(r"^    (b_\d{4})  reach_cube_quick  seed \d+  (\w+)([+-]) (\w+)([+-])$", tail, re.M)
    assert [b[0] for b in order] == [f"b_{i:04d}" for i in range(blocks)], tail
    slots = [(first, second) for _, first, _, second, _ in order]
    assert all(sorted(s) == ["blind", "vision"] for s in slots), order
    assert all(ok == ("+" if slot == "vision" else "-") for _, a, x, b, y in order for slot, ok in ((a, x), (b, y)))
    # the comparison's table: two episodes per block in the recorded order, the vision one the success
    lines = tail.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("episode  end condition"))
    rows = [line.split() for line in lines[header + 2:header + 2 + 2 * blocks]]
    assert [r[0] for r in rows] == [f"ep_{i:04d}" for i in range(2 * blocks)], rows
    ran = [slot for block in slots for slot in block]
    assert [r[3] for r in rows] == ["yes" if slot == "vision" else "no" for slot in ran], (ran, rows)
    assert {r[1] for r in rows} == {"policy_completed"}, rows


def test_ctrl_c_stops_the_demo_and_every_child_ends_with_it():
    demo = Demo()
    children: list = []
    try:
        demo.wait_line(r"submitted job job-", 90.0)
        children = demo.children()
        assert len(children) >= 5, (children, demo.output)  # relay, arm driver, camera, rollout, station
        demo.proc.send_signal(signal.SIGINT)
        rc = demo.wait(60.0)
        assert rc == 128 + signal.SIGINT, demo.output
        assert wait_gone(children, 10.0) == []
    finally:
        kill_all(children)
        demo.kill()


def test_a_node_killed_mid_job_ends_the_demo_with_an_error_instead_of_waiting_forever():
    # The station's own JobStatus says when ep_0000 runs (the demo's progress bar shows a line only when the count
    # of finished episodes or the state changes, so "ep_0000 running" may never be printed).
    namespace = f"killed_{uuid.uuid4().hex[:8]}"
    topics = StationTopics(namespace)
    demo = Demo("--namespace", namespace)
    children: list = []
    try:
        running = topics.spin_until(lambda: (bool(topics.statuses) and topics.statuses[-1].message.startswith(
            "ep_0000 running")) or demo.proc.poll() is not None, 120.0)
        assert running and demo.proc.poll() is None, (topics.statuses[-1:], demo.output)
        children = demo.children()
        station = [p for p in children if "strands_robots.nodes.station.node" in cmdline(p)]
        assert len(station) == 1, (children, demo.output)
        os.kill(station[0], signal.SIGKILL)
        rc = demo.wait(60.0)
        assert rc == 1, demo.output
        assert re.search(r"^\[demo\] station exited with code -9 before the job ended; stopping", demo.output,
                         re.M), demo.output
        assert "SUCCEEDED" not in demo.output
        assert wait_gone(children, 10.0) == []
    finally:
        kill_all(children)
        demo.kill()
        topics.close()


def test_with_a_relay_the_station_takes_a_remote_teams_job_and_stops_on_ctrl_c(tmp_path):
    from strands_robots.policies.demo import DemoPolicy
    from strands_robots.cli.station_demo import LocalStation

    relay = LocalStation(str(tmp_path), out=lambda name, line: None)  # only its relay is started here
    demo = None
    children: list = []
    try:
        relay.start_relay()
        credentials = relay.credentials_file()  # 0600, in a 0700 dir: the relay, the station id, its token file
        demo = Demo("--relay-credentials", credentials, "--namespace", f"remote_station_{uuid.uuid4().hex[:8]}")
        demo.wait_line(r"takes jobs from", 60.0)
        client = relay.client()
        task = {"task_id": "hold", "instruction": "hold", "parameters": {"duration_s": "1"},
                "scoring": [{"name": "done", "question": "Held?", "answer_type": "yes_no", "max_points": 1,
                             "success_answer": "yes"}]}
        job_id = client.submit_job(station_id="sim_station", tasks=[task], episodes=1)
        final = client.serve_policy(job_id, DemoPolicy("scripted", {"mode": "torque_ramp", "target": 1.0}))
        assert final.state == "SUCCEEDED", (final.message, demo.output)
        assert [(e.episode_id, e.end_condition) for e in final.episodes] == [("ep_0000", "timeout")]
        children = demo.children()
        demo.proc.send_signal(signal.SIGINT)
        assert demo.wait(60.0) == 128 + signal.SIGINT
        assert wait_gone(children, 10.0) == []
    finally:
        kill_all(children)
        if demo is not None:
            demo.kill()
        relay.stop()


def test_a_whole_job_runs_over_tls_when_the_relay_has_a_certificate(tmp_path):
    from test_relay_harness import self_signed_cert

    from strands_robots.policies.demo import DemoPolicy
    from strands_robots.cli.station_demo import LocalStation

    cert, key = self_signed_cert(tmp_path)
    lines: list = []
    station = LocalStation(str(tmp_path / "station"), namespace=f"tls_station_{uuid.uuid4().hex[:8]}",
                           tls=(cert, key), out=lambda name, line: lines.append(f"[{name}] {line}"))
    try:
        station.start_relay()
        assert any("(TLS;" in line for line in lines), lines
        station.start_nodes()
        client = station.client()
        task = {"task_id": "hold", "instruction": "hold", "parameters": {"duration_s": "1"},
                "scoring": [{"name": "done", "question": "Held?", "answer_type": "yes_no", "max_points": 1,
                             "success_answer": "yes"}]}
        job_id = client.submit_job(station_id="sim_station", tasks=[task], episodes=1)
        final = client.serve_policy(job_id, DemoPolicy("scripted", {"mode": "torque_ramp", "target": 1.0}))
        assert final.state == "SUCCEEDED", (final.message, "\n".join(lines[-40:]))
        assert [(e.episode_id, e.end_condition) for e in final.episodes] == [("ep_0000", "timeout")]
        from strands_robots.client import EvaluationClient, Unavailable

        plain = EvaluationClient(station.relay_target, token=station.client_token, timeout_s=3.0)
        with pytest.raises(Unavailable):
            plain.get_status(job_id)  # a plain channel does not reach a TLS relay
    finally:
        station.stop()
