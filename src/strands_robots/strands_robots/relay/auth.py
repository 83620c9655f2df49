"""Bearer tokens for the relay: who is calling, from a YAML file, checked in constant time on every call.

The file names each client and each station with its token::

    clients:
      team_a: "a-long-random-token"
    stations:
      sim_station: "another-long-random-token"

A call carries ``authorization: Bearer <token>`` in its gRPC metadata. :meth:`TokenBook.identify` compares
the presented token with every known token using ``hmac.compare_digest`` and never stops early, so the time
taken does not tell how much of a token matched or which entry did. A malformed file is refused with the
reason (:class:`TokenFileError`), never half-loaded; so is a file that group or others may read or write (one
line naming the file and its mode, as ssh refuses a private key: ``chmod 600`` it), a file another user owns or
could replace, anything but a regular file, and a file over its size bound
(:mod:`strands_robots.client.credential_files`).

Tokens rotate without a restart: :class:`ReloadingTokenBook` holds the file's current book and re-reads the file
when it changes (checked every ``check_s``) or when asked (the relay does on SIGHUP). A file that no longer
loads keeps the book it had (one line naming the file and the reason) until a good one is written; calls in
flight finish under the book they started with, and every later call is checked against the new one.

No grpc import here: the server adapts this onto gRPC metadata and status codes.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Tuple

KIND_CLIENT = "client"
KIND_STATION = "station"

#: Shorter tokens are refused: a bearer token is the whole secret.
MIN_TOKEN_LENGTH = 16


class TokenFileError(ValueError):
    """The token file cannot be used; the message names the entry and the reason."""


@dataclass(frozen=True)
class Principal:
    """Who a valid token belongs to: a client (``team_a``) or a station (``sim_station``)."""

    kind: str
    name: str


@dataclass(frozen=True)
class AuthResult:
    """The answer to :meth:`TokenBook.authenticate`: a principal, or the reason the call is refused."""

    principal: Optional[Principal]
    reason: str = ""


def _entries(section: object, kind: str) -> Tuple[Tuple[str, str], ...]:
    if section is None:
        return ()
    if not isinstance(section, Mapping):
        raise TokenFileError(f"'{kind}s' must be a mapping of name: token, got {type(section).__name__}")
    out = []
    for name, token in section.items():
        if not isinstance(name, str) or not name:
            raise TokenFileError(f"{kind}s: every name must be a non-empty string, got {name!r}")
        if not isinstance(token, str):
            raise TokenFileError(f"{kind}s.{name}: the token must be a string, got {type(token).__name__}")
        if len(token) < MIN_TOKEN_LENGTH:
            raise TokenFileError(f"{kind}s.{name}: the token is {len(token)} characters; "
                                 f"at least {MIN_TOKEN_LENGTH} are required")
        if token != token.strip() or any(c.isspace() for c in token):
            raise TokenFileError(f"{kind}s.{name}: the token contains whitespace")
        out.append((name, token))
    return tuple(out)


class TokenBook:
    """The known tokens, each mapped to its principal. Immutable once built; safe to share between threads."""

    def __init__(self, clients: Mapping[str, str], stations: Mapping[str, str]) -> None:
        entries = [(t, Principal(KIND_CLIENT, n)) for n, t in _entries(clients, KIND_CLIENT)]
        entries += [(t, Principal(KIND_STATION, n)) for n, t in _entries(stations, KIND_STATION)]
        seen: dict = {}
        for token, principal in entries:
            if token in seen:
                other = seen[token]
                raise TokenFileError(f"{principal.kind}s.{principal.name} has the same token as "
                                     f"{other.kind}s.{other.name}; every token must be unique")
            seen[token] = principal
        if not entries:
            raise TokenFileError("the token file names no clients and no stations")
        self._entries = tuple((t.encode("utf-8"), p) for t, p in entries)
        self.clients = frozenset(p.name for _, p in entries if p.kind == KIND_CLIENT)
        self.stations = frozenset(p.name for _, p in entries if p.kind == KIND_STATION)

    @classmethod
    def from_yaml_text(cls, text: str, source: str = "token file") -> "TokenBook":
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise TokenFileError(f"{source}: not valid YAML: {exc}") from exc
        if not isinstance(data, Mapping):
            raise TokenFileError(f"{source}: expected a mapping with 'clients' and 'stations', "
                                 f"got {type(data).__name__}")
        unknown = sorted(str(k) for k in data if k not in ("clients", "stations"))
        if unknown:
            raise TokenFileError(f"{source}: unknown section(s) {', '.join(unknown)}; "
                                 f"only 'clients' and 'stations' are read")
        try:
            return cls(data.get("clients"), data.get("stations"))
        except TokenFileError as exc:
            raise TokenFileError(f"{source}: {exc}") from None

    @classmethod
    def from_file(cls, path: "str | Path") -> "TokenBook":
        """Read a tokens file, or refuse it in one line naming the file and the rule.

        It must be yours, mode 0600 (or stricter), in a directory only you may change, and at most
        :data:`~strands_robots.client.credential_files.MAX_TOKENS_FILE_BYTES`.
        """
        from strands_robots.client.credential_files import MAX_TOKENS_FILE_BYTES
        from strands_robots.wire.credentials import CredentialsError, read_private_text

        path = Path(path)
        try:
            text = read_private_text(path, "tokens file", MAX_TOKENS_FILE_BYTES)
        except CredentialsError as exc:
            if exc.errno is not None:
                raise TokenFileError(f"cannot read token file {str(path)!r}: {exc.strerror}") from None
            raise TokenFileError(str(exc)) from None
        return cls.from_yaml_text(text, source=str(path))

    def identify(self, token: str) -> Optional[Principal]:
        """Return the principal ``token`` belongs to, or None; compares with every entry (constant time)."""
        presented = token.encode("utf-8")
        found = None
        for known, principal in self._entries:
            if hmac.compare_digest(known, presented):
                found = principal
        return found

    def authenticate(self, metadata: Iterable[Tuple[str, "str | bytes"]], kind: str) -> AuthResult:
        """Check a call's metadata for a ``Bearer`` token of a principal of ``kind``."""
        values = [v for k, v in metadata if k.lower() == "authorization"]
        if not values:
            return AuthResult(None, "missing 'authorization: Bearer <token>' metadata")
        if len(values) > 1:
            return AuthResult(None, "more than one authorization header")
        value = values[0]
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return AuthResult(None, "authorization must be 'Bearer <token>'")
        principal = self.identify(token.strip())
        if principal is None:
            return AuthResult(None, "unknown token")
        if principal.kind != kind:
            return AuthResult(None, f"a {principal.kind} token cannot call the {kind} service")
        return AuthResult(principal)


