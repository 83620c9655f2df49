"""The "reruns: why" summary (rerun_reasons.py): a test that fails once and then passes is named with its error."""

from __future__ import annotations

import rerun_reasons

pytest_plugins = ["pytester"]

FLAKY = """
from pathlib import Path

MARK = Path(__file__).with_name("attempted")


def helper_that_fails(n):
    raise RuntimeError(f"stalled {n} times: the hidden cause")


def test_fails_once():
    if not MARK.exists():
        MARK.write_text("1")
        print("the attempt's own output line")
        helper_that_fails(1)


def test_steady():
    assert 1 + 1 == 2
"""

CONFTEST = """
from rerun_reasons import register


def pytest_configure(config):
    register(config)
"""


def _run(pytester, source: str):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_flaky=source)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--reruns", "1", "-p", "no:randomly")


def test_a_rerun_is_named_with_its_error_and_last_frame_in_the_reruns_why_section(pytester):
    result = _run(pytester, FLAKY)
    assert result.parseoutcomes() == {"passed": 2, "rerun": 1}
    out = result.stdout.str()
    assert f"{rerun_reasons.SECTION} (1)" in out
    section = out[out.index(rerun_reasons.SECTION):]
    assert "RERUN test_flaky.py::test_fails_once (call, attempt 1)" in section
    assert "RuntimeError: stalled 1 times: the hidden cause" in section  # the crash line and the E line
    assert "helper_that_fails" in section  # the last frame
    assert "the attempt's own output line" in section  # its captured output
    assert "test_steady" not in section


def test_no_rerun_prints_no_section(pytester):
    result = _run(pytester, "def test_ok():\n    assert True\n")
    assert result.parseoutcomes() == {"passed": 1}
    assert rerun_reasons.SECTION not in result.stdout.str()


def test_a_long_failure_is_cut_to_the_bound_keeping_its_exception_and_last_lines(pytester):
    deep = """
from pathlib import Path

MARK = Path(__file__).with_name("attempted")


def recurse(n):
    if n == 0:
        raise ValueError("bottom of a deep stack")
    recurse(n - 1)


def test_deep():
    if not MARK.exists():
        MARK.write_text("1")
        print("\\n".join(f"noise {i}" for i in range(100)))
        recurse(60)
"""
    result = _run(pytester, deep)
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}
    out = result.stdout.str()
    section = out[out.index(rerun_reasons.SECTION):].splitlines()
    body = [line for line in section[2:] if line.startswith("    ")]
    assert len(body) <= rerun_reasons.MAX_LINES, len(body)
    text = "\n".join(body)
    assert "ValueError: bottom of a deep stack" in text
    assert "lines above left out" in text
    assert "noise 99" in text and "noise 0\n" not in text  # the captured output's tail, not its head
