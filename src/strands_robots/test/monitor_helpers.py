"""Shared by the monitoring tests: real observer events and station messages, a publishing test node.

No rclpy import at module level (the tests that need it skip first).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from strands_robots.simulation.observers import RunPolicyEnded, RunPolicyStarted, RunPolicyStep

KEYS = ("left.joint_1", "left.joint_2", "right.joint_1", "right.joint_4")
SRC = Path(__file__).resolve().parents[1]          # src/strands_robots
REPO = SRC.parents[1]


def started(run_id: str, seq: int = 0, robot: str = "sim_arms") -> RunPolicyStarted:
    return RunPolicyStarted(run_id=run_id, event_seq=seq, monotonic_ns=1_000 + seq, utc_ns=1_700_000_000_000_000_000,
                            robot_name=robot, policy="mock", instruction="stack the cubes", control_frequency=50.0,
                            action_horizon=8, total_steps=10, async_rtc=False, episode_index=0, n_episodes=1,
                            actuator_keys=KEYS)


def step(run_id: str, seq: int, index: int, *, resolution: str = "full", unresolved=(), reasons=(),
         age: int = 0, missed: bool = False, hook: str = "ok") -> RunPolicyStep:
    applied = tuple(k for k in KEYS if k not in unresolved)
    return RunPolicyStep(run_id=run_id, event_seq=seq, monotonic_ns=1_000 + seq,
                         utc_ns=1_700_000_000_000_000_000 + seq * 20_000_000, applied_action_index=index,
                         legacy_step_index=index, action_resolution=resolution, applied_action_keys=applied,
                         unresolved_action_keys=tuple(unresolved), unresolved_action_reasons=tuple(reasons),
                         action_error="", observation_is_chunk_reused=age > 0, observation_age_steps=age,
                         legacy_hook_outcome=hook, chunk_index=index % 8, elapsed_s=index * 0.02,
                         sim_time_s=index * 0.02, deadline_missed=missed,
                         observation={f"{k}.pos": 0.01 * index for k in KEYS},
                         action={k: 0.012 * index for k in KEYS})


def ended(run_id: str, seq: int, *, stopped_reason: str = "budget", detail: str = "", failures: int = 0,
          missed: int = 0) -> RunPolicyEnded:
    return RunPolicyEnded(run_id=run_id, event_seq=seq, monotonic_ns=1_000 + seq,
                          utc_ns=1_700_000_000_000_000_000 + seq * 20_000_000,
                          outcome="ok" if stopped_reason == "budget" else "error", stopped_reason=stopped_reason,
                          end_detail=detail, applied_actions=seq - 1, observer_failures=failures,
                          missed_deadlines=missed)


def job_status_dict(job_id: str = "job-1", state: str = "RUNNING", episodes=()) -> dict:
    return {"job_id": job_id, "station_id": "sim_station", "state": state, "episodes_total": 3,
            "episodes": list(episodes), "updated_unix_ms": 1_700_000_000_000, "message": "episode 1 running"}


def episode_dict(episode_id: str, end: str = "timeout", *, scored=True, success=True, score=0.75,
                 taken_over=False, detail="", run_id="") -> dict:
    return {"episode_id": episode_id, "end_condition": end, "scored": scored, "success": success, "score": score,
            "taken_over": taken_over, "end_detail": detail, "run_id": run_id}


def safety_stop_dict() -> dict:
    checks = [
        {"arm": "right", "joint": "joint_4", "quantity": "torque", "value": 3.4, "limit": 3.0, "unit": "N*m",
         "text": "right: joint 4 reads +3.4 N*m"},
        {"arm": "left", "joint": "joint_2", "quantity": "velocity", "value": -2.6, "limit": 2.5, "unit": "rad/s",
         "text": "left: joint 2 reads -2.6 rad/s"},
    ]
    return {"stamp": {"sec": 1_700_000_001, "nanosec": 0}, "stopped": True, "checks": checks,
            "detail": "; ".join(c["text"] for c in checks)}


def lease_dict(holder: str = "station") -> dict:
    return {"stamp": {"sec": 1_700_000_000, "nanosec": 0}, "state": "held", "lease_id": "lease-7", "holder": holder,
            "priority": 10, "expires_unix_ms": 1_700_000_001_000, "previous_holder": ""}


def driver_status_dict() -> dict:
    return {"hardware": "mujoco", "active": True, "stopped": False, "physics_rate_hz": 500.0,
            "lease_holder": "station", "actuator_keys": list(KEYS)}


def subprocess_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(REPO / "src" / "rqt_strands_robots"),
                                         env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_module(module: str, *args: str) -> subprocess.Popen:
    """``python -m module args`` with this test process's DDS domain, output piped."""
    return subprocess.Popen([sys.executable, "-m", module, *args], env=subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stop_process(proc: subprocess.Popen, timeout_s: float = 10.0) -> tuple[str, str]:
    """SIGINT, then SIGKILL after ``timeout_s``; the process's (stdout, stderr)."""
    if proc.poll() is None:
        proc.send_signal(2)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return out, err


class Publishers:
    """One node publishing the station's topics under a namespace, each with its publisher's QoS."""

    def __init__(self, context, namespace: str) -> None:
        import rclpy
        from strands_robots.monitoring.live import qos_profile
        from strands_robots.monitoring.topics import topics_in

        from strands_robots.conversions.messages import message_class

        self.node = rclpy.create_node("monitor_test_publishers", context=context)
        self.pubs = {}
        for name, topic in topics_in(namespace):
            self.pubs[topic.name.lstrip("/")] = self.node.create_publisher(message_class(topic.type_name), name,
                                                                           qos_profile(topic.qos))

    def publish(self, name: str, msg) -> None:
        self.pubs[name].publish(msg)

    def publish_dict(self, name: str, type_name: str, d: dict) -> None:
        from strands_robots.conversions.introspection import dict_to_msg

        self.pubs[name].publish(dict_to_msg(type_name, d))

    def publish_event(self, event, dropped_before: int = 0) -> None:
        from strands_robots.conversions.events import event_to_msg

        self.pubs["observer_events"].publish(event_to_msg(event, dropped_before))

    def wait_subscribed(self, name: str, timeout_s: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.pubs[name].get_subscription_count() > 0:
                return True
            time.sleep(0.05)
        return False

    def destroy(self) -> None:
        self.node.destroy_node()
