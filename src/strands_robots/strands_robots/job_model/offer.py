"""What a station offers teams: its profile, whether it takes free-form tasks, and its suites.

A station reads its suite files (``station.suite_file``), turns each into a :class:`SuiteOffer` (what a team
needs to write a job: the tasks with their instruction, layout, trial count and budget, the score sheet's
questions, and what the team may choose) and sends the :class:`StationOffer` to the relay when it connects. The
relay stores it per station, lists it (``EvaluationClient.list_suites``, ``strands-robots job suites``) and
checks every submitted job against it (``team_job.check_against_offer``). The station's predicates, sheets'
points, seeds, operator and fault settings are not in an offer. Pure: the standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

__all__ = [
    "PROFILES",
    "HARDWARE",
    "SIMULATED",
    "HEADLINES",
    "CHOOSABLE",
    "CAMERA_CHOICES",
    "ChoiceRule",
    "OfferedTask",
    "SuiteOffer",
    "StationOffer",
]

HARDWARE, SIMULATED = "hardware", "simulated"
#: A station's profile: ``hardware`` (a person scores and clears stops; the default) or ``simulated`` (the
#: scripted operator may score, faults may be injected).
PROFILES = (HARDWARE, SIMULATED)
#: Which success a suite's rates use.
HEADLINES = ("success_at_end", "success_ever")
#: The camera request: one ``team_may_choose`` entry (``cameras: true``) allows all three.
CAMERA_CHOICES = ("cameras", "image_format", "image_quality")
#: Every setting a suite may leave to the team (``team_may_choose``), and what it is.
CHOOSABLE = {
    "cameras": "the cameras the policy gets: 'none', or comma-separated <camera> or <camera>:<width>x<height>",
    "image_format": "jpeg or png",
    "image_quality": "JPEG quality 1..95",
    "control_frequency": "the control rate in Hz",
}


@dataclass(frozen=True)
class ChoiceRule:
    """One setting the team may choose, with its range when it is a number (None: the station's own range)."""

    key: str
    minimum: Optional[float] = None
    maximum: Optional[float] = None

    def allowed(self) -> str:
        """Say what this rule allows, as a refusal quotes it."""
        if self.minimum is None and self.maximum is None:
            return f"{self.key} ({CHOOSABLE.get(self.key, '')})"
        low = "-inf" if self.minimum is None else f"{self.minimum:g}"
        high = "inf" if self.maximum is None else f"{self.maximum:g}"
        return f"{self.key} in [{low}, {high}]"

    def refusal(self, text: str) -> Optional[str]:
        """Return why ``text`` is outside this rule's range (None when inside, or no range)."""
        if self.minimum is None and self.maximum is None:
            return None
        try:
            value = float(text)
        except ValueError:
            return f"{self.key}={text!r} refused: must be a number ({self.allowed()})"
        if not math.isfinite(value) or (self.minimum is not None and value < self.minimum) or \
                (self.maximum is not None and value > self.maximum):
            return f"{self.key}={text!r} refused: the suite allows {self.allowed()}"
        return None

    def to_mapping(self) -> dict:
        out: dict = {"key": self.key}
        if self.minimum is not None:
            out["min"] = self.minimum
        if self.maximum is not None:
            out["max"] = self.maximum
        return out

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "ChoiceRule":
        return cls(str(data["key"]), _optional_float(data.get("min")), _optional_float(data.get("max")))


def _optional_float(value: Any) -> Optional[float]:
    return None if value is None else float(value)


@dataclass(frozen=True)
class OfferedTask:
    """One suite task as a team sees it: ``trials`` is how many trials (seeds) it has at most."""

    task_id: str
    instruction: str
    layout: str
    trials: int
    budget_s: float
    questions: Tuple[str, ...] = ()

    def to_mapping(self) -> dict:
        return {"task_id": self.task_id, "instruction": self.instruction, "layout": self.layout,
                "trials": self.trials, "budget_s": self.budget_s, "questions": list(self.questions)}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "OfferedTask":
        return cls(str(data["task_id"]), str(data.get("instruction", "")), str(data.get("layout", "")),
                   int(data["trials"]), float(data["budget_s"]), tuple(str(q) for q in data.get("questions", ())))


@dataclass(frozen=True)
class SuiteOffer:
    """One suite a station offers: its id, title, headline success, tasks and what a team may choose."""

    suite: str
    title: str
    headline: str
    tasks: Tuple[OfferedTask, ...]
    team_may_choose: Tuple[ChoiceRule, ...] = ()

    def task(self, task_id: str) -> Optional[OfferedTask]:
        return next((t for t in self.tasks if t.task_id == task_id), None)

    def choice(self, key: str) -> Optional[ChoiceRule]:
        return next((c for c in self.team_may_choose if c.key == key), None)

    def to_mapping(self) -> dict:
        return {"suite": self.suite, "title": self.title, "headline": self.headline,
                "tasks": [t.to_mapping() for t in self.tasks],
                "team_may_choose": [c.to_mapping() for c in self.team_may_choose]}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "SuiteOffer":
        return cls(str(data["suite"]), str(data.get("title", "")), str(data.get("headline", HEADLINES[0])),
                   tuple(OfferedTask.from_mapping(t) for t in data.get("tasks", ())),
                   tuple(ChoiceRule.from_mapping(c) for c in data.get("team_may_choose", ())))


@dataclass(frozen=True)
class StationOffer:
    """What one station offers: its profile, whether it runs a team's free-form tasks, and its suites.

    ``refuses_recordings``: the station's config forbids its recordings leaving it (a job asking for them,
    ``record: true``, is refused).
    """

    station_id: str
    profile: str = HARDWARE
    allow_free_form_tasks: bool = False
    suites: Tuple[SuiteOffer, ...] = ()
    refuses_recordings: bool = False

    def suite(self, suite_id: str) -> Optional[SuiteOffer]:
        return next((s for s in self.suites if s.suite == suite_id), None)

    def to_mapping(self) -> dict:
        return {"station_id": self.station_id, "profile": self.profile,
                "allow_free_form_tasks": self.allow_free_form_tasks, "suites": [s.to_mapping() for s in self.suites],
                "refuses_recordings": self.refuses_recordings}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "StationOffer":
        return cls(str(data["station_id"]), str(data.get("profile", HARDWARE)),
                   bool(data.get("allow_free_form_tasks", False)),
                   tuple(SuiteOffer.from_mapping(s) for s in data.get("suites", ())),
                   bool(data.get("refuses_recordings", False)))

    @classmethod
    def from_pb(cls, station_id: str, msg: Any) -> "StationOffer":
        """Return station ``station_id``'s offer from its ``StationOffer`` message (suites.proto; read by field)."""
        return cls(station_id, msg.profile, msg.allow_free_form_tasks, tuple(
            SuiteOffer(s.suite, s.title, s.headline,
                       tuple(OfferedTask(t.task_id, t.instruction, t.layout, t.trials, t.budget_s, tuple(t.questions))
                             for t in s.tasks),
                       tuple(ChoiceRule(c.key, c.min if c.HasField("min") else None,
                                        c.max if c.HasField("max") else None) for c in s.team_may_choose))
            for s in msg.suites), msg.refuses_recordings)
