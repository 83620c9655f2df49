"""Every free text entering the relay is length-checked where it enters; the relay keeps serving after a refusal.

The relay runs as its own process; the station's link and the client talk to it over gRPC.
"""

from __future__ import annotations

import threading

import grpc
import pytest
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
    yes_no_task,
)

from strands_robots.client import EvaluationClient, InvalidTask, RelayError, pb
from strands_robots.wire.proto import evaluation_service_pb2 as es
from strands_robots.wire.proto import evaluation_service_pb2_grpc as es_grpc
from strands_robots.wire.proto import policy_session_pb2 as ps
from strands_robots.wire.proto import station_service_pb2 as ss
from strands_robots.wire.proto import station_service_pb2_grpc as ss_grpc
from strands_robots.station_link.link import StationLink
from strands_robots.client.policy_spec import MAX_SPEC_JSON
from strands_robots.relay.text_limits import cut_policy_reply, cut_policy_request, snapshot_refusal

MIB = 1024 * 1024
STATION_MD = (("authorization", f"Bearer {STATION_TOKENS['sim_station']}"),)
CLIENT_MD = (("authorization", f"Bearer {CLIENT_TOKENS['team_a']}"),)


@pytest.fixture
def relay_target(tmp_path):
    tokens = write_tokens(tmp_path)
    port = free_port()
    proc = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", tokens, "--poll-s", "0.1")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc)


def test_a_16_mib_cancel_reason_is_refused_clearly_and_the_relay_keeps_serving_the_station(relay_target):
    cancels = []
    link = StationLink(relay_target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.1,
                       on_cancel=lambda job, reason: cancels.append((job, reason))).start()
    try:
        with EvaluationClient(relay_target, token=CLIENT_TOKENS["team_a"]) as client:
            job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
            other = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            # 16 MiB on the wire: past the relay's largest message, refused by gRPC before any handler
            with grpc.insecure_channel(relay_target, options=[("grpc.max_send_message_length", 64 * MIB)]) as ch:
                with pytest.raises(grpc.RpcError) as err:
                    es_grpc.EvaluationStub(ch).CancelJob(es.CancelJobRequest(job_id=job, reason="x" * (16 * MIB)),
                                                         metadata=CLIENT_MD, timeout=30)
                assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "larger than max" in err.value.details()
            # just under the limit: refused by the relay naming the reason's limit
            with pytest.raises(RelayError) as err:
                client.cancel(job, reason="x" * (16 * MIB - 256))
            assert err.value.code == "INVALID_ARGUMENT"
            assert "CancelJob: a CancelJobRequest of" in str(err.value)
            assert "reason at most 1024" in str(err.value)
            with pytest.raises(RelayError) as err:
                client.cancel(job, reason="y" * 1025)
            assert "reason is 1025 characters long; at most 1024 are allowed" in str(err.value)
            assert cancels == []  # nothing reached the station
            # the relay keeps serving: the station reports its other job, heartbeats, and a fair cancel arrives
            link.report(pb.JobStatus(job_id=other, station_id="sim_station", state="RUNNING", episodes_total=1,
                                     updated_unix_ms=5, sequence=1))
            assert link.flush(10)
            assert client.get_status(other).state == "RUNNING"
            assert client.cancel(job, reason="wrong checkpoint") is True
            wait_until(lambda: cancels, what="the cancel on the station")
            assert cancels == [(job, "wrong checkpoint")]
            assert client.get_status(job).HasField("station_last_heard_unix_ms")
    finally:
        link.close()


