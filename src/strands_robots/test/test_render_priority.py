"""The camera process's lower priority (cameras/render_priority.py): the rule, and a real process's threads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from strands_robots.cameras.render_priority import DEFAULT_NICE, NICE_ENV, nice_increment


def test_the_increment_defaults_to_ten_takes_zero_to_nineteen_and_refuses_the_rest_naming_the_variable():
    assert nice_increment({}) == DEFAULT_NICE == 10
    assert nice_increment({NICE_ENV: " 0 "}) == 0
    assert nice_increment({NICE_ENV: "19"}) == 19
    for bad in ("-5", "20", "high", "1.5"):
        with pytest.raises(ValueError, match=f"{NICE_ENV} must be an integer 0..19, got '{bad}'"):
            nice_increment({NICE_ENV: bad})


CHILD = textwrap.dedent("""
    import os, threading
    from strands_robots.cameras.render_priority import lower_render_priority
    before = os.getpriority(os.PRIO_PROCESS, 0)
    after = lower_render_priority()
    seen = []
    t = threading.Thread(target=lambda: seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    t.start(); t.join()
    print(before, after, seen[0], os.environ.get("LP_NUM_THREADS"))
""")


@pytest.mark.parametrize("env, lp, expect_delta, expect_lp", [({}, None, 10, "1"), ({NICE_ENV: "0"}, "2", 0, "2"),
                                                               ({NICE_ENV: "3"}, None, 3, "1")])
def test_a_process_and_every_thread_it_starts_after_run_at_the_lower_priority(env, lp, expect_delta, expect_lp):
    child_env = {k: v for k, v in os.environ.items() if k not in (NICE_ENV, "LP_NUM_THREADS")}
    child_env.update(env)
    if lp is not None:
        child_env["LP_NUM_THREADS"] = lp
    out = subprocess.run([sys.executable, "-c", CHILD], env=child_env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    before, after, thread_nice, lp_threads = out.stdout.split()
    expected = min(19, int(before) + expect_delta)
    assert int(after) == expected and int(thread_nice) == expected
    assert lp_threads == expect_lp
