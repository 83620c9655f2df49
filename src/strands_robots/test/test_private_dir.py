"""A private run directory (tokens) goes when its owner goes, however it goes (strands_robots/private_dir.py)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from strands_robots.private_dir import OWNER_FILE, PrivateDir, sweep

GONE_WITHIN_S = 10.0  # a bound on the janitor's reaction, not a timing figure

# A process that makes a private dir in argv[1], writes a secret into it, says where, and waits to be killed. It
# stands for a program run from a terminal, where Ctrl-C ends it, so it does not keep an ignored or blocked SIGINT
# from whatever started it (a pytest worker whose earlier tests left one would make the Ctrl-C test hang).
OWNER = textwrap.dedent("""
    import os, signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    from strands_robots.private_dir import PrivateDir
    private = PrivateDir("strands_test_", sys.argv[1])
    with open(os.path.join(private.path, "token"), "w") as handle:
        handle.write(sys.argv[2])
    print(private.path, private.janitor_pid, flush=True)
    time.sleep(600)
""")


def _wait_gone(path: str, timeout_s: float = GONE_WITHIN_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _start_owner(parent: Path, secret: str, **popen) -> "tuple[subprocess.Popen, str, int]":
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(parent), secret], stdout=subprocess.PIPE, text=True,
                            **popen)
    assert proc.stdout is not None
    path, janitor = proc.stdout.readline().split()
    return proc, path, int(janitor)


def _files_holding(root: Path, secret: str) -> list:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret in p.read_text(errors="replace")]


def test_the_directory_is_private_and_goes_at_close(tmp_path):
    with PrivateDir("strands_test_", str(tmp_path)) as private:
        assert stat.S_IMODE(os.stat(private.path).st_mode) == 0o700
        assert Path(private.path, OWNER_FILE).read_text().split()[0] == str(os.getpid())
        janitor = private.janitor_pid
    assert not os.path.exists(private.path)
    assert janitor is not None and _pid_gone(janitor)


def _pid_gone(pid: int, timeout_s: float = GONE_WITHIN_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def test_a_sigkilled_owner_leaves_no_file_holding_its_secret(tmp_path):
    secret = f"secret-{os.getpid()}-{time.monotonic_ns()}"
    proc, path, janitor = _start_owner(tmp_path, secret)
    try:
        assert _files_holding(tmp_path, secret) == [os.path.join(path, "token")]
        proc.kill()
        proc.wait(10.0)
        assert _wait_gone(path), f"{path} outlived its SIGKILLed owner"
        assert _files_holding(tmp_path, secret) == []
        assert _pid_gone(janitor), "the janitor stayed after its work"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10.0)


def test_a_ctrl_c_to_the_owners_terminal_group_never_reaches_the_janitor_first(tmp_path):
    secret = f"secret-{os.getpid()}-{time.monotonic_ns()}"
    proc, path, janitor = _start_owner(tmp_path, secret, start_new_session=True)
    try:
        os.killpg(proc.pid, signal.SIGINT)  # the owner's group: the janitor is in a session of its own
        proc.wait(10.0)
        assert _wait_gone(path) and _pid_gone(janitor)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10.0)


def test_a_sigterm_to_the_janitor_removes_the_directory_too(tmp_path):
    secret = f"secret-{os.getpid()}-{time.monotonic_ns()}"
    proc, path, janitor = _start_owner(tmp_path, secret)
    try:
        os.kill(janitor, signal.SIGTERM)
        assert _wait_gone(path), "the janitor stopped without removing the directory"
    finally:
        proc.kill()
        proc.wait(10.0)


def test_the_next_start_sweeps_directories_whose_owner_died_with_its_janitor(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10.0)
    orphan = tmp_path / "strands_test_orphan"
    orphan.mkdir(mode=0o700)
    (orphan / OWNER_FILE).write_text(f"{dead.pid} 1\n")
    (orphan / "token").write_text("left behind")
    reused = tmp_path / "strands_test_reused_pid"  # a live pid that is another process now (start time differs)
    reused.mkdir(mode=0o700)
    (reused / OWNER_FILE).write_text(f"{os.getpid()} 1\n")
    live = tmp_path / "strands_test_live"
    live.mkdir(mode=0o700)
    with open(f"/proc/{os.getpid()}/stat") as handle:
        text = handle.read()
    (live / OWNER_FILE).write_text(f"{os.getpid()} {text[text.rfind(')') + 2:].split()[19]}\n")
    unmarked = tmp_path / "strands_test_unmarked"  # not known to be ours to judge: left alone
    unmarked.mkdir()
    other_kind = tmp_path / "other_orphan"
    other_kind.mkdir()
    (other_kind / OWNER_FILE).write_text(f"{dead.pid} 1\n")
    removed = sweep("strands_test_", str(tmp_path))
    assert sorted(removed) == sorted([str(orphan), str(reused)])
    assert live.exists() and unmarked.exists() and other_kind.exists()
    with PrivateDir("strands_test_", str(tmp_path)) as private:  # a new one sweeps first as well
        assert live.exists() and os.path.exists(private.path)
