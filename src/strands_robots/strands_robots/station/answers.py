"""A score-sheet answer's text form, and the error every sheet check raises.

The text form is what ROS messages, the command line and a task's ``answer.<item>`` carry.
"""

from __future__ import annotations

from strands_robots.station.model import Answer, AnswerType, ScoringItemDefinition

__all__ = ["ScoreSheetError", "parse_answer", "format_answer"]


class ScoreSheetError(ValueError):
    """A sheet definition or an answer set was refused. ``item`` names the item ("" for the whole sheet)."""

    def __init__(self, item: str, reason: str) -> None:
        self.item = item
        self.reason = reason
        super().__init__(f"item {item!r}: {reason}" if item else reason)


def parse_answer(item: ScoringItemDefinition, text: str) -> Answer:
    """Parse a typed answer from its text form: "yes"/"no", a decimal count, or the choice itself.

    :raises ScoreSheetError: the text is not a valid answer for the item.
    """
    if not isinstance(text, str):
        raise ScoreSheetError(item.name, f"answer text must be a string, got {text!r}")
    value = text.strip()
    kind = item.answer_type
    if kind is AnswerType.YES_NO:
        if value.lower() in ("yes", "true"):
            return True
        if value.lower() in ("no", "false"):
            return False
        raise ScoreSheetError(item.name, f"a yes_no answer must be 'yes' or 'no', got {text!r}")
    if kind is AnswerType.COUNT:
        if not (value.isdigit() and value.isascii()):
            raise ScoreSheetError(item.name, f"a count must be a decimal integer >= 0, got {text!r}")
        return int(value)
    if value in item.choices:
        return item.choices.index(value)
    raise ScoreSheetError(item.name, f"{text!r} is not one of the choices ({', '.join(item.choices)})")


def format_answer(item: ScoringItemDefinition, answer: Answer) -> str:
    """Format a typed answer as text (the inverse of :func:`parse_answer`)."""
    kind = item.answer_type
    if kind is AnswerType.YES_NO:
        return "yes" if answer else "no"
    if kind is AnswerType.COUNT:
        return str(int(answer))
    return item.choices[int(answer)]
