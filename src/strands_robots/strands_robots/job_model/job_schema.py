"""The job file's JSON Schema, made from the rules :mod:`~strands_robots.job_model.team_job` checks, and its page.

:func:`job_schema` builds the schema from the very constants the reader uses (the keys each place allows, the
choosable settings, the limits, the text lengths, the interval methods, the keys that are never a team's), so
it cannot drift from what ``submit`` and the relay accept; each field carries a description and an example here.
:func:`job_file_markdown` renders it as ``docs/job-file.md`` (a test keeps that page equal to it). The schema
says the shape; what only a station knows (its suites, tasks, trial counts, choice ranges) is checked against
its offer (``team_job.check_against_offer``). Pure: the standard library.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from strands_robots.job_model import team_job as rules
from strands_robots.job_model.offer import CHOOSABLE
from strands_robots.job_model.team_keys import never_a_teams_keys

__all__ = ["job_schema", "job_file_markdown", "EXAMPLE_JOB", "SCHEMA_ID"]

SCHEMA_ID = "https://strands-robots.dev/schemas/job-file.json"

#: One description and one example per field, by the field's path (``tasks[].trials``, ``choose.cameras``).
_FIELDS: Dict[str, Any] = {
    "station_id": ("The station that runs the job (`suites` lists the stations and what each offers).",
                   "sim_station"),
    "suite": ("One of the suites the station offers; `tasks` names its tasks.", "demo"),
    "tasks": ("The suite's tasks to run, entry by entry in this order: `{task, trials}` or a bare task id (one "
              "trial). Trial i of a task runs with the suite's seed i; a task named again goes on with its next "
              "trials.", [{"task": "hold_pose", "trials": 2}, "reach_cube"]),
    "tasks[].task": ("A task id of the suite.", "hold_pose"),
    "tasks[].trials": ("How many trials (episodes) of the task; at most what the suite offers.", 2),
    "choose": ("Settings the team chooses, where the suite's `team_may_choose` allows them (`suites` shows which "
               "and their ranges).", {"cameras": "scene:224x224,wrist", "control_frequency": 50}),
    "choose.cameras": (CHOOSABLE["cameras"] + ".", "scene:224x224,wrist"),
    "choose.image_format": (CHOOSABLE["image_format"] + ".", "jpeg"),
    "choose.image_quality": (CHOOSABLE["image_quality"] + ".", 90),
    "choose.control_frequency": (CHOOSABLE["control_frequency"] + ".", 50),
    "free_form": ("The team's own tasks, where the station allows them; scored only by the station's operator "
                  "(a scripted operator leaves them unscored).",
                  [{"task_id": "wave", "instruction": "wave at the camera", "trials": 2, "scoring": [
                      {"name": "waved", "question": "Did it wave?", "answer_type": "yes_no", "max_points": 1,
                       "success_answer": "yes"}]}]),
    "free_form[].task_id": ("The task's id in this job (not a suite task's).", "wave"),
    "free_form[].instruction": ("What the policy is asked to do (its prompt).", "wave at the camera"),
    "free_form[].layout": ("The scene the operator sets up, in words.", "empty table"),
    "free_form[].scoring": ("The questions the station's operator answers after each episode, the success item "
                            "first: each `{name, question, answer_type (yes_no, count, choice), max_points, ...}` "
                            "(`success_answer` for the success item; `choices` and `choice_points` for a choice; "
                            "`points_per_unit` for a count). The station checks the sheet.",
                            [{"name": "waved", "question": "Did it wave?", "answer_type": "yes_no", "max_points": 1,
                              "success_answer": "yes"}]),
    "free_form[].trials": ("How many episodes of the task (default 1).", 2),
    "free_form[].budget_s": ("The episode's budget in seconds (default: the station's).", 5),
    "policy": ("The policy `submit --serve` serves (with the strands_robots package); `serve --policy` or "
               "`serve --openpi` serve your own instead.", {"provider": "scripted", "config": {"mode": "torque_ramp"}}),
    "policy.provider": ("A policy provider of the strands_robots package (mock, scripted, replay, ...).", "scripted"),
    "policy.config": ("The provider's settings.", {"mode": "torque_ramp"}),
    "max_discards": ("Discarded episodes the job tolerates before it fails (default: the station's, 10).", 2),
    "intervals": ("How the success rates' 95 % interval is computed.", "wilson"),
    "job_id": ("The job's id (default: a fresh unguessable one per submit).", "my_job"),
    "record": ("Bring every episode's recording (MCAP) home: `job recordings` downloads them; a station whose "
               "config keeps recordings on site refuses the job at submit.", True),
    "compare": ("Makes the job a comparison (A/B) of two or more policies, each served by its own "
                "`job serve JOB --slot NAME`: blocks of one suite task and seed, every slot once in a recorded random "
                "order (docs/comparisons.md).",
                {"slots": ["vision", "blind"], "stop": {"when": "separated", "alpha": 0.05, "max_blocks": 40}}),
    "compare.slots": ("The compared policies' slots, 2 to 8, each a name [A-Za-z0-9._-]{1,64} (your team's) or "
                      "{name, team} (another team's, which must accept the job: docs/comparisons.md); the first two "
                      "are a and b of the verdict.", ["vision", {"name": "theirs", "team": "lab_b"}]),
    "compare.slots[].name": ("The slot's name, [A-Za-z0-9._-]{1,64}, unique in the job.", "theirs"),
    "compare.slots[].team": ("The team that serves the slot: its client name at the relay (absent: yours).",
                             "lab_b"),
    "compare.stop": ("Stop once an anytime-valid test of the paired outcomes separates the policies (absent: every "
                     "block runs).", {"when": "separated", "alpha": 0.05, "max_blocks": 40}),
    "compare.stop.when": ("The stop rule: separated (the only one).", "separated"),
    "compare.stop.alpha": ("The false-winner rate allowed, in (0, 0.5].", 0.05),
    "compare.stop.max_blocks": ("At most this many blocks (default: every block the tasks make).", 40),
    "compare.stop.or_out_of_reach": ("Also stop (not_separated) once separation within max_blocks is out of "
                                     "reach.", False),
    "client_id": ("Ignored on submit: the relay takes the client id from the token.", "team_a"),
}

#: A whole job file assembled from the examples above (it passes the reader's rules: a test checks it).
EXAMPLE_JOB: Dict[str, Any] = {key: _FIELDS[key][1] for key in
                               ("station_id", "suite", "tasks", "choose", "free_form", "policy", "max_discards",
                                "intervals", "job_id")}


def _field(path: str, schema: Dict[str, Any]) -> Dict[str, Any]:
    description, example = _FIELDS.get(path, ("(not described: add it to job_model/job_schema.py)", None))
    out = {"description": description, **schema}
    if example is not None:
        out["examples"] = [example]
    return out


def _text(path: str, limit_key: str, *, required: bool = False) -> Dict[str, Any]:
    schema: Dict[str, Any] = {"type": "string", "maxLength": rules.TEXT_LIMITS[limit_key]}
    if required:
        schema["minLength"] = 1
    return _field(path, schema)


def _object(keys: tuple, properties: Dict[str, Any], required: tuple = ()) -> Dict[str, Any]:
    missing = [k for k in keys if k not in properties]
    for key in missing:  # a key the reader allows that this module does not describe yet
        properties[key] = _field(key, {})
    return {"type": "object", "properties": {k: properties[k] for k in keys}, "required": list(required),
            "additionalProperties": False}


def _compare() -> Dict[str, Any]:
    from strands_robots.job_model import compare

    stop = _object(compare._STOP_KEYS, {
        "when": _field("compare.stop.when", {"enum": list(compare.STOP_WHEN), "default": compare.STOP_WHEN[0]}),
        "alpha": _field("compare.stop.alpha", {"type": "number", "exclusiveMinimum": 0, "maximum": compare.MAX_ALPHA,
                                               "default": 0.05}),
        "max_blocks": _field("compare.stop.max_blocks", {"type": "integer", "minimum": 1,
                                                         "maximum": compare._MAX_BLOCKS}),
        "or_out_of_reach": _field("compare.stop.or_out_of_reach", {"type": "boolean", "default": False}),
    })
    slots = _field("compare.slots", {"type": "array", "minItems": compare.MIN_SLOTS, "maxItems": compare.MAX_SLOTS,
                                     "uniqueItems": True,
                                     "items": {"oneOf": [
                                         {"type": "string", "pattern": compare.SLOT_PATTERN.pattern},
                                         _object(compare._SLOT_KEYS, {
                                             "name": _field("compare.slots[].name", {
                                                 "type": "string", "pattern": compare.SLOT_PATTERN.pattern}),
                                             "team": _field("compare.slots[].team", {
                                                 "type": "string", "pattern": compare.TEAM_PATTERN.pattern}),
                                         }, required=("name",))]}})
    return {**_field("compare", {}), **_object(compare._COMPARE_KEYS, {"slots": slots,
                                                                         "stop": {**_field("compare.stop", {}),
                                                                                  **stop}}, required=("slots",))}


def job_schema() -> Dict[str, Any]:
    """Return the job file's JSON Schema (draft 2020-12) from the reader's own rules."""
    suite_task = _object(rules._SUITE_TASK_KEYS, {
        "task": _text("tasks[].task", "task", required=True),
        "trials": _field("tasks[].trials", {"type": "integer", "minimum": 1, "maximum": rules.MAX_EPISODES,
                                            "default": 1}),
    }, required=("task",))
    free_form = _object(rules._FREE_FORM_KEYS, {
        "task_id": _text("free_form[].task_id", "task_id", required=True),
        "instruction": _text("free_form[].instruction", "instruction", required=True),
        "layout": _text("free_form[].layout", "layout"),
        "scoring": _field("free_form[].scoring", {"type": "array", "minItems": 1, "items": {"type": "object"}}),
        "trials": _field("free_form[].trials", {"type": "integer", "minimum": 1, "maximum": rules.MAX_EPISODES,
                                                "default": 1}),
        "budget_s": _field("free_form[].budget_s", {"type": "number", "exclusiveMinimum": 0}),
    }, required=("task_id", "instruction", "scoring"))
    choose = {"type": "object", "additionalProperties": False,
              "properties": {key: _field(f"choose.{key}", {"type": ["string", "number", "boolean"]})
                             for key in CHOOSABLE}}
    policy = _object(rules._POLICY_KEYS, {
        "provider": _text("policy.provider", "policy.provider"),
        "config": _field("policy.config", {"type": "object"}),
    })
    properties = {
        "station_id": _text("station_id", "station_id"),
        "suite": _text("suite", "suite"),
        "tasks": _field("tasks", {"type": "array", "items": {"oneOf": [
            {"type": "string", "minLength": 1, "maxLength": rules.TEXT_LIMITS["task"]}, suite_task]}}),
        "choose": _field("choose", choose),
        "free_form": _field("free_form", {"type": "array", "items": free_form}),
        "policy": _field("policy", policy),
        "max_discards": _field("max_discards", {"type": "integer", "minimum": 0, "maximum": rules.MAX_DISCARDS}),
        "intervals": _field("intervals", {"enum": list(rules.INTERVAL_METHODS), "default": rules.INTERVAL_METHODS[0]}),
        "job_id": _field("job_id", {"type": "string", "pattern": rules.JOB_ID_PATTERN}),
        "client_id": _text("client_id", "client_id"),
        "compare": _compare(),
        "record": _field("record", {"type": "boolean", "default": False}),
    }
    job = _object(rules._JOB_KEYS, properties)
    job.update({
        "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
        "title": "strands_robots job file",
        "description": "A team's evaluation job: a station's suite tasks and trials and/or the team's own tasks. "
                       "Keys that would let a team score itself, inject faults, drive the scripted operator or set "
                       "seeds, budgets or the scene are refused wherever they appear (x-refused-keys).",
        "anyOf": [{"required": ["suite", "tasks"]}, {"required": ["free_form"]}],
        "x-refused-keys": never_a_teams_keys(),
        "x-moved-keys": dict(rules._MOVED),
        "x-max-episodes": rules.MAX_EPISODES,
        "examples": [EXAMPLE_JOB],
    })
    return job


def _rows(schema: Dict[str, Any], prefix: str, out: List[tuple]) -> None:
    required = set(schema.get("required", ()))
    for key, prop in schema.get("properties", {}).items():
        path = f"{prefix}{key}"
        kind = prop.get("type") or ("one of " + ", ".join(prop["enum"]) if "enum" in prop else "")
        if isinstance(kind, list):
            kind = " or ".join(kind)
        limits = []
        for name, word in (("minimum", ">="), ("maximum", "<="), ("exclusiveMinimum", ">"), ("maxLength", "chars <=")):
            if name in prop:
                limits.append(f"{word} {prop[name]}")
        if "pattern" in prop:
            limits.append(f"pattern `{prop['pattern']}`")
        example = json.dumps(prop["examples"][0]) if prop.get("examples") else ""
        out.append((path, kind, "yes" if key in required else "", "; ".join(limits), prop.get("description", ""),
                    example))
        if prop.get("type") == "object" and "properties" in prop:
            _rows(prop, f"{path}.", out)
        items = prop.get("items") or {}
        for variant in [items, *items.get("oneOf", [])]:
            if variant.get("type") == "object" and "properties" in variant:
                _rows(variant, f"{path}[].", out)


def job_file_markdown() -> str:
    """Return ``docs/job-file.md``: the schema as a page (generated: ``strands-eval schema --markdown``)."""
    import textwrap

    schema = job_schema()
    rows: List[tuple] = []
    _rows(schema, "", rows)
    lines = [
        "# The job file",
        "",
        "<!-- Generated by `strands-eval schema --markdown` from the rules submit and the relay check "
        "(strands_robots/job_model/job_schema.py); a test keeps it equal. Do not edit by hand. -->",
        "",
        "A job file is YAML. `strands-eval submit --dry-run job.yaml` checks one with the relay's rules and "
        "sends nothing; `strands-eval schema` prints the JSON Schema below as JSON (for an editor's completion).",
        "",
        "A job names a station's suite and some of its tasks (`suite`, `tasks`), the team's own tasks "
        "(`free_form`, where the station allows them), or both. `strands-eval suites` lists what each station "
        "offers: its suites, their tasks and trials, and what a team may choose.",
        "",
        "## Example",
        "",
        "```yaml",
        _yaml(EXAMPLE_JOB).rstrip(),
        "```",
        "",
        "## Fields",
        "",
        "| field | type | required | limits | what it is | example |",
        "|---|---|---|---|---|---|",
    ]
    for path, kind, required, limits, description, example in rows:
        cells = [f"`{path}`", kind, required, limits, description, f"`{example}`" if example else ""]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += [
        "",
        "A job needs `suite` with `tasks`, or `free_form`, or both. "
        f"A job runs at most {schema['x-max-episodes']} episodes in all.",
        "",
        "## Keys a job never carries",
        "",
        "These belong to the station (its suite files) and are refused wherever a job puts them, naming the key:",
        "",
    ]
    lines += textwrap.wrap(", ".join(f"`{k}`" for k in schema["x-refused-keys"]), 116)
    lines += ["", "Keys of the format before suites, refused with where their setting went:", ""]
    lines += [f"- `{key}`: {where}" for key, where in schema["x-moved-keys"].items()]
    return "\n".join(lines) + "\n"


def _yaml(data: Any, indent: int = 0) -> str:
    """Write the example as YAML: block mappings, list items and nested mappings in flow (JSON) form."""
    pad = "  " * indent
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out.append(f"{pad}{key}: {json.dumps(value)}")
        elif isinstance(value, list):
            out.append(f"{pad}{key}:")
            out += [f"{pad}  - {json.dumps(item)}" for item in value]
        else:
            out.append(f"{pad}{key}: {json.dumps(value)}")
    return "\n".join(out) + "\n"
