"""The client side of a job on the command line: a job file's tasks submitted, its policy served, the job watched.

Shared by ``strands-eval`` and ``strands-robots job`` (:mod:`strands_robots.client.cli.job`), the demo
(:mod:`strands_robots.cli.station_demo`) and ``demo-job`` (:mod:`strands_robots.cli.demo_job`):
:func:`submit_team_job` (a job file's job as the client submits it: its suite tasks and trials, choices, own
tasks), :func:`submit_job_file`, :func:`serve_in_background`,
:func:`watch_job` (a progress bar of finished episodes until the job ends) and :func:`summary_table` /
:func:`report_final` (the final table and rates).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from strands_robots.client import Policy

__all__ = ["free_form_tasks", "submit_team_job", "progress_bar", "summary_table", "summary_lines",
           "status_summary", "comparison_progress", "watch_job", "submit_job_file",
           "serve_in_background", "report_final"]


def free_form_tasks(job: Any) -> list:
    """Return a team job's own tasks as the client submits them (mappings, each trial once, in order)."""
    from strands_robots.job_model.team_job import free_form_parameters

    out = []
    for own in job.free_form:
        task = {"task_id": own.task_id, "instruction": own.instruction, "layout": own.layout,
                "parameters": free_form_parameters(own, job.choose), "scoring": [dict(i) for i in own.scoring]}
        out.extend([task] * own.trials)
    return out


def submit_team_job(client: Any, job: Any, *, station_id: str = "") -> str:
    """Submit a team's job (``job_model.team_job.TeamJob``) through ``client``; the job id.

    Every setting of the job file reaches the station: the suite, its tasks and trials, the choices, the team's
    own tasks, ``max_discards``, ``intervals``, ``record`` and ``compare``; the file's ``policy`` is served by the
    client that submits (``DemoPolicy``), the station's provider being ``relay``. ``job_id`` and ``client_id`` are
    the submit's (a fresh id per submit, the token's team).
    """
    from strands_robots.job_model.compare import compare_to_mapping

    station = station_id or job.station_id
    if job.suite:
        return client.submit_suite_job(station, job.suite, [(t.task, t.trials) for t in job.tasks],
                                       choose=dict(job.choose), free_form=free_form_tasks(job),
                                       max_discards=job.max_discards, intervals=job.intervals,
                                       record=job.record or None,
                                       **({} if job.compare is None
                                          else {"compare": compare_to_mapping(job.compare)}))
    tasks = free_form_tasks(job)
    return client.submit_job(station_id=station, tasks=tasks, episodes=len(tasks), max_discards=job.max_discards,
                             intervals=job.intervals, record=job.record or None)


def progress_bar(done: int, total: int, width: int = 30) -> str:
    """Return ``[#####.....] 3/8 episodes``: never more than ``total`` (an episode run again counts once).

    A job lists every attempt it finished, re-runs of faulted episodes among them, so ``done`` may exceed the
    episodes the job asked for; the bar says ``total/total`` and how many more ran (``8/8 episodes (+1 re-run)``).
    """
    total = max(total, 1)
    shown = min(done, total)
    filled = min(width, round(width * shown / total))
    extra = done - shown
    rerun = f" (+{extra} re-run{'s' if extra > 1 else ''})" if extra > 0 else ""
    return f"[{'#' * filled}{'.' * (width - filled)}] {shown}/{total} episodes{rerun}"


def status_progress(status: Any) -> str:
    """Return a ``JobStatus``'s progress: :func:`progress_bar`, or a full bar and how a comparison stopped early."""
    from strands_robots.client.comparison_view import status_early_stop

    stopped = status_early_stop(status)
    if stopped:
        return f"[{'#' * 30}] {stopped}"
    return progress_bar(len(status.episodes), status.episodes_total)


def _figure(episode: Any, name: str) -> Any:
    """Return an episode's optional figure, or None when it is not known.

    A protobuf's when present, a model's when not None, a ROS message's ``[<=1]`` field when it holds its value.
    """
    has = getattr(episode, "HasField", None)
    if callable(has):
        return getattr(episode, name) if has(name) else None
    value = getattr(episode, name, None)
    if value is not None and not isinstance(value, (str, bytes)) and hasattr(value, "__len__"):
        return value[0] if len(value) else None
    return value


