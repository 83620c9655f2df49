"""Every command of ``strands-eval`` and ``strands-robots`` tells the truth about itself, and refuses a bad option.

The commands are found by walking the parsers themselves (every command and sub-command, and the commands whose
own module parses their arguments, ``relay``, ``record``, ``export lerobot`` ..., through that module's parser),
so a command added later is walked without this file changing. For each one:

- each option, argument and sub-command has its help line, in plain words (no reStructuredText markup, no
  unexpanded ``%(...)s``, nothing of the project's history);
- ``COMMAND --help`` through the console script's own ``main`` exits 0 with the usage line naming the command,
  within a deadline, and leaves nothing behind: no ROS context, no thread, no child process, no file;
- ``COMMAND --no-such-option`` exits 2 through argparse with the usage line and the error naming the command,
  never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import re
import sys
import threading
import time
from pathlib import Path

import pytest

_MARKUP = re.compile(r"``|:(class|mod|func|meth|data):|%\(")
# What help must not say: the project's history (issues, tickets, commits, what the code used to do).
_HISTORY = re.compile(r"\b(issue|ticket|PR|pull request|bug)\s*#?\d+|#\d+\b|\bused to\b|\bno longer\b|\bpreviously\b"
                      r"|\bformerly\b|\blegacy\b|\bdeprecated\b|\bbackwards? compat|\bwork-?around\b|\bregression\b"
                      r"|\bwave \d|\bcommit\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b|\bCI\b|\brerun\b"
                      r"|\bfix(ed)? for\b|\bin the old\b"
                      r"|\bnew in\b|\bsince (v|version )?\d", re.IGNORECASE)
# A --help only prints: this bounds the wait on one (seconds), it does not measure it.
_HELP_DEADLINE_S = 20.0


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias names the same parser: walked once, by its first name
                    seen.add(id(sub))
                    yield name, sub


def _walk(parser: argparse.ArgumentParser, argv: "tuple[str, ...]"):
    """Yield (argv naming the command, its parser) for ``parser`` and every command under it."""
    from strands_robots.cli import DELEGATED, delegated_parser

    yield argv, parser
    for name, sub in _subcommands(parser):
        delegated = sub.get_default("delegated")
        if delegated is None:
            yield from _walk(sub, (*argv, name))
            continue
        yield from _walk(delegated_parser(delegated), (*argv, name))
        for command in DELEGATED[delegated].commands:
            yield from _walk(delegated_parser(delegated, command), (*argv, name, command))


@functools.lru_cache(maxsize=None)
def _commands() -> "tuple[tuple[str, tuple[str, ...], argparse.ArgumentParser], ...]":
    """Every command of both console scripts: (script, argv after the script, parser)."""
    from strands_robots.cli import build_parser
    from strands_robots.client.cli import build_parser as eval_parser

    return tuple(("strands-eval", argv, p) for argv, p in _walk(eval_parser(), ())) + \
        tuple(("strands-robots", argv, p) for argv, p in _walk(build_parser(), ()))


def _main(script: str):
    if script == "strands-eval":
        from strands_robots.client.cli import main
    else:
        from strands_robots.cli import main
    return main


def _name(script: str, argv: "tuple[str, ...]") -> str:
    return " ".join((script, *argv))


def test_the_walk_reaches_every_kind_of_command():
    names = {_name(script, argv) for script, argv, _ in _commands()}
    assert {"strands-eval", "strands-eval submit", "strands-eval serve", "strands-robots", "strands-robots up",
            "strands-robots echo", "strands-robots job", "strands-robots job submit", "strands-robots relay",
            "strands-robots relay tokens", "strands-robots relay tokens add", "strands-robots record",
            "strands-robots report", "strands-robots rescore", "strands-robots demo-job",
            "strands-robots export", "strands-robots export lerobot"} <= names
    from strands_robots.cli import build_parser

    listed = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))._choices_actions
    walked = {argv[0] for script, argv, _ in _commands() if script == "strands-robots" and argv}
    assert {choice.dest.split(" ")[0] for choice in listed} <= walked  # every command --help lists (aliases aside)


def test_every_parser_is_named_for_the_command_that_runs_it():
    misnamed = [f"{_name(script, argv)}: prog {parser.prog!r}" for script, argv, parser in _commands()
                if parser.prog != _name(script, argv)]
    assert not misnamed, "\n".join(misnamed)


def test_every_option_argument_and_command_has_its_help_line():
    missing = []
    for script, argv, parser in _commands():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{_name(script, argv)} {choice.dest}: no help line" for choice in action._choices_actions
                            if not (choice.help or "").strip()]
                continue
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"{_name(script, argv)}: {'/'.join(action.option_strings) or action.dest}")
        if not (parser.description or "").strip() and len(argv) > 0:
            missing.append(f"{_name(script, argv)}: no description")
    assert not missing, "options without a help line:\n" + "\n".join(missing)


def test_no_help_text_carries_markup_or_history():
    flagged = []
    for script, argv, parser in _commands():
        for line in parser.format_help().splitlines():
            if _MARKUP.search(line) or _HISTORY.search(line):
                flagged.append(f"{_name(script, argv)}: {line.strip()}")
    assert not flagged, "help with markup or history:\n" + "\n".join(flagged)


@contextlib.contextmanager
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run in an empty directory with HOME and ROS's own directories in it: what a command writes is seen."""
    for var, sub in (("HOME", "home"), ("ROS_HOME", "ros_home"), ("ROS_LOG_DIR", "ros_log"),
                     ("XDG_STATE_HOME", "state"), ("XDG_CACHE_HOME", "cache"), ("XDG_CONFIG_HOME", "config"),
                     ("MPLCONFIGDIR", "mpl")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.chdir(tmp_path)
    yield


def _children() -> set:
    """Return the PIDs of this process's children (every thread's)."""
    found: set = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            found |= set((task / "children").read_text().split())
    return found


def _run(script: str, argv: "list[str]") -> "tuple[object, str, str, float]":
    """Run the console script's main in this process: (exit code or the exception raised, stdout, stderr, s)."""
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: object = _main(script)(argv)
        except SystemExit as done:
            code = done.code
        except BaseException as exc:  # noqa: BLE001 - a traceback is the failure this test is for
            code = exc
    return code, out.getvalue(), err.getvalue(), time.monotonic() - started


def _ros_context_is_up() -> bool:
    rclpy = sys.modules.get("rclpy")
    return bool(rclpy is not None and rclpy.ok())


def test_help_of_every_command_exits_zero_naming_it_and_leaves_nothing_behind(tmp_path, monkeypatch):
    wrong = []
    with _isolated(tmp_path, monkeypatch):
        for script, argv, _ in _commands():
            name = _name(script, argv)
            threads, children = set(threading.enumerate()), _children()  # each command answers for its own
            code, out, err, took = _run(script, [*argv, "--help"])
            if code != 0 or not out.startswith(f"usage: {name} "):
                wrong.append(f"{name} --help: exit {code!r}, stdout {out[:120]!r}, stderr {err[-300:]!r}")
            if took > _HELP_DEADLINE_S:
                wrong.append(f"{name} --help: {took:.1f} s (past the {_HELP_DEADLINE_S:g} s deadline: it does work)")
            if _ros_context_is_up():
                wrong.append(f"{name} --help: left a ROS context up")
            left = [t.name for t in threading.enumerate() if t not in threads and t.is_alive()]
            if left:
                wrong.append(f"{name} --help: left threads running: {left}")
            spawned = _children() - children
            if spawned:
                wrong.append(f"{name} --help: started processes {sorted(spawned)}")
        written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert not wrong and not written, "\n".join([*wrong, f"--help wrote files: {written}"])


def test_an_unknown_option_exits_2_with_the_usage_of_the_command_given_it(tmp_path, monkeypatch):
    wrong = []
    with _isolated(tmp_path, monkeypatch):
        for script, argv, _ in _commands():
            name = _name(script, argv)
            code, out, err, _ = _run(script, [*argv, "--no-such-option"])
            if isinstance(code, BaseException):
                wrong.append(f"{name} --no-such-option: raised {type(code).__name__}: {code}")
            elif code != 2 or not err.startswith(f"usage: {name} ") or f"\n{name}: error: " not in err \
                    or "Traceback" in err + out:
                wrong.append(f"{name} --no-such-option: exit {code!r}, stderr {err[-400:]!r}")
    assert not wrong, "\n".join(wrong)


def test_the_client_command_line_and_the_job_command_offer_the_same_commands():
    from strands_robots.cli import build_parser
    from strands_robots.client.cli import build_parser as eval_parser

    def commands(parser):
        return set(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)

    job = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["job"]
    assert commands(eval_parser()) == commands(job)
    assert {"submit", "status", "watch", "list", "cancel", "serve", "recordings", "suites", "leaderboard",
            "schema"} <= commands(eval_parser())
