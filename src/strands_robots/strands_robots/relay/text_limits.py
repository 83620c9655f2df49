"""The length of every free text entering the relay, checked where it enters (``station/limits.py``'s numbers).

- A caller's text is **refused** (:class:`~strands_robots.station.limits.TextTooLong`, answered INVALID_ARGUMENT
  naming the field): ids in every request (``IDENTIFIER_MAX``), a cancel reason (``CANCEL_REASON_MAX``), and every
  text of a station's snapshot (:func:`snapshot_refusal`: the job message, each episode's id, run id and
  end_detail, and its task's texts, the provenance's declared spec: ``MAX_SPEC_JSON``), so the station can
  replace a snapshot the relay refuses. A policy's declared spec at its attach is checked whole
  (``client.policy_spec.spec_refusal``). A task's texts at
  submit are checked by the shared job validation (``job_request.check_submit``).
- A text inside a policy session is **cut** with a marker (:func:`cut_policy_request`, :func:`cut_policy_reply`):
  refusing it would end the session mid-episode, and what it says (a policy's error) must still arrive.

Pure: protobuf messages in, a reason or a cut message out. No grpc.
"""

from __future__ import annotations

from typing import Any

from strands_robots.client.policy_spec import MAX_SPEC_JSON
from strands_robots.station.limits import (
    CANCEL_REASON_MAX,
    END_DETAIL_MAX,
    IDENTIFIER_MAX,
    INSTRUCTION_MAX,
    JOB_MESSAGE_MAX,
    TASK_TEXT_MAX,
    TextTooLong,
    check_text,
    cut,
)

__all__ = ["check_id", "check_cancel_reason", "snapshot_refusal", "cut_policy_request", "cut_policy_reply",
           "TextTooLong"]


def check_id(value: str, what: str) -> str:
    """Refuse an id longer than ``IDENTIFIER_MAX``."""
    return check_text(value, IDENTIFIER_MAX, what)


def check_cancel_reason(reason: str) -> str:
    """Refuse a cancel reason longer than ``CANCEL_REASON_MAX``."""
    return check_text(reason, CANCEL_REASON_MAX, "reason")


def _task_refusal(task: Any, where: str) -> str:
    checks = [(task.task_id, IDENTIFIER_MAX, "task_id"), (task.instruction, INSTRUCTION_MAX, "instruction"),
              (task.layout, TASK_TEXT_MAX, "layout")]
    for key, value in task.parameters.items():
        checks += [(key, TASK_TEXT_MAX, "parameters key"), (value, TASK_TEXT_MAX, f"parameters[{key[:40]!r}]")]
    for i, item in enumerate(task.scoring.items):
        checks += [(item.name, IDENTIFIER_MAX, f"scoring.items[{i}].name"),
                   (item.question, TASK_TEXT_MAX, f"scoring.items[{i}].question"),
                   (item.success_answer, TASK_TEXT_MAX, f"scoring.items[{i}].success_answer")]
        checks += [(c, TASK_TEXT_MAX, f"scoring.items[{i}].choices") for c in item.choices]
    for value, limit, what in checks:
        if len(value) > limit:
            return str(TextTooLong(f"{where}.{what}", len(value), limit))
    return ""


def snapshot_refusal(snapshot: Any) -> str:
    """Say which text of a ``JobStatus`` is over its limit, naming the field; "" when every one fits."""
    checks = [(snapshot.job_id, IDENTIFIER_MAX, "job_id"), (snapshot.station_id, IDENTIFIER_MAX, "station_id"),
              (snapshot.state, IDENTIFIER_MAX, "state"), (snapshot.message, JOB_MESSAGE_MAX, "message")]
    if snapshot.HasField("provenance"):
        from strands_robots.job_model.compare import MAX_SLOTS

        provenance = snapshot.provenance
        checks.append((provenance.policy_spec_json, MAX_SPEC_JSON, "provenance.policy_spec_json"))
        if len(provenance.slot_specs) > MAX_SLOTS:
            return (f"provenance.slot_specs: {len(provenance.slot_specs)} slots, more than a comparison has "
                    f"(at most {MAX_SLOTS})")
        for i, s in enumerate(provenance.slot_specs):
            checks += [(s.slot, IDENTIFIER_MAX, f"provenance.slot_specs[{i}].slot"),
                       (s.policy_spec_json, MAX_SPEC_JSON, f"provenance.slot_specs[{i}].policy_spec_json")]
    for value, limit, what in checks:
        if len(value) > limit:
            return str(TextTooLong(what, len(value), limit))
    for i, ep in enumerate(snapshot.episodes):
        for value, limit, what in ((ep.episode_id, IDENTIFIER_MAX, "episode_id"),
                                   (ep.end_condition, IDENTIFIER_MAX, "end_condition"),
                                   (ep.end_detail, END_DETAIL_MAX, "end_detail"),
                                   (ep.run_id, IDENTIFIER_MAX, "run_id")):
            if len(value) > limit:
                return str(TextTooLong(f"episodes[{i}].{what}", len(value), limit))
        for j, item in enumerate(ep.items):
            for value, limit, what in ((item.name, IDENTIFIER_MAX, "name"), (item.question, TASK_TEXT_MAX, "question")):
                if len(value) > limit:
                    return str(TextTooLong(f"episodes[{i}].items[{j}].{what}", len(value), limit))
        reason = _task_refusal(ep.task, f"episodes[{i}].task")
        if reason:
            return reason
    return ""


def cut_policy_request(request: Any) -> Any:
    """Cut the free texts of a station's ``PolicyRequest`` to their limits (in place; returned)."""
    kind = request.WhichOneof("kind")
    if kind == "episode_end":
        end = request.episode_end
        end.episode_id = cut(end.episode_id, IDENTIFIER_MAX)
        end.end_condition = cut(end.end_condition, IDENTIFIER_MAX)
        end.end_detail = cut(end.end_detail, END_DETAIL_MAX)
    elif kind == "episode_start":
        request.episode_start.episode_id = cut(request.episode_start.episode_id, IDENTIFIER_MAX)
    return request


def cut_policy_reply(reply: Any) -> Any:
    """Cut the free texts of a client's ``PolicyReply`` (a policy's error, its EndEpisode reason) to their limits."""
    kind = reply.WhichOneof("kind")
    if kind == "error":
        reply.error.type = cut(reply.error.type, IDENTIFIER_MAX)
        reply.error.message = cut(reply.error.message, JOB_MESSAGE_MAX)
    elif kind == "end_episode":
        reply.end_episode.reason = cut(reply.end_episode.reason, JOB_MESSAGE_MAX)
    return reply
