"""Typed errors of the Evaluation Client, each carrying the relay's reason (``str(exc)``, ``exc.reason``)."""

from __future__ import annotations

from typing import Dict, Type


class RelayError(Exception):
    """A relay call failed. ``reason`` is the server's message; ``code`` the gRPC status name."""

    code = "UNKNOWN"

    def __init__(self, reason: str, code: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        if code:
            self.code = code


class Unauthenticated(RelayError):
    """No token, an unknown token, or a token of the wrong kind."""

    code = "UNAUTHENTICATED"


class NotAllowed(Unauthenticated):
    """The token is valid but may not do this: a comparison slot another team serves (the reason names it)."""

    code = "PERMISSION_DENIED"


class NotFound(RelayError):
    """No such job for this client (another client's job reads the same as a missing one)."""

    code = "NOT_FOUND"


class InvalidTask(RelayError):
    """The job or one of its tasks was refused; the reason names the task index, field and why."""

    code = "INVALID_ARGUMENT"


class AlreadyExists(RelayError):
    """The job id is taken, or another policy client already serves this job."""

    code = "ALREADY_EXISTS"


class Unavailable(RelayError):
    """The relay could not be reached (or went away mid-call)."""

    code = "UNAVAILABLE"


class SessionAborted(RelayError):
    """The policy session was ended by the other side or the relay."""

    code = "ABORTED"


class MessageTooLarge(RelayError):
    """A message exceeded the relay's size limit."""

    code = "RESOURCE_EXHAUSTED"


class QuotaExceeded(RelayError):
    """A per-team limit of the relay was reached (open jobs, queued episodes, open streams).

    ``reason`` names the limit and its value (``max_open_jobs_per_token (64) reached: ...``); wait for a job to end
    or close a stream, then try again. Same gRPC code as :class:`MessageTooLarge`, told apart by the reason.
    """

    code = "RESOURCE_EXHAUSTED"


class DeadlineExceeded(RelayError):
    """The call did not finish within its timeout."""

    code = "DEADLINE_EXCEEDED"


class PolicyFailed(RelayError):
    """The served policy raised (something other than EndEpisode); the station was told, then the session ended."""

    code = "POLICY_FAILED"


class RecordingCorrupt(RelayError):
    """A recording's bytes do not match its SHA-256 or size (cut short or changed on the way); nothing was kept."""

    code = "DATA_LOSS"


class NotNow(RelayError):
    """The call cannot be done in the job's present state; the reason says why.

    An invitation already answered or a job ended, a slot served before its team accepted the invitation, a
    recording not usable.
    """

    code = "FAILED_PRECONDITION"


class RecordingRefused(NotNow):
    """The relay holds no usable recording of the episode; the reason says why.

    Larger than the relay's max_recording_bytes (or the client's max_bytes), its bytes not matching what the
    station said, or still being uploaded.
    """

    code = "FAILED_PRECONDITION"


_BY_CODE: Dict[str, Type[RelayError]] = {
    cls.code: cls
    for cls in (Unauthenticated, NotFound, InvalidTask, AlreadyExists, Unavailable, SessionAborted,
                MessageTooLarge, DeadlineExceeded, RecordingCorrupt, RecordingRefused)
}
_BY_CODE["PERMISSION_DENIED"] = NotAllowed


def from_rpc_error(exc: Exception) -> RelayError:
    """Return the typed error for a ``grpc.RpcError`` (the server's details as the reason)."""
    code = exc.code() if hasattr(exc, "code") else None
    name = getattr(code, "name", "UNKNOWN")
    details = exc.details() if hasattr(exc, "details") else ""
    reason = details or str(exc)
    cls = _BY_CODE.get(name, RelayError)
    if cls is MessageTooLarge and reason.startswith("max_"):
        cls = QuotaExceeded  # the relay's limit refusals name their limit first
    return cls(reason, name)
