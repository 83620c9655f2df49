"""station/pending_uploads.py: a relay job's recordings stay on disk until the relay holds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from strands_robots.station.model import EpisodeResult, Task
from strands_robots.station.pending_uploads import PendingUpload, PendingUploads, settle, sort_pending
from strands_robots.station.durable_files import PersistenceError

SHA_A = "a" * 64
SHA_B = "b" * 64


def _upload(run_id="run-1", episode_id="ep_0000", job_id="job-1", sha=SHA_A):
    return PendingUpload(job_id=job_id, episode_id=episode_id, run_id=run_id, path=f"/rec/{run_id}.mcap", sha256=sha)


def _episode(episode_id="ep_0000", run_id="run-1", sha=SHA_A):
    return EpisodeResult(episode_id=episode_id, end_condition="timeout", scored=True, success=True, score=1.0,
                         items=(), task=Task(task_id="a", instruction="i"), taken_over=False, end_detail="",
                         run_id=run_id, recording_sha256=sha)


def test_an_added_upload_loads_back_in_a_new_store_and_is_gone_once_removed(tmp_path):
    store = PendingUploads(str(tmp_path / "uploads"))
    store.add(_upload("run-2", "ep_0001"))
    store.add(_upload("run-1"))
    loaded, problems = PendingUploads(str(tmp_path / "uploads")).load()
    assert problems == ()
    assert loaded == (_upload("run-1"), _upload("run-2", "ep_0001"))
    assert store.remove("run-1") is True
    assert store.remove("run-1") is False
    assert PendingUploads(str(tmp_path / "uploads")).load()[0] == (_upload("run-2", "ep_0001"),)
    assert [n for n in os.listdir(tmp_path / "uploads") if n.endswith(".tmp")] == []


def test_a_process_killed_right_after_add_returns_leaves_the_entry_on_disk(tmp_path):
    directory = tmp_path / "uploads"
    code = ("import os, sys; from strands_robots.station.pending_uploads import PendingUpload, PendingUploads; "
            f"PendingUploads({str(directory)!r}).add(PendingUpload('job-1', 'ep_0000', 'run-9', '/r.mcap', "
            f"{SHA_A!r})); os.kill(os.getpid(), 9)")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ}, timeout=60)
    assert proc.returncode == -9
    assert PendingUploads(str(directory)).load() == ((PendingUpload("job-1", "ep_0000", "run-9", "/r.mcap", SHA_A),),
                                                     ())


def test_a_refused_upload_is_kept_aside_with_its_reason_and_not_pending_again(tmp_path):
    store = PendingUploads(str(tmp_path))
    store.add(_upload())
    kept = store.refuse("run-1", "RESOURCE_EXHAUSTED: too large")
    assert kept == str(tmp_path / "run-1.upload.json.refused")
    assert json.loads(open(kept).read())["refused"] == "RESOURCE_EXHAUSTED: too large"
    assert store.load() == ((), ())
    assert store.refuse("run-1", "again") is None  # nothing pending under that id


def test_an_unreadable_entry_is_named_and_kept_while_the_others_load(tmp_path):
    store = PendingUploads(str(tmp_path))
    store.add(_upload())
    (tmp_path / "torn.upload.json").write_text('{"job_id": "job-1"')
    loaded, problems = store.load()
    assert loaded == (_upload(),)
    assert len(problems) == 1 and "torn.upload.json" in problems[0] and "unreadable pending upload" in problems[0]
    assert (tmp_path / "torn.upload.json").exists()


@pytest.mark.parametrize("run_id", ["", "../x", ".hidden", "a/b"])
def test_a_run_id_that_cannot_name_a_file_is_refused(tmp_path, run_id):
    with pytest.raises(PersistenceError, match="cannot name a pending upload file"):
        PendingUploads(str(tmp_path)).add(_upload(run_id))


def test_settle_removes_a_stored_one_keeps_a_refused_one_aside_and_the_rest_pending():
    assert settle(True, "OK") == "sent"
    for code in ("RESOURCE_EXHAUSTED", "DATA_LOSS", "INVALID_ARGUMENT", "NOT_FOUND", "FILE"):
        assert settle(False, code) == "refused", code
    for code in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED", "UNAUTHENTICATED", "ERROR", "UNKNOWN"):
        assert settle(False, code) == "pending", code


def test_after_a_restart_only_finished_episodes_with_that_run_and_recording_are_sent_again():
    pending = (_upload("run-1", "ep_0000"), _upload("run-2", "ep_0001"), _upload("run-3", "ep_0002"),
               _upload("run-4", "ep_0003", sha=SHA_B), _upload("run-5", "ep_0000", job_id="job-gone"))
    jobs = {"job-1": (_episode("ep_0000", "run-1"), _episode("ep_0002", "run-other"), _episode("ep_0003", "run-4"))}
    resend, dropped = sort_pending(pending, jobs.get)
    assert resend == (_upload("run-1", "ep_0000"),)
    why = {u.run_id: reason for u, reason in dropped}
    assert set(why) == {"run-2", "run-3", "run-4", "run-5"}
    assert "has no result" in why["run-2"]
    assert "finished as run 'run-other'" in why["run-3"]
    assert "SHA-256 'aaaaaaaaaaaa'" in why["run-4"] and "'bbbbbbbbbbbb'" in why["run-4"]
    assert why["run-5"] == "job 'job-gone' is not on this station"


# -- the sender: pending entries joined to the link's uploads -------------------------------------------------
class _Link:
    """The link's upload port: each upload ends at once as ``outcomes`` say (by run), else stored."""

    def __init__(self, outcomes=None):
        self.outcomes = dict(outcomes or {})
        self.sent = []

    def upload_recording(self, job_id, episode_id, path, on_done=None):
        from strands_robots.station_link.recording_upload import UploadResult

        self.sent.append((job_id, episode_id, path))
        code = self.outcomes.get(path, "OK")
        on_done(UploadResult(job_id, episode_id, path, ok=code == "OK", code=code, reason=f"reason {code}"))


