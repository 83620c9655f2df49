"""A job's snapshot as one relay message: made to fit by construction, and what was left out said in it.

A station reports every snapshot of a job in a ``ReportStatus`` call the relay accepts only up to its
``max_message_bytes``. A snapshot grows with its job: every finished episode carries its task (instruction,
layout, parameters, score sheet) and its answered sheet. :func:`fit_snapshot` returns a snapshot that fits
unchanged; one that does not is made to fit, in this order and only as far as needed:

0. its texts cut to their limits (:func:`cut_snapshot`: the message and each ``end_detail``, with a marker saying
   how much was cut), as the relay would refuse them longer; then, leaving out
1. the texts of the oldest episodes' tasks and sheets: each keeps its id, end condition, scores, answers, run id,
   recording hash, its task's id and the head of its ``end_detail`` (:data:`SLIM_END_DETAIL_MAX` characters);
2. then, oldest first, all but each episode's id, end condition, ``scored``, ``success``, ``score`` and
   ``taken_over``: what the rates are computed from (the *skeleton*);
3. then the policy's declared spec in the provenance (a comparison's: every slot's).

Episodes are never left out (``len(episodes)`` counts the finished episodes, and the relay refuses a snapshot with
fewer than it holds), and the snapshot's ``message`` says what was left out and that the station's own record
(its ``get_status`` service, its job files) holds every episode in full: a trimmed snapshot is never silent.

By construction a skeleton episode is at most :data:`SKELETON_EPISODE_MAX_BYTES` (the station's episode ids
and end conditions are its own: ``ep_`` and at most 7 digits, one of ``STATION_END_CONDITIONS``), a job lists at
most ``EPISODES_LISTED_MAX`` episodes (``station.limits``) and a snapshot's other fields are bounded where they
enter (ids, the message, the provenance and its declared spec), and its summary (the job's figures with their
intervals) carries counts and the station's own texts, per task at most (:func:`summary_max_bytes`): so every
snapshot a station makes fits a relay message of the default size (:func:`worst_case_bytes`, checked by a test
against a real relay).

Pure: protobuf messages in and out, no grpc.
"""

from __future__ import annotations

from typing import Any, Optional

from strands_robots.wire.proto import evaluation_pb2 as ev
from strands_robots.station.limits import END_DETAIL_MAX, EPISODES_LISTED_MAX, IDENTIFIER_MAX, JOB_MESSAGE_MAX, cut

__all__ = ["fit_snapshot", "cut_snapshot", "SLIM_END_DETAIL_MAX", "SKELETON_EPISODE_MAX_BYTES", "worst_case_bytes",
           "summary_max_bytes"]

#: What a slimmed episode keeps of its ``end_detail`` (characters).
SLIM_END_DETAIL_MAX = 256
#: A skeleton episode in the snapshot, framed (field tag and length): ``ep_`` + 7 digits, the longest station end
#: condition (20 characters), three true flags and a score: 52 bytes, rounded up.
SKELETON_EPISODE_MAX_BYTES = 64
#: The final message field: at most ``JOB_MESSAGE_MAX`` characters of at most 4 UTF-8 bytes each, tag and length.
_MESSAGE_FIELD_MAX_BYTES = 4 * JOB_MESSAGE_MAX + 4
#: The provenance without its declared spec: version, revision, three config files (a path of up to 4096
#: bytes each, a name, a SHA-256), framed.
_PROVENANCE_REST_MAX_BYTES = 3 * (4096 + 128 + 64 + 16) + 512
#: ids (job, station), state, counts, times, sequence and the framing of the fields above.
_FIXED_MAX_BYTES = 2 * (4 * IDENTIFIER_MAX + 4) + 64 + 64


def summary_max_bytes(tasks: Optional[int] = None) -> int:
    """Return the most bytes a snapshot's ``summary`` takes: the job's figures and one per task, framed.

    Counts and numbers are bounded by their types; the texts are the station's own (an interval method's name,
    the notes of ``stats.proportion`` / ``stats.mean_score``) and task ids at most ``IDENTIFIER_MAX`` characters;
    a job names at most ``validation.JOB_LIMITS["tasks"]`` tasks.

    :param tasks: the most tasks with figures (None: the job limit).
    """
    from strands_robots import validation
    from strands_robots.stats import mean_score, proportion

    tasks = int(validation.JOB_LIMITS["tasks"].maximum) if tasks is None else tasks
    notes = (mean_score.NO_SCORES_NOTE, mean_score.ONE_SCORE_NOTE, mean_score.CONSTANT_NOTE,
             f"{mean_score.BCA_FALLBACK_NOTE}; {mean_score.SMALL_SAMPLE_NOTE}")
    rate = 2 * 6 + 3 * 9 + 2 + len("clopper-pearson") + 9 + 3 + len(proportion.NO_TRIALS_NOTE) + 4
    score = 6 + 3 * 9 + 2 + len("percentile") + 9 + 6 + 11 + 3 + max(len(n) for n in notes) + 4
    coverage = 7 * 6 + 4
    figures = rate + score + coverage
    task = 4 * IDENTIFIER_MAX + 4 + figures + 4
    return figures + tasks * task + 8


