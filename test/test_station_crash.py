"""A crash of one process ends at most one episode, and the job goes on.

Every process is its own (relay, arm driver, rollout node, station node: ``station_demo.LocalStation``; the team's
policy client: ``crash_harness.py`` run as a script), killed for real and started again as a supervisor would.
Each test submits its own job through the relay and checks ``crash_harness.check_invariants``: the job terminal
with a reason, each episode id once in the relay and in the station's log, the observer stream's one Started
and one Ended per run, nothing lost or re-run, nothing left running. Episodes are 1 s at 50 Hz; a job has three
(the crash ends the second, whose task runs again as a new episode before the third).

One set of processes serves the module (a test's job ends before the next is submitted, and every killed process
is started again). Each team's client process is started before its job is submitted and is ready to attach when
the job reaches the station, so the station's attach deadline (``ATTACH_S``) bounds only a killed client's
restart, not a process start on a loaded machine.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import yaml


pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

from crash_harness import (  # noqa: E402
    INFRASTRUCTURE,
    SUITE,
    TERMINAL,
    ObserverRecorder,
    SnapshotWatch,
    check_invariants,
    crash_station,
    running_episode,
    task,
)
from suite_harness import submit_suite  # noqa: E402

from strands_robots.client.evaluation_client import new_job_id  # noqa: E402

JOB_TIMEOUT_S = 180.0
ATTACH_S = 8.0  # the station's policy-attach deadline here (a killed client's restart attaches within it)
CLIENT_READY_S = 60.0  # a client process has imported within this, however loaded the machine
EPISODES = 3


def inference_deadline_s() -> float:
    """Return the rollout node's policy inference deadline here (``rtc_inference_timeout_s``, config/rollout.yaml).

    The station's own ``rtc_inference_timeout_s`` is 0 in config/station.yaml: the rollout node's applies.
    """
    from strands_robots.cli.station_demo import config_file

    with open(config_file("rollout.yaml"), encoding="utf-8") as handle:
        params = yaml.safe_load(handle)["/**/rollout"]["ros__parameters"]
    return float(params["rtc_inference_timeout_s"])


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    namespace = f"crash_{int(time.time())}"
    station = crash_station(str(tmp_path_factory.mktemp("crash")), namespace=namespace, suite_tasks=TASKS,
                            station_params={"attach_timeout_s": "20.0", "policy_attach_timeout_s": str(ATTACH_S)})
    recorder = None
    try:
        station.start_relay()
        station.start_nodes()
        recorder = ObserverRecorder(namespace)
        assert recorder.wait_matched(), "the rollout node's observer_events never appeared"
        station.recorder = recorder
        yield station
    finally:
        try:
            if recorder is not None:
                recorder.close()
        finally:
            station.stop()  # every process ever started, by PID
    assert station.left_running() == []


def run_job(stack, tasks, episodes, kill_in, name, sig=signal.SIGKILL, hold_s=0.0):
    """Submit a job, serve it from a client process, signal ``name`` while ``kill_in`` runs, restart it."""
    client = stack.client()
    stack.before = stack.recorder.runs()
    job_id = new_job_id()
    stack.start_client(job_id, wait_ready_s=CLIENT_READY_S)  # ready before the station's attach deadline starts
    submit_suite(client, stack.station_id, SUITE, tasks, episodes, job_id=job_id)
    watch = SnapshotWatch(stack, job_id)
    try:
        status = watch.wait(lambda s: running_episode(s) == kill_in, JOB_TIMEOUT_S, f"{kill_in} running")
        # Into the rollout: its Started event seen (the lease, start pose and goal come first; a fixed pause
        # after "running" assumed an idle machine).
        earlier = stack.before | {e.run_id for e in status.episodes}  # the runs of the episodes before it
        assert stack.recorder.wait_started_since(earlier, 60.0), \
            f"{kill_in}'s rollout never started\n{stack.tail()}"
        killed_at = time.monotonic()
        if sig == signal.SIGSTOP:
            stack.kill(name, signal.SIGSTOP)
            time.sleep(hold_s)
            stack.kill(name, signal.SIGCONT)
        else:
            stack.kill(name, sig)
            stack.restart(name)
        final = watch.wait(lambda s: s.state in TERMINAL, JOB_TIMEOUT_S, "a terminal state")
        return client, job_id, final, watch, status, time.monotonic() - killed_at
    finally:
        watch.close()


def faults(final):
    return [(e.episode_id, e.task.task_id, e.end_detail) for e in final.episodes if e.end_condition == INFRASTRUCTURE]


def rows(final):
    return [(e.episode_id, e.task.task_id, e.end_condition) for e in final.episodes]


TASKS = [task("a"), task("b"), task("c")]


def test_rollout_node_killed_mid_episode_and_restarted_ends_that_episode_only_and_the_job_succeeds(stack):
    client, job_id, final, watch, _, took = run_job(stack, TASKS, EPISODES, "ep_0001", "rollout")
    assert final.state == "SUCCEEDED", (final.message, stack.tail())
    (fault,) = faults(final)
    assert fault[:2] == ("ep_0001", "b") and "the rollout node died during the episode" in fault[2], fault
    assert rows(final)[2] == ("ep_0002", "b", "timeout")  # its task ran again as a new id
    figures = check_invariants(stack, job_id, final, watch, stack.recorder, TASKS, killed_rollouts=1,
                               before=stack.before)
    assert figures["kept"] == EPISODES and figures["faults"] == 1
    print(f"rollout kill: job ended {took:.1f} s after the kill; {figures}")


def test_arm_driver_killed_mid_episode_and_restarted_ends_that_episode_only_and_the_job_succeeds(stack):
    client, job_id, final, watch, _, took = run_job(stack, TASKS, EPISODES, "ep_0001", "arm_driver")
    assert final.state == "SUCCEEDED", (final.message, stack.tail())
    got = faults(final)
    assert got and got[0][:2] == ("ep_0001", "b") and "arm driver" in got[0][2], got
    assert len(got) <= 2, got  # the killed episode, and perhaps the next while the driver was still starting
    figures = check_invariants(stack, job_id, final, watch, stack.recorder, TASKS, before=stack.before)
    assert figures["kept"] == EPISODES
    print(f"driver kill: job ended {took:.1f} s after the kill; {figures}")


def test_policy_client_stalled_ten_seconds_ends_that_episode_only_and_the_job_succeeds(stack):
    # A policy client stopped for 10 s, five times the rollout's inference deadline. The stalled episode ends on
    # that bound (a station fault naming it), and the client, running again, serves the rest of the job.
    deadline_s = inference_deadline_s()
    client, job_id, final, watch, _, took = run_job(stack, TASKS, EPISODES, "ep_0001", "client", sig=signal.SIGSTOP,
                                                    hold_s=10.0)
    assert final.state == "SUCCEEDED", (final.message, stack.tail())
    got = faults(final)
    assert got and got[0][:2] == ("ep_0001", "b"), got
    assert f"InferenceTimeout: policy inference did not finish within {deadline_s:g} s" in got[0][2], got
    figures = check_invariants(stack, job_id, final, watch, stack.recorder, TASKS, before=stack.before)
    assert figures["kept"] == EPISODES
    print(f"client SIGSTOP 10 s: job ended {took:.1f} s after the stop; faults {got}; {figures}")


def test_policy_client_killed_and_restarted_ends_that_episode_only_and_the_job_succeeds(stack):
    client, job_id, final, watch, _, took = run_job(stack, TASKS, EPISODES, "ep_0001", "client")
    assert final.state == "SUCCEEDED", (final.message, stack.tail())
    got = faults(final)
    assert got and got[0][:2] == ("ep_0001", "b"), got
    figures = check_invariants(stack, job_id, final, watch, stack.recorder, TASKS, before=stack.before)
    assert figures["kept"] == EPISODES
    print(f"client kill: job ended {took:.1f} s after the kill; faults {got}; {figures}")


def test_a_job_never_served_fails_at_the_attach_deadline_and_the_served_job_behind_it_succeeds(stack):
    client = stack.client()
    stack.before = stack.recorder.runs()
    never = submit_suite(client, stack.station_id, SUITE, TASKS, 2)  # nobody serves it
    served = submit_suite(client, stack.station_id, SUITE, TASKS, 2)
    stack.start_client(served)  # it attaches while the station still waits for the first job's client
    watch = SnapshotWatch(stack, served)
    try:
        final = watch.wait(lambda s: s.state in TERMINAL, JOB_TIMEOUT_S, "a terminal state")
    finally:
        watch.close()
    first = client.get_status(never)
    assert first.state == "FAILED" and len(first.episodes) == 0, first
    assert f"no policy client attached within {ATTACH_S:g} s (policy_attach_timeout_s)" in first.message, first
    assert final.state == "SUCCEEDED", (final.message, stack.tail())
    assert [e.end_condition for e in final.episodes] == ["timeout", "timeout"]
    check_invariants(stack, served, final, watch, stack.recorder, TASKS, before=stack.before)
