"""A system test's own suite: the station-side settings its scenarios need, written as the station's suite file.

Teams never send a predicate, an operator or fault setting, a seed or a scene: a simulated station's suite files
hold them. A test that drives such a scenario writes its tasks here before the station starts (the station reads
its suites once, at start) and names them in its job (``EvaluationClient.submit_suite_job``).
:func:`suite_task` turns a task written with the station's own parameters (``success_when``,
``operator_takeover_at_s``, ``answer.<item>``, ``fault.<name>``, ``start_pose_*``, ``object_*``, ``policy.<option>``,
``duration_s``, ``seed``) into a suite task; :func:`write_suite` writes the suite file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

import yaml

# station task parameter -> (suite section, key); None section: a top-level key of the suite task
_SECTIONS = {
    "success_when": ("success", "when"),
    "start_pose_timeout_s": ("start_pose", "timeout_s"),
    "start_pose_tolerance_rad": ("start_pose", "tolerance_rad"),
    "object_x": ("scene", "object_x"),
    "object_y": ("scene", "object_y"),
    "camera_cover": ("scene", "camera_cover"),
}
#: The team's choices, never a suite's: a job's ``choose``.
CHOICES = ("cameras", "image_format", "image_quality", "control_frequency")


def _value(text: str):
    loaded = yaml.safe_load(text)
    return loaded if isinstance(loaded, (int, float, bool, str)) else text


def suite_task(task: Mapping, seeds: int = 20) -> dict:
    """Return the suite task of a task mapping written with the station's parameters (``seeds`` trials)."""
    params = dict(task.get("parameters") or {})
    out: dict = {"task_id": task["task_id"], "instruction": task["instruction"], "layout": task.get("layout", ""),
                 "budget_s": float(params.pop("duration_s", 10.0)), "scoring": list(task["scoring"])}
    if "seed" in params:
        first = int(params.pop("seed"))
        out["seed_rule"] = {"first": first, "count": seeds}
    else:
        out["seed_rule"] = {"first": 0, "count": seeds}
    for key, text in params.items():
        if key in CHOICES:
            continue
        if key in _SECTIONS:
            section, name = _SECTIONS[key]
        elif key.startswith("operator_"):
            section, name = "operator", key[len("operator_"):]
        elif key.startswith("answer."):
            out.setdefault("operator", {}).setdefault("answers", {})[key[len("answer."):]] = _value(text)
            continue
        elif key.startswith("fault."):
            section, name = "faults", key[len("fault."):]
        elif key.startswith("policy."):
            section, name = "policy_hints", key[len("policy."):]
        else:
            raise ValueError(f"task {task['task_id']!r}: {key!r} is no station setting a suite holds")
        out.setdefault(section, {})[name] = text if key == "success_when" or key == "camera_cover" else _value(text)
    return out


def choices(task: Mapping) -> dict:
    """Return the team's choices a task mapping carries (its cameras and rate parameters)."""
    return {k: v for k, v in (task.get("parameters") or {}).items() if k in CHOICES}


def write_suite(directory: "str | Path", suite: str, tasks: Iterable[Mapping], *, seeds: int = 20,
                team_may_choose: "Mapping | None" = None) -> Path:
    """Write ``<directory>/<suite>.yaml`` holding ``tasks`` (each once by id); return its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    unique: dict = {}
    for task in tasks:
        unique.setdefault(task["task_id"], suite_task(task, seeds))
    data = {"suite": suite, "title": f"system test suite {suite}", "headline": "success_at_end",
            "team_may_choose": dict(team_may_choose or {"cameras": True, "control_frequency": True}),
            "tasks": list(unique.values())}
    path = directory / f"{suite}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def suite_trials(tasks, episodes: int) -> list:
    """Return ``[(task_id, trials)]`` running ``tasks`` cycled for ``episodes`` episodes (each id in one run)."""
    trials: list = []
    for i in range(episodes):
        name = tasks[i % len(tasks)]["task_id"]
        if trials and trials[-1][0] == name:
            trials[-1] = (name, trials[-1][1] + 1)
        else:
            trials.append((name, 1))
    return trials


def submit_suite(client, station_id: str, suite: str, tasks, episodes: int, job_id: "str | None" = None) -> str:
    """Submit the suite job naming ``tasks`` (the suite's, by id) for ``episodes`` episodes; the job id."""
    chosen: dict = {}
    for task in tasks:
        chosen.update(choices(task))
    return client.submit_suite_job(station_id, suite, suite_trials(tasks, episodes), choose=chosen, job_id=job_id)
