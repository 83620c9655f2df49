"""Policy sessions through the relay.

Observations out, chunks back, EndEpisode, resume, job end, and what each side sees when the other goes away.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    relay_env,
    running_relay,
    stop_process,
    wait_until,
    yes_no_task,
)

from strands_robots.client import AlreadyExists, EndEpisode, EvaluationClient, Policy, PolicyFailed, pb
from strands_robots.policies.base import EndEpisode as CoreEndEpisode
from strands_robots.station_link.link import StationLink
from strands_robots.station_link.session import PolicyDisconnected, RemotePolicyError


class Doubler(Policy):
    """Answers x -> 2x; ends the episode when the observation says so."""

    def __init__(self):
        self.calls = []

    def reset(self, task):
        self.calls.append(("reset", task.instruction, self.episode.episode_id, tuple(self.episode.action_keys)))

    def act(self, observation):
        self.calls.append(("act", observation["x"]))
        if observation.get("done"):
            raise EndEpisode("goal reached")
        return [{"left/j1": observation["x"] * 2}, {"left/j1": observation["x"] * 2 + 1}]

    def resume(self, observation):
        self.calls.append(("resume", observation["x"]))


def _setup(relay):
    client = EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"])
    link = StationLink(relay.target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.1).start()
    job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
    return client, link, job


def _serve_in_thread(client, job, policy, events=None):
    result = {}

    def run():
        try:
            result["final"] = client.serve_policy(job, policy, on_event=(events.append if events is not None else None))
        except Exception as exc:  # noqa: BLE001 - handed to the test
            result["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, result


def _request_streams() -> set:
    """Return the threads grpc feeds streaming calls from (one per open policy session), found by their stacks."""
    frames = sys._current_frames()

    def feeding(thread) -> bool:
        frame = frames.get(thread.ident)
        while frame is not None:
            if frame.f_code.co_name == "consume_request_iterator":
                return True
            frame = frame.f_back
        return False

    return {t for t in threading.enumerate() if feeding(t)}


def _finish(link, job):
    link.report(pb.JobStatus(job_id=job, station_id="sim_station", state="SUCCEEDED", episodes_total=1,
                             updated_unix_ms=99, message="done"))
    assert link.flush(10)


def test_observations_go_out_chunks_come_back_resume_and_end_episode_reach_the_policy(tmp_path):
    with running_relay(tmp_path) as relay:
        client, link, job = _setup(relay)
        policy, events = Doubler(), []
        thread, result = _serve_in_thread(client, job, policy, events)
        session = link.open_session(job)
        try:
            assert session.wait_attached(10) == "team_a"
            session.start_episode("ep_0000", pb.Task(task_id="pick", instruction="pick up the cube"),
                                  action_keys=["left/j1"], control_frequency=50, action_horizon=2)
            assert session.act({"x": 1.5}) == [{"left/j1": 3.0}, {"left/j1": 4.0}]
            session.resume({"x": 7.0})
            with pytest.raises(CoreEndEpisode, match="goal reached"):
                session.act({"x": 2.0, "done": True})
            session.end_episode("ep_0000", pb.END_POLICY_COMPLETED)
            _finish(link, job)
            thread.join(10)
            assert result["final"].state == "SUCCEEDED" and result["final"].updated_unix_ms == 99
            assert policy.calls == [("reset", "pick up the cube", "ep_0000", ("left/j1",)), ("act", 1.5),
                                    ("resume", 7.0), ("act", 2.0)]
            kinds = [e.WhichOneof("kind") for e in events]
            assert kinds == ["episode_start", "act", "resume", "act", "episode_end", "job_ended"]
        finally:
            session.close()
            link.close()
            client.close()


def test_requests_sent_before_the_client_attaches_wait_for_it(tmp_path):
    with running_relay(tmp_path) as relay:
        client, link, job = _setup(relay)
        session = link.open_session(job)
        answer = {}
        starter = threading.Thread(target=lambda: answer.setdefault(
            "ok", session.start_episode("ep_0000", pb.Task(task_id="t", instruction="go"))), daemon=True)
        starter.start()
        policy = Doubler()
        thread, result = _serve_in_thread(client, job, policy)
        try:
            starter.join(10)
            assert "ok" in answer and policy.calls[0][:3] == ("reset", "go", "ep_0000")
            assert session.act({"x": 1.0}) == [{"left/j1": 2.0}, {"left/j1": 3.0}]
            _finish(link, job)
            thread.join(10)
            assert result["final"].state == "SUCCEEDED"
        finally:
            session.close()
            link.close()
            client.close()


def test_a_policy_failure_reaches_the_station_with_its_type_and_ends_the_clients_serve(tmp_path):
    class Broken(Policy):
        def act(self, observation):
            raise ValueError("checkpoint has no head")

    with running_relay(tmp_path) as relay:
        client, link, job = _setup(relay)
        thread, result = _serve_in_thread(client, job, Broken())
        session = link.open_session(job)
        try:
            session.wait_attached(10)
            session.start_episode("ep_0000", pb.Task(task_id="t", instruction="go"))
            with pytest.raises(RemotePolicyError, match="ValueError: checkpoint has no head") as err:
                session.act({"x": 1.0})
            assert err.value.error_type == "ValueError"
            thread.join(10)
            assert isinstance(result["error"], PolicyFailed)
            assert "checkpoint has no head" in str(result["error"])
        finally:
            session.close()
            link.close()
            client.close()


def test_a_second_policy_client_for_the_same_job_is_refused(tmp_path):
    with running_relay(tmp_path) as relay:
        client, link, job = _setup(relay)
        thread, result = _serve_in_thread(client, job, Doubler())
        session = link.open_session(job)
        try:
            session.wait_attached(10)
            with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as second:
                with pytest.raises(AlreadyExists, match="already serves job"):
                    second.serve_policy(job, Doubler())
            _finish(link, job)
            thread.join(10)
            assert result["final"].state == "SUCCEEDED"
        finally:
            session.close()
            link.close()
            client.close()


def test_serving_an_ended_job_returns_its_final_status_at_once(tmp_path):
    with running_relay(tmp_path) as relay:
        client, link, job = _setup(relay)
        try:
            _finish(link, job)
            final = client.serve_policy(job, Doubler())
            assert (final.job_id, final.state, final.message) == (job, "SUCCEEDED", "done")
        finally:
            link.close()
            client.close()


def test_the_client_is_told_when_the_station_leaves_and_keeps_serving_its_next_session(tmp_path):
    with running_relay(tmp_path) as relay:
        client, link, job = _setup(relay)
        events, policy = [], Doubler()
        thread, result = _serve_in_thread(client, job, policy, events)
        first = link.open_session(job)
        try:
            first.wait_attached(10)
            first.start_episode("ep_0000", pb.Task(task_id="t", instruction="go"))
            first.close()
            wait_until(lambda: any(e.WhichOneof("kind") == "station_left" for e in events), what="station_left")
            second = link.open_session(job)
            second.wait_attached(10)
            second.start_episode("ep_0001", pb.Task(task_id="t", instruction="go again"))
            assert second.act({"x": 4.0}) == [{"left/j1": 8.0}, {"left/j1": 9.0}]
            second.close()
            _finish(link, job)
            thread.join(10)
            assert result["final"].state == "SUCCEEDED"
            assert [c[2] for c in policy.calls if c[0] == "reset"] == ["ep_0000", "ep_0001"]
        finally:
            link.close()
            client.close()


def test_a_client_attaching_again_after_its_policy_failed_is_never_counted_disconnected_by_the_next_episode(
        tmp_path):
    """The failed client's stream end reaches the relay only after the station opened the next episode's session.

    The client's own stream is held at its end until an event releases it, once the relay's broker opened the
    next episode's station side: the window is there on every run, whatever the machine's load.
    """
    from strands_robots.client.served_policy import serve_to_the_end

    class FailsOnce(Doubler):
        def act(self, observation):
            if not any(c[0] == "act" for c in self.calls):
                self.calls.append(("act", observation["x"]))
                raise ValueError("policy exploded")
            return super().act(observation)

    release, next_open = threading.Event(), threading.Event()
    with running_relay(tmp_path) as relay:
        client, link, job = _setup(relay)
        broker = relay.server.core.broker
        open_station, opened = broker.open_station, []

        def open_counted(*args, **kwargs):
            side = open_station(*args, **kwargs)
            opened.append(side)
            if len(opened) == 2:
                next_open.set()
            return side

        broker.open_station = open_counted
        serve, calls = client._stub.ServePolicy, []

        def end_held_until_released(requests, **kwargs):
            calls.append(True)
            if len(calls) > 1:
                return serve(requests, **kwargs)

            def held():
                yield from requests
                release.wait(30)  # the client ended its stream; the relay sees that end only now

            return serve(held(), **kwargs)

        client._stub.ServePolicy = end_held_until_released
        policy, result = FailsOnce(), {}

        def run():
            try:
                result["final"] = serve_to_the_end(client, job, policy)
            except Exception as exc:  # noqa: BLE001 - handed to the test
                result["error"] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        first = link.open_session(job)
        second = None
        try:
            first.wait_attached(10)
            first.start_episode("ep_0000", pb.Task(task_id="t", instruction="go"))
            with pytest.raises(RemotePolicyError, match="ValueError: policy exploded"):
                first.act({"x": 1.0})
            first.end_episode("ep_0000", "policy_error", "the policy raised")
            first.close()
            second = link.open_session(job)
            assert next_open.wait(10), "the relay never opened the next episode's session"
            release.set()
            assert second.wait_attached(10) == "team_a"
            second.start_episode("ep_0001", pb.Task(task_id="t", instruction="go again"))
            assert second.act({"x": 4.0}) == [{"left/j1": 8.0}, {"left/j1": 9.0}]
            second.end_episode("ep_0001", "timeout")
            _finish(link, job)
            thread.join(10)
            assert result.get("final") is not None and result["final"].state == "SUCCEEDED", result
            assert [c[2] for c in policy.calls if c[0] == "reset"] == ["ep_0000", "ep_0001"]
        finally:
            release.set()
            if second is not None:
                second.close()
            link.close()
            client.close()


_CLIENT_SCRIPT = textwrap.dedent("""
    import sys
    from strands_robots.client import EvaluationClient, Policy

    class Slow(Policy):
        def act(self, observation):
            print("ACT", observation["x"], flush=True)
            return [{"k": observation["x"]}]

    EvaluationClient(sys.argv[1], token=sys.argv[2]).serve_policy(sys.argv[3], Slow())
