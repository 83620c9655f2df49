"""System test: the relay, the station (with its DDS domain) and the team on three hosts: network namespaces.

The test makes the namespaces (``ip netns``), a veth pair from the relay's to each of the others and their
addresses (10.245.1.0/24 to the station, 10.245.2.0/24 to the team; no route between those two). The relay
listens in its namespace; the station's processes (arm driver, camera, rollout, station node) run in the
station's, the team's client (submit and serve the policy) in the team's. Checked: the job runs to SUCCEEDED;
the station and the team only connect out to the relay (no TCP listener on any address but loopback, every
connection off the host goes to the relay's address and port); ROS discovery stays inside the station's
namespace (a probe node there sees the station's nodes, the same probe in the relay's namespace sees none).
Skips with the reason where namespaces cannot be made; every namespace is deleted even on failure, after every
process in it was ended by PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh or a ROS 2 distro")
pytest.importorskip("strands_robots_msgs.msg", reason="strands_robots_msgs is not built (colcon build)")
pytest.importorskip("mujoco", reason="MuJoCo is not installed")

from cluster_harness import SCRIPTED, pids_alive, start_cluster_relay, station_credentials, task  # noqa: E402
from netns_harness import NetnsLab, NetnsUnavailable, host_of, is_loopback  # noqa: E402

from strands_robots.cli.station_demo import LocalStation  # noqa: E402

RELAY_PORT = 50051  # the relay's namespace is its own: no other process can hold it
JOB_TIMEOUT_S = 240.0

TEAM_SCRIPT = """
import json, sys
from strands_robots.client import EvaluationClient
from strands_robots.policies.demo import DemoPolicy
target, token, station, tasks, scripted = sys.argv[1:6]
client = EvaluationClient(target, token=token)
job_id = client.submit_job(station_id=station, tasks=json.loads(tasks), episodes=2)
print(json.dumps({"submitted": job_id}), flush=True)
policy = DemoPolicy("scripted", json.loads(scripted))
final = client.serve_policy(job_id, policy, reconnect_s=30.0)
print(json.dumps({"job_id": job_id, "state": final.state, "message": final.message,
                  "episodes": [[e.episode_id, e.task.task_id, e.end_condition] for e in final.episodes],
                  "served": policy.episodes}), flush=True)
"""

PROBE_SCRIPT = """
import sys, time
import rclpy
want, wait_s = sys.argv[1], float(sys.argv[2])
rclpy.init()
node = rclpy.create_node("discovery_probe")
deadline = time.monotonic() + wait_s
seen = []
while time.monotonic() < deadline and not seen:
    rclpy.spin_once(node, timeout_sec=0.1)
    seen = [ns + "/" + n for n, ns in node.get_node_names_and_namespaces() if ns.startswith("/" + want)]
print("SEEN " + ",".join(seen) if seen else "UNSEEN", flush=True)
node.destroy_node()
rclpy.shutdown()
"""


class NetnsStation(LocalStation):
    """The simulated station with every node in the station's namespace."""

    def __init__(self, *args, prefix: list, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.prefix = prefix

    def _node_argv(self, module: str, name: str, params_file: str, overrides: dict) -> list:
        return [*self.prefix, *super()._node_argv(module, name, params_file, overrides)]


def probe(lab: NetnsLab, role: str, namespace: str, wait_s: float) -> str:
    done = subprocess.run([*lab.exec_prefix(role), sys.executable, "-c", PROBE_SCRIPT, namespace, str(wait_s)],
                          capture_output=True, text=True, timeout=wait_s + 60)
    return (done.stdout.strip().splitlines() or [f"no answer: {done.stderr[-500:]}"])[-1]


def test_relay_station_and_team_in_their_own_namespaces_run_a_job_to_succeeded(tmp_path):
    try:
        lab = NetnsLab(f"sr{os.getpid() % 100000}", ["station", "team"])
    except NetnsUnavailable as exc:
        pytest.skip(f"network namespaces cannot be made here: {exc}")
    lines: list = []
    team = None
    pids: list = []
    namespace = f"netns_station_{int(time.time())}"
    stack = NetnsStation(str(tmp_path), namespace=namespace, prefix=lab.exec_prefix("station"),
                         out=lambda name, line: lines.append(f"[{name}] {line}"))
    try:
        relay_for_station, station_ip = lab.addresses["station"]
        relay_for_team, team_ip = lab.addresses["team"]
        stack.write_tokens()
        relay, _ = start_cluster_relay(stack, "relay", RELAY_PORT, f"sqlite:{tmp_path / 'relay.db'}", 3.0,
                                       host="0.0.0.0", argv_prefix=tuple(lab.exec_prefix("relay")))
        station_credentials(stack, [f"{relay_for_station}:{RELAY_PORT}"])
        stack.start_nodes()
        pids = [relay.pid, stack.driver.pid, stack.rollout.pid, stack.station.pid]
        team = subprocess.Popen(
            [*lab.exec_prefix("team"), sys.executable, "-c", TEAM_SCRIPT, f"{relay_for_team}:{RELAY_PORT}",
             stack.client_token, stack.station_id, json.dumps([task("x"), task("y")]), json.dumps(SCRIPTED)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
        pids.append(team.pid)

        # while the job runs: both connect to the relay, from their own addresses
        relay_end = f":{RELAY_PORT}"
        deadline = time.monotonic() + JOB_TIMEOUT_S
        peers: set = set()
        while time.monotonic() < deadline and not {station_ip, team_ip} <= peers and team.poll() is None:
            peers = {host_of(peer) for local, peer in lab.sockets("relay", "state", "established")
                     if local.endswith(relay_end)}
            time.sleep(0.1)
        assert {station_ip, team_ip} <= peers, (peers, team.poll(), "\n".join(lines[-60:]))
        for role, relay_ip in (("station", relay_for_station), ("team", relay_for_team)):
            listening = [local for local, _ in lab.sockets(role, "-l")]
            assert all(is_loopback(local) for local in listening), (role, listening)  # no port off the host
            remote = [peer for _, peer in lab.sockets(role, "state", "established") if not is_loopback(peer)]
            assert remote and all((host_of(peer), peer.rsplit(":", 1)[1]) == (relay_ip, str(RELAY_PORT))
                                  for peer in remote), (role, remote)

        # ROS discovery stays in the station's namespace
        assert probe(lab, "station", namespace, 30.0).startswith("SEEN /" + namespace)
        assert probe(lab, "relay", namespace, 5.0) == "UNSEEN"
        assert probe(lab, "team", namespace, 5.0) == "UNSEEN"

        out, err = team.communicate(timeout=JOB_TIMEOUT_S)
        assert team.returncode == 0, (err[-3000:], "\n".join(lines[-60:]))
        final = json.loads(out.strip().splitlines()[-1])
        assert final["state"] == "SUCCEEDED", (final, "\n".join(lines[-60:]))
        assert [row[1] for row in final["episodes"]] == ["x", "y"]
        assert [row[0] for row in final["episodes"]] == final["served"] == ["ep_0000", "ep_0001"]
    finally:
        if team is not None and team.poll() is None:
            team.kill()
            team.wait(15)
        stack.stop()  # every child by its PID (process group): SIGINT, SIGTERM, SIGKILL
        lab.close()
    assert pids_alive(pids) == [], "processes left running"
    assert not [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                if n.startswith(lab.prefix + "_")], "namespaces left behind"
