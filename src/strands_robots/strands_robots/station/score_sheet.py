"""Score sheets: validating a task's sheet definition and an operator's answers, and scoring them.

Rules, in the order they are checked (the first broken one is reported, naming the item and the reason):

Sheet definition (:func:`validate_sheet`)
    1. at least one item; ``items[0]`` is the success item;
    2. every item: a non-empty, unique ``name``; a non-empty ``question``; an ``AnswerType``;
       ``max_points`` a finite number >= 0;
    3. yes_no: no choices, no choice points, no points per unit;
       count: ``points_per_unit`` a finite number >= 0, no choices;
       choice: ``choices`` non-empty, unique, non-empty strings; ``choice_points`` one per choice, each finite
       and in ``[0, max_points]``; no points per unit;
    4. ``success_answer``: on the success item it is required and valid for its type ("yes"/"no"; a decimal
       integer >= 0 for count, the minimum count; one of ``choices``); on any other item it must be empty;
    5. sizes (``validation.SHEET_LIMITS`` and ``station.limits.TASK_TEXT_MAX``): at most 100 items and 100
       choices an item, points at most 1e6, names, questions and choices at most TASK_TEXT_MAX characters.

Answers (:func:`score_answers`)
    every item answered exactly once, no unknown items; yes_no a ``bool``; count an ``int`` >= 0; choice an
    ``int`` index into ``choices`` (``bool`` is never accepted as a number).

Score: ``sum(points) / sum(max_points)``, 0.0 when nothing carries weight. Success: the success item's answer
against ``success_answer`` (yes_no equal, count >= the minimum, choice the named choice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence, Tuple, Union

from strands_robots import validation as rules
from strands_robots.station.answers import ScoreSheetError, format_answer, parse_answer
from strands_robots.station.model import (
    Answer,
    AnswerType,
    ScoredItem,
    ScoringItemDefinition,
    ScoringSheet,
)

__all__ = [
    "ScoreSheetError",
    "SheetScore",
    "validate_sheet",
    "validate_answers",
    "score_answers",
    "item_points",
    "is_success",
    "parse_answer",
    "format_answer",
    "sheet_items",
]

Answers = Union[Mapping[str, Answer], Iterable[Tuple[str, Answer]]]


@dataclass(frozen=True)
class SheetScore:
    """The scored sheet: ``items`` (success item first), ``score`` in [0, 1] and ``success``."""

    items: Tuple[ScoredItem, ...]
    score: float
    success: bool


# -- the definition ---------------------------------------------------------------------------------------------
def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def validate_sheet(sheet: ScoringSheet) -> ScoringSheet:
    """Return ``sheet`` when it is a valid definition; raise :class:`ScoreSheetError` otherwise."""
    if not isinstance(sheet, ScoringSheet):
        raise ScoreSheetError("", f"a score sheet must be a ScoringSheet, got {type(sheet).__name__}")
    items = sheet.items
    if not isinstance(items, tuple) or not items:
        raise ScoreSheetError("", "a score sheet needs at least one item: the success item first")
    limit = rules.SHEET_LIMITS["items"]
    if len(items) > limit.maximum:
        raise ScoreSheetError("", f"a score sheet has at most {int(limit.maximum)} items, got {len(items)}")
    seen: set = set()
    for index, item in enumerate(items):
        if not isinstance(item, ScoringItemDefinition):
            raise ScoreSheetError(f"#{index}", f"must be a ScoringItemDefinition, got {type(item).__name__}")
        if not isinstance(item.name, str) or not item.name.strip():
            raise ScoreSheetError(f"#{index}", "name must be a non-empty string")
        if item.name in seen:
            raise ScoreSheetError(item.name, f"duplicate item name (items #{index} and an earlier one)")
        seen.add(item.name)
        _validate_item(item, is_success_item=index == 0)
    try:
        rules.check_sheet_bounds(sheet)
    except rules.ValueRefused as exc:
        raise ScoreSheetError("", exc.reason) from None
    return sheet


def _validate_item(item: ScoringItemDefinition, *, is_success_item: bool) -> None:
    name = item.name
    if not isinstance(item.question, str) or not item.question.strip():
        raise ScoreSheetError(name, "question must be a non-empty string")
    if not isinstance(item.answer_type, AnswerType):
        raise ScoreSheetError(name, f"answer_type must be one of {', '.join(t.value for t in AnswerType)}, "
                                    f"got {item.answer_type!r}")
    if not _number(item.max_points) or item.max_points < 0:
        raise ScoreSheetError(name, f"max_points must be a finite number >= 0, got {item.max_points!r}")
    kind = item.answer_type
    if kind is not AnswerType.CHOICE and (item.choices or item.choice_points):
        raise ScoreSheetError(name, f"choices and choice_points are only for choice items, not {kind.value}")
    if kind is not AnswerType.COUNT and item.points_per_unit != 0:
        raise ScoreSheetError(name, f"points_per_unit is only for count items, not {kind.value}")
    if kind is AnswerType.COUNT:
        if not _number(item.points_per_unit) or item.points_per_unit < 0:
            raise ScoreSheetError(name, f"points_per_unit must be a finite number >= 0, got {item.points_per_unit!r}")
    if kind is AnswerType.CHOICE:
        choices = item.choices
        if not isinstance(choices, tuple) or not choices:
            raise ScoreSheetError(name, "a choice item needs a non-empty tuple of choices")
        for i, choice in enumerate(choices):
            if not isinstance(choice, str) or not choice.strip():
                raise ScoreSheetError(name, f"choice #{i} must be a non-empty string, got {choice!r}")
        if len(set(choices)) != len(choices):
            dup = next(c for c in choices if choices.count(c) > 1)
            raise ScoreSheetError(name, f"choices must be unique; {dup!r} appears more than once")
        points = item.choice_points
        if not isinstance(points, tuple) or len(points) != len(choices):
            raise ScoreSheetError(name, f"choice_points must give one value per choice: {len(choices)} choices, "
                                        f"{len(points) if isinstance(points, tuple) else points!r} points")
        for choice, p in zip(choices, points):
            if not _number(p) or p < 0 or p > item.max_points:
                raise ScoreSheetError(name, f"choice {choice!r} earns {p!r} points; each must be in "
                                            f"[0, max_points={item.max_points:g}]")
    success = item.success_answer
    if not isinstance(success, str):
        raise ScoreSheetError(name, f"success_answer must be a string, got {success!r}")
    if not is_success_item:
        if success:
            raise ScoreSheetError(name, "success_answer is only for the success item (the first item)")
        return
    if not success:
        raise ScoreSheetError(name, "the success item needs a success_answer")
    if kind is AnswerType.YES_NO and success not in ("yes", "no"):
        raise ScoreSheetError(name, f"success_answer of a yes_no item must be 'yes' or 'no', got {success!r}")
    if kind is AnswerType.COUNT and not (success.isdigit() and success.isascii()):
        raise ScoreSheetError(name, f"success_answer of a count item must be the minimum count as a decimal "
                                    f"integer >= 0, got {success!r}")
    if kind is AnswerType.CHOICE and success not in item.choices:
        raise ScoreSheetError(name, f"success_answer {success!r} is not one of the choices "
                                    f"({', '.join(item.choices)})")


# -- answers ----------------------------------------------------------------------------------------------------
def _answer_pairs(answers: Answers) -> list:
    if isinstance(answers, Mapping):
        return list(answers.items())
    if isinstance(answers, (str, bytes)):
        raise ScoreSheetError("", "answers must be a mapping or a sequence of (name, answer) pairs")
    pairs = []
    for entry in answers:
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise ScoreSheetError("", f"each answer must be a (name, answer) pair, got {entry!r}")
        pairs.append(entry)
    return pairs


def _check_answer(item: ScoringItemDefinition, answer: object) -> None:
    kind = item.answer_type
    if kind is AnswerType.YES_NO:
        if not isinstance(answer, bool):
            raise ScoreSheetError(item.name, f"a yes_no answer must be a bool, got {answer!r}")
        return
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise ScoreSheetError(item.name, f"a {kind.value} answer must be an integer, got {answer!r}")
    if kind is AnswerType.COUNT and answer < 0:
        raise ScoreSheetError(item.name, f"a count must be >= 0, got {answer}")
    if kind is AnswerType.CHOICE and not 0 <= answer < len(item.choices):
        raise ScoreSheetError(item.name, f"choice index {answer} is out of range: {len(item.choices)} choices "
                                         f"({', '.join(item.choices)})")


def validate_answers(sheet: ScoringSheet, answers: Answers) -> dict:
    """``{name: answer}`` when every item of ``sheet`` is answered exactly once with the right type.

    :raises ScoreSheetError: an unknown item, an item answered twice or not at all, or a wrong answer.
    """
    by_name = {item.name: item for item in sheet.items}
    given: dict = {}
    for name, answer in _answer_pairs(answers):
        if name not in by_name:
            raise ScoreSheetError(str(name), f"unknown item; the sheet has {', '.join(by_name)}")
        if name in given:
            raise ScoreSheetError(name, "answered more than once")
        _check_answer(by_name[name], answer)
        given[name] = answer
    for item in sheet.items:
        if item.name not in given:
            raise ScoreSheetError(item.name, "not answered; every item needs exactly one answer")
    return given


# -- scoring ----------------------------------------------------------------------------------------------------
def item_points(item: ScoringItemDefinition, answer: Answer) -> float:
    """Points ``answer`` earns on ``item`` (the answer already checked)."""
    kind = item.answer_type
    if kind is AnswerType.YES_NO:
        return float(item.max_points) if answer else 0.0
    if kind is AnswerType.COUNT:
        return float(min(int(answer) * item.points_per_unit, item.max_points))
    return float(item.choice_points[int(answer)])


def is_success(item: ScoringItemDefinition, answer: Answer) -> bool:
    """Whether the success item's ``answer`` satisfies its ``success_answer``."""
    kind = item.answer_type
    if kind is AnswerType.YES_NO:
        return bool(answer) == (item.success_answer == "yes")
    if kind is AnswerType.COUNT:
        return int(answer) >= int(item.success_answer)
    return item.choices[int(answer)] == item.success_answer


def score_answers(sheet: ScoringSheet, answers: Answers) -> SheetScore:
    """Validate ``answers`` against ``sheet`` and score them.

    :raises ScoreSheetError: see :func:`validate_answers`.
    """
    given = validate_answers(sheet, answers)
    scored = []
    earned = 0.0
    maximum = 0.0
    for index, item in enumerate(sheet.items):
        answer = given[item.name]
        points = item_points(item, answer)
        earned += points
        maximum += float(item.max_points)
        scored.append(ScoredItem(name=item.name, question=item.question, answer_type=item.answer_type,
                                 answer=answer, points=points, max_points=float(item.max_points),
                                 is_success_item=index == 0))
    score = earned / maximum if maximum > 0 else 0.0
    success = is_success(sheet.items[0], given[sheet.items[0].name])
    return SheetScore(tuple(scored), min(1.0, max(0.0, score)), success)


def sheet_items(items: Sequence[ScoringItemDefinition]) -> ScoringSheet:
    """Build a validated :class:`ScoringSheet` of ``items`` (success item first)."""
    return validate_sheet(ScoringSheet(tuple(items)))
