"""``make test``'s workers really keep a file's tests together (xdist_groups.py, through the conftests' hook).

The conftests mark every item with its group; pytest-xdist's worker hook turns the marks into node-id suffixes,
so the marks must be there first (the hook is ``tryfirst``). Without that, every test was a group of its own: a
file's tests spread over the workers and each worker built the file's module fixtures (process stacks) again.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist", reason="pytest-xdist is not installed")

HERE = Path(__file__).resolve().parent


def test_two_workers_run_each_file_in_one_worker_under_its_group():
    files = [HERE / "test_chunks.py", HERE / "test_lease.py"]
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2",
                          "--dist", "loadgroup", "-v", *map(str, files)], capture_output=True, text=True, timeout=300,
                         cwd=str(HERE.parents[2]))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    workers: dict = {}
    for line in out.stdout.splitlines():
        found = re.match(r"\[(gw\d+)\] .*?PASSED (\S+?\.py)::\S+@(\S+)", line)
        if found:
            worker, path, group = found.groups()
            assert group == path, line  # the group is the file's own path
            workers.setdefault(path, set()).add(worker)
    assert set(workers) == {f"src/strands_robots/test/{f.name}" for f in files}, out.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), workers
