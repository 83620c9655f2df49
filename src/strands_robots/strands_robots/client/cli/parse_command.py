"""Parse a command line whose parser has sub-commands, a bad option refused by the command it was given to.

``argparse`` leaves an option no sub-command knows to the top-level parser, whose error then prints the top-level
usage (``usage: strands-robots [-h] COMMAND ...``) and hides the options the user was looking for. Here that
error comes from the innermost command chosen, with its own usage line and exit code 2, as every other
argument error does.
"""

from __future__ import annotations

import argparse
from typing import Sequence

__all__ = ["parse_command", "chosen_command"]


def chosen_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """Return the parser of the innermost command ``args`` chose (``parser`` itself when it has none)."""
    while True:
        subs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, subs.dest, None) if subs is not None and subs.dest != argparse.SUPPRESS else None
        if name not in (subs.choices if subs is not None else {}):
            return parser
        parser = subs.choices[name]


def parse_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Return ``parser``'s namespace of ``argv``; exit 2 through the chosen command's error on an unknown option."""
    args, unknown = parser.parse_known_args(list(argv))
    if unknown:
        chosen_command(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    return args
