"""``strands-robots export FORMAT ...``: a dataset out of episode recordings, one sub-command per format."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Return the ``strands-robots export`` parser, each format a command of its own (each sets ``func``)."""
    from strands_robots.export import lerobot

    parser = argparse.ArgumentParser(prog="strands-robots export", allow_abbrev=False,
                                     description="Datasets out of episode recordings.")
    formats = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")
    dataset = formats.add_parser("lerobot", allow_abbrev=False, help="a LeRobotDataset v3 from episode recordings",
                                 description=lerobot.DESCRIPTION)
    lerobot.add_arguments(dataset)
    dataset.set_defaults(func=lerobot.run)
    return parser


def main(argv: "Sequence[str] | None" = None) -> int:
    """Run the format's export; 0 with the dataset written, 2 when the arguments or the input are refused."""
    from strands_robots.client.cli.parse_command import parse_command

    args = parse_command(build_parser(), list(sys.argv[1:] if argv is None else argv))
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
