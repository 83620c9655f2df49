"""Every ``--help`` of ``strands-eval`` and ``strands-robots`` says each option in a line of its own, in plain words.

The parsers are walked recursively (every command and subcommand); each option and argument has its help text,
and the rendered help carries no reStructuredText markup (double backquotes, ``:class:`` roles) and no
unexpanded ``%(...)s``.
"""

from __future__ import annotations

import argparse
import re

import pytest

_MARKUP = re.compile(r"``|:(class|mod|func|meth|data):|%\(")


def _parsers(parser: argparse.ArgumentParser, name: str):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def _all():
    from strands_robots.cli import build_parser
    from strands_robots.client.cli import build_parser as eval_parser

    yield from _parsers(eval_parser(), "strands-eval")
    yield from _parsers(build_parser(), "strands-robots")


def test_every_option_of_every_command_has_its_help_line():
    missing = []
    for name, parser in _all():
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not (action.help or "").strip() and action.dest != "args":
                missing.append(f"{name}: {'/'.join(action.option_strings) or action.dest}")
    assert not missing, "options without a help line:\n" + "\n".join(missing)


def test_no_help_text_carries_markup():
    marked = []
    for name, parser in _all():
        text = parser.format_help()
        for line in text.splitlines():
            if _MARKUP.search(line):
                marked.append(f"{name}: {line.strip()}")
    assert not marked, "help with markup:\n" + "\n".join(marked)


def test_the_client_command_line_and_the_job_command_offer_the_same_commands():
    from strands_robots.cli import build_parser
    from strands_robots.client.cli import build_parser as eval_parser

    def commands(parser):
        return set(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)

    job = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["job"]
    assert commands(eval_parser()) == commands(job)
    assert {"submit", "status", "watch", "list", "cancel", "serve", "recordings", "suites", "leaderboard",
            "schema"} <= commands(eval_parser())


@pytest.mark.parametrize("argv", [["--help"], ["serve", "--help"], ["submit", "--help"]])
def test_strands_eval_help_exits_zero(argv, capsys):
    from strands_robots.client.cli import main

    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0 and "usage: strands-eval" in capsys.readouterr().out