def episode_figure_cells(episode: Any) -> tuple:
    """Return the table cells of an episode's success at the end / ever and the figures its score is read against."""
    cells = []
    for name in ("success_at_end", "success_ever"):
        value = _figure(episode, name)
        cells.append("-" if value is None else ("yes" if value else "no"))
    for name, form in (("inference_latency_p50_ms", "{:.1f}"), ("inference_latency_p99_ms", "{:.1f}"),
                       ("mean_observation_age_steps", "{:.2f}"), ("missed_deadlines", "{:d}")):
        value = _figure(episode, name)
        cells.append("-" if value is None else form.format(value))
    return tuple(cells)


def summary_table(status: Any) -> str:
    """Format the final table and the rates.

    Per episode: its end condition, scored, success, score, taken over; both meanings of success (at_end, ever:
    the task's predicate on the final observation, on any observation) and what the score should be read
    against (inference latency p50 / p99 in ms, mean observation age in steps, missed deadlines); "-" where not
    known. Then the job's figures, or for a comparison job its result: each slot's rate, the paired difference,
    the verdict.
    """
    rows = [("episode", "end condition", "scored", "success", "score", "taken over", "at_end", "ever", "p50_ms",
             "p99_ms", "obs_age", "missed")]
    for e in status.episodes:
        rows.append((e.episode_id, e.end_condition, "yes" if e.scored else "no",
                     ("yes" if e.success else "no") if e.scored else "-", f"{e.score:.2f}" if e.scored else "-",
                     "yes" if e.taken_over else "no", *episode_figure_cells(e)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if hasattr(status, "HasField") and status.HasField("comparison"):  # slots, paired difference, verdict, blocks
        from strands_robots.client.comparison_view import comparison_lines

        lines += comparison_lines(status.comparison)  # per slot: the figures pooled over the slots mean nothing
    else:
        lines += summary_lines(status)
    return "\n".join(lines)


def status_summary(status: Any) -> Any:
    """Return the figures a snapshot carries: a ``pb.JobFigures`` or the model's ``JobSummary``; None when none.

    :param status: a ``pb.JobStatus`` (the client's) or the model's ``JobStatus``.
    """
    has_field = getattr(status, "HasField", None)
    if has_field is not None:
        return status.summary if has_field("summary") else None
    return getattr(status, "summary", None)


def _figures_line(figures: Any) -> str:
    """One line of figures: a ``pb.JobFigures``/``TaskFigures`` (client_cli.figures_text) or a model's ``.text()``."""
    if hasattr(figures, "HasField"):
        from strands_robots.client.cli.figures_text import figures_text

        return figures_text(figures)
    return figures.text()


def _task_figures(task: Any) -> str:
    """Return a task's figures, ``success <rate>; mean score <score>; <coverage>`` (pb ``TaskFigures`` or model)."""
    if hasattr(task, "HasField"):
        from strands_robots.client.cli.figures_text import coverage_text, rate_text, score_text
    else:
        from strands_robots.station.summary import coverage_text, rate_text, score_text  # type: ignore[assignment]
    return f"success {rate_text(task.success)}; mean score {score_text(task.score)}; {coverage_text(task.coverage)}"


def summary_lines(status: Any) -> list:
    """Return the job's figures with their intervals, then one line per task (the snapshot's summary).

    A snapshot without a summary (a station that computes none) gets the same figures computed here from its
    listed episodes where the station package is installed, said so (its discarded and interrupted episodes are not
    known here); the client alone says the station sent none.
    """
    summary, note = status_summary(status), ""
    if summary is None:
        try:
            from strands_robots.station.summary import summarize
        except ImportError:  # the client's distribution: no statistics of its own
            return ["job: (the station sent no figures)"]
        from strands_robots.wire.pb_model import episode_result_from_pb

        episodes = [episode_result_from_pb(e) if hasattr(e, "HasField") else e for e in status.episodes]
        summary = summarize(episodes)
        note = " (computed from the listed episodes: the station sent no summary)"
    lines = [f"job: {_figures_line(summary)}{note}"]
    if len(summary.tasks) > 1:
        width = max(len(t.task_id) for t in summary.tasks)
        lines += [f"  {t.task_id:<{width}}  {_task_figures(t)}" for t in summary.tasks]
    return lines


def _attempted(figures: Any) -> int:
    coverage = figures.coverage
    if hasattr(coverage, "attempted"):
        return int(coverage.attempted)
    from strands_robots.client.cli.figures_text import COVERAGE_BUCKETS

    return sum(int(getattr(coverage, name)) for name in COVERAGE_BUCKETS)


def comparison_progress(status: Any) -> str:
    """One line of a comparison job's progress for ``watch``: blocks complete and the stop rule's state.

    Names no slot while the labels are blind; empty for a single-policy job (or a status that is not a pb).
    """
    has_field = getattr(status, "HasField", None)
    if has_field is None or not has_field("comparison"):
        return ""
    from strands_robots.client.comparison_view import comparison_view

    view = comparison_view(status.comparison)
    line = f"comparison: {view.block_count} complete blocks"
    if view.stop is not None:
        line += (f"; e-value {view.stop.e_value:.3g} (separates at {view.stop.threshold:g}), verdict "
                 f"{view.stop.verdict}")
    if view.revealed and view.pairs:
        pair = view.pairs[0]
        line += f"; {pair.a} - {pair.b} {pair.difference}"
    return line


def watch_job(client: Any, job_id: str, *, poll_s: float = 0.5, write: Callable[[str], None] = print,
              stop: Optional[threading.Event] = None, timeout_s: Optional[float] = None) -> Any:
    """Poll ``get_status`` until the job ends, printing the progress bar when it changes; the final status."""
    from strands_robots.client import RelayError

    terminal = {"SUCCEEDED", "FAILED", "CANCELLED"}
    last = None
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    status = None
    while True:
        try:
            status = client.get_status(job_id)
        except RelayError as exc:
            write(f"get_status: {exc}")
            status = None
        if status is not None:
            shown = (len(status.episodes), status.state)
            if shown != last:
                last = shown
                write(f"{status_progress(status)}  {status.state}  {status.message}")
                progress = comparison_progress(status)
                figures = status_summary(status)
                # a comparison's figures are per slot (its progress line); pooled over the slots they mean nothing
                if figures is not None and _attempted(figures) and not progress:
                    write(f"    {_figures_line(figures)}")
                if progress:
                    write(f"    {progress}")
            if status.state in terminal:
                return status
        if stop is not None and stop.is_set():
            return status
        if deadline is not None and time.monotonic() > deadline:
            return status
        time.sleep(poll_s)



def submit_job_file(client: Any, job: Any, *, write: Callable[[str], None] = print, prefix: str = "[demo]",
                    policy_provider: str = "", connect_timeout_s: float = 60.0) -> str:
    """Submit the job file's job (a ``TeamJob``) through ``client``; the job id.

    A relay that is not listening yet (started at the same time, as under ``ros2 launch``) is retried until
    ``connect_timeout_s``: an UNAVAILABLE call never reached it, so trying again cannot submit twice.
    """
    from strands_robots.client import Unavailable

    deadline = time.monotonic() + connect_timeout_s
    while True:
        try:
            job_id = submit_team_job(client, job)
            break
        except Unavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    named = f"suite {job.suite}'s " if job.suite else ""
    write(f"{prefix} submitted job {job_id}: {job.episodes} episodes of {len(job.tasks) + len(job.free_form)} "
          f"{named}tasks; serving the {policy_provider or job.policy_provider} policy through the relay")
    return job_id


def serve_in_background(client: Any, job_id: str, policy: Policy, served: dict, slot: str = "") -> threading.Thread:
    """Serve ``policy`` for the job on a thread; ``served`` gets ``final`` (its last status) or ``error``.

    :param slot: the comparison job's slot the policy serves ("" for a job of one policy).
    """

    def serve() -> None:
        try:
            served["final"] = client.serve_policy(job_id, policy, slot=slot)
        except Exception as exc:  # reported by the caller; the status poll still sees the job end
            served["error"] = exc

    thread = threading.Thread(target=serve, name="demo-policy", daemon=True)
    thread.start()
    return thread


def report_final(final: Any, write: Callable[[str], None] = print) -> int:
    """Print the summary table and the job's last line; 0 when the job SUCCEEDED, else 1."""
    write("")
    write(summary_table(final))
    write(f"job {final.job_id} {final.state}: {final.message}")
    return 0 if final.state == "SUCCEEDED" else 1
