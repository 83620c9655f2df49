"""Reading a credential from a file: only a file that nobody else could have written or swapped, and only so much.

Every file that holds a secret or decides whom to trust (a token file, the relay's tokens file, a relay
credentials file, a TLS private key, a ``root_certificates`` bundle, a certificate chain) is read here, by one of
two functions:

- :func:`read_private_file` (a secret): rules 1-5;
- :func:`read_trusted_file` (public, but whoever can change it decides whom this process trusts: a CA bundle, a
  certificate chain): rules 1-3 and 5, and rule 4 for writing only (group and others may read it).

The rules, in the order they are checked (each refusal is one line naming the file and the rule):

1. The path is resolved (symlinks followed) and every directory from the file's up to ``/`` is owned by you or
   root and writable by nobody else, unless its sticky bit is set (``/tmp``: there others may add files but may
   not rename or delete yours). Otherwise another user could put their own file in its place, as ssh's
   ``StrictModes`` reasons about ``~/.ssh``.
2. The file is opened without following a last symlink and without blocking, and is a regular file (not a FIFO, a
   device such as ``/dev/zero``, or a directory).
3. It is owned by you (the effective user) or root: a file another user owns is theirs to change.
4. Its mode gives group and others no access (private), or no write access (trusted).
5. It holds at most ``max_bytes``: at most that many bytes (plus one) are read, and a longer file is refused, so a
   huge or endless file never fills memory.

Ownership and mode are checked on the open file (``fstat``), so the file checked is the file read. No ROS and no
grpc here: the Evaluation Client reads its ``root_certificates`` through this module too.
"""

from __future__ import annotations

import errno as errno_module
import os
import stat
from typing import Optional

__all__ = ["CredentialFileError", "read_private_file", "read_trusted_file", "MAX_SECRET_FILE_BYTES",
           "MAX_TOKENS_FILE_BYTES", "MAX_CERTIFICATE_FILE_BYTES"]

#: A token file, a relay credentials file, a TLS private key: far smaller (an RSA-16384 key in PEM is ~13 KB).
MAX_SECRET_FILE_BYTES = 64 * 1024
#: The relay's tokens file: one line per team or station (~80 bytes each), tens of thousands of them.
MAX_TOKENS_FILE_BYTES = 4 * 1024 * 1024
#: A PEM certificate bundle (Debian's whole ``ca-certificates.crt`` is ~220 KB).
MAX_CERTIFICATE_FILE_BYTES = 4 * 1024 * 1024


class CredentialFileError(ValueError):
    """A credential file was refused: one line naming the file and the rule.

    ``errno`` is set when it cannot be opened at all (missing, no permission), with ``strerror`` saying why.
    """

    def __init__(self, message: str, errno: Optional[int] = None, strerror: str = "") -> None:
        super().__init__(message)
        self.errno = errno
        self.strerror = strerror


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _trusted_owner(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _check_directories(what: str, shown: str, real: str) -> None:
    """Rule 1: every directory holding ``real`` (a resolved path) is yours or root's, and only yours to change."""
    directory = os.path.dirname(real)
    while True:
        try:
            st = os.stat(directory)
        except OSError as exc:
            raise CredentialFileError(f"cannot read {what} {shown!r}: its directory {directory!r}: "
                                      f"{exc.strerror or exc}", exc.errno, exc.strerror or str(exc)) from None
        mode = stat.S_IMODE(st.st_mode)
        if not _trusted_owner(st.st_uid):
            raise CredentialFileError(
                f"{what} {shown!r} is refused: its directory {directory!r} is owned by {_owner(st.st_uid)}, not by "
                f"you ({_owner(os.geteuid())}) or root, so that user could replace the file; keep credentials in a "
                f"directory you own")
        if mode & 0o022 and not mode & stat.S_ISVTX:
            raise CredentialFileError(
                f"{what} {shown!r} is refused: its directory {directory!r} has mode {mode:04o}: group or others may "
                f"write it and it has no sticky bit, so another user could replace the file; chmod go-w "
                f"{directory!r} (or keep the file in a private directory)")
        parent = os.path.dirname(directory)
        if parent == directory:
            return
        directory = parent


def _read(path: "str | os.PathLike[str]", what: str, max_bytes: int, forbidden_bits: int, fix: str) -> bytes:
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be >= 1, got {max_bytes!r}")
    shown = os.fspath(path)
    real = os.path.realpath(shown)
    _check_directories(what, shown, real)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        if exc.errno == errno_module.ELOOP:  # swapped for a symlink since it was resolved
            raise CredentialFileError(f"{what} {shown!r} is refused: it became a symlink while it was read") from None
        raise CredentialFileError(f"cannot read {what} {shown!r}: {exc.strerror or exc}", exc.errno,
                                  exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CredentialFileError(f"{what} {shown!r} is refused: not a regular file (a device, FIFO or "
                                      f"directory could never end or change under the reader)")
        if not _trusted_owner(st.st_uid):
            raise CredentialFileError(
                f"{what} {shown!r} is refused: it is owned by {_owner(st.st_uid)}, not by you "
                f"({_owner(os.geteuid())}) or root, so that user may change it; chown it to yourself")
        mode = stat.S_IMODE(st.st_mode)
        if mode & forbidden_bits:
            raise CredentialFileError(f"{what} {shown!r} has mode {mode:04o}: {fix}")
        if st.st_size > max_bytes:
            raise CredentialFileError(f"{what} {shown!r} is refused: it is {st.st_size} bytes, more than the "
                                      f"{max_bytes} a {what} may hold")
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while total <= max_bytes:  # read until the end, or one byte past the bound (a file that grew meanwhile)
            chunk = os.read(fd, min(1 << 16, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise CredentialFileError(f"{what} {shown!r} is refused: it holds more than the {max_bytes} bytes a "
                                      f"{what} may hold")
        return b"".join(chunks)
    except OSError as exc:
        raise CredentialFileError(f"cannot read {what} {shown!r}: {exc.strerror or exc}", exc.errno,
                                  exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def read_private_file(path: "str | os.PathLike[str]", what: str = "credentials file",
                      max_bytes: int = MAX_SECRET_FILE_BYTES) -> bytes:
    """Return the bytes of a secret file (rules 1-5: mode 0600 or stricter); else raise :class:`CredentialFileError`."""
    return _read(path, what, max_bytes, 0o077,
                 "group or others may access it; make it 0600 (chmod 600)")


def read_trusted_file(path: "str | os.PathLike[str]", what: str = "root_certificates",
                      max_bytes: int = MAX_CERTIFICATE_FILE_BYTES) -> bytes:
    """Return the bytes of a file that decides whom to trust (rules 1-5; group and others may read, not write)."""
    return _read(path, what, max_bytes, 0o022,
                 "group or others may write it, and it decides whom this process trusts; chmod go-w it")
