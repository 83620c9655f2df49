"""The rollout node as its own process: a goal cannot steer its relay policy, and an early cancel is never lost.

Every node here is a process of its own (``python -m strands_robots.nodes.arm_driver.node`` /
``rollout_node``); the test process only holds a client node. Each test ends every process it started by its
PID (SIGINT, then SIGKILL), also when it fails.

- The token-theft goal: a RunEpisode goal whose ``policy_config_json`` names an attacker's relay (a real TCP
  listener on loopback that counts what it receives) and a token file. The goal is refused naming the keys and
  the attacker receives nothing, with or without the node's own credentials; no parameter holds a token.
- With its own credentials file the node's relay provider reaches that relay (a relay process and a team's
  client here), and the team's ``EndEpisode`` ends the episode ``policy_completed``.
- A cancel sent the moment the goal is accepted ends the episode as cancelled, never a full-budget run; one
  sent while the node waits for its driver ends the goal cancelled, saying so.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from action_msgs.msg import GoalInfo, GoalStatus  # noqa: E402
from action_msgs.srv import CancelGoal  # noqa: E402
from rcl_interfaces.msg import Parameter as ParameterMsg  # noqa: E402
from rcl_interfaces.msg import ParameterType, ParameterValue  # noqa: E402
from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters  # noqa: E402
from strands_robots.ros.action_client import ActionClient  # noqa: E402
from rclpy.action.client import ClientGoalHandle  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from strands_robots_msgs.action import RunEpisode  # noqa: E402
from unique_identifier_msgs.msg import UUID  # noqa: E402

from strands_robots.ros.process import spin_in_background  # noqa: E402

from goal_warmup import warm_goal_path  # noqa: E402

RATE_HZ = 50.0
STATION_TOKEN = "tok-station-secret-0123456789"  # the node's own token (from its credentials file)
STOLEN_TOKEN = "tok-what-the-attacker-wants-42"  # the file the attacker's goal names


class CountingListener:
    """A TCP listener on loopback (the attacker's "relay") counting accepted connections and received bytes."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self.connections = 0
        self.received = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="attacker-relay", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        conn.settimeout(0.5)
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not data:
                    return
                with self._lock:
                    self.received += len(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self._sock.close()


def _private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def _credentials_file(directory: Path, target: str) -> Path:
    _private(directory / "station.token", STATION_TOKEN + "\n")
    return _private(directory / "relay.yaml", f"target: {target}\nstation_id: sim_station\n"
                                               "token_file: station.token\n")


def _start(module: str, namespace: str, *params: str) -> subprocess.Popen:
    args = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={namespace}"]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _end(proc: subprocess.Popen) -> str:
    """End a process this test started (SIGINT to its group, then SIGKILL); return its output."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=10)
    return out or ""


class Station:
    """A client node (the test's) beside a driver process and a rollout node process in one namespace."""

    def __init__(self, *rollout_params: str, driver: bool = True) -> None:
        self.namespace = f"/rollout_proc_{uuid.uuid4().hex[:8]}"
        self.procs: list = []
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("test_client", namespace=self.namespace, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spinner = spin_in_background(self.executor, "rollout-proc-test")
        self.action = ActionClient(self.node, RunEpisode, "run_episode")
        try:
            if driver:
                self.procs.append(_start("strands_robots.nodes.arm_driver.node", self.namespace,
                                         "autostart:=true", f"control_rate_hz:={RATE_HZ}"))
            self.rollout = _start("strands_robots.nodes.rollout.node", self.namespace,
                                  "start_pose_before_episode:=false", f"control_frequency:={RATE_HZ}",
                                  "driver_timeout_s:=30.0", "driver_silence_s:=0.5", *rollout_params)
            self.procs.append(self.rollout)
            assert self.action.wait_for_server(timeout_sec=60.0), "run_episode action server not found"
            self._warm_goal_path()
        except BaseException:
            self.close()
            raise

    def _warm_goal_path(self, timeout_s: float = 30.0) -> None:
        """Before any test goal, one refused goal answered with its result (goal_warmup.py says why)."""
        warm_goal_path(self.action, RATE_HZ, timeout_s)

    def call(self, srv_type, name: str, request, timeout_s: float = 20.0):
        """Call one of the node's parameter services (idempotent), asking again every 5 s up to ``timeout_s``.

        A service seen in the graph is not yet matched both ways: a request sent to a node just started can be
        taken while its answer has no matched reader yet, and that answer is lost (no answer in 20 s). Asking
        again is safe for these services, and the first answer counts.
        """
        client = self.node.create_client(srv_type, f"{self.namespace}/rollout/{name}")
        try:
            assert client.wait_for_service(timeout_sec=timeout_s), f"{name} not found"
            done = threading.Event()
            futures = []
            deadline = time.monotonic() + timeout_s
            while not done.is_set() and time.monotonic() < deadline:
                future = client.call_async(request)
                future.add_done_callback(lambda _f: done.set())
                futures.append(future)
                done.wait(min(5.0, max(0.0, deadline - time.monotonic())))
            assert done.is_set(), f"{name}: no answer to {len(futures)} request(s) in {timeout_s} s"
            return next(f for f in futures if f.done()).result()
        finally:
            self.node.destroy_client(client)

    def send(self, timeout_s: float = 30.0, **fields):
        goal = RunEpisode.Goal()
        goal.seed = -1
        goal.control_frequency = RATE_HZ
        for k, v in fields.items():
            setattr(goal, k, v)
        done = threading.Event()
        future = self.action.send_goal_async(goal)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), "RunEpisode goal: no answer"
        handle = future.result()
        assert handle.accepted, "RunEpisode goal refused"
        return handle

    def send_and_cancel_at_once(self, timeout_s: float = 30.0, **fields):
        """Send a goal under an id of our own and its cancel right behind it, before the goal's answer came.

        The cancel is sent again until the server knows the goal (a cancel that overtook its goal is answered
        "unknown goal"), so it lands as early after the acceptance as the transport allows. The cancel client is
        new, so (as in :meth:`call`) its first answers can be lost while the server's reply writer has not matched
        it yet: a request with no answer in 5 s is sent again (else it can go unanswered for 30 s and more). A
        request after one whose answer was lost may find the goal cancelling or over ("rejected", "terminated"): the
        lost one reached it first, and the result says how the goal ended.
        """
        goal = RunEpisode.Goal()
        goal.seed = -1
        goal.control_frequency = RATE_HZ
        for k, v in fields.items():
            setattr(goal, k, v)
        goal_id = UUID(uuid=list(uuid.uuid4().bytes))
        cancel = self.node.create_client(CancelGoal, f"{self.namespace}/run_episode/_action/cancel_goal")
        try:
            assert cancel.wait_for_service(timeout_sec=timeout_s), "cancel_goal not found"
            sent = self.action.send_goal_async(goal, goal_uuid=goal_id)
            attempts, unanswered = 0, []  # requests still without an answer (it may come late, or never)
            deadline = time.monotonic() + timeout_s
            answered = threading.Event()
            accepted = False
            while not accepted:
                attempts += 1
                answered.clear()
                future = cancel.call_async(CancelGoal.Request(goal_info=GoalInfo(goal_id=goal_id)))
                future.add_done_callback(lambda _f: answered.set())
                answered.wait(min(5.0, max(0.0, deadline - time.monotonic())))
                late = [f for f in unanswered if f.done()]
                unanswered = [f for f in unanswered if not f.done()]
                if any(f.result().return_code == CancelGoal.Response.ERROR_NONE for f in late):
                    break
                if not future.done():
                    unanswered.append(future)
                    assert time.monotonic() < deadline, f"cancel_goal: no answer to {attempts} request(s)"
                    continue
                code = future.result().return_code
                accepted = code == CancelGoal.Response.ERROR_NONE
                if unanswered and code in (CancelGoal.Response.ERROR_REJECTED,
                                           CancelGoal.Response.ERROR_GOAL_TERMINATED):
                    break  # an earlier request, its answer lost, reached the goal first; the result tells
                assert accepted or attempts < 10_000, f"the cancel was never accepted ({code})"
            done = threading.Event()
            sent.add_done_callback(lambda _f: done.set())
            if not done.wait(5.0):
                # The server holds the goal (it answered a cancel for it), but the goal's own answer is late or
                # lost: the goal is adopted under its id, as the station's send_episode_goal does, and its
                # result says how it ended.
                response = RunEpisode.Impl.SendGoalService.Response()
                response.accepted = True
                return ClientGoalHandle(self.action, goal_id, response), attempts
            handle = sent.result()
            assert handle.accepted, "RunEpisode goal refused"
            return handle, attempts
        finally:
            self.node.destroy_client(cancel)

    @staticmethod
    def result(handle, timeout_s: float = 60.0):
        """Return the goal's result and status, asking again every 5 s (an answer can be lost, see above)."""
        done = threading.Event()
        futures = []
        deadline = time.monotonic() + timeout_s
        while not done.is_set() and time.monotonic() < deadline:
            future = handle.get_result_async()
            future.add_done_callback(lambda _f: done.set())
            futures.append(future)
            done.wait(min(5.0, max(0.0, deadline - time.monotonic())))
        assert done.is_set(), f"RunEpisode result not within {timeout_s} s ({len(futures)} request(s))"
        answer = next(f for f in futures if f.done()).result()
        return answer.result, answer.status

    def close(self) -> None:
        outputs = []
        try:
            for proc in reversed(self.procs):
                outputs.append(_end(proc))
        finally:
            self.executor.shutdown(timeout_sec=5.0)
            self.spinner.join(5.0)
            self.node.destroy_node()
            rclpy.try_shutdown(context=self.context)
        self.output = "\n".join(outputs)


@pytest.fixture
def attacker():
    listener = CountingListener()
    try:
        yield listener
    finally:
        listener.close()


def _theft_config(attacker: CountingListener, token_file: Path) -> str:
    return json.dumps({"relay_target": f"127.0.0.1:{attacker.port}", "station_id": "sim_station",
                       "station_token_file": str(token_file), "job_id": "job-1", "episode_id": "ep_0000",
                       "attach_timeout_s": 2.0})


@pytest.mark.parametrize("own_credentials", [True, False], ids=["with-credentials", "without-credentials"])
def test_a_goal_naming_a_relay_and_a_token_file_is_refused_by_key_and_the_attacker_receives_nothing(
        tmp_path, attacker, own_credentials):
    stolen = _private(tmp_path / "stolen.token", STOLEN_TOKEN + "\n")
    params = []
    if own_credentials:
        # The node's own relay is elsewhere (nothing listens there): the goal must not be able to move it.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            elsewhere = s.getsockname()[1]
        params.append(f"relay_credentials_file:={_credentials_file(tmp_path, f'127.0.0.1:{elsewhere}')}")
    station = Station(*params)
    try:
        handle = station.send(policy_provider="relay", policy_config_json=_theft_config(attacker, stolen),
                              duration_s=1.0)
        result, status = station.result(handle)
        # After the answer the node is idle: anything it would have sent has been sent (or never will be).
        follow = station.send(policy_provider="mock", duration_s=0.2)
        follow_result, follow_status = station.result(follow)
    finally:
        station.close()
    assert (attacker.connections, attacker.received) == (0, 0)
    assert status == GoalStatus.STATUS_ABORTED, result.message
    assert result.message.startswith("goal refused: policy_config"), result.message
    for key in ("relay_target", "station_id", "station_token_file"):
        assert key in result.message, result.message
    assert STOLEN_TOKEN not in result.message and result.ended.run_id == ""
    # The node itself still runs episodes: a refusal broke nothing.
    assert follow_status == GoalStatus.STATUS_SUCCEEDED and follow_result.ended.outcome == "ok", follow_result.message
    assert STOLEN_TOKEN not in station.output and STATION_TOKEN not in station.output


def test_without_credentials_a_relay_goal_is_refused_saying_where_credentials_come_from():
    station = Station(driver=False)
    try:
        result, status = station.result(station.send(
            policy_provider="relay", policy_config_json=json.dumps({"job_id": "j", "episode_id": "ep_0000"}),
            duration_s=1.0))
    finally:
        station.close()
    assert status == GoalStatus.STATUS_ABORTED
    assert "no relay credentials" in result.message and "relay_credentials_file" in result.message, result.message


def test_no_parameter_of_the_rollout_node_holds_a_token_and_the_credentials_file_is_read_only(tmp_path):
    creds = _credentials_file(tmp_path, "127.0.0.1:1")
    station = Station(f"relay_credentials_file:={creds}", driver=False)
    try:
        names = station.call(ListParameters, "list_parameters", ListParameters.Request()).result.names
        values = station.call(GetParameters, "get_parameters", GetParameters.Request(names=list(names))).values
        other = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=str(tmp_path / "other.yaml"))
        change = SetParameters.Request(parameters=[ParameterMsg(name="relay_credentials_file", value=other)])
        refused = station.call(SetParameters, "set_parameters", change).results[0]
    finally:
        station.close()
    assert "relay_credentials_file" in names and len(values) == len(names)
    texts = {name: str(v) for name, v in zip(names, values)}
    holding = [name for name, text in texts.items() if STATION_TOKEN in text or "token" in name]
    assert holding == [], holding
    assert str(creds) in texts["relay_credentials_file"]  # the file's name only, never its content
    assert not refused.successful and "read-only" in refused.reason


def test_a_credentials_file_others_may_read_stops_the_node_with_one_line(tmp_path):
    creds = _credentials_file(tmp_path, "127.0.0.1:1")
    creds.chmod(0o644)
    proc = _start("strands_robots.nodes.rollout.node", f"/rollout_proc_{uuid.uuid4().hex[:8]}",
                  f"relay_credentials_file:={creds}")
    try:
        code = proc.wait(60)
    finally:
        out = _end(proc)
    assert code == 2, out
    lines = [line for line in out.splitlines() if "relay.yaml" in line]
    assert len(lines) == 1 and "mode 0644" in lines[0], out


EARLY_CANCEL_ATTEMPTS = int(os.environ.get("STRANDS_EARLY_CANCEL_ATTEMPTS", "12"))


def test_a_cancel_right_after_acceptance_ends_the_episode_cancelled_never_a_full_budget_run():
    budget = 100  # 2 s at 50 Hz: a lost cancel runs all of them
    station = Station()
    runs = []
    try:
        for _ in range(EARLY_CANCEL_ATTEMPTS):
            handle, attempts = station.send_and_cancel_at_once(policy_provider="mock", max_steps=budget)
            result, status = station.result(handle)
            runs.append((status, result.ended.run_id, result.ended.outcome, result.ended.applied_actions,
                         result.message, attempts))
    finally:
        station.close()
    print("early cancels (status, run_id, outcome, applied, message, cancel sends):", runs)
    for status, run_id, outcome, applied, message, _ in runs:
        assert status == GoalStatus.STATUS_CANCELED, runs
        if run_id:  # the episode had started: its Ended says cancelled, within a control period or so
            assert outcome == "cancelled" and applied < budget // 10, runs
        else:  # the cancel came before the rollout: nothing ran, and the message says why
            assert "cancel" in message, runs


def test_a_cancel_while_the_node_waits_for_its_driver_ends_the_goal_cancelled_saying_so():
    station = Station(driver=False)  # no driver: the episode waits for it (driver_timeout_s 30 s)
    try:
        handle, _ = station.send_and_cancel_at_once(policy_provider="mock", max_steps=100)
        result, status = station.result(handle, timeout_s=20.0)  # well before the 30 s driver wait ends
    finally:
        station.close()
    assert status == GoalStatus.STATUS_CANCELED
    assert result.message == "cancelled before the episode started (goal cancelled)" and result.ended.run_id == ""


def test_the_relay_provider_reaches_the_relay_of_the_nodes_credentials_file_and_the_team_ends_the_episode(
        tmp_path):
    pytest.importorskip("grpc", reason="grpcio is not installed")
    from test_relay_harness import (CLIENT_TOKENS, STATION_TOKENS, free_port, start_relay_process, stop_process,
                                    write_tokens, yes_no_task)

    from strands_robots.client import EndEpisode, EvaluationClient, Policy

    class Hold(Policy):
        def __init__(self) -> None:
            self.chunks = 0

        def act(self, observation):
            self.chunks += 1
            if self.chunks > 3:
                raise EndEpisode("held long enough")
            return [{"right.joint_1": observation["right.joint_1.pos"]}] * 4

    port = free_port()
    relay = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", write_tokens(tmp_path))
    served: dict = {}
    try:
        _private(tmp_path / "station.token", STATION_TOKENS["sim_station"] + "\n")
        creds = _private(tmp_path / "relay.yaml", f"target: 127.0.0.1:{port}\nstation_id: sim_station\n"
                                                   "token_file: station.token\n")
        with EvaluationClient(f"127.0.0.1:{port}", token=CLIENT_TOKENS["team_a"]) as client:
            job_id = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            team = Hold()

            def serve() -> None:
                try:
                    served["final"] = client.serve_policy(job_id, team)
                except Exception as exc:  # the job never ends here: the session ends when the test does
                    served["error"] = exc

            threading.Thread(target=serve, daemon=True).start()
            station = Station(f"relay_credentials_file:={creds}")
            try:
                config = {"job_id": job_id, "episode_id": "ep_0000", "attach_timeout_s": 20.0}
                result, status = station.result(station.send(
                    policy_provider="relay", policy_config_json=json.dumps(config), max_steps=200,
                    action_horizon=4))
            finally:
                station.close()
    finally:
        stop_process(relay)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert (result.ended.stopped_reason, result.end_condition) == ("policy_completed", "policy_completed")
    assert result.ended.applied_actions == 12 and team.chunks == 4