class ReloadingTokenBook:
    """A tokens file's current :class:`TokenBook`, re-read on change or on :meth:`reload`; same calls as the book.

    :param path: the tokens file (read now: a bad file raises :class:`TokenFileError` here, as at start).
    :param check_s: how often a thread of its own looks at the file's size, times and inode (a rename onto it,
        as ``mv new tokens.yaml`` does, counts); ``0`` watches nothing (reload on request only).
    """

    def __init__(self, path: "str | Path", check_s: float = 1.0,
                 log: Optional[Callable[[str], None]] = None) -> None:
        self.path = Path(path)
        self._log = log or logging.getLogger("strands_robots.relay").warning
        self._stamp = self._stat()
        self._book = TokenBook.from_file(self.path)
        self._lock = threading.Lock()  # one reload at a time (the watch and a SIGHUP may meet)
        self.reloads = 0               # books loaded after the first
        self.refused = 0               # re-reads that kept the previous book (the file did not load)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if check_s > 0:
            self._thread = threading.Thread(target=self._watch, args=(check_s,), name="relay-tokens", daemon=True)
            self._thread.start()

    def _stat(self) -> Optional[Tuple[int, int, int, int]]:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)

    def reload(self) -> str:
        """Re-read the file now; return "" when the new book is in use, else why the old one stays."""
        with self._lock:
            self._stamp = self._stat()
            try:
                book = TokenBook.from_file(self.path)
            except TokenFileError as exc:
                reason = f"tokens file not reloaded, the previous tokens stay in use: {exc}"
                self.refused += 1
                self._log(reason)
                return reason
            self._book = book
            self.reloads += 1
            logging.getLogger("strands_robots.relay").info(
                "tokens file %s reloaded: %d client(s), %d station(s)", self.path, len(book.clients),
                len(book.stations))
            return ""

    def _watch(self, check_s: float) -> None:
        while not self._stop.wait(check_s):
            if self._stat() != self._stamp:
                self.reload()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    @property
    def book(self) -> TokenBook:
        return self._book

    @property
    def clients(self) -> frozenset:
        return self._book.clients

    @property
    def stations(self) -> frozenset:
        return self._book.stations

    def identify(self, token: str) -> Optional[Principal]:
        return self._book.identify(token)

    def authenticate(self, metadata: Iterable[Tuple[str, "str | bytes"]], kind: str) -> AuthResult:
        return self._book.authenticate(metadata, kind)
