"""The station node's submit_job refuses a bad job with the validation module's reason, over DDS.

The fourth caller of ``strands_robots.validation``: a client node calls the station node's ``submit_job``
service with the late-limit and typo jobs of test_job_validation_relay.py; each is refused before it is queued
with ``tasks[1].<key>: <the module's reason>``, the same words the relay and ``Station.submit`` answer.
"""

from __future__ import annotations

import threading
import uuid

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy is not importable; source scripts/env.sh")
pytest.importorskip("strands_robots_msgs.srv", reason="strands_robots_msgs is not built (colcon build)")

from rclpy.context import Context  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from ros_harness import NodeSpinners  # noqa: E402
from strands_robots_msgs.srv import SubmitJob  # noqa: E402
from test_job_validation_relay import BAD_JOBS, IDS, STATION_ONLY, job_tasks, module_reason  # noqa: E402

from strands_robots.conversions.station import station_task_to_msg  # noqa: E402
from strands_robots.station.job_file import task_from_mapping  # noqa: E402


@pytest.fixture(scope="module")
def station_node(tmp_path_factory):
    """Yield (client node, state dir) beside a station node of its own (no driver or rollout: nothing runs)."""
    from strands_robots.nodes.station.node import StationNode

    context = Context()
    rclpy.init(context=context)
    spinners = NodeSpinners(context)
    nodes = []
    namespace = f"/validation_{uuid.uuid4().hex[:8]}"
    try:
        state = tmp_path_factory.mktemp("station_state")
        station = StationNode(context=context, namespace=namespace,
                              parameter_overrides=[Parameter("state_dir", value=str(state)),
                                                   Parameter("allow_free_form_tasks", value=True)])
        nodes.append(station)
        spinners.add(station)
        client = rclpy.create_node("validation_client", namespace=namespace, context=context)
        nodes.append(client)
        spinners.add(client)
        yield client, state
    finally:
        for node in nodes:
            close = getattr(node, "close", None)
            if close is not None:
                close()
        spinners.shutdown()
        for node in reversed(nodes):
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def call(node, srv_type, name, timeout_s=20.0, **fields):
    client = node.create_client(srv_type, name)
    try:
        assert client.wait_for_service(timeout_sec=timeout_s), f"{name} not available"
        request = srv_type.Request()
        for key, value in fields.items():
            setattr(request, key, value)
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), f"{name}: no answer within {timeout_s} s"
        return future.result()
    finally:
        node.destroy_client(client)


@pytest.mark.parametrize("parameters, key, allowed", BAD_JOBS, ids=IDS)
def test_the_station_nodes_submit_job_refuses_with_the_modules_reason(station_node, parameters, key, allowed):
    field, reason = module_reason(parameters)
    tasks = [station_task_to_msg(task_from_mapping(t, i)) for i, t in enumerate(job_tasks(parameters))]
    res = call(station_node[0], SubmitJob, "submit_job", client_id="team_a", tasks=tasks, episodes_total=2,
               policy_provider="relay", policy_config_json="")
    assert not res.accepted and res.job_id == ""
    if key in STATION_ONLY:  # a job never sets it: the station's suite files do
        assert f"{key!r} refused: " in res.message and "tasks[1]" in res.message, res.message
    else:
        assert res.message == f"tasks[1].{field}: {reason}" and allowed in res.message


def test_a_job_the_station_node_refused_was_never_persisted(station_node):
    client, state = station_node
    tasks = [station_task_to_msg(task_from_mapping(t, i))
             for i, t in enumerate(job_tasks({"duraton_s": "3"}))]
    res = call(client, SubmitJob, "submit_job", client_id="team_a", tasks=tasks, episodes_total=2,
               policy_provider="relay", policy_config_json="")
    assert not res.accepted and "duraton_s" in res.message
    assert [p for p in state.rglob("*") if p.is_file()] == []  # the station persists a job before accepting it