def test_a_report_with_an_oversized_snapshot_is_invalid_argument_naming_the_field_and_stores_nothing(relay_target):
    with EvaluationClient(relay_target, token=CLIENT_TOKENS["team_a"]) as client, \
            grpc.insecure_channel(relay_target) as channel:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2)
        stub = ss_grpc.StationStub(channel)
        fine = pb.JobStatus(job_id=job, station_id="sim_station", state="RUNNING", episodes_total=2,
                            updated_unix_ms=1, sequence=1, message="ok")
        huge = pb.JobStatus(job_id=job, station_id="sim_station", state="RUNNING", episodes_total=2,
                            updated_unix_ms=2, sequence=2, message="m" * 3000)
        with pytest.raises(grpc.RpcError) as err:
            stub.ReportStatus(ss.ReportStatusRequest(snapshots=[fine, huge]), metadata=STATION_MD, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details() == (f"snapshots[1] (job '{job}'): message is 3000 characters long; at most 2048 "
                                       f"are allowed; nothing of this report was stored")
        assert client.get_status(job).state == "CREATED"
        detail = pb.JobStatus(job_id=job, station_id="sim_station", state="RUNNING", episodes_total=2,
                              updated_unix_ms=3, sequence=3)
        detail.episodes.add(episode_id="ep_0000", end_condition=pb.END_SAFETY_STOP, end_detail="d" * 5000)
        with pytest.raises(grpc.RpcError) as err:
            stub.ReportStatus(ss.ReportStatusRequest(snapshots=[detail]), metadata=STATION_MD, timeout=10)
        assert "episodes[0].end_detail is 5000 characters long; at most 2048" in err.value.details()
        # the same report without it goes through
        assert stub.ReportStatus(ss.ReportStatusRequest(snapshots=[fine]), metadata=STATION_MD, timeout=10).stored == 1
        assert client.get_status(job).message == "ok"


def test_ids_over_their_limit_are_refused_where_they_enter(relay_target):
    with EvaluationClient(relay_target, token=CLIENT_TOKENS["team_a"]) as client:
        with pytest.raises(RelayError, match="job_id is 200 characters long; at most 128 are allowed"):
            client.get_status("j" * 200)
        with pytest.raises(InvalidTask, match="station_id is 300 characters long; at most 128"):
            client.submit_job(station_id="s" * 300, tasks=[yes_no_task()], episodes=1)
        with pytest.raises(RelayError, match="attach.job_id is 129 characters long"):
            client.serve_policy("k" * 129, object(), reconnect_s=0)


def test_a_policy_declaring_100000_keys_is_refused_at_its_attach_naming_the_field(relay_target):
    with EvaluationClient(relay_target, token=CLIENT_TOKENS["team_a"]) as client, \
            grpc.insecure_channel(relay_target) as channel:
        job = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        stub = es_grpc.EvaluationStub(channel)
        for spec, words in ((ps.PolicySpec(action_keys=[f"k{i}" for i in range(100_000)]),
                             "attach.spec: policy spec: action_keys has 100000 entries; at most 256 are allowed"),
                            (ps.PolicySpec(source="s" * 4_000_000),
                             "attach.spec: policy spec: source is 4000000 characters long; at most 1024")):
            attach = ps.PolicyReply(attach=ps.SessionAttach(job_id=job, spec=spec))  # past the client's own check
            with pytest.raises(grpc.RpcError) as err:
                list(stub.ServePolicy(iter([attach]), metadata=CLIENT_MD, timeout=30))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert words in err.value.details()
        fine = ps.PolicyReply(attach=ps.SessionAttach(job_id=job, spec=ps.PolicySpec(action_keys=["right.joint_1"])))
        link = StationLink(relay_target, "sim_station", STATION_TOKENS["sim_station"])
        session = link.open_session(job)
        done = threading.Event()

        def replies():  # the client's stream stays open until the test ends it
            yield fine
            done.wait(30)

        call = stub.ServePolicy(replies(), metadata=CLIENT_MD, timeout=30)
        try:
            assert session.wait_attached(timeout_s=20.0)  # a spec within the limits attaches
            assert list(session.policy_spec.action_keys) == ["right.joint_1"]
        finally:
            done.set()
            call.cancel()
            session.close()
            link.close()


def test_snapshot_refusal_names_each_text_field_and_passes_a_snapshot_that_fits():
    ok = pb.JobStatus(job_id="j", station_id="s", state="RUNNING", message="m" * 2048)
    ok.episodes.add(episode_id="ep_0000", end_detail="d" * 2048, task=pb.Task(task_id="t", instruction="i" * 4096))
    assert snapshot_refusal(ok) == ""
    bad = pb.JobStatus()
    bad.CopyFrom(ok)
    bad.episodes[0].task.parameters["seed"] = "9" * 2000
    assert snapshot_refusal(bad) == ("episodes[0].task.parameters['seed'] is 2000 characters long; at most 1024 are "
                                     "allowed")
    bad.CopyFrom(ok)
    bad.episodes[0].task.instruction = "i" * 4097
    assert snapshot_refusal(bad).startswith("episodes[0].task.instruction is 4097 characters long")
    bad.CopyFrom(ok)
    bad.provenance.slot_specs.add(slot="vision", policy_spec_json="{}")
    bad.provenance.slot_specs.add(slot="theirs", policy_spec_json="{" + " " * MAX_SPEC_JSON + "}")
    assert snapshot_refusal(bad).startswith(f"provenance.slot_specs[1].policy_spec_json is {MAX_SPEC_JSON + 2} "
                                            f"characters long")
    bad.CopyFrom(ok)
    for n in range(9):
        bad.provenance.slot_specs.add(slot=f"s{n}")
    assert snapshot_refusal(bad) == ("provenance.slot_specs: 9 slots, more than a comparison has (at most 8)")


def test_policy_session_texts_are_cut_with_a_marker_never_refused():
    reply = cut_policy_reply(ps.PolicyReply(request_id=3, error=ps.PolicyError(type="E" * 500, message="x" * 100_000)))
    assert len(reply.error.message) <= 2048 and reply.error.message.endswith("characters cut]")
    assert len(reply.error.type) <= 128
    ended = cut_policy_reply(ps.PolicyReply(request_id=4, end_episode=ps.EndEpisode(reason="r" * 5000)))
    assert 2000 < len(ended.end_episode.reason) <= 2048
    request = cut_policy_request(ps.PolicyRequest(episode_end=ps.EpisodeEnd(episode_id="ep_0001",
                                                                            end_detail="d" * 9000)))
    assert request.episode_end.episode_id == "ep_0001"
    assert 2000 < len(request.episode_end.end_detail) <= 2048
    small = ps.PolicyReply(request_id=5, error=ps.PolicyError(type="ValueError", message="bad key"))
    assert cut_policy_reply(small).error.message == "bad key"
