"""``strands-robots rescore RECORDING.mcap...``: every episode's success and score recomputed offline, beside the live.

A recording (``strands-robots record`` beside a station, ``up --record``, or a rollout's own episode file) holds,
for each episode, the predicate's inputs on every step's observation (``RunPolicyStep.success_input_*``) and on
the final one (``RunPolicyEnded.end_input_*``), the predicate the rollout judged (``success_when``), and, when the
station's ``job_status`` was recorded, the station's result: the exact task (its ``success_when``, ``headline``
and sheet), the end condition, the answered sheet and the live ``success_at_end``, ``success_ever``, ``success``
and ``score``.

From those alone this recomputes each episode (:mod:`~strands_robots.station.success_judgement`, the functions
the station judges with): ``success_at_end`` (the predicate on the final inputs, with the end condition),
``success_ever`` (on any step's inputs, or at the end), the headline's success, and the score (the sheet with
its success item answered from the recomputed success, as the scripted operator answers, and every other item
as the station recorded it). A task without a predicate is rescored from its recorded sheet alone. Each
recomputed value is printed beside the live one; the exit code is 1 when any differs, 0 when all agree, 2 when a
file cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

__all__ = ["EpisodeRescore", "rescore_recording", "format_rescores", "build_parser", "main"]


@dataclass
class EpisodeRescore:
    """One episode of a recording, live beside recomputed (None: not known / not recomputable)."""

    run_id: str
    episode_id: str = ""
    predicate: str = ""
    end_condition: str = ""
    headline: str = ""
    steps: int = 0
    live: dict = field(default_factory=dict)      # success_at_end, success_ever, success, score, steps_ever, ...
    rescored: dict = field(default_factory=dict)
    note: str = ""

    @property
    def differences(self) -> "list[str]":
        """The names whose live and recomputed values are both known and differ."""
        out = []
        for name, value in self.rescored.items():
            live = self.live.get(name)
            if value is None or live is None:
                continue
            if isinstance(value, float) or isinstance(live, float):
                if abs(float(value) - float(live)) > 1e-9:
                    out.append(name)
            elif value != live:
                out.append(name)
        return out


def _one(seq: Any) -> Any:
    """Return the value of a ``[<=1]`` field: its element, or None when empty."""
    seq = list(seq or ())
    return seq[0] if seq else None


def _station_results(records: list) -> "dict[str, Any]":
    """Return the station's episode results by run id: the latest JobStatus of each job, then loose EpisodeResults."""
    latest: dict = {}
    loose: dict = {}
    for _log_ns, kind, msg, _topic in records:
        if kind == "JobStatus":
            latest[msg.job_id] = msg
        elif kind == "EpisodeResult" and msg.episode_id and msg.run_id:
            loose[msg.run_id] = msg
    out = dict(loose)
    for status in latest.values():
        for episode in status.episodes:
            if episode.run_id:
                out[episode.run_id] = episode
    return out


def _rescore_run(run_id: str, steps: list, ended: Any, result: Any, station_recorded: bool) -> EpisodeRescore:
    from strands_robots.conversions.station import station_task_from_msg
    from strands_robots.rollout.end_condition import end_condition_for
    from strands_robots.station.success_judgement import (
        HEADLINE_AT_END,
        PARAM_SUCCESS_WHEN,
        headline_of,
        judge_episode,
        predicate_of,
    )

    out = EpisodeRescore(run_id=run_id, steps=len(steps))
    task = station_task_from_msg(result.task) if result is not None else None
    params = dict(task.parameters) if task is not None else {}
    if task is None and ended.success_when:
        params = {PARAM_SUCCESS_WHEN: ended.success_when}
    out.episode_id = result.episode_id if result is not None else ""
    out.end_condition = result.end_condition if result is not None else end_condition_for(ended.stopped_reason)
    predicate = predicate_of(params)
    out.predicate = predicate.text if predicate is not None else ""
    out.headline = headline_of(params) if predicate is not None else ""
    out.live["rollout_ever"] = bool(ended.success_ever) if predicate is not None and predicate.per_step else None
    out.live["first_step"] = int(ended.success_first_step) if out.live["rollout_ever"] is not None else None
    if result is not None:
        out.live["success_at_end"] = _one(result.success_at_end)
        out.live["success_ever"] = _one(result.success_ever)
        out.live["success"] = bool(result.success) if result.scored else None
        out.live["score"] = float(result.score) if result.scored else None
    judgement = None
    if predicate is not None:
        first = -1
        for index, keys, values in steps:
            if predicate.holds_on(dict(zip(keys, values))):
                first = index
                break
        steps_ever = first >= 0
        if predicate.per_step:
            out.rescored["rollout_ever"] = steps_ever
            out.rescored["first_step"] = first
        end_inputs = dict(zip(ended.end_input_keys, map(float, ended.end_input_values)))
        judgement = judge_episode(params, out.end_condition, end_inputs, steps_ever)
        out.rescored["success_at_end"] = judgement.success_at_end
        out.rescored["success_ever"] = judgement.success_ever
    if result is None:
        out.note = ("not among the station's results (discarded): the rollout's own judgement only"
                    if station_recorded else "no station result recorded: the rollout's own judgement only")
        return out
    if not result.scored:
        out.note = "unscored"
        return out
    success, score, why = _rescore_sheet(task, result, judgement)
    out.rescored["success"], out.rescored["score"] = success, score
    if why:
        out.note = why
    elif judgement is None:
        out.note = "no predicate: rescored from the recorded sheet"
    elif out.headline != HEADLINE_AT_END:
        out.note = f"headline {out.headline}"
    return out


