"""``strands-robots relay tokens add NAME --client|--station``: a new team's or station's token, for the operator.

    strands-robots relay tokens add team_a --client --tokens tokens.yaml [--out DIR]
    strands-robots relay tokens add lab_1 --station --tokens tokens.yaml --relay-address relay.example:50051

Adds ``NAME: <a fresh random token>`` to the tokens file's ``clients`` or ``stations`` (creating the file, mode
0600; an existing one must pass the relay's own checks first, :meth:`~strands_robots.relay.auth.TokenBook.from_file`)
and writes what to hand over, mode 0600, in ``--out`` (default: the tokens file's directory): a client's
``NAME.token`` (the team's ``--token-file``), or a station's ``NAME.credentials.yaml`` (its
``--relay-credentials``: relay address, station id, token). A name already in the file, in either section, or an
output file that already exists is refused, and nothing is written. The tokens file is rewritten whole (comments
are not kept) through a temporary file renamed onto it, so a running relay (which re-reads it on change) sees the
old book or the new one, never half a file. The token itself is never printed.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["add_token", "main", "NAME_PATTERN"]

#: A client or station name: what the relay shows and a job's client_id / station_id.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to a new file ``path`` with mode 0600 (refused when it exists)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def add_token(tokens: "str | os.PathLike[str]", name: str, kind: str, *,
              out_dir: "str | os.PathLike[str] | None" = None, relay_address: str = "127.0.0.1:50051") -> Path:
    """Add ``name`` with a fresh token to the tokens file; return the file written for it (token or credentials).

    :param tokens: the relay's tokens file (created 0600 when missing).
    :param name: the client's (team's) or station's name.
    :param kind: ``client`` or ``station``.
    :param out_dir: where the token file or the credentials file goes (default: the tokens file's directory).
    :param relay_address: a station's credentials name this relay address (host:port).
    :raises ValueError: a bad name or kind, a name already in the file, an output file that exists, a tokens file
        the relay would refuse (each one line).
    """
    import yaml

    from strands_robots.relay.auth import TokenBook

    if kind not in ("client", "station"):
        raise ValueError(f"kind must be client or station, got {kind!r}")
    if not NAME_PATTERN.match(name):
        raise ValueError(f"name {name!r} refused: 1-128 letters, digits, '.', '_', '-' starting with a letter or digit")
    path = Path(tokens)
    data: dict = {"clients": {}, "stations": {}}
    if path.exists():
        book = TokenBook.from_file(path)  # the relay's own checks: private, well-formed, unique tokens
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        data = {"clients": dict(loaded.get("clients") or {}), "stations": dict(loaded.get("stations") or {})}
        if name in book.clients or name in book.stations:
            section = "clients" if name in book.clients else "stations"
            raise ValueError(f"{name!r} is already in {path}'s {section}; remove it there first to replace its token")
    out = Path(out_dir) if out_dir is not None else (path.parent if str(path.parent) else Path("."))
    target = out / (f"{name}.token" if kind == "client" else f"{name}.credentials.yaml")
    if target.exists():
        raise ValueError(f"{target} already exists; move it away or give another --out")
    token = secrets.token_urlsafe(32)
    data[f"{kind}s"][name] = token
    TokenBook(data["clients"], data["stations"])  # the new book must load as the relay will load it
    out.mkdir(parents=True, exist_ok=True)
    if kind == "client":
        _write_private(target, token + "\n")
    else:
        _write_private(target, yaml.safe_dump({"target": relay_address, "station_id": name, "token": token},
                                               sort_keys=False))
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _write_private(temporary, yaml.safe_dump({k: v for k, v in data.items() if v}, sort_keys=True))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        target.unlink(missing_ok=True)
        raise
    return target


def build_parser() -> argparse.ArgumentParser:
    """Return the ``strands-robots relay tokens`` parser."""
    parser = argparse.ArgumentParser(prog="strands-robots relay tokens", allow_abbrev=False,
                                     description="Manage the relay's tokens file.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = commands.add_parser("add", help="add a client (team) or a station with a fresh token", allow_abbrev=False,
                              description="Add a client (team) or a station with a fresh token to the tokens file "
                                          "and write its token file (client) or credentials file (station), 0600.")
    add.add_argument("name", help="the team's client name or the station's id")
    kind = add.add_mutually_exclusive_group(required=True)
    kind.add_argument("--client", action="store_const", const="client", dest="kind", help="a team's client token")
    kind.add_argument("--station", action="store_const", const="station", dest="kind",
                      help="a station's token and its credentials file")
    add.add_argument("--tokens", required=True, metavar="FILE", help="the relay's tokens file (created when missing)")
    add.add_argument("--out", default=None, metavar="DIR",
                     help="where NAME.token or NAME.credentials.yaml goes (default: the tokens file's directory)")
    add.add_argument("--relay-address", default="127.0.0.1:50051", metavar="HOST:PORT",
                     help="with --station: the relay address its credentials name (default %(default)s)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``strands-robots relay tokens add ...``; exit 0, or 2 with one line saying why nothing was written."""
    from strands_robots.client.cli.parse_command import parse_command

    args = parse_command(build_parser(), list(sys.argv[1:] if argv is None else argv))
    try:
        written = add_token(args.tokens, args.name, args.kind, out_dir=args.out, relay_address=args.relay_address)
    except (ValueError, OSError) as exc:
        print(f"strands-robots relay tokens: {exc}", file=sys.stderr, flush=True)
        return 2
    what = "token file (the team's --token-file)" if args.kind == "client" else \
        "credentials file (the station's --relay-credentials)"
    print(f"added {args.kind} {args.name!r} to {args.tokens}; its {what}: {written} (mode 0600); a running relay "
          f"reads the new token within seconds", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
