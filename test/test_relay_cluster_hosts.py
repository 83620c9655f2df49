"""System test: two relays of one cluster on two hosts (network namespaces); a team's token never crosses in plaintext.

Host A (the lab's ``relay`` namespace, 10.245.1.1) runs PostgreSQL, relay A and the station's side of the policy
session; host B (``b``, 10.245.1.2) runs relay B and the team, which submits and serves its policy on B. The
station opens the session first, so A is the session's home and B must forward the team's stream (carrying the
team's bearer token) to A. Without TLS, B refuses (FAILED_PRECONDITION, naming the rule) and no session runs; with
both relays on TLS (one certificate for both addresses, each trusting it for the other) the same session runs
across the hosts. Skips with the reason where namespaces cannot be made; every process is ended by PID and every
namespace deleted, even on failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("psycopg", reason="psycopg is not installed")
pytest.importorskip("grpc", reason="grpcio is not installed")

from netns_harness import NetnsLab, NetnsUnavailable  # noqa: E402
from test_relay_harness import (  # noqa: E402
    CLIENT_TOKENS,
    STATION_TOKENS,
    postgres_server,
    relay_env,
    self_signed_cert,
    stop_process,
    write_tokens,
    yes_no_task,
)

RELAY_PORT = 50051  # each host is a namespace of its own: nothing else holds the port there
STALE_S = 1.0

STATION_SIDE = """
import json, sys, time
from strands_robots.client import pb
from strands_robots.relay.postgres_store import PostgresStore
from strands_robots.station_link.link import StationLink
target, token, job_id, store_url, root, attach_s = sys.argv[1:7]
link = StationLink(target, "sim_station", token, heartbeat_s=0.1, root_certificates=root or None).start()
store = PostgresStore(store_url, pool_size=1)
try:
    session = link.open_session(job_id)
    deadline = time.monotonic() + 30
    while store.session_home(job_id) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"home": store.session_home(job_id).relay_id}), flush=True)
    try:
        session.wait_attached(float(attach_s))
        session.start_episode("ep_0000", pb.Task(task_id="pick", instruction="pick"), action_keys=["right.joint_4"])
        chunks = [session.act({"x": float(i)}) for i in range(3)]
        session.end_episode("ep_0000", "timeout")
        link.report(pb.JobStatus(job_id=job_id, station_id="sim_station", state="SUCCEEDED", episodes_total=1,
                                 sequence=9, updated_unix_ms=1,
                                 episodes=[pb.EpisodeResult(episode_id="ep_0000", end_condition="timeout")]))
        link.flush(10)
        print(json.dumps({"chunks": chunks, "home": store.session_home(job_id).relay_id}), flush=True)
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
    session.close()
finally:
    store.close()
    link.close()
"""

TEAM_SIDE = """
import json, sys
from strands_robots.client import EvaluationClient, Policy
class Plus(Policy):
    def reset(self, task):
        pass
    def act(self, observation):
        return [{"right.joint_4": observation["x"] + 1.0}]
target, token, root, task = sys.argv[1:5]
client = EvaluationClient(target, token=token, root_certificates=root or None)
job_id = client.submit_job(station_id="sim_station", tasks=[json.loads(task)], episodes=1)
print(json.dumps({"job_id": job_id}), flush=True)
sys.stdin.readline()  # the station's side opened first: its relay is the home
try:
    final = client.serve_policy(job_id, Plus())
    print(json.dumps({"state": final.state}), flush=True)
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "code": getattr(exc, "code", ""), "message": str(exc)}),
          flush=True)
