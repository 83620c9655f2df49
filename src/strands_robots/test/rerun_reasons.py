"""Why each rerun happened: a terminal summary section "reruns: why" naming every rerun test and its failure.

``scripts/test.sh`` runs pytest with ``--reruns 2``: a test that fails and then passes counts as passed, and
pytest-rerunfailures' own summary names it but keeps no trace of why it failed. Every rerun is a bug with a
cause, so this plugin keeps, for each report whose outcome is "rerun", the test id, the phase, the crash line
(file:line: message), the tail of the traceback (the exception lines and the last frames) and the tail of the
output the attempt captured, bounded to :data:`MAX_LINES` lines a rerun, and prints them at the end of the
run. Both conftests register it once (:func:`register`), so a run over both test trees prints one section.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

PLUGIN_NAME = "strands_robots_rerun_reasons"
SECTION = "reruns: why"
MAX_LINES = 40
CAPTURED_LINES = 12  # of MAX_LINES, the most kept from the attempt's captured stdout/stderr/log


@dataclass(frozen=True)
class RerunReason:
    nodeid: str
    when: str
    attempt: int
    lines: tuple[str, ...]


def _tail(lines: list[str], count: int) -> list[str]:
    if len(lines) <= count:
        return lines
    return [f"... ({len(lines) - count} lines above left out)", *lines[-(count - 1):]]


def reason_lines(report: pytest.TestReport, max_lines: int = MAX_LINES,
                 captured_lines: int = CAPTURED_LINES) -> list[str]:
    """Return the bounded short form of ``report``'s failure: crash line, traceback tail, captured output tail."""
    lines: list[str] = []
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        lines.append(f"{crash.path}:{crash.lineno}: {crash.message.splitlines()[0] if crash.message else ''}")
    captured: list[str] = []
    for title, content in report.sections:
        if content.strip():
            captured += [f"-- {title} --", *content.rstrip().splitlines()]
    captured = _tail(captured, captured_lines) if captured else []
    traceback = (report.longreprtext or "").rstrip().splitlines()
    lines += _tail(traceback, max(1, max_lines - len(lines) - len(captured)))
    return [*lines, *captured][:max_lines]


@dataclass(eq=False)  # a plugin must stay hashable
class RerunReasons:
    """The plugin object: collects the rerun reports as they are logged, prints them at the end."""

    max_lines: int = MAX_LINES
    reasons: list[RerunReason] = field(default_factory=list)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome != "rerun":
            return
        self.reasons.append(RerunReason(report.nodeid, report.when, getattr(report, "rerun", 0) + 1,
                                        tuple(reason_lines(report, self.max_lines))))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.reasons:
            return
        terminalreporter.write_sep("=", f"{SECTION} ({len(self.reasons)})", yellow=True, bold=True)
        for reason in self.reasons:
            terminalreporter.write_line(f"RERUN {reason.nodeid} ({reason.when}, attempt {reason.attempt})",
                                        yellow=True)
            for line in reason.lines:
                terminalreporter.write_line(f"    {line}")


def register(config: pytest.Config) -> None:
    """Register the plugin once per pytest run (each conftest that wants it calls this from pytest_configure)."""
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(RerunReasons(), PLUGIN_NAME)
