"""``strands-eval schema``: the job file's JSON Schema (``--markdown``: docs/job-file.md), made from the reader's rules.

``strands-eval schema`` prints JSON (for an editor's completion and checks); ``--markdown`` the page
docs/job-file.md is.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["add_schema_parser", "cmd_job_schema"]


def cmd_job_schema(args: argparse.Namespace) -> int:
    """Print the schema (JSON) or its page (Markdown)."""
    from strands_robots.job_model.job_schema import job_file_markdown, job_schema

    if args.markdown:
        print(job_file_markdown(), end="")
    else:
        print(json.dumps(job_schema(), indent=2))
    return 0


def add_schema_parser(commands: Any) -> None:
    """Add ``schema`` to the job commands' subparsers."""
    p = commands.add_parser("schema", help="print the job file's JSON Schema (--markdown: as docs/job-file.md)",
                            description="Print the job file's JSON Schema, made from the rules submit and the relay "
                                        "check.", allow_abbrev=False)
    p.add_argument("--markdown", action="store_true", help="print the page docs/job-file.md instead of JSON")
    p.set_defaults(func=cmd_job_schema)
