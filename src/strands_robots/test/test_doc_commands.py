"""Every command in the README and docs/ runs as written, or is what its ``--help`` says it is.

Each ```` ```bash ```` block of ``README.md``, ``docs/*.md`` and ``bench/README.md`` carries an HTML comment on the
line above it that says how it is checked (readers of the rendered page do not see it):

- ``<!-- doc-test: run -->``: the block runs in bash from the repository's root with ``set -eo pipefail`` and
  must exit 0 (blocks that need no ROS distro, a server or minutes);
- ``<!-- doc-test: help -->``: every command in it is one of the project's (``strands-robots``, ``make``,
  ``python bench/<file>.py``, ``bash scripts/bench.sh``), its ``--help`` exits 0 (``make -n`` for a make target),
  and every option the line uses appears in that help;
- ``<!-- doc-test: skip: <why> -->``: not run here (a ROS distro's ``ros2``, a running relay); the reason is said.

A block without a marker fails, so a new command cannot slip in unchecked. Relative links between the pages must
name a file that exists and, with ``#anchor``, one of its headings.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "bench" / "README.md")
MARKER = re.compile(r"<!--\s*doc-test:\s*(run|help|skip)\s*(?::\s*(.*?))?\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")
RUN_TIMEOUT_S = 120.0
HELP_TIMEOUT_S = 60.0
# Pages the README links to that their authors write beside this one: a link to them is not yet a broken link.
PAGES_WRITTEN_ELSEWHERE: set = set()


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    mode: str  # run | help | skip | "" (no marker)
    reason: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks_of(page: Path) -> list:
    """Return every fenced block of ``page`` with the doc-test marker on the nearest non-blank line above it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = MARKER.search(lines[k]) if k >= 0 else None
        found.append(Block(page, i + 1, opening.group(1), marker.group(1) if marker else "",
                           (marker.group(2) or "") if marker else "", "\n".join(lines[i + 1:j])))
        i = j + 1
    return found


SHELL_BLOCKS = [b for page in PAGES for b in blocks_of(page) if b.language in ("bash", "sh", "shell", "console")]


def commands_of(text: str) -> list:
    """Return the block's commands as token lists: continuations joined, comments and ``VAR=`` prefixes dropped."""
    commands = []
    for logical in re.sub(r"\\\n\s*", " ", text).splitlines():
        tokens = shlex.split(logical, comments=True)
        while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):
            tokens.pop(0)
        if tokens:
            commands.append(tokens)
    return commands


def options_of(tokens: list) -> list:
    """Return the options a command line uses: ``--name`` (``--name=value`` too) and ``-x``; ``[--opt]`` counts."""
    found = []
    for token in tokens:
        for part in token.strip("[]").split("|"):
            match = re.match(r"^(--?[A-Za-z][\w-]*)", part)
            if match:
                found.append(match.group(1))
    return found


def _environment() -> dict:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # A block's `source scripts/env.sh` picks its leg from ROS: the leg these tests run on (env.sh exports SR_ROS).
    if "ROS" not in env and env.get("SR_ROS") in ("kilted", "jazzy"):
        env["ROS"] = env["SR_ROS"]
    return env


@lru_cache(maxsize=None)
def help_text(command: tuple) -> "tuple[int, str]":
    """Return the exit status and output of ``command`` (a ``--help`` or ``make -n``), run once per command."""
    done = subprocess.run(list(command), cwd=REPO, env=_environment(), capture_output=True, text=True,
                          timeout=HELP_TIMEOUT_S)
    return done.returncode, done.stdout + done.stderr


