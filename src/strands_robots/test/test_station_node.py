"""station_node over ROS: its services, job_status, episode results, operator and takeover services.

With a real arm driver node and rollout node in this process (no relay: the jobs come from ``submit_job`` and
run a built-in policy on the rollout node).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid

import pytest
import yaml

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from ros_harness import NodeSpinners, wait_for  # noqa: E402
from strands_robots_msgs.msg import EpisodeResult, JobStatus, ScoredItem  # noqa: E402
from strands_robots_msgs.srv import (  # noqa: E402
    CancelJob,
    Discard,
    GetStatus,
    Resume,
    SubmitJob,
    SubmitScoreSheet,
    Takeover,
)

from strands_robots.conversions.station import station_task_to_msg  # noqa: E402
from strands_robots.ros.qos import EVENT_QOS, LATCHED_QOS  # noqa: E402
from strands_robots.ros.process import NODE_SWITCH_INTERVAL_S  # noqa: E402
from strands_robots.station.job_file import task_from_mapping  # noqa: E402

RATE_HZ = 50.0
SHEET = [{"name": "done", "question": "Did it hold?", "answer_type": "yes_no", "max_points": 2,
          "success_answer": "yes"},
         {"name": "touches", "question": "Touches?", "answer_type": "count", "max_points": 3, "points_per_unit": 1}]


SUITE = {"suite": "node_test", "title": "station node test", "team_may_choose": {"control_frequency": True},
         "tasks": [{"task_id": "hold", "instruction": "do hold", "layout": "table", "budget_s": 1.0, "scoring": SHEET,
                    "seed_rule": {"first": 0, "count": 5}},
                   {"task_id": "takeover", "instruction": "do takeover", "layout": "table", "budget_s": 1.0,
                    "scoring": SHEET, "seed_rule": {"first": 0, "count": 5}, "operator": {"takeover_at_s": 0.3}}]}


def ros_task(task_id, **params):
    parameters = {"duration_s": "1", **params}
    return station_task_to_msg(task_from_mapping(
        {"task_id": task_id, "instruction": f"do {task_id}", "layout": "table", "parameters": parameters,
         "scoring": SHEET}, 0))


class Station:
    """Driver, rollout (its takeover services included) and station nodes in this process, plus a client node."""

    def __init__(self, tmp_path, operator="scripted", rollout_params=(), **station_params):
        from strands_robots.nodes.arm_driver.node import ArmDriverNode
        from strands_robots.nodes.rollout.node import RolloutNode
        from strands_robots.nodes.station.node import StationNode

        self.namespace = f"/station_test_{uuid.uuid4().hex[:8]}"
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(NODE_SWITCH_INTERVAL_S)
        self.context = Context()
        rclpy.init(context=self.context)
        self.spinners = NodeSpinners(self.context)
        self.nodes = []
        self.lock = threading.Lock()
        self.statuses, self.results = [], []
        try:
            self.driver = self._add(ArmDriverNode(context=self.context, namespace=self.namespace,
                                                  parameter_overrides=[Parameter("control_rate_hz", value=RATE_HZ)]))
            assert self.driver.trigger_configure() == TransitionCallbackReturn.SUCCESS
            assert self.driver.trigger_activate() == TransitionCallbackReturn.SUCCESS
            self.rollout = RolloutNode(context=self.context, namespace=self.namespace, parameter_overrides=[
                Parameter("start_pose_before_episode", value=False), Parameter("control_frequency", value=RATE_HZ),
                Parameter("driver_silence_s", value=0.5), Parameter("driver_timeout_s", value=30.0),
                *(Parameter(k, value=v) for k, v in dict(rollout_params).items())])
            self.takeover = self.rollout.takeover  # the rollout node creates its takeover services itself
            self._add(self.rollout)
            suites = tmp_path / "suites"  # the station's own tasks (its predicates and scripted operator's settings)
            suites.mkdir(exist_ok=True)
            (suites / "node_test.yaml").write_text(yaml.safe_dump(SUITE))
            params = {"state_dir": str(tmp_path / "state"), "operator": operator, "profile": "simulated",
                      "suites_dir": str(suites), "allow_free_form_tasks": True, **station_params}
            self.station = self._add(StationNode(
                context=self.context, namespace=self.namespace,
                parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]))
            self.client = self._add(rclpy.create_node("station_test_client", namespace=self.namespace,
                                                      context=self.context))
            self.client.create_subscription(JobStatus, "job_status", self._on_status, LATCHED_QOS)
            self.client.create_subscription(EpisodeResult, "station/episode_results", self._on_result,
                                            EVENT_QOS)
        except BaseException:
            self.close()
            raise

    def _add(self, node, multi=False):
        self.nodes.append(node)
        return self.spinners.add(node, multi=multi)

    def _on_status(self, msg):
        with self.lock:
            self.statuses.append(msg)

    def _on_result(self, msg):
        with self.lock:
            self.results.append(msg)

    def call(self, srv_type, name, timeout_s=20.0, request=None, **fields):
        client = self.client.create_client(srv_type, name)
        try:
            assert client.wait_for_service(timeout_sec=timeout_s), f"{name} not available"
            req = srv_type.Request() if request is None else request
            for k, v in fields.items():
                setattr(req, k, v)
            done = threading.Event()
            future = client.call_async(req)
            future.add_done_callback(lambda _f: done.set())
            assert done.wait(timeout_s), f"{name}: no answer"
            return future.result()
        finally:
            self.client.destroy_client(client)

    def submit(self, tasks, episodes, provider="scripted",
               config='{"mode": "torque_ramp", "joint": "right.joint_4", "target": 1.0}', suite_trials=(), **fields):
        """Submit the team's own ``tasks``, or the node_test suite's tasks and trials, over ``submit_job``."""
        suite = {"suite": "node_test", "suite_tasks": [t for t, _ in suite_trials],
                 "suite_trials": [n for _, n in suite_trials]} if suite_trials else {}
        res = self.call(SubmitJob, "submit_job", client_id="test", tasks=tasks, episodes_total=episodes,
                        policy_provider=provider, policy_config_json=config, **suite, **fields)
        assert res.accepted, res.message
        return res.job_id

    def latest(self, job_id):
        with self.lock:
            mine = [s for s in self.statuses if s.job_id == job_id]
        return mine[-1] if mine else None

    def wait_state(self, job_id, predicate, timeout_s=60.0):
        ok = wait_for(lambda: self.latest(job_id) is not None and predicate(self.latest(job_id)), timeout_s)
        assert ok, f"job {job_id}: last status {self.latest(job_id)}"
        return self.latest(job_id)

    def close(self):
        for node in self.nodes:
            close = getattr(node, "close", None)
            if close is not None:
                try:
                    close()
                except Exception as exc:  # noqa: BLE001  (teardown goes on; the test's own assertions decide)
                    print(f"close {node.get_name()}: {exc}")
        self.spinners.shutdown()
        for node in reversed(self.nodes):
            node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        sys.setswitchinterval(self._switch)


@pytest.fixture
def station(tmp_path):
    s = Station(tmp_path)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def manual_station(tmp_path):
    s = Station(tmp_path, operator="manual")
    try:
        yield s
    finally:
        s.close()


def test_takeover_services_refuse_without_an_episode(station):
    res = station.call(Takeover, "pause_rollout", operator_name="op", reason="check")
    assert (res.ok, res.message) == (False, "no episode is running")
    res = station.call(Resume, "resume_rollout", operator_name="op")
    assert (res.ok, res.message) == (False, "no takeover is in force")
    res = station.call(Takeover, "pause_rollout", operator_name="  ")
    assert (res.ok, res.message) == (False, "operator_name must be a non-empty string")


def test_a_submitted_job_is_published_latched_with_each_episode_result_once(station):
    job_id = station.submit([], 2, suite_trials=[("hold", 1), ("takeover", 1)])
    final = station.wait_state(job_id, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"))
    assert final.state == "SUCCEEDED", final.message
    assert [(e.episode_id, e.end_condition, e.taken_over) for e in final.episodes] == [
        ("ep_0000", "timeout", False), ("ep_0001", "timeout", True)]
    assert wait_for(lambda: len([r for r in station.results]) >= 2, 5.0)
    assert [r.episode_id for r in station.results] == ["ep_0000", "ep_0001"]  # each once, in order
    assert station.takeover.in_takeover is False
    # A subscriber that comes late still gets the latest snapshot (transient local).
    # It stays until the node goes, after its executor stopped: destroyed under the spinning executor, the
    # subscription's QoS event handler races the executor's wait set (InvalidHandle), which ends the client's
    # spin thread, and the get_status below would wait 20 s for an answer no thread takes.
    late = []
    station.client.create_subscription(JobStatus, "job_status", late.append, LATCHED_QOS)
    assert wait_for(lambda: any(m.job_id == job_id and m.state == "SUCCEEDED" for m in late), 10.0)
    res = station.call(GetStatus, "get_status", job_id=job_id)
    assert res.found and res.status.state == "SUCCEEDED" and len(res.status.episodes) == 2
    assert res.status.station_id == "sim_station" and res.status.episodes_total == 2
    assert res.status.episodes[0].items[0].is_success_item and res.status.episodes[0].items[0].answer in ("yes", "no")
    assert station.call(GetStatus, "get_status", job_id="job-unknown").found is False
    res = station.call(CancelJob, "cancel_job", job_id=job_id, reason="too late")
    assert (res.ok, res.message) == (False, f"job {job_id} already ended (SUCCEEDED)")


def test_the_published_status_carries_the_jobs_figures_with_their_intervals(station):
    from strands_robots.stats.proportion import proportion_interval

    job_id = station.submit([], 2, suite_trials=[("hold", 2)])
    final = station.wait_state(job_id, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"))
    assert final.state == "SUCCEEDED", final.message
    assert len(final.summary) == 1 and list(final.comparison) == []  # a single-policy job: no comparison
    figures = final.summary[0]
    outcomes = [e for e in final.episodes if e.scored and not e.taken_over]
    successes = sum(e.success for e in outcomes)
    expected = proportion_interval(successes, len(outcomes))
    assert (figures.success.successes, figures.success.trials) == (successes, len(outcomes))
    assert figures.success.method == "wilson" and figures.success.confidence == 0.95
    assert list(figures.success.low) == [pytest.approx(expected.low)]
    assert list(figures.success.high) == [pytest.approx(expected.high)]
    assert figures.coverage.scored == len(outcomes) and [t.task_id for t in figures.tasks] == ["hold"]
    assert list(figures.score.mean) == [pytest.approx(sum(e.score for e in outcomes) / len(outcomes))]


def test_submit_job_refuses_a_malformed_task_naming_the_task_and_field(station):
    bad = ros_task("hold")
    bad.scoring.items[0].answer_type = "maybe"
    res = station.call(SubmitJob, "submit_job", client_id="t", tasks=[ros_task("ok"), bad], episodes_total=1,
                       policy_provider="mock", policy_config_json="")
    assert not res.accepted
    assert res.message.startswith("tasks[1].scoring:") and "'maybe'" in res.message
    res = station.call(SubmitJob, "submit_job", client_id="t", tasks=[ros_task("ok")], episodes_total=0,
                       policy_provider="mock", policy_config_json="")
    assert not res.accepted
    assert res.message.startswith("episodes_total: episodes_total=0 refused: allowed range [1, 100000]")


def test_cancel_job_stops_the_running_episode_and_the_job_ends_cancelled(station):
    job_id = station.submit([ros_task("long", duration_s="30")], 1)
    station.wait_state(job_id, lambda s: "ep_0000 running" in s.message)
    res = station.call(CancelJob, "cancel_job", job_id=job_id, reason="the team asked")
    assert res.ok, res.message
    final = station.wait_state(job_id, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"), 20.0)
    assert final.state == "CANCELLED" and "the team asked" in final.message
    assert len(final.episodes) == 0  # the interrupted episode has no result


def test_manual_operator_scores_through_the_services_and_every_refusal_says_why(manual_station):
    s = manual_station
    job_id = s.submit([ros_task("hold")], 1)
    s.wait_state(job_id, lambda st: "waiting for the score sheet" in st.message)
    res = s.call(Takeover, "takeover", operator_name="op", reason="late")
    assert not res.ok and "no rollout is running" in res.message
    res = s.call(Discard, "discard", episode_id="ep_0000")
    assert (res.ok, res.message) == (False, "ep_0000 was not taken over; only a taken-over episode can be discarded")
    res = s.call(SubmitScoreSheet, "submit_score_sheet", episode_id="ep_0000",
                 answers=[ScoredItem(name="done", answer="yes"), ScoredItem(name="touches", answer="lots")])
    assert not res.ok and "touches" in res.message and "'lots'" in res.message
    res = s.call(SubmitScoreSheet, "submit_score_sheet", episode_id="ep_0009",
                 answers=[ScoredItem(name="done", answer="yes"), ScoredItem(name="touches", answer="1")])
    assert not res.ok and "'ep_0009' does not await a score sheet; ep_0000 does" in res.message
    res = s.call(SubmitScoreSheet, "submit_score_sheet", episode_id="ep_0000",
                 answers=[ScoredItem(name="done", answer="yes"), ScoredItem(name="touches", answer="1")])
    assert res.ok, res.message
    final = s.wait_state(job_id, lambda st: st.state == "SUCCEEDED")
    (episode,) = final.episodes
    assert episode.scored and episode.success
    assert [(i.name, i.answer, i.points, i.max_points) for i in episode.items] == [
        ("done", "yes", 2.0, 2.0), ("touches", "1", 1.0, 3.0)]
    assert episode.score == pytest.approx(3.0 / 5.0)


def test_takeover_services_hold_a_running_episode_and_hand_it_back(station):
    from strands_robots.ros.action_client import ActionClient
    from strands_robots_msgs.action import RunEpisode
    from strands_robots_msgs.msg import ObserverEvent

    steps = []
    station.client.create_subscription(ObserverEvent, "observer_events",
                                       lambda m: steps.append(m) if m.kind == "step" else None, EVENT_QOS)
    action = ActionClient(station.client, RunEpisode, "run_episode")
    assert action.wait_for_server(timeout_sec=20.0)
    goal = RunEpisode.Goal()
    goal.policy_provider, goal.duration_s, goal.control_frequency, goal.seed = "mock", 2.0, RATE_HZ, -1
    sent = threading.Event()
    future = action.send_goal_async(goal)
    future.add_done_callback(lambda _f: sent.set())
    assert sent.wait(20.0) and future.result().accepted
    handle = future.result()
    assert wait_for(lambda: len(steps) >= 10, 20.0)
    res = station.call(Takeover, "pause_rollout", operator_name="op", reason="adjust the cube")
    assert (res.ok, res.message) == (True, "op took over (adjust the cube); rollout time stands still")
    res = station.call(Takeover, "pause_rollout", operator_name="other")
    assert (res.ok, res.message) == (False, "op already took the rollout over")
    held = len(steps)
    wait_for(lambda: False, 0.5)  # the operator holds the arms for a while
    during = len(steps) - held
    res = station.call(Resume, "resume_rollout", operator_name="op")
    assert (res.ok, res.message) == (True, "op handed the arms back to the policy")
    done = threading.Event()
    result_future = handle.get_result_async()
    result_future.add_done_callback(lambda _f: done.set())
    assert done.wait(30.0)
    result = result_future.result().result
    assert during <= 2  # at most the step under way when the pause came (and its event in flight)
    assert result.ended.applied_actions == 100 and result.end_condition == "timeout"  # the whole budget ran
    assert station.takeover.in_takeover is False


def test_lease_renewals_go_on_after_a_failed_send_and_end_when_stopped():
    from strands_robots.nodes.station.lease import RenewalThread

    sent, errors, lock = [], [], threading.Lock()

    def renew():
        with lock:
            sent.append(time.monotonic())
            if len(sent) == 2:
                raise RuntimeError("the service went away")

    renewals = RenewalThread(0.02, renew, errors.append).start()
    try:
        assert wait_for(lambda: len(sent) >= 5, 10.0)  # the failed second send did not end them
    finally:
        renewals.stop()
    with lock:
        count = len(sent)
    assert errors == ["lease renewal not sent: RuntimeError: the service went away"]
    assert not wait_for(lambda: len(sent) > count, 0.2)  # stopped: none after
    with pytest.raises(ValueError, match="renewal period must be > 0"):
        RenewalThread(0.0, renew, errors.append)


def test_a_station_whose_executor_is_blocked_longer_than_the_lease_keeps_it_through_an_episode(station):
    from strands_robots_msgs.msg import LeaseState, ObserverEvent

    block_s = 1.5  # longer than the lease (lease_duration_s 1.0): renewals from the executor would stop
    lease_s = station.station.get_parameter("lease_duration_s").value
    assert block_s > lease_s
    states, lock = [], threading.Lock()  # (time received, msg) of the driver's lease_state

    def on_state(msg):
        with lock:
            states.append((time.monotonic(), msg))

    steps = []
    station.client.create_subscription(LeaseState, "lease_state", on_state, LATCHED_QOS)
    station.client.create_subscription(ObserverEvent, "observer_events",
                                       lambda m: steps.append(m) if m.kind == "step" else None, EVENT_QOS)
    job_id = station.submit([ros_task("hold", duration_s="4")], 1)
    assert wait_for(lambda: len(steps) >= 10, 30.0)  # the rollout runs: the episode is under way
    assert wait_for(lambda: any(m.state == LeaseState.STATE_HELD and m.holder.startswith("station:")
                                for _, m in list(states)), 10.0)
    blocked = {}

    def block():  # one callback of the station node's executor that takes longer than the lease
        timer.cancel()
        blocked["from"] = time.monotonic()
        threading.Event().wait(block_s)
        blocked["to"] = time.monotonic()

    timer = station.station.create_timer(0.01, block)
    assert wait_for(lambda: "to" in blocked, 10.0)
    final = station.wait_state(job_id, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"))
    station.station.destroy_timer(timer)
    assert final.state == "SUCCEEDED", final.message
    assert [(e.episode_id, e.end_condition) for e in final.episodes] == [("ep_0000", "timeout")]
    with lock:
        seen = list(states)
    lease_id = next(m.lease_id for _, m in seen if m.state == LeaseState.STATE_HELD and m.holder.startswith("station:"))
    ours = [(t, m) for t, m in seen if m.lease_id == lease_id]
    assert not [m.state for _, m in ours if m.state == LeaseState.STATE_EXPIRED]
    # Renewals counted at the driver: each one moves the lease's expiry on (a held state with a new expires_unix_ms).
    expiries = [(t, m.expires_unix_ms) for t, m in ours if m.state == LeaseState.STATE_HELD]
    renewed = [t for (t, e), (_, before) in zip(expiries[1:], expiries) if e > before]
    during = [t for t in renewed if blocked["from"] < t < blocked["to"]]
    assert len(during) >= 2, f"{len(during)} renewals reached the driver in the {block_s} s the executor was blocked"
    gaps = [(b - a) / 1000.0 for (_, a), (_, b) in zip(expiries, expiries[1:])]
    assert max(gaps) < lease_s, f"the lease's expiry stood still for {max(gaps):.3f} s (lease {lease_s} s)"


STATION_TOKEN = "tok-" + uuid.uuid4().hex  # the station's secret: no parameter may show it


def test_no_parameter_of_the_station_node_shows_its_token_and_the_credentials_file_is_read_only(tmp_path):
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters

    from strands_robots.cli.bringup import write_relay_credentials
    from strands_robots.nodes.station.node import StationNode

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    token_file = private / "station_token"
    token_file.write_text(STATION_TOKEN)
    os.chmod(token_file, 0o600)
    creds = write_relay_credentials(str(private), "127.0.0.1:1", "sim_station", str(token_file))
    namespace = f"/station_params_{uuid.uuid4().hex[:8]}"
    context = Context()
    rclpy.init(context=context)
    spinners = NodeSpinners(context)
    nodes = []
    try:
        node = StationNode(context=context, namespace=namespace, parameter_overrides=[
            Parameter("state_dir", value=str(tmp_path / "state")), Parameter("relay_credentials_file", value=creds)])
        nodes.append(node)
        spinners.add(node)
        client = rclpy.create_node("param_reader", namespace=namespace, context=context)  # another node
        nodes.append(client)
        spinners.add(client)

        def call(srv_type, name, request):
            cli = client.create_client(srv_type, f"{namespace}/station/{name}")
            assert cli.wait_for_service(timeout_sec=20.0), name
            done = threading.Event()
            future = cli.call_async(request)
            future.add_done_callback(lambda _f: done.set())
            assert done.wait(20.0), name
            return future.result()

        names = call(ListParameters, "list_parameters", ListParameters.Request()).result.names
        values = call(GetParameters, "get_parameters", GetParameters.Request(names=list(names))).values
        other = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=str(tmp_path / "other.yaml"))
        refused = call(SetParameters, "set_parameters", SetParameters.Request(
            parameters=[ParameterMsg(name="relay_credentials_file", value=other)])).results[0]
    finally:
        for n in nodes:
            getattr(n, "close", lambda: None)()
        spinners.shutdown()
        for n in reversed(nodes):
            n.destroy_node()
        rclpy.try_shutdown(context=context)
    texts = {name: str(value) for name, value in zip(names, values)}
    assert "relay_credentials_file" in texts and len(values) == len(names)
    assert [name for name, text in texts.items() if STATION_TOKEN in text or "token" in name] == []
    assert not {"relay_target", "station_token", "station_token_file"} & set(names)
    assert creds in texts["relay_credentials_file"]  # the file's name only, never its content
    assert not refused.successful and "read-only" in refused.reason


def test_an_unreadable_job_file_at_start_is_named_on_diagnostics_and_its_job_failed(tmp_path):
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from strands_robots_msgs.srv import GetStatus

    from strands_robots.nodes.station.node import StationNode

    state = tmp_path / "state"
    state.mkdir()
    (state / "job-torn.job.json").write_text("{half a job")
    namespace = f"/station_diag_{uuid.uuid4().hex[:8]}"
    context = Context()
    rclpy.init(context=context)
    spinners = NodeSpinners(context)
    nodes, seen = [], []
    try:
        client = rclpy.create_node("diag_reader", namespace=namespace, context=context)
        nodes.append(client)
        client.create_subscription(DiagnosticArray, "/diagnostics", seen.append, 10)
        spinners.add(client)
        node = StationNode(context=context, namespace=namespace,
                           parameter_overrides=[Parameter("state_dir", value=str(state))])
        nodes.append(node)
        spinners.add(node)

        def mine():
            return [s for m in list(seen) for s in m.status if s.hardware_id == "sim_station" and "jobs" in s.name]

        assert wait_for(lambda: any(s.level == DiagnosticStatus.ERROR for s in mine()), 20.0), mine()
        cli = client.create_client(GetStatus, f"{namespace}/get_status")
        assert cli.wait_for_service(timeout_sec=20.0)
        done = threading.Event()
        future = cli.call_async(GetStatus.Request(job_id="job-torn"))
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(20.0)
        status = future.result()
    finally:
        for n in nodes:
            getattr(n, "close", lambda: None)()
        spinners.shutdown()
        for n in reversed(nodes):
            n.destroy_node()
        rclpy.try_shutdown(context=context)
    error = next(s for s in mine() if s.level == DiagnosticStatus.ERROR)
    values = {kv.key: kv.value for kv in error.values}
    (moved,) = [p for p in os.listdir(state) if p.startswith("job-torn.job.json.unreadable-")]
    assert "job-torn" in error.message and moved in values["set_aside.job-torn"]
    assert status.found and status.status.state == "FAILED" and moved in status.status.message


def test_a_hardware_station_refuses_the_scripted_operator_at_start_in_one_line():
    from strands_robots.nodes.station.node import station_profile

    with pytest.raises(ValueError) as info:
        station_profile("hardware", "scripted")
    assert "\n" not in str(info.value) and "a hardware station never runs the scripted operator" in str(info.value)
    assert station_profile("hardware", "") == ("hardware", "manual")
    assert station_profile("simulated", "") == ("simulated", "scripted")
    assert station_profile("simulated", "manual") == ("simulated", "manual")
    with pytest.raises(ValueError):
        station_profile("lab", "")


def test_submit_job_carries_the_suite_job_and_refuses_a_station_key_naming_it(station):
    from diagnostic_msgs.msg import KeyValue

    res = station.call(SubmitJob, "submit_job", client_id="t", tasks=[ros_task("own", success_when="x > 1")],
                       episodes_total=1, policy_provider="mock", policy_config_json="")
    assert not res.accepted and res.message.startswith("tasks[0].parameters['success_when']: 'success_when' refused")
    res = station.call(SubmitJob, "submit_job", client_id="t", suite="node_test", suite_tasks=["hold"],
                       suite_trials=[9], episodes_total=9, policy_provider="mock", policy_config_json="")
    assert not res.accepted and res.message.startswith("tasks[0].trials: 9 refused: suite 'node_test' has 5")
    res = station.call(SubmitJob, "submit_job", client_id="t", suite="node_test", suite_tasks=["hold"],
                       suite_trials=[2], episodes_total=2, policy_provider="mock", policy_config_json="",
                       choose=[KeyValue(key="seed", value="7")])
    assert not res.accepted and res.message.startswith("choose.seed: 'seed' refused"), res.message
    job_id = station.submit([], 2, provider="mock", config="{}", suite_trials=[("hold", 2)])
    final = station.wait_state(job_id, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"))
    assert final.state == "SUCCEEDED", final.message
    kept = [e for e in final.episodes if e.end_condition != "infrastructure_fault"]  # a station fault runs again
    assert [(e.task.task_id, {kv.key: kv.value for kv in e.task.parameters}["seed"]) for e in kept] == [
        ("hold", "0"), ("hold", "1")]
    assert station.station.station.status(job_id).episodes_total == 2


def test_submit_job_asking_for_recordings_records_each_of_its_episodes_and_no_other_jobs(tmp_path):
    """The job file's ``record: true`` as ``demo-job --ros`` sends it: each episode recorded, its file named."""
    import hashlib

    from diagnostic_msgs.msg import KeyValue

    from strands_robots.cli.demo_job import submit_request
    from strands_robots.job_model.team_job import team_job_from_mapping

    recordings = tmp_path / "recordings"
    station = Station(tmp_path, rollout_params={"recording_dir": str(recordings)})
    try:
        job_file = team_job_from_mapping({
            "station_id": "sim_station", "suite": "node_test", "tasks": [{"task": "hold", "trials": 1}],
            "free_form": [{"task_id": "own", "instruction": "do own", "layout": "table", "scoring": SHEET,
                           "trials": 1, "budget_s": 1}],
            "policy": {"provider": "scripted", "config": {"mode": "torque_ramp", "joint": "right.joint_4",
                                                          "target": 1.0}},
            "record": True})
        request = submit_request(job_file, SubmitJob.Request, KeyValue)
        assert request.record is True
        res = station.call(SubmitJob, "submit_job", request=request)
        assert res.accepted, res.message
        recorded = res.job_id
        plain = station.submit([ros_task("own")], 1)
        finals = [station.wait_state(job, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"))
                  for job in (recorded, plain)]
        assert [f.state for f in finals] == ["SUCCEEDED", "SUCCEEDED"], [f.message for f in finals]
        assert station.station.station.spec(recorded).record is True
        assert station.station.station.spec(plain).record is False
        kept = [e for e in finals[0].episodes if e.end_condition != "infrastructure_fault"]
        assert [e.task.task_id for e in kept] == ["hold", "own"]  # the suite's trial and the team's own task
        on_disk = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in recordings.rglob("*.mcap")}
        assert [e.recording_sha256 in on_disk for e in finals[0].episodes] == [True] * len(finals[0].episodes)
        assert len(on_disk) == len(finals[0].episodes)  # the job that did not ask was not recorded
        assert [e.recording_sha256 for e in finals[1].episodes] == [""] * len(finals[1].episodes)
    finally:
        station.close()


