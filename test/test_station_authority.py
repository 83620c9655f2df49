"""System test: who may clear a safety stop and who may take the arms, with every node its own process.

An arm driver, a rollout node and one or two station nodes run as their own processes (each in a session of
its own, ended by its PID in ``finally``), over real DDS; the test process is the operator and the client (ROS
services and topics).

- A safety stop is cleared by a person: a station with ``operator: manual`` never calls ``reset_safety`` (the
  driver logs every call with who asked); its next episode waits, and only the operator's ``clear_safety_stop``
  lets it go on, the driver's log and the job's message naming the operator.
- Stations are who they say: a second station (its own station node process, its own id, a higher lease
  priority) on the same driver neither revokes the first station's lease mid-episode nor records an episode it
  did not play; it waits for the arms and plays its own episodes once they are free.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import uuid

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from ros_harness import wait_for  # noqa: E402

RATE_HZ = 50.0
POLICY = '{"mode": "torque_ramp", "joint": "right.joint_4", "target": 1.0}'
SHEET = [{"name": "done", "question": "Did it hold?", "answer_type": "yes_no", "max_points": 1,
          "success_answer": "yes"}]
WAITING = "waiting for an operator to clear the safety stop"


def ros_task(task_id, **params):
    from strands_robots.conversions.station import station_task_to_msg
    from strands_robots.station.job_file import task_from_mapping

    return station_task_to_msg(task_from_mapping(
        {"task_id": task_id, "instruction": f"do {task_id}", "layout": "table", "parameters": params,
         "scoring": SHEET}, 0))


SUITE = "authority"
SUITE_TASKS = [{"task_id": name, "instruction": f"do {name}", "layout": "table", "scoring": SHEET,
                "parameters": {"duration_s": seconds, "success_when": "end_condition == timeout"}}
               for name, seconds in (("hold_a", "3"), ("hold_b", "1"))]


class Rig:
    """The node processes (output kept per process) and a client node in this process."""

    def __init__(self, tmp_path):
        from rclpy.context import Context

        self.tmp = tmp_path
        self.tag = uuid.uuid4().hex[:8]
        self.ns_a = f"/auth_a_{self.tag}"
        self.procs = {}
        self.lines = {}
        self.lock = threading.Lock()
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"authority_test_{self.tag}", context=self.context)
        self.statuses = {}
        self.leases = []
        from rclpy.executors import MultiThreadedExecutor

        self.executor = MultiThreadedExecutor(num_threads=2, context=self.context)
        self.executor.add_node(self.node)
        self.spin = threading.Thread(target=self._spin, daemon=True)
        self.spin.start()

    def _spin(self):
        try:
            self.executor.spin()
        except Exception:  # the context shutting down at the end
            pass

    # -- processes ------------------------------------------------------------------------------------------
    def start(self, name, module, node_name, namespace, params_file, params):
        import subprocess

        from strands_robots.cli.station_demo import config_file

        argv = [sys.executable, "-m", module, "--ros-args", "-r", f"__node:={node_name}", "-r",
                f"__ns:={namespace}", "--params-file", config_file(params_file)]
        for key, value in params.items():
            argv += ["-p", f"{key}:={value}"]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.procs[name] = proc
        self.lines[name] = []

        def pump():
            for line in proc.stdout:
                with self.lock:
                    self.lines[name].append(line.rstrip("\n"))

        threading.Thread(target=pump, daemon=True).start()
        return proc

    def output(self, name):
        with self.lock:
            return list(self.lines[name])

    def start_arms(self):
        hz = f"{RATE_HZ:.1f}"
        self.start("driver", "strands_robots.nodes.arm_driver.node", "arm_driver", self.ns_a, "rollout.yaml",
                   {"control_rate_hz": hz, "autostart": "true"})
        self.start("rollout", "strands_robots.nodes.rollout.node", "rollout", self.ns_a, "rollout.yaml",
                   {"control_frequency": hz, "start_pose_before_episode": "false", "record": "false",
                    "policy_provider": "mock", "driver_silence_s": "0.5"})
        from strands_robots_msgs.msg import LeaseState

        from strands_robots.ros.qos import LATCHED_QOS

        self.node.create_subscription(LeaseState, f"{self.ns_a}/lease_state", self._on_lease, LATCHED_QOS)

    def start_station(self, name, namespace, station_id, **params):
        from strands_robots_msgs.msg import JobStatus

        from strands_robots.ros.qos import LATCHED_QOS

        from suite_harness import write_suite

        suites = self.tmp / "suites"
        write_suite(suites, SUITE, SUITE_TASKS)  # the stations' own tasks (their predicates)
        values = {"station_id": station_id, "state_dir": str(self.tmp / name), "driver_namespace": self.ns_a,
                  "rollout_namespace": self.ns_a, "suites_dir": str(suites), **params}
        self.start(name, "strands_robots.nodes.station.node", "station", namespace, "station.yaml", values)
        self.node.create_subscription(JobStatus, f"{namespace}/job_status", self._on_status, LATCHED_QOS)

    def close(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
        for proc in self.procs.values():
            try:
                proc.wait(10.0)
            except Exception:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10.0)
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    # -- ROS ------------------------------------------------------------------------------------------------
    def _on_status(self, msg):
        with self.lock:
            self.statuses.setdefault(msg.job_id, []).append(msg)

    def _on_lease(self, msg):
        with self.lock:
            self.leases.append((msg.state, msg.holder))

    def history(self, job_id):
        with self.lock:
            return list(self.statuses.get(job_id, []))

    def latest(self, job_id):
        history = self.history(job_id)
        return history[-1] if history else None

    def call(self, srv_type, name, timeout_s=60.0, **fields):
        client = self.node.create_client(srv_type, name)
        try:
            assert client.wait_for_service(timeout_sec=timeout_s), f"{name} not available"
            req = srv_type.Request()
            for key, value in fields.items():
                setattr(req, key, value)
            done = threading.Event()
            future = client.call_async(req)
            future.add_done_callback(lambda _f: done.set())
            assert done.wait(20.0), f"{name}: no answer"
            return future.result()
        finally:
            self.node.destroy_client(client)

    def submit(self, namespace, tasks, episodes, suite_trials=()):
        """Submit over the station's service: the team's own ``tasks``, or this rig's suite tasks and trials."""
        from strands_robots_msgs.srv import SubmitJob

        suite = {"suite": SUITE, "suite_tasks": [t for t, _ in suite_trials],
                 "suite_trials": [n for _, n in suite_trials]} if suite_trials else {}
        res = self.call(SubmitJob, f"{namespace}/submit_job", client_id="team", tasks=tasks, episodes_total=episodes,
                        policy_provider="scripted", policy_config_json=POLICY, **suite)
        assert res.accepted, res.message
        return res.job_id

    def wait_job(self, job_id, predicate, timeout_s=120.0):
        ok = wait_for(lambda: self.latest(job_id) is not None and predicate(self.latest(job_id)), timeout_s, 0.05)
        assert ok, (f"job {job_id}: last status {self.latest(job_id)}\n"
                    + "\n".join(f"[{n}] {line}" for n in self.lines for line in self.output(n)[-15:]))
        return self.latest(job_id)


