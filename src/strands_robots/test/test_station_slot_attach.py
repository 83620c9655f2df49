"""The station node's wait for a comparison's slots over a real relay: what it keeps of each slot, what it says.

``StationPolicyCalls.wait_for_policy`` (the station node's own code, on a real ``StationLink`` to an in-process
relay, each slot served by a real client): every slot's declared spec is kept for the compatibility gate by its
slot, and the status it words for the operator names no slot (the labels are blind until the job ends).
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("grpc", reason="grpcio is not installed")
pytest.importorskip("strands_robots_msgs.srv", reason="strands_robots_msgs is not built (colcon build)")

from test_relay_comparison_slots import Offset, _comparison, _link  # noqa: E402
from test_relay_harness import CLIENT_TOKENS, running_relay, serve_slot  # noqa: E402

from strands_robots.client import EvaluationClient  # noqa: E402
from strands_robots.client.policy_spec import PolicySpec  # noqa: E402
from strands_robots.nodes.station.policy import RelaySettings, StationPolicyCalls  # noqa: E402
from strands_robots.nodes.station.preflight import StationPreflightCalls  # noqa: E402
from strands_robots.station.job_file import job_spec_from_mapping  # noqa: E402
from strands_robots.wire.proto import evaluation_pb2 as pb  # noqa: E402

SHEET = [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1, "success_answer": "yes"}]


class Declares(Offset):
    """A slot's policy that declares what it commands."""

    def spec(self):
        return PolicySpec(action_keys=("right.joint_9",), source="declares right.joint_9")


class StationSide(StationPolicyCalls, StationPreflightCalls):
    """The station node's policy calls on a real link (no ROS node: nothing here logs or calls a service)."""

    def __init__(self, link, target):
        self._link = link
        self._relay = RelaySettings(target, "sim_station", "", attach_timeout_s=10.0)
        self._declared: dict = {}
        self._declared_slots: dict = {}
        self._init_preflight(None, "")


def test_the_wait_keeps_each_slots_declared_spec_and_its_words_name_no_slot(tmp_path):
    with running_relay(tmp_path) as relay, EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job_id = _comparison(relay, client)
        served = {"vision": serve_slot(client, job_id, Offset(1.0), "vision"),
                  "blind": serve_slot(client, job_id, Declares(2.0), "blind")}
        spec = job_spec_from_mapping({
            "job_id": job_id, "client_id": "team_a", "station_id": "sim_station", "episodes_total": 4,
            "policy": {"provider": "relay"}, "compare": {"slots": ["vision", "blind"], "suite": "demo"},
            "tasks": [{"task_id": "reach_cube", "instruction": "reach", "scoring": SHEET,
                       "parameters": {"seed": str(i)}} for i in range(2)]})
        link = _link(relay)
        side = StationSide(link, relay.target)
        try:
            ready, words = side.wait_for_policy(spec, threading.Event())
            assert ready, words
            assert words == f"the policy clients of 2 slots attached through {relay.target}"
            specs = side.attached_slot_specs(spec)
            assert set(specs) == {"vision", "blind"} and specs["vision"] is None
            assert specs["blind"].action_keys == ("right.joint_9",)  # the second slot's own, for the gate
            assert side.attached_policy_spec(spec) is None  # the first slot's (provenance)
        finally:
            for session in (side._preflight_sessions.pop(job_id, None) or {}).values():
                session.close()
            link.report(pb.JobStatus(job_id=job_id, station_id="sim_station", state="CANCELLED", episodes_total=4,
                                     sequence=1, updated_unix_ms=1))  # the job's end reaches each slot's client
            link.flush(10)
            link.close()
            for out in served.values():
                out["thread"].join(10.0)
    assert {slot: out["final"].state for slot, out in served.items()} == {"vision": "CANCELLED", "blind": "CANCELLED"}