""")


def test_a_policy_client_that_disconnects_mid_episode_ends_the_stations_session_with_the_reason(tmp_path):
    script = tmp_path / "policy_client.py"
    script.write_text(_CLIENT_SCRIPT)
    with running_relay(tmp_path) as relay:
        client, link, job = _setup(relay)
        proc = subprocess.Popen([sys.executable, str(script), relay.target, CLIENT_TOKENS["team_a"], job],
                                env=relay_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        before = _request_streams()
        session = link.open_session(job)
        try:
            session.wait_attached(30)
            mine = _request_streams() - before  # grpc's thread that sends this session's requests
            assert len(mine) == 1, mine
            session.start_episode("ep_0003", pb.Task(task_id="t", instruction="go"))
            assert session.act({"x": 5.0}) == [{"k": 5.0}]
            stop_process(proc, sig=9)  # the team's process dies mid-episode
            with pytest.raises(PolicyDisconnected) as err:
                session.act({"x": 6.0})
            assert "policy client 'team_a' disconnected mid-episode ep_0003" in str(err.value)
            assert job in str(err.value)
            # the ended stream leaves no thread behind, closed or not (a station keeps running for many jobs)
            wait_until(lambda: not any(t.is_alive() for t in mine), 5.0, what="the ended session's request thread")
            # the next session waits for a client again and works with a new one
            again = link.open_session(job)
            thread, result = _serve_in_thread(client, job, Doubler())
            again.wait_attached(10)
            again.start_episode("ep_0004", pb.Task(task_id="t", instruction="go"))
            assert again.act({"x": 1.0}) == [{"left/j1": 2.0}, {"left/j1": 3.0}]
            again.close()
            _finish(link, job)
            thread.join(10)
            assert result["final"].state == "SUCCEEDED"
        finally:
            stop_process(proc, sig=9)
            session.close()
            link.close()
            client.close()


def test_a_remote_policy_drives_the_simulated_arms_through_the_relay(tmp_path):
    pytest.importorskip("mujoco")
    from strands_robots.simulation import Simulation

    class Hold(Policy):
        def __init__(self):
            self.acts = 0
            self.keys = ()

        def reset(self, task):
            self.keys = tuple(self.episode.action_keys)

        def act(self, observation):
            self.acts += 1
            if self.acts > 3:
                raise EndEpisode("held long enough")
            return [{k: float(observation.get(k, 0.0)) for k in self.keys} for _ in range(4)]

    sim = Simulation()
    sim.add_robot("alice")
    with running_relay(tmp_path) as relay:
        client, link, job = _setup(relay)
        remote = Hold()
        thread, result = _serve_in_thread(client, job, remote)
        session = link.open_session(job)
        try:
            session.wait_attached(10)
            out = sim.run_policy(robot_name="alice", policy_provider=session, instruction="hold still",
                                 n_steps=100, action_horizon=4, fast_mode=True)
            (ep,) = out["episodes"]
            assert out["status"] == "success", out
            assert ep["stopped_reason"] == "policy_completed"
            assert ep["applied_actions"] == 12  # three chunks of four, then EndEpisode
            assert len(remote.keys) == 14
            _finish(link, job)
            thread.join(10)
            assert result["final"].state == "SUCCEEDED"
        finally:
            session.close()
            link.close()
            client.close()


def test_a_newer_session_of_the_station_replaces_a_stale_one(tmp_path):
    with running_relay(tmp_path) as relay:
        client, link, job = _setup(relay)
        events = []
        thread, result = _serve_in_thread(client, job, Doubler(), events)
        stale = link.open_session(job)
        try:
            stale.wait_attached(10)
            stale.start_episode("ep_0000", pb.Task(task_id="t", instruction="go"))
            fresh = link.open_session(job)  # e.g. the station restarted while the old stream still looks alive
            assert fresh.wait_attached(10) == "team_a"
            with pytest.raises(PolicyDisconnected, match="replaced by a newer policy session of station "
                                                         "'sim_station'"):
                stale.act({"x": 1.0})
            fresh.start_episode("ep_0001", pb.Task(task_id="t", instruction="go"))
            assert fresh.act({"x": 2.0}) == [{"left/j1": 4.0}, {"left/j1": 5.0}]
            left = [e.station_left.reason for e in events if e.WhichOneof("kind") == "station_left"]
            assert left and "replaced by a newer policy session" in left[0]
            fresh.close()
            _finish(link, job)
            thread.join(10)
            assert result["final"].state == "SUCCEEDED"
        finally:
            stale.close()
            link.close()
            client.close()
