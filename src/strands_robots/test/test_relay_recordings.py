"""Episode recordings to the team through a real relay process: byte for byte, only to the owner, bounded, hashed.

The station's side is the station link's uploader (station_link/recording_upload.py) with the station's token; the
team's side is the Evaluation Client and ``strands-robots job recordings``. The recordings are real MCAP files
(written with the mcap library, several chunks long).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from strands_robots.client import EvaluationClient, NotFound, RecordingCorrupt, RecordingRefused
from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.wire.proto import station_service_pb2 as ss
from strands_robots.wire.proto import station_service_pb2_grpc as ss_grpc
from strands_robots.station_link.recording_upload import RecordingUploader, chunks, file_digest, upload
from strands_robots.station_link.link import StationLink
from test_relay_harness import (
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    relay_env,
    start_relay_process,
    stop_process,
    write_tokens,
    yes_no_task,
)

STATION = STATION_TOKENS["sim_station"]
META = (("authorization", f"Bearer {STATION}"),)


def write_mcap(path: Path, payload_bytes: int, seed: int = 0) -> Path:
    """Write a real MCAP file whose messages carry ``payload_bytes`` of pseudo-random bytes in all."""
    from mcap.writer import Writer

    rng = hashlib.sha256(str(seed).encode())
    with open(path, "wb") as f:
        writer = Writer(f)
        writer.start(profile="", library="test")
        schema = writer.register_schema(name="blob", encoding="", data=b"")
        channel = writer.register_channel(topic="/blob", message_encoding="raw", schema_id=schema)
        sent, n = 0, 0
        while sent < payload_bytes:
            block = b"".join(hashlib.sha256(rng.digest() + n.to_bytes(8, "big") + bytes([k])).digest()
                             for k in range(256))[: min(8192, payload_bytes - sent)]
            writer.add_message(channel, log_time=n, publish_time=n, data=block)
            sent += len(block)
            n += 1
        writer.finish()
    return path


@pytest.fixture
def relay(tmp_path):
    port = free_port()
    proc = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", write_tokens(tmp_path),
                               "--max-recording-bytes", str(3 * 1024 * 1024), "--poll-s", "0.1")
    try:
        yield type("Relay", (), {"target": f"127.0.0.1:{port}", "db": tmp_path / "relay.db", "proc": proc})
    finally:
        stop_process(proc)


def _station_job(client: EvaluationClient, job_id: str) -> str:
    """Submit a job for sim_station and return its station-side id (what the station's job stream says)."""
    client.submit_job("sim_station", [yes_no_task()], episodes=2, job_id=job_id)
    return job_id  # the first job of this name: the relay keeps the client's id on the station side


def _report_episode(channel, job_id: str, episode_id: str, sha256: str) -> None:
    stub = ss_grpc.StationStub(channel)
    status = ev.JobStatus(job_id=job_id, station_id="sim_station", state="RUNNING", episodes_total=2,
                          updated_unix_ms=int(time.time() * 1000), sequence=1,
                          episodes=[ev.EpisodeResult(episode_id=episode_id, end_condition="timeout",
                                                     recording_sha256=sha256)])
    response = stub.ReportStatus(ss.ReportStatusRequest(station_id="sim_station", snapshots=[status]),
                                 metadata=META, timeout=10)
    assert response.stored == 1, response


def test_the_owner_downloads_the_stations_recording_byte_for_byte(relay, tmp_path):
    recording = write_mcap(tmp_path / "episode_0000_abcd1234.mcap", 2_500_000)  # three 1 MiB chunks
    original = recording.read_bytes()
    with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job = _station_job(client, "rec-1")
        link = StationLink(relay.target, "sim_station", STATION)
        try:
            with grpc.insecure_channel(relay.target) as channel:
                _report_episode(channel, job, "ep_0000", hashlib.sha256(original).hexdigest())
            link.upload_recording(job, "ep_0000", recording)  # the station's hook after the episode
            assert link.uploader.wait_idle(60)
            assert [r.ok for r in link.uploader.results] == [True], link.uploader.results
        finally:
            link.close()
        infos = client.list_recordings("rec-1")
        assert [(i.episode_id, i.size_bytes, i.sha256, i.file_name, i.refused) for i in infos] == [
            ("ep_0000", len(original), hashlib.sha256(original).hexdigest(), recording.name, "")]
        out = tmp_path / "home"
        out.mkdir()
        done = client.download_recording("rec-1", "ep_0000", out)
        assert done.path == out / "ep_0000.mcap"
        assert done.path.read_bytes() == original
        assert done.size_bytes == len(original) and done.sha256 == hashlib.sha256(original).hexdigest()
        assert not list(out.glob("*.part"))
        from mcap.reader import make_reader

        with open(done.path, "rb") as f:
            assert sum(1 for _ in make_reader(f).iter_messages()) == -(-2_500_000 // 8192)

    # a retry of the same recording is answered without rewriting it
    with grpc.insecure_channel(relay.target) as channel:
        again = upload(ss_grpc.StationStub(channel), META, job, "ep_0000", recording, timeout_s=30)
    assert again.already_stored

    # the command line: every recording of the job into DIR
    token_file = tmp_path / "team_a.token"
    token_file.write_text(CLIENT_TOKENS["team_a"])
    token_file.chmod(0o600)
    cli_out = tmp_path / "cli"
    run = subprocess.run([sys.executable, "-m", "strands_robots.client.cli.job", "recordings", "--relay", relay.target,
                          "--token-file", str(token_file), "rec-1", "-o", str(cli_out)],
                         env=relay_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (cli_out / "ep_0000.mcap").read_bytes() == original
    assert f"ep_0000: {cli_out / 'ep_0000.mcap'} ({len(original)} bytes" in run.stdout


def test_another_team_is_refused_exactly_like_an_unknown_job(relay, tmp_path):
    recording = write_mcap(tmp_path / "r.mcap", 300_000)
    with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as owner:
        job = _station_job(owner, "secret-job")
    with grpc.insecure_channel(relay.target) as channel:
        assert not upload(ss_grpc.StationStub(channel), META, job, "ep_0000", recording, timeout_s=30).already_stored
    out = tmp_path / "b"
    out.mkdir()
    with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_b"]) as other:
        with pytest.raises(NotFound) as theirs:
            other.download_recording("secret-job", "ep_0000", out)
        with pytest.raises(NotFound) as unknown:
            other.download_recording("never-was", "ep_0000", out)
        with pytest.raises(NotFound) as listed:
            other.list_recordings("secret-job")
        # the raw stream too (no get_status first): same code, same words with the id swapped
        stub_err = []
        for job_id in ("secret-job", "never-was"):
            with pytest.raises(NotFound) as raw:
                from strands_robots.client import recordings

                recordings.download(other._stub, other._metadata, job_id, "ep_0000", out / "x.mcap")
            stub_err.append(str(raw.value))
    assert str(theirs.value).replace("secret-job", "ID") == str(unknown.value).replace("never-was", "ID")
    assert str(listed.value) == str(theirs.value)
    assert stub_err[0].replace("secret-job", "ID") == stub_err[1].replace("never-was", "ID")
    assert "secret" not in str(unknown.value) and "team_a" not in str(theirs.value)
    assert list(out.iterdir()) == []  # nothing written for the refused team


def test_an_oversize_recording_is_refused_with_a_clear_error_and_the_team_is_told_why(relay, tmp_path):
    big = write_mcap(tmp_path / "big.mcap", 3 * 1024 * 1024 + 10_000)  # past --max-recording-bytes 3 MiB
    with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job = _station_job(client, "big-job")
        with grpc.insecure_channel(relay.target) as channel:
            with pytest.raises(grpc.RpcError) as err:
                upload(ss_grpc.StationStub(channel), META, job, "ep_0000", big, timeout_s=30)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        size = big.stat().st_size
        assert (f"the recording of episode 'ep_0000' ({size} bytes) is larger than this relay's max_recording_bytes "
                f"({3 * 1024 * 1024})") in err.value.details()
        [info] = client.list_recordings("big-job")
        assert info.refused == err.value.details()
        with pytest.raises(RecordingRefused, match="max_recording_bytes"):
            client.download_recording("big-job", "ep_0000", tmp_path / "big-home.mcap")
        assert not (tmp_path / "big-home.mcap").exists()

        # the client's own bound, before a byte is written
        small = write_mcap(tmp_path / "small.mcap", 200_000)
        with grpc.insecure_channel(relay.target) as channel:
            upload(ss_grpc.StationStub(channel), META, job, "ep_0001", small, timeout_s=30)
        with pytest.raises(RecordingRefused, match=r"larger than max_bytes \(1000\)"):
            client.download_recording("big-job", "ep_0001", tmp_path / "s.mcap", max_bytes=1000)
        assert not (tmp_path / "s.mcap").exists() and not (tmp_path / "s.mcap.part").exists()

    # the station's uploader gives up on it at once (not retried) and says why
    with grpc.insecure_channel(relay.target) as channel:
        uploader = RecordingUploader(ss_grpc.StationStub(channel), META)
        uploader.submit(job, "ep_0000", big)
        assert uploader.wait_idle(30)
        uploader.close()
    [result] = uploader.results
    assert (result.ok, result.code, result.attempts) == (False, "RESOURCE_EXHAUSTED", 1)
    assert "max_recording_bytes" in result.reason


def _chunk_rows(db: Path, job: str) -> list:
    with sqlite3.connect(db, timeout=30) as conn:
        return conn.execute("SELECT seq, length(data) FROM recording_chunks WHERE job_id = ? ORDER BY seq",
                            (job,)).fetchall()


def test_a_corrupted_or_truncated_transfer_is_detected_by_the_hash_and_leaves_no_file(relay, tmp_path):
    recording = write_mcap(tmp_path / "r.mcap", 2_200_000)
    original = recording.read_bytes()
    with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job = _station_job(client, "hash-job")
        with grpc.insecure_channel(relay.target) as channel:
            stub = ss_grpc.StationStub(channel)
            upload(stub, META, job, "ep_0000", recording, timeout_s=30)
            upload(stub, META, job, "ep_0001", recording, timeout_s=30)
        rows = _chunk_rows(relay.db, job)
        assert len(rows) == 6  # 3 chunks each

        # one byte changed where the relay keeps it: the download's SHA-256 says so, no file is kept
        with sqlite3.connect(relay.db, timeout=30) as conn:
            data = conn.execute("SELECT data FROM recording_chunks WHERE job_id = ? AND episode_id = 'ep_0000' "
                                "AND seq = 1", (job,)).fetchone()[0]
            flipped = bytes([data[0] ^ 0x01]) + data[1:]
            conn.execute("UPDATE recording_chunks SET data = ? WHERE job_id = ? AND episode_id = 'ep_0000' AND "
                         "seq = 1", (flipped, job))
        target = tmp_path / "ep0.mcap"
        with pytest.raises(RecordingCorrupt, match="is corrupt: its SHA-256 is [0-9a-f]{64}, the station's is "
                                                   + hashlib.sha256(original).hexdigest()):
            client.download_recording("hash-job", "ep_0000", target)
        assert not target.exists() and not Path(str(target) + ".part").exists()

        # the last chunk gone: the stream ends short and the client says so
        with sqlite3.connect(relay.db, timeout=30) as conn:
            conn.execute("DELETE FROM recording_chunks WHERE job_id = ? AND episode_id = 'ep_0001' AND seq = 2",
                         (job,))
        with pytest.raises(RecordingCorrupt, match=f"cut short: {2 * 1024 * 1024} of {len(original)} bytes"):
            client.download_recording("hash-job", "ep_0001", tmp_path / "ep1.mcap")
        assert not (tmp_path / "ep1.mcap").exists()

        # the relay's copy intact but not the one the station reported in the episode's result: refused too
        with grpc.insecure_channel(relay.target) as channel:
            upload(ss_grpc.StationStub(channel), META, job, "ep_0001", recording, timeout_s=30)
            _report_episode(channel, job, "ep_0001", "0" * 64)
        with pytest.raises(RecordingCorrupt, match="not the one the station reported"):
            client.download_recording("hash-job", "ep_0001", tmp_path / "ep1.mcap")
        assert not (tmp_path / "ep1.mcap").exists()


def test_an_upload_whose_bytes_do_not_match_its_header_is_refused_and_not_kept(relay, tmp_path):
    recording = write_mcap(tmp_path / "r.mcap", 1_500_000)
    size, sha = file_digest(recording)
    with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job = _station_job(client, "bad-upload")
        with grpc.insecure_channel(relay.target) as channel:
            stub = ss_grpc.StationStub(channel)
            with pytest.raises(grpc.RpcError) as wrong_hash:
                stub.UploadRecording(chunks(job, "ep_0000", recording, size, "f" * 64), metadata=META, timeout=30)
            messages = list(chunks(job, "ep_0001", recording, size, sha))
            with pytest.raises(grpc.RpcError) as cut:
                stub.UploadRecording(iter(messages[:-1]), metadata=META, timeout=30)  # the stream ends early
            other = (("authorization", f"Bearer {STATION_TOKENS['other_station']}"),)
            with pytest.raises(grpc.RpcError) as not_theirs:
                stub.UploadRecording(chunks(job, "ep_0002", recording, size, sha), metadata=other, timeout=30)
        assert wrong_hash.value.code() == grpc.StatusCode.DATA_LOSS
        assert f"is not the header's {'f' * 64}" in wrong_hash.value.details()
        assert cut.value.code() == grpc.StatusCode.DATA_LOSS
        assert "the upload was cut short" in cut.value.details()
        assert not_theirs.value.code() == grpc.StatusCode.NOT_FOUND
        assert _chunk_rows(relay.db, job) == []  # nothing of a refused upload is kept
        infos = {i.episode_id: i.refused for i in client.list_recordings("bad-upload")}
        assert set(infos) == {"ep_0000", "ep_0001"} and all(infos.values())
        with pytest.raises(RecordingRefused, match="not stored"):
            client.download_recording("bad-upload", "ep_0000", tmp_path / "x.mcap")
    assert os.listdir(tmp_path).count("x.mcap") == 0


def test_two_relays_on_one_postgresql_serve_every_recording_and_listing(tmp_path):
    """Uploaded through relay A, downloaded (and the job listed) through relay B: the bytes live in the store."""
    from test_relay_harness import postgres_server

    with postgres_server() as url:
        tokens = write_tokens(tmp_path)
        port_a, port_b = free_port(), free_port()
        a = b = None
        try:
            a = start_relay_process(port_a, url, tokens)
            b = start_relay_process(port_b, url, tokens)
            recording = write_mcap(tmp_path / "r.mcap", 1_800_000)
            with EvaluationClient(f"127.0.0.1:{port_a}", token=CLIENT_TOKENS["team_a"]) as via_a:
                job = _station_job(via_a, "pg-job")
            with grpc.insecure_channel(f"127.0.0.1:{port_a}") as channel:
                assert not upload(ss_grpc.StationStub(channel), META, job, "ep_0000", recording,
                                  timeout_s=60).already_stored
            with EvaluationClient(f"127.0.0.1:{port_b}", token=CLIENT_TOKENS["team_a"]) as via_b:
                done = via_b.download_recording("pg-job", "ep_0000", tmp_path / "home.mcap")
                assert done.path.read_bytes() == recording.read_bytes()
                assert [j.job_id for j in via_b.list_jobs().jobs] == ["pg-job"]
            with EvaluationClient(f"127.0.0.1:{port_b}", token=CLIENT_TOKENS["team_b"]) as other:
                with pytest.raises(NotFound, match="no job 'pg-job' for this client"):
                    other.download_recording("pg-job", "ep_0000", tmp_path / "theirs.mcap")
                assert list(other.list_jobs().jobs) == []

            # the same episode uploaded through both relays at once (a retry after a failover): stored once,
            # whole; the one that lost the race is told ABORTED and its uploader tries again
            second = write_mcap(tmp_path / "r2.mcap", 3_000_000, seed=1)
            channels = [grpc.insecure_channel(f"127.0.0.1:{p}") for p in (port_a, port_b)]
            try:
                uploaders = [RecordingUploader(ss_grpc.StationStub(c), META, retry_s=(0.05, 0.2)) for c in channels]
                for u in uploaders:
                    u.submit(job, "ep_0001", second)
                assert all(u.wait_idle(60) for u in uploaders)
                for u in uploaders:
                    u.close()
            finally:
                for c in channels:
                    c.close()
            results = [u.results[0] for u in uploaders]
            assert all(r.ok for r in results), results
            with EvaluationClient(f"127.0.0.1:{port_b}", token=CLIENT_TOKENS["team_a"]) as via_b:
                done = via_b.download_recording("pg-job", "ep_0001", tmp_path / "home2.mcap")
                assert done.path.read_bytes() == second.read_bytes()
        finally:
            stop_process(a)
            stop_process(b)


def test_two_uploads_of_one_episode_at_once_store_it_once(relay, tmp_path):
    """A station's retry racing its first attempt: the second waits, then finds the recording stored."""
    import threading

    recording = write_mcap(tmp_path / "r.mcap", 2_500_000)
    with EvaluationClient(relay.target, token=CLIENT_TOKENS["team_a"]) as client:
        job = _station_job(client, "race-job")
        answers, errors = [], []

        def send():
            try:
                with grpc.insecure_channel(relay.target) as channel:
                    answers.append(upload(ss_grpc.StationStub(channel), META, job, "ep_0000", recording,
                                          timeout_s=60).already_stored)
            except grpc.RpcError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=send) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == [] and sorted(answers) == [False, True]
        assert [n for n, _ in _chunk_rows(relay.db, job)] == [0, 1, 2]
        done = client.download_recording("race-job", "ep_0000", tmp_path / "home.mcap")
        assert done.path.read_bytes() == recording.read_bytes()