def test_a_station_keeping_its_recordings_refuses_a_submit_job_asking_for_them_and_persists_nothing(tmp_path):
    station = Station(tmp_path, team_recordings=False)
    try:
        refusal = ("job refused: record: station 'sim_station' does not send recordings to teams (its "
                   "team_recordings parameter is false); submit the job without record: true")
        for suite in ({}, {"suite": "node_test", "suite_tasks": ["hold"], "suite_trials": [1]}):
            res = station.call(SubmitJob, "submit_job", client_id="t", tasks=[ros_task("own")],
                               episodes_total=2 if suite else 1, policy_provider="mock", policy_config_json="",
                               record=True, **suite)
            assert (res.accepted, res.job_id, res.message) == (False, "", refusal)
        assert station.station.station.statuses() == ()  # nothing queued, nothing persisted
        assert [p for p in (tmp_path / "state").rglob("*") if p.is_file()] == []  # persisted before accepted
        job_id = station.submit([ros_task("own")], 1, provider="mock", config="{}")
        final = station.wait_state(job_id, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"))
        assert final.state == "SUCCEEDED", final.message
    finally:
        station.close()


def test_a_hardware_station_does_not_offer_a_suite_with_scripted_operator_settings(tmp_path):
    s = Station(tmp_path, operator="manual", profile="hardware")
    try:
        assert sorted(s.station.suites) == [] and len(s.station.refused_suites) == 1
        assert "task 'takeover': operator: a hardware station runs no scripted operator" in s.station.refused_suites[0]
    finally:
        s.close()
