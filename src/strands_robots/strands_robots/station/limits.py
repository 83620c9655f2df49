"""Length limits for every free text that crosses a boundary (relay, station, rollout), checked where it enters.

A text a caller sends (a task's instruction or layout, a parameter value, a cancel reason) is **refused** when it
is longer than its limit: the caller learns it at once and can send less. A text the station produces itself from
what happened (an episode's ``end_detail``, a job's ``message``) is **cut** to its limit with a marker saying how
much was cut, so the fact that something happened is never lost and never makes a report too large to deliver.

Limits count characters (``len`` of the ``str``); a UTF-8 encoding is at most 4 bytes a character, so every
limit here bounds the bytes on the wire too. The proto comments name the same numbers.
"""

from __future__ import annotations

__all__ = [
    "CANCEL_REASON_MAX",
    "END_DETAIL_MAX",
    "EPISODES_LISTED_MAX",
    "IDENTIFIER_MAX",
    "INSTRUCTION_MAX",
    "JOB_MESSAGE_MAX",
    "OPERATOR_TEXT_MAX",
    "TASK_TEXT_MAX",
    "TextTooLong",
    "check_text",
    "cut",
]

CANCEL_REASON_MAX = 1024   # a team's or an operator's reason for cancelling a job
INSTRUCTION_MAX = 4096     # a task's instruction (what the policy is told)
TASK_TEXT_MAX = 1024       # any other free text of a task: layout, parameter keys and values, item names
IDENTIFIER_MAX = 128       # ids and names: job id, station id, episode id, operator name, task name
OPERATOR_TEXT_MAX = 1024   # an operator's free text (takeover reason, skip-scoring reason)
END_DETAIL_MAX = 2048      # an episode's end_detail (produced by the station: cut, never refused)
JOB_MESSAGE_MAX = 2048     # a job's progress or terminal message (produced by the station: cut, never refused)
#: Finished episodes one job lists (kept ones and those its station faults ended): past it the job FAILs rather
#: than start another, so its snapshot always fits one relay message (``station_link.snapshot_fit``). Twice the most
#: episodes a job may ask for (``validation.JOB_LIMITS``).
EPISODES_LISTED_MAX = 200_000


class TextTooLong(ValueError):
    """A caller's text is over its limit; the message names the field, its length and the limit."""

    def __init__(self, what: str, length: int, limit: int) -> None:
        super().__init__(f"{what} is {length} characters long; at most {limit} are allowed")
        self.what = what
        self.length = length
        self.limit = limit


def check_text(text: str, limit: int, what: str) -> str:
    """Return ``text`` unchanged, or raise :class:`TextTooLong` naming ``what`` when it is over ``limit``."""
    if len(text) > limit:
        raise TextTooLong(what, len(text), limit)
    return text


def cut(text: str, limit: int) -> str:
    """Return ``text`` when it fits ``limit``, else its head and a marker naming how many characters were cut.

    The result is never longer than ``limit`` (for any ``limit`` of 40 or more).
    """
    if len(text) <= limit:
        return text
    marker_room = 40
    head = max(0, limit - marker_room)
    marker = f" [... {len(text) - head} characters cut]"
    return text[:head] + marker[: max(0, limit - head)]
