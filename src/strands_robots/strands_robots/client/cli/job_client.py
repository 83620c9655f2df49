"""What every ``strands-robots job`` command shares: the token, the relay connection, the options, the guard.

The guard turns a bad input or a relay's refusal into one line and an exit code.

The client token comes from ``--token-file FILE`` (mode 0600, or refused with one line naming the mode) or the
environment variable ``STRANDS_ROBOTS_TOKEN``; never from the command line
(:mod:`strands_robots.client.cli.argv_secrets` refuses ``--token``). Exit codes: 2 a bad command line or
file, 3 the relay refused (the reason is printed), 4 the policy (an openpi server, a module) could not be reached
or loaded.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

from strands_robots.client.cli import argv_secrets

__all__ = ["EXIT_USAGE", "EXIT_REFUSED", "EXIT_POLICY_SERVER", "TOKEN_ENV", "client_token", "connect", "fail",
           "guard", "add_common_arguments", "DEFAULT_NAME"]

EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_POLICY_SERVER = 4
#: The environment variable holding the client token when no ``--token-file`` is given.
TOKEN_ENV = argv_secrets.CLIENT_TOKEN_ENV
#: The environment variables ``--relay`` and ``--token-file`` default to (set once per shell, not per command).
RELAY_ENV, TOKEN_FILE_ENV = "STRANDS_ROBOTS_RELAY", "STRANDS_ROBOTS_TOKEN_FILE"
#: How the commands name themselves in a one-line error unless the parser says otherwise (``cli_name``).
DEFAULT_NAME = "strands-robots job"


def client_token(args: argparse.Namespace) -> str:
    """Return the client token: ``--token-file`` (0600) first, then ``STRANDS_ROBOTS_TOKEN``; never argv."""
    from strands_robots.client.credential_files import read_private_file

    path = getattr(args, "token_file", None)
    if path:
        lines = read_private_file(path, "--token-file").decode("utf-8", "replace").strip().splitlines()
        if not lines or not lines[0].strip():
            raise ValueError(f"--token-file {str(path)!r} is empty")
        return lines[0].strip()
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    raise ValueError(f"no client token: give --token-file FILE (mode 0600), or set {TOKEN_FILE_ENV} to such a file "
                     f"or {TOKEN_ENV} to the token")


def connect(args: argparse.Namespace) -> Any:
    """Return an :class:`~strands_robots.client.EvaluationClient` on ``--relay`` with the client token."""
    from strands_robots.client import EvaluationClient

    return EvaluationClient(args.relay, token=client_token(args), root_certificates=args.root_certificates or None)


def fail(text: str, code: int, name: str = DEFAULT_NAME) -> int:
    """Print ``text`` as the job command's one-line error (``name: text``) and return ``code``."""
    print(f"{name}: {text}", file=sys.stderr, flush=True)
    return code


def guard(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command: a bad input exits 2, a relay's refusal 3, each with its one-line reason."""
    def wrapped(args: argparse.Namespace) -> int:
        from strands_robots.client import RelayError

        try:
            return run(args)
        except (ValueError, OSError) as exc:
            return fail(str(exc), EXIT_USAGE, getattr(args, "cli_name", DEFAULT_NAME))
        except RelayError as exc:
            return fail(f"{type(exc).__name__}: {exc}", EXIT_REFUSED, getattr(args, "cli_name", DEFAULT_NAME))

    wrapped.__name__ = run.__name__
    wrapped.__doc__ = run.__doc__
    return wrapped


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """Add the options every job command takes: the relay, the token file, the relay's CA and the poll period."""
    p.add_argument("--relay", default=os.environ.get(RELAY_ENV) or "127.0.0.1:50051",
                   help=f"host:port of the relay (default: ${RELAY_ENV}, else 127.0.0.1:50051)")
    p.add_argument("--token-file", default=os.environ.get(TOKEN_FILE_ENV) or None,
                   help=f"a file (mode 0600) holding this client's token (default: ${TOKEN_FILE_ENV}; else the "
                        f"token itself in ${TOKEN_ENV})")
    p.add_argument("--root-certificates",
                   help="PEM file of the relay's CA: connect over TLS (default: none, a plaintext connection)")
    p.add_argument("--poll-s", type=float, default=0.5,
                   help="how often to ask the relay for the job's status, in seconds (default %(default)s)")