def help_command(tokens: list) -> "tuple[tuple, list]":
    """Return the ``--help`` call that documents ``tokens``, and the options the line uses that it must list.

    :raises ValueError: the line is not one of the project's commands.
    """
    words = [t for t in tokens[1:] if not t.startswith("-") and not t.startswith("[")]
    head = tokens[0]
    if head == "strands-robots":
        # Every word before the first option: the subcommands, then positionals argparse takes before --help.
        leading = []
        for token in tokens[1:]:
            if token.startswith("-") or token.startswith("["):
                break
            leading.append(token)
        return ("strands-robots", *leading, "--help"), options_of(tokens[1:])
    if head == "python" and len(tokens) > 1 and tokens[1].startswith("bench/") and tokens[1].endswith(".py"):
        return ("python", tokens[1], "--help"), options_of(tokens[2:])
    if head == "bash" and tokens[1:2] == ["scripts/bench.sh"]:
        return ("python", "bench/control_loop.py", "--help"), options_of(tokens[2:])
    if head == "make" and words:
        target, variables = words[0], [t for t in tokens[1:] if "=" in t]
        arguments = [v.split("=", 1)[1] for v in variables if v.startswith("ARGS=")]
        if arguments and target in ("run", "bench"):
            program = ("strands-robots", "up") if target == "run" else ("python", "bench/control_loop.py")
            return (*program, "--help"), options_of(shlex.split(arguments[0]))
        return ("make", "-n", target, *[v for v in variables if not v.startswith("ARGS=")]), []
    raise ValueError(f"{' '.join(tokens)!r} is not one of the project's commands: mark its block run or skip")


def test_every_shell_block_says_how_it_is_checked():
    unmarked = [b.where for b in SHELL_BLOCKS if not b.mode]
    assert SHELL_BLOCKS, "no shell block found: the pages moved?"
    assert not unmarked, f"shell blocks without a <!-- doc-test: run|help|skip: why --> marker: {unmarked}"
    unexplained = [b.where for b in SHELL_BLOCKS if b.mode == "skip" and not b.reason]
    assert not unexplained, f"skipped blocks must say why (<!-- doc-test: skip: why -->): {unexplained}"


@pytest.mark.parametrize("block", [b for b in SHELL_BLOCKS if b.mode == "run"], ids=lambda b: b.where)
def test_a_run_block_runs_as_written(block):
    script = "set -eo pipefail\n" + block.text + "\n"
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=_environment(), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, (f"{block.where}: exit {done.returncode}\n{block.text}\n--- stdout\n"
                                  f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")


HELP_BLOCKS = [b for b in SHELL_BLOCKS if b.mode == "help"]


@pytest.fixture(scope="module")
def every_help_read():
    """Every help block's ``--help`` run once, several at a time: the blocks' tests then read the cache."""
    commands = set()
    for block in HELP_BLOCKS:
        for tokens in commands_of(block.text):
            try:
                commands.add(help_command(tokens)[0])
            except ValueError:
                pass  # reported by the block's own test
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(help_text, sorted(commands)))


@pytest.mark.parametrize("block", HELP_BLOCKS, ids=lambda b: b.where)
def test_a_help_block_uses_only_options_its_commands_take(block, every_help_read):
    checks = []
    for tokens in commands_of(block.text):
        try:
            checks.append((tokens, *help_command(tokens)))
        except ValueError as exc:
            pytest.fail(f"{block.where}: {exc}")
    assert checks, f"{block.where}: a help block without a command"
    answers = [help_text(command) for _, command, _ in checks]
    problems = []
    for (tokens, command, options), (code, text) in zip(checks, answers):
        if code != 0:
            problems.append(f"{' '.join(command)} exits {code}: {text.strip()[-400:]}")
            continue
        missing = [o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text)]
        if missing:
            problems.append(f"{' '.join(tokens)}: {missing} not in `{' '.join(command)}`")
    assert not problems, f"{block.where}:\n" + "\n".join(problems)


def anchors_of(page: Path) -> set:
    """Return GitHub's anchors for the headings of ``page`` (lower case, punctuation dropped, spaces to dashes)."""
    anchors, in_fence = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return anchors


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_every_relative_link_between_the_pages_names_a_file_and_heading_that_exist():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            relative = file.relative_to(REPO).as_posix() if file.is_relative_to(REPO) else str(file)
            if not file.exists():
                if relative not in PAGES_WRITTEN_ELSEWHERE:
                    broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
                continue
            if anchor and file.suffix == ".md" and anchor not in anchors_of(file):
                broken.append(f"{page.relative_to(REPO)}: {target} (no heading #{anchor})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_help_check_catches_an_option_a_command_does_not_take():
    # The check itself can fail: an option no command has is reported, a real one is not.
    command, options = help_command(["strands-robots", "echo", "--namespace", "x", "--no-such-option"])
    code, text = help_text(command)
    assert code == 0 and "--namespace" in text
    assert [o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text)] == ["--no-such-option"]
    with pytest.raises(ValueError, match="not one of the project's commands"):
        help_command(["curl", "-s", "http://127.0.0.1:9464/metrics"])