def _sender(tmp_path, link, jobs=None):
    from strands_robots.station.recording_sender import RecordingSender

    lines = []
    sender = RecordingSender(PendingUploads(str(tmp_path)), link, (jobs or {}).get, info=lines.append,
                             warning=lines.append, error=lines.append)
    return sender, lines


def test_the_sender_removes_a_stored_recording_keeps_a_refused_one_aside_and_retries_one_given_up(tmp_path):
    link = _Link({"/rec/run-2.mcap": "RESOURCE_EXHAUSTED", "/rec/run-3.mcap": "UNAVAILABLE"})
    sender, lines = _sender(tmp_path, link)
    for n in (1, 2, 3):
        sender.keep("job-1", f"ep_000{n}", f"run-{n}", f"/rec/run-{n}.mcap", SHA_A)
    assert len(sender.uploads.load()[0]) == 3
    for n in (1, 2, 3):
        sender.send("job-1", f"ep_000{n}", f"run-{n}", f"/rec/run-{n}.mcap")
    assert [u.run_id for u in sender.uploads.load()[0]] == ["run-3"]  # stored one gone, refused one aside
    assert (tmp_path / "run-2.upload.json.refused").exists()
    assert any("refused by the relay (RESOURCE_EXHAUSTED" in line for line in lines)
    link.outcomes.clear()  # the relay is back
    assert sender.retry_given_up() == 1
    assert link.sent[-1] == ("job-1", "ep_0003", "/rec/run-3.mcap")
    assert sender.uploads.load() == ((), ())
    assert sender.retry_given_up() == 0


def test_after_close_a_given_up_upload_stays_on_disk_for_the_next_start_only(tmp_path):
    link = _Link({"/rec/run-1.mcap": "UNAVAILABLE"})
    sender, _ = _sender(tmp_path, link)
    sender.keep("job-1", "ep_0000", "run-1", "/rec/run-1.mcap", SHA_A)
    sender.close()
    sender.send("job-1", "ep_0000", "run-1", "/rec/run-1.mcap")
    assert sender.retry_given_up() == 0
    assert [u.run_id for u in sender.uploads.load()[0]] == ["run-1"]


def test_at_start_the_sender_sends_again_the_finished_episodes_and_drops_the_interrupted_ones(tmp_path):
    link = _Link()
    jobs = {"job-1": (_episode("ep_0000", "run-1"),)}
    sender, lines = _sender(tmp_path, link, jobs)
    sender.keep("job-1", "ep_0000", "run-1", "/rec/run-1.mcap", SHA_A)
    sender.keep("job-1", "ep_0001", "run-2", "/rec/run-2.mcap", SHA_A)  # the running episode at the kill
    assert sender.resend_pending() == 1
    assert link.sent == [("job-1", "ep_0000", "/rec/run-1.mcap")]
    assert sender.uploads.load() == ((), ())
    assert any("/rec/run-2.mcap not sent: episode 'ep_0001'" in line for line in lines)
