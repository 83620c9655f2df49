"""keep_freed_buffers (client/malloc_tuning.py): a step's large freed buffers are reused, not faulted in anew.

Each case runs in a fresh interpreter (the tuning is process-wide and once per process): 200 steps that each
write three 300 kB buffers and free them, counting the page faults the steps take after a warm-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1]

_STEPS = """
import os, resource
from strands_robots.client.malloc_tuning import keep_freed_buffers
tuned = keep_freed_buffers()
again = keep_freed_buffers()
def step():
    bufs = [bytearray(os.urandom(16)) * (300 * 1024 // 16) for _ in range(3)]  # every page written
    return sum(len(b) for b in bufs)
for _ in range(20):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    step()
print(tuned, again, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

sys.path.insert(0, str(PACKAGE_ROOT))
from strands_robots.client.malloc_tuning import _glibc  # noqa: E402

glibc = pytest.mark.skipif(not _glibc(), reason="the tuning is glibc's mallopt")


def _run(**env: str) -> tuple:
    out = subprocess.run([sys.executable, "-c", _STEPS], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT), **env})
    assert out.returncode == 0, out.stderr
    tuned, again, faults = out.stdout.split()
    return tuned == "True", again == "True", int(faults)


@glibc
def test_tuned_process_reuses_its_freed_buffers():
    tuned, again, faults = _run()
    assert tuned and again  # the second call answers the first's result
    assert faults < 100, f"{faults} page faults over 200 steps of 900 kB each"  # ~0 measured; untuned ~100/step


@glibc
def test_opt_out_leaves_malloc_as_it_is_and_the_buffers_fault_again():
    tuned, again, faults = _run(STRANDS_ROBOTS_MALLOC_TUNING="off")
    assert not tuned and not again
    # glibc's own thresholds hand the freed top back: the next step's buffers are new pages (the control case,
    # which shows the count above measures what the tuning changes)
    assert faults > 2000, f"only {faults} page faults untuned"


def test_not_glibc_does_nothing(monkeypatch):
    from strands_robots.client import malloc_tuning

    monkeypatch.setattr(malloc_tuning, "_done", None)
    monkeypatch.setattr(malloc_tuning.os, "confstr", lambda name: None)  # what musl / macOS answer
    monkeypatch.delenv(malloc_tuning.OPT_OUT_VARIABLE, raising=False)
    assert malloc_tuning.keep_freed_buffers() is False