def cut_snapshot(status: Any) -> Any:
    """Return a copy of ``status`` (``pb.JobStatus``) with its message and every end_detail cut to their limits."""
    short = ev.JobStatus()
    short.CopyFrom(status)
    short.message = cut(short.message, JOB_MESSAGE_MAX)
    for episode in short.episodes:
        episode.end_detail = cut(episode.end_detail, END_DETAIL_MAX)
    return short


def _varint_len(value: int) -> int:
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


def _framed(episode: Any) -> int:
    """Bytes ``episode`` takes as one element of ``JobStatus.episodes`` (tag, length, body)."""
    size = episode.ByteSize()
    return 1 + _varint_len(size) + size


def _slim(episode: Any) -> None:
    task_id = episode.task.task_id
    episode.ClearField("task")
    episode.task.task_id = task_id
    for item in episode.items:
        item.question = ""
    episode.end_detail = cut(episode.end_detail, SLIM_END_DETAIL_MAX)


def _skeleton(episode: Any) -> None:
    for name in ("items", "task", "end_detail", "run_id", "recording_sha256"):
        episode.ClearField(name)


def _note(budget_bytes: int, slimmed: int, skeletons: int, spec_left_out: str) -> str:
    parts = []
    if slimmed:
        parts.append(f"the first {slimmed} episode(s) without their task's texts and sheet's questions")
    if skeletons:
        parts.append(f"the first {skeletons} with only their id, end condition and score")
    if spec_left_out:
        parts.append(f"{spec_left_out} left out of the provenance")
    return (f"[this snapshot was trimmed to fit one relay message ({budget_bytes} bytes): {'; '.join(parts)}; the "
            f"station's record holds every episode in full]")


def fit_snapshot(status: Any, budget_bytes: int) -> Optional[Any]:
    """Return ``status`` (``pb.JobStatus``) when it is at most ``budget_bytes``, else a copy trimmed to fit.

    :returns: the snapshot, a trimmed copy whose message says what was left out, or None when even every
        episode's skeleton and no declared spec do not fit (a budget below :func:`worst_case_bytes`).
    """
    if status.ByteSize() <= budget_bytes:
        return status
    short = cut_snapshot(status)
    if short.ByteSize() <= budget_bytes:
        return short
    status = short
    short = ev.JobStatus()
    short.CopyFrom(status)
    short.message = ""
    room = budget_bytes - _MESSAGE_FIELD_MAX_BYTES  # the message, with the note, is set at the end
    size = short.ByteSize()
    slimmed = skeletons = 0
    for step in (_slim, _skeleton):
        done = 0
        for episode in short.episodes:
            if size <= room:
                break
            before = _framed(episode)
            step(episode)
            size -= before - _framed(episode)
            done += 1
        if step is _slim:
            slimmed = done
        else:
            skeletons = done
    spec_left_out = ""
    if size > room and (short.provenance.policy_spec_json or short.provenance.slot_specs):
        spec_left_out = "every slot's declared spec" if short.provenance.slot_specs else "the policy's declared spec"
        short.provenance.policy_spec_json = ""
        short.provenance.ClearField("slot_specs")
        size = short.ByteSize()
    note = _note(budget_bytes, max(slimmed, skeletons), skeletons, spec_left_out)
    head = cut(status.message, JOB_MESSAGE_MAX - len(note) - 1) if status.message else ""
    short.message = f"{head} {note}" if head else note
    return short if short.ByteSize() <= budget_bytes else None


def worst_case_bytes(episodes: int = EPISODES_LISTED_MAX, spec_json_max: Optional[int] = None) -> int:
    """Return the most bytes a fitted snapshot of ``episodes`` skeleton episodes can take (the bound above)."""
    from strands_robots.client.policy_spec import MAX_SPEC_JSON

    spec = MAX_SPEC_JSON if spec_json_max is None else spec_json_max
    return (_FIXED_MAX_BYTES + _MESSAGE_FIELD_MAX_BYTES + _PROVENANCE_REST_MAX_BYTES + spec + 8
            + summary_max_bytes() + episodes * SKELETON_EPISODE_MAX_BYTES)
