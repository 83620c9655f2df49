"""The one rule: which keys a team's job may never carry, whatever the station.

Scoring rules, the scripted operator's settings, simulated faults, seeds, episode budgets and scene settings are
the station's (its suite files); a job that names one is refused at submit, naming the key. The job file
(:mod:`~strands_robots.job_model.team_job`), the relay's ``SubmitJob`` (``relay.job_request``) and the station
node's ``submit_job`` service call :func:`team_key_refusal` on every key a team sent (top-level job keys, each
task entry's keys, each choice and each free-form task parameter), so the rule is said once. Pure: no imports
beyond the standard library.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "JOB",
    "SUITE_TASK",
    "FREE_FORM_TASK",
    "CHOICE",
    "TASK_PARAMETER",
    "PLACES",
    "TeamJobRefused",
    "TeamKeyRefused",
    "team_key_refusal",
    "check_team_key",
    "never_a_teams_keys",
]

# Where a key stands in a team's job.
JOB = "job"                      # a top-level key of the job
SUITE_TASK = "suite task"        # a key of one `tasks:` entry ({task, trials})
FREE_FORM_TASK = "free-form task"  # a key of one `free_form:` entry (a team's own task)
CHOICE = "choice"                # a key of `choose:` (team_may_choose)
TASK_PARAMETER = "task parameter"  # a parameter of a free-form task on the wire (SubmitJob's Task.parameters)
PLACES = (JOB, SUITE_TASK, FREE_FORM_TASK, CHOICE, TASK_PARAMETER)

# Keys (exact) never a team's, anywhere, and why.
_SELF_SCORING = "the success predicate and the score sheet's answers are the station's (its suite files): a team " \
                "never scores its own episodes"
_OPERATOR = "the scripted operator is driven only by the station's suite files, never by a job"
_FAULTS = "simulated faults are set only in the station's suite files (a simulated station), never by a job"
_SEEDS = "seeds come from the station's suite (trial i uses the suite task's seed i); ask for trials instead"
_SCENE = "the scene and the start pose are the suite task's, set by the station"
_NEVER = {
    "success_when": _SELF_SCORING,
    "success": _SELF_SCORING,
    "headline": _SELF_SCORING,
    "answers": _SELF_SCORING,
    "operator": _OPERATOR,
    "faults": _FAULTS,
    "seed": _SEEDS,
    "seeds": _SEEDS,
    "seed_rule": _SEEDS,
    "scene": _SCENE,
    "object_x": _SCENE,
    "object_y": _SCENE,
    "camera_cover": _SCENE,
    "start_pose": _SCENE,
}
# Key prefixes never a team's.
_NEVER_PREFIXES = (
    ("answer.", _SELF_SCORING),
    ("operator_", _OPERATOR),
    ("operator.", _OPERATOR),
    ("fault.", _FAULTS),
    ("faults.", _FAULTS),
    ("start_pose_", _SCENE),
    ("scene.", _SCENE),
)
# Keys a team may set on its own (free-form) task but never on a suite's task: the suite fixes them.
_SUITE_FIXES = {
    "scoring": "a suite task's score sheet is the station's; a team's own sheet belongs to a free_form task",
    "budget": "a suite task's episode budget is the suite's (budget_s)",
    "budget_s": "a suite task's episode budget is the suite's (budget_s)",
    "duration_s": "a suite task's episode budget is the suite's (budget_s)",
    "instruction": "a suite task's instruction is the suite's; a team's own task belongs in free_form",
    "layout": "a suite task's layout is the suite's; a team's own task belongs in free_form",
    "parameters": "a suite task's parameters are the suite's; the team's settings go in choose (team_may_choose)",
}


class TeamJobRefused(ValueError):
    """A team's job was refused; ``field`` names where (``tasks[1].trials``, ``choose.cameras``), ``reason`` why."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class TeamKeyRefused(TeamJobRefused):
    """A team's job carried a key that is never a team's (:func:`team_key_refusal`)."""


def team_key_refusal(key: str, place: str) -> Optional[str]:
    """Return why a team may never send ``key`` at ``place`` (one of :data:`PLACES`), or None.

    None does not mean the key is allowed there: each place also refuses keys it does not know (and ``choose``
    those the suite's ``team_may_choose`` does not list); this rule is the part that holds on every station.
    """
    if place not in PLACES:
        raise ValueError(f"place must be one of {PLACES}, got {place!r}")
    name = str(key)
    if name in _NEVER:
        return f"{name!r} refused: {_NEVER[name]}"
    for prefix, why in _NEVER_PREFIXES:
        if name.startswith(prefix):
            return f"{name!r} refused: {why}"
    if place in (SUITE_TASK, CHOICE) and name in _SUITE_FIXES:
        return f"{name!r} refused: {_SUITE_FIXES[name]}"
    if place == CHOICE and name in ("scoring", "trials", "task"):
        return f"{name!r} refused: not a setting a team chooses"
    return None


def check_team_key(key: str, place: str, field: str) -> None:
    """Raise :class:`TeamKeyRefused` naming ``field`` when :func:`team_key_refusal` refuses ``key``."""
    reason = team_key_refusal(key, place)
    if reason is not None:
        raise TeamKeyRefused(field, reason)


def never_a_teams_keys() -> list:
    """Return the keys no team job carries anywhere, sorted, and each refused prefix as ``<prefix>*``."""
    return sorted(_NEVER) + [f"{prefix}*" for prefix, _ in _NEVER_PREFIXES]