@pytest.fixture
def rig(tmp_path):
    rig = Rig(tmp_path)
    try:
        yield rig
    finally:
        rig.close()


def test_a_manual_station_never_clears_a_safety_stop_itself_and_the_operator_clear_resumes_the_job(rig):
    from strands_robots_msgs.srv import ClearSafetyStop

    rig.start_arms()
    rig.start_station("station", rig.ns_a, "lab_a", operator="manual", scoring_timeout_s="0.1")
    job = rig.submit(rig.ns_a, [ros_task("push", **{"policy.target": "2.0", "duration_s": "3"}),
                                ros_task("hold", duration_s="1")], 2)
    status = rig.wait_job(job, lambda s: s.message.startswith(WAITING))
    assert status.state == "RUNNING" and [e.end_condition for e in status.episodes] == ["safety_stop"]
    assert "right: joint 4 reads +" in status.message
    # Waiting: the station never asked the driver to reset (the driver logs every reset_safety with who asked).
    assert not wait_for(lambda: any("reset_safety by" in line for line in rig.output("driver")), 2.0)
    assert rig.latest(job).message.startswith(WAITING) and rig.latest(job).state == "RUNNING"
    reply = rig.call(ClearSafetyStop, f"{rig.ns_a}/clear_safety_stop", operator_name="ann")
    assert reply.ok, reply.message
    final = rig.wait_job(job, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"))
    assert final.state == "SUCCEEDED", final.message
    assert [e.end_condition for e in final.episodes] == ["safety_stop", "timeout"]
    resets = [line for line in rig.output("driver") if "reset_safety by" in line]
    assert len(resets) == 1 and "reset_safety by ann (lease held by station:lab_a)" in resets[0], resets
    assert any(m.message.startswith("ep_0001 starting: ann cleared the safety stop: right: joint 4 reads +")
               for m in rig.history(job)), [m.message for m in rig.history(job)]
    assert any("[operator] clear_safety_stop by ann: accepted" in line for line in rig.output("station"))


def test_a_second_station_on_the_same_arms_waits_for_them_and_never_revokes_the_first_mid_episode(rig):
    from strands_robots_msgs.msg import LeaseState

    rig.start_arms()
    rig.start_station("station_a", rig.ns_a, "lab_a")
    ns_b = f"/auth_b_{rig.tag}"
    rig.start_station("station_b", ns_b, "lab_b", lease_priority="50", lease_wait_s="90.0")
    job_a = rig.submit(rig.ns_a, [], 2, suite_trials=[("hold_a", 2)])
    assert wait_for(lambda: (LeaseState.STATE_HELD, "station:lab_a") in list(rig.leases), 60.0, 0.05), rig.leases
    job_b = rig.submit(ns_b, [], 2, suite_trials=[("hold_b", 2)])
    final_a = rig.wait_job(job_a, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"), 180.0)
    final_b = rig.wait_job(job_b, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"), 180.0)
    # The first station's episodes all ran their budget: nobody took its arms mid-episode.
    assert final_a.state == "SUCCEEDED" and [e.end_condition for e in final_a.episodes] == ["timeout", "timeout"]
    # The second station waited (it said so), then played every episode it records: a rollout ran for each.
    assert any("waiting for the arms" in s.message and "station:lab_a" in s.message for s in rig.history(job_b))
    assert final_b.state == "SUCCEEDED", final_b.message
    assert [e.end_condition for e in final_b.episodes] == ["timeout", "timeout"]
    assert all(e.run_id for e in final_b.episodes)
    driver = rig.output("driver")
    assert not [line for line in driver if "revoking" in line], [line for line in driver if "revoking" in line]
    assert any("granted to 'station:lab_b' (priority 50)" in line for line in driver)
    assert any("never preempts another station's lease" in line for line in driver)


def test_a_foreign_resume_over_the_station_service_is_refused_with_the_reason(rig):
    from strands_robots_msgs.srv import Resume, Takeover

    rig.start_arms()
    rig.start_station("station", rig.ns_a, "lab_a", operator="manual", scoring_timeout_s="0.1", supervisors="sue")
    job = rig.submit(rig.ns_a, [ros_task("hold", duration_s="4")], 1)
    rig.wait_job(job, lambda s: s.message.startswith("ep_0000 running"))

    def took_over():  # a takeover asked while the rollout is still starting is refused (or fails): ask again
        if any("op2 took over ep_0000" in s.message for s in rig.history(job)):
            return True
        rig.call(Takeover, f"{rig.ns_a}/takeover", operator_name="op2", reason="adjust the cube")
        return wait_for(lambda: any("op2 took over ep_0000" in s.message for s in rig.history(job)), 1.0)

    assert wait_for(took_over, 30.0, 0.2), [s.message for s in rig.history(job)]
    foreign = rig.call(Resume, f"{rig.ns_a}/resume", operator_name="op3")
    assert not foreign.ok
    assert foreign.message == "op3 may not resume op2's takeover of ep_0000: only op2 or a supervisor (sue) may"
    own = rig.call(Resume, f"{rig.ns_a}/resume", operator_name="op2")
    assert own.ok, own.message
    final = rig.wait_job(job, lambda s: s.state in ("SUCCEEDED", "FAILED", "CANCELLED"))
    assert final.state == "SUCCEEDED" and final.episodes[0].taken_over
    assert final.episodes[0].end_condition == "timeout"
