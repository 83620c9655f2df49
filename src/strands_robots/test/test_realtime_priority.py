"""STRANDS_ROBOTS_RT_PRIORITY: the opt-in SCHED_FIFO of the hot-path node processes (no ROS)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from strands_robots.nodes.realtime_priority import RT_PRIORITY_ENV, apply_realtime_priority, resolve_priority

linux_only = pytest.mark.skipif(not hasattr(os, "SCHED_FIFO"), reason="no SCHED_FIFO on this platform")


@pytest.mark.parametrize("value, expected", [("", 0), (None, 0), ("  ", 0), ("0", 0), ("1", 1), (" 10 ", 10),
                                             ("99", 99)])
def test_the_value_is_a_priority_or_nothing(value, expected):
    assert resolve_priority(value, 99) == expected


@pytest.mark.parametrize("value", ["high", "1.5", "-1", "100"])
def test_a_bad_value_is_refused_naming_the_variable(value):
    with pytest.raises(ValueError, match=RT_PRIORITY_ENV):
        resolve_priority(value, 99)


class Recorder:
    def __init__(self, error: "OSError | None" = None) -> None:
        self.calls: list = []
        self.error = error

    def __call__(self, pid, policy, param):
        self.calls.append((pid, policy, param.sched_priority))
        if self.error is not None:
            raise self.error


@linux_only
def test_unset_or_zero_leaves_the_scheduler_alone():
    setter = Recorder()
    assert apply_realtime_priority({}, set_scheduler=setter) == ""
    assert apply_realtime_priority({RT_PRIORITY_ENV: "0"}, set_scheduler=setter) == ""
    assert setter.calls == []


@linux_only
def test_a_priority_moves_the_calling_thread_to_fifo_at_it():
    setter = Recorder()
    assert apply_realtime_priority({RT_PRIORITY_ENV: "12"}, set_scheduler=setter, max_priority=99) == "SCHED_FIFO 12"
    assert setter.calls == [(0, os.SCHED_FIFO, 12)]


@linux_only
def test_a_refusal_is_an_error_saying_what_it_needs_never_a_silent_fallback():
    setter = Recorder(PermissionError(1, "Operation not permitted"))
    with pytest.raises(ValueError) as info:
        apply_realtime_priority({RT_PRIORITY_ENV: "10"}, set_scheduler=setter, max_priority=99)
    text = str(info.value)
    assert f"{RT_PRIORITY_ENV}=10" in text and "Operation not permitted" in text and "CAP_SYS_NICE" in text
    with pytest.raises(ValueError, match="0-99"):
        apply_realtime_priority({RT_PRIORITY_ENV: "200"}, set_scheduler=setter, max_priority=99)
    assert len(setter.calls) == 1  # the out-of-range value never reached the system


@linux_only
def test_the_real_call_makes_the_process_and_the_threads_it_starts_afterwards_fifo():
    # In a child process (this one keeps its scheduler): main thread first, then a thread started after it.
    code = textwrap.dedent(f"""
        import os, threading
        from strands_robots.nodes.realtime_priority import apply_realtime_priority
        try:
            done = apply_realtime_priority({{"{RT_PRIORITY_ENV}": "3"}})
        except ValueError as exc:
            print("refused", exc)
            raise SystemExit(0)
        seen = []
        def look():
            seen.append((os.sched_getscheduler(0), os.sched_getparam(0).sched_priority))
        t = threading.Thread(target=look)
        t.start(); t.join()
        print(done, os.sched_getscheduler(0) == os.SCHED_FIFO, os.sched_getparam(0).sched_priority,
              seen[0][0] == os.SCHED_FIFO, seen[0][1])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("refused"):
        pytest.skip(f"this account may not use SCHED_FIFO: {out.stdout.strip()}")
    assert out.stdout.split() == ["SCHED_FIFO", "3", "True", "3", "True", "3"]