"""


class Proc:
    """A process in a namespace; its output lines read on a thread."""

    def __init__(self, argv: list, stdin: bool = False) -> None:
        self.proc = subprocess.Popen(argv, env=relay_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, text=True)
        self.lines: list = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, predicate, timeout_s: float, what: str) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            exited = self.proc.poll() is not None
            found = next((line for line in list(self.lines) if predicate(line)), None)
            if found is not None:
                return found
            if exited:  # every line it wrote was read before the poll said it ended
                self._reader.join(5)
                found = next((line for line in list(self.lines) if predicate(line)), None)
                if found is not None:
                    return found
                break
            time.sleep(0.05)
        raise AssertionError(f"{what}: not seen within {timeout_s} s (exit {self.proc.poll()}):\n"
                             + "\n".join(self.lines[-40:]))

    def json_line(self, key: str, timeout_s: float) -> dict:
        line = self.wait_line(lambda ln: ln.startswith("{") and key in json.loads(ln), timeout_s, f"a line with {key}")
        return json.loads(line)

    def stop(self) -> None:
        stop_process(self.proc)
        self._reader.join(15)


def _relay(lab: NetnsLab, role: str, address: str, store_url: str, tokens, tls) -> Proc:
    extra = ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])] if tls else []
    relay = Proc([*lab.exec_prefix(role), sys.executable, "-m", "strands_robots.relay", "--listen",
                  f"{address}:{RELAY_PORT}", "--advertise", f"{address}:{RELAY_PORT}", "--store", store_url,
                  "--tokens", str(tokens), "--poll-s", "0.05", "--cluster-stale-s", str(STALE_S), *extra])
    relay.wait_line(lambda ln: " in the cluster on " in ln, 60, f"relay on {address} joining the cluster")
    return relay


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_a_forward_between_hosts_carries_a_token_only_over_tls(tmp_path, tls):
    try:
        lab = NetnsLab(f"rh{os.getpid() % 100000}", ["b"])
    except NetnsUnavailable as exc:
        pytest.skip(f"network namespaces cannot be made here: {exc}")
    host_a, host_b = lab.addresses["b"]  # A: the hub's end (10.245.1.1); B: the peer's (10.245.1.2)
    procs: list = []
    try:
        with postgres_server(listen=host_a, argv_prefix=tuple(lab.exec_prefix("relay")),
                             allow_from="10.245.0.0/16") as store_url:
            tokens = write_tokens(tmp_path)
            cert = key = None
            if tls:
                cert, key = self_signed_cert(tmp_path, ips=(host_a, host_b))  # both relays' addresses
            relay_a = _relay(lab, "relay", host_a, store_url, tokens, (cert, key) if tls else None)
            procs.append(relay_a)
            relay_b = _relay(lab, "b", host_b, store_url, tokens, (cert, key) if tls else None)
            procs.append(relay_b)
            plaintext_warned = [ln for ln in relay_b.lines if "without TLS: policy sessions whose two sides" in ln]
            assert bool(plaintext_warned) is not tls, relay_b.lines

            root = str(cert) if tls else ""
            team = Proc([*lab.exec_prefix("b"), sys.executable, "-c", TEAM_SIDE, f"{host_b}:{RELAY_PORT}",
                         CLIENT_TOKENS["team_a"], root, json.dumps(yes_no_task())], stdin=True)
            procs.append(team)
            job_id = team.json_line("job_id", 60)["job_id"]
            station = Proc([*lab.exec_prefix("relay"), sys.executable, "-c", STATION_SIDE, f"{host_a}:{RELAY_PORT}",
                            STATION_TOKENS["sim_station"], job_id, store_url, root, "30" if tls else "5"])
            procs.append(station)
            home = station.json_line("home", 60)["home"]
            relay_a_id = relay_a.wait_line(lambda ln: " in the cluster on " in ln, 1, "A's id").split("relay ", 2)[-1]
            assert home == relay_a_id.split(" ", 1)[0]  # the station's relay (A) is the home: B must forward
            team.proc.stdin.write("serve\n")
            team.proc.stdin.flush()
            served = team.json_line("state" if tls else "error", 60)
            ended = station.json_line("chunks" if tls else "error", 60)
            if tls:
                assert served == {"state": "SUCCEEDED"}, team.lines
                assert ended["chunks"] == [[{"right.joint_4": float(i) + 1.0}] for i in range(3)]
                assert ended["home"] == home  # served across the hosts, A the home throughout
            else:
                assert served["code"] == "FAILED_PRECONDITION", served
                assert served["message"] == (
                    f"the policy session of job {job_id!r} cannot be forwarded to its home: the home relay "
                    f"{host_a}:{RELAY_PORT} is on another host and this relay has no TLS: forwarding would send the "
                    f"side's token there in plaintext, so it is refused; give every relay of the cluster "
                    f"--tls-cert and --tls-key (they trust their own certificate chain for each other), or keep "
                    f"the cluster on one host")
                assert ended["error"] in ("PolicySessionError", "PolicyDisconnected"), ended  # no session ran
                assert any("relay refused Evaluation.ServePolicy" in ln and "plaintext" in ln
                           for ln in relay_b.lines), relay_b.lines
            for relay in (relay_a, relay_b):
                assert not any("Traceback" in ln for ln in relay.lines), relay.lines
            for proc in reversed(procs):
                proc.stop()
    finally:
        for proc in reversed(procs):
            proc.stop()
        lab.close()
    assert all(p.proc.poll() is not None for p in procs), "processes left running"
    assert not [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                if n.startswith(lab.prefix + "_")], "namespaces left behind"