def _rescore_sheet(task: Any, result: Any, judgement: Any) -> "tuple[Optional[bool], Optional[float], str]":
    """Score the sheet again: its success item from the recomputed success, the other items as recorded."""
    from strands_robots.station.answers import ScoreSheetError, parse_answer
    from strands_robots.station.score_sheet import score_answers
    from strands_robots.station.scripted_operator import scripted_answers

    items = {item.name: item for item in task.scoring.items}
    answers: dict = {}
    try:
        for scored in result.items:
            if scored.name in items:
                answers[scored.name] = parse_answer(items[scored.name], scored.answer)
    except ScoreSheetError as exc:
        return None, None, f"the recorded sheet does not parse: {exc}"
    if judgement is not None and task.scoring.items:
        first = task.scoring.items[0].name
        answers[first] = dict(scripted_answers(task, judgement.success))[first]
    try:
        sheet = score_answers(task.scoring, answers)
    except (ValueError, KeyError) as exc:
        return None, None, f"the recorded sheet cannot be scored again: {exc}"
    return bool(sheet.success), float(sheet.score), ""


def rescore_recording(paths: "Sequence[str | Path]", notes: "list[str] | None" = None) -> "list[EpisodeRescore]":
    """Recompute every episode of the recordings at ``paths`` (in the order their rollouts started).

    :param notes: gets one line per file read only in part (cut short, or still being written).
    :raises McapError: a file is not MCAP or a message cannot be decoded; OSError when it cannot be read.
    """
    from strands_robots.monitoring.report import read_messages

    records: list = []
    for path in paths:
        found, why = read_messages(Path(path))  # a file cut short is read as far as it is whole
        records.extend(found)
        if why and notes is not None:
            notes.append(f"{Path(path).name} was {why}")
    records.sort(key=lambda r: r[0])
    order: list = []
    steps: dict = {}
    ended: dict = {}
    for _log_ns, kind, msg, _topic in records:
        if kind != "ObserverEvent":
            continue
        run_id = msg.run_id
        if run_id not in steps:
            steps[run_id] = []
            order.append(run_id)
        if msg.kind == "step" and msg.step:
            s = msg.step[0]
            steps[run_id].append((int(s.applied_action_index), tuple(s.success_input_keys),
                                  tuple(float(v) for v in s.success_input_values)))
        elif msg.kind == "ended" and msg.ended:
            ended[run_id] = msg.ended[0]
    results = _station_results(records)
    out = []
    for run_id in order:
        if run_id not in ended:
            out.append(EpisodeRescore(run_id=run_id, steps=len(steps[run_id]),
                                      note="no Ended event recorded: not rescored"))
            continue
        out.append(_rescore_run(run_id, sorted(steps[run_id]), ended[run_id], results.get(run_id), bool(results)))
    return out


def _cell(live: Any, rescored: Any) -> str:
    def word(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.4f}"
        return str(value)

    return f"{word(live)}/{word(rescored)}"


def format_rescores(rescores: "Sequence[EpisodeRescore]") -> str:
    """Format the table: per episode live/rescored for each value, and whether they agree."""
    names = ("success_at_end", "success_ever", "success", "score")
    rows = [("episode", "run", "end condition", "at_end", "ever", "success", "score", "agree", "predicate / note")]
    for r in rescores:
        diff = r.differences
        rows.append((r.episode_id or "-", r.run_id[:8], r.end_condition or "-",
                     *(_cell(r.live.get(n), r.rescored.get(n)) for n in names),
                     "DIFFERS: " + ", ".join(diff) if diff else "yes",
                     "; ".join(p for p in (r.predicate, r.note) if p)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    differing = sum(1 for r in rescores if r.differences)
    lines.append(f"{len(rescores)} episode(s) rescored (live/rescored): "
                 + (f"{differing} differ" if differing else "every one agrees with its live result"))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strands-robots rescore",
                                     description="Every recorded episode's success (at the end, "
                                     "ever) and score recomputed from the recorded predicate inputs and sheet, printed "
                                     "beside the live ones; exit 1 when any differs, 2 when a recording is unreadable.")
    parser.add_argument("recordings", nargs="+", help="MCAP recordings (strands-robots record, up --record, or "
                                                       "a rollout's episode files)")
    return parser


def main(argv: "Sequence[str] | None" = None) -> int:
    """Print each episode's live and recomputed success and score; 1 when any differs, 2 when unreadable."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    notes: list = []
    try:
        rescores = rescore_recording(args.recordings, notes)
    except Exception as exc:  # not MCAP, undecodable, unreadable: one line, no traceback
        print(f"strands-robots rescore: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 2
    for note in notes:  # what it holds is rescored; a run without its Ended is listed as such
        print(f"strands-robots rescore: {note}", file=sys.stderr, flush=True)
    print(format_rescores(rescores), flush=True)
    return 1 if any(r.differences for r in rescores) else 0


if __name__ == "__main__":
    sys.exit(main())
