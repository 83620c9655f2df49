"""Score sheets: definition validation, answer validation, scoring and success (station/score_sheet.py)."""

import math

import pytest

from strands_robots.station.model import AnswerType, ScoringItemDefinition as Item, ScoringSheet
from strands_robots.station.score_sheet import (
    ScoreSheetError,
    format_answer,
    parse_answer,
    score_answers,
    validate_sheet,
)

YES_NO = AnswerType.YES_NO
COUNT = AnswerType.COUNT
CHOICE = AnswerType.CHOICE


def sheet(*items):
    return ScoringSheet(tuple(items))


def reached(success_answer="yes", max_points=2.0):
    return Item("reached", "Did the gripper reach the cup?", YES_NO, max_points, success_answer=success_answer)


def stacked(max_points=3.0, per_unit=1.0):
    return Item("stacked", "How many blocks are stacked?", COUNT, max_points, points_per_unit=per_unit)


def grasp(points=(0.0, 0.5, 1.0), max_points=1.0, success_answer=""):
    return Item("grasp", "How was the grasp?", CHOICE, max_points, choices=("none", "partial", "firm"),
                choice_points=points, success_answer=success_answer)


def refusal(s):
    with pytest.raises(ScoreSheetError) as info:
        validate_sheet(s)
    return info.value


# -- definition -------------------------------------------------------------------------------------------------
def test_valid_sheet_is_returned_unchanged():
    s = sheet(reached(), stacked(), grasp())
    assert validate_sheet(s) is s


def test_empty_sheet_is_refused_for_lacking_the_success_item():
    err = refusal(sheet())
    assert err.item == "" and "success item" in err.reason


def test_duplicate_item_name_is_refused_naming_the_item():
    err = refusal(sheet(reached(), Item("reached", "Again?", YES_NO, 1.0)))
    assert err.item == "reached" and "duplicate" in err.reason


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, True, "2"])
def test_max_points_must_be_finite_and_non_negative(bad):
    err = refusal(sheet(reached(), Item("tidy", "Tidy?", YES_NO, bad)))
    assert err.item == "tidy" and "max_points" in err.reason


def test_answer_type_must_be_an_answer_type():
    err = refusal(sheet(reached(), Item("tidy", "Tidy?", "yes_no", 1.0)))
    assert err.item == "tidy" and "answer_type" in err.reason


def test_empty_question_is_refused():
    err = refusal(sheet(Item("reached", " ", YES_NO, 1.0, success_answer="yes")))
    assert err.item == "reached" and "question" in err.reason


def test_choice_item_without_choices_is_refused():
    err = refusal(sheet(reached(), Item("grasp", "Grasp?", CHOICE, 1.0)))
    assert err.item == "grasp" and "non-empty" in err.reason


def test_duplicate_choices_are_refused_naming_the_choice():
    err = refusal(sheet(reached(), Item("grasp", "Grasp?", CHOICE, 1.0, choices=("a", "b", "a"),
                                        choice_points=(0, 0, 0))))
    assert err.item == "grasp" and "'a'" in err.reason and "unique" in err.reason


def test_choice_points_must_align_with_choices():
    err = refusal(sheet(reached(), grasp(points=(0.0, 1.0))))
    assert err.item == "grasp" and "3 choices" in err.reason


def test_choice_points_above_max_points_are_refused():
    err = refusal(sheet(reached(), grasp(points=(0.0, 0.5, 1.5))))
    assert err.item == "grasp" and "'firm'" in err.reason and "max_points" in err.reason


def test_negative_points_per_unit_is_refused():
    err = refusal(sheet(reached(), stacked(per_unit=-0.5)))
    assert err.item == "stacked" and "points_per_unit" in err.reason


def test_points_per_unit_on_a_yes_no_item_is_refused():
    err = refusal(sheet(reached(), Item("tidy", "Tidy?", YES_NO, 1.0, points_per_unit=1.0)))
    assert err.item == "tidy" and "only for count" in err.reason


def test_success_item_needs_a_success_answer():
    err = refusal(sheet(reached(success_answer="")))
    assert err.item == "reached" and "success_answer" in err.reason


@pytest.mark.parametrize("item", [
    Item("s", "q", YES_NO, 1.0, success_answer="maybe"),
    Item("s", "q", COUNT, 1.0, points_per_unit=1.0, success_answer="-1"),
    Item("s", "q", COUNT, 1.0, points_per_unit=1.0, success_answer="two"),
    Item("s", "q", CHOICE, 1.0, choices=("a", "b"), choice_points=(0, 1), success_answer="c"),
])
def test_success_answer_must_be_valid_for_its_type(item):
    err = refusal(sheet(item))
    assert err.item == "s" and "success_answer" in err.reason


def test_success_answer_on_another_item_is_refused():
    err = refusal(sheet(reached(), Item("tidy", "Tidy?", YES_NO, 1.0, success_answer="yes")))
    assert err.item == "tidy" and "only for the success item" in err.reason


# -- answers ----------------------------------------------------------------------------------------------------
def answer_refusal(s, answers):
    with pytest.raises(ScoreSheetError) as info:
        score_answers(s, answers)
    return info.value


def test_unanswered_item_is_refused_naming_it():
    err = answer_refusal(sheet(reached(), stacked()), {"reached": True})
    assert err.item == "stacked" and "not answered" in err.reason


def test_item_answered_twice_is_refused():
    err = answer_refusal(sheet(reached()), [("reached", True), ("reached", False)])
    assert err.item == "reached" and "more than once" in err.reason


def test_unknown_item_is_refused():
    err = answer_refusal(sheet(reached()), {"reached": True, "tidy": True})
    assert err.item == "tidy" and "unknown item" in err.reason


@pytest.mark.parametrize("item,answer,words", [
    (reached(), 1, "bool"),
    (stacked(), True, "integer"),
    (stacked(), -2, ">= 0"),
    (stacked(), 1.5, "integer"),
    (grasp(success_answer="firm"), 3, "out of range"),
    (grasp(success_answer="firm"), -1, "out of range"),
])
def test_wrong_answer_type_or_range_is_refused_with_the_reason(item, answer, words):
    err = answer_refusal(sheet(item), {item.name: answer})
    assert err.item == item.name and words in err.reason


# -- scoring ----------------------------------------------------------------------------------------------------
def test_score_is_points_earned_over_sheet_maximum():
    s = sheet(reached(max_points=2.0), stacked(max_points=3.0, per_unit=1.0), grasp(max_points=1.0))
    result = score_answers(s, {"reached": True, "stacked": 2, "grasp": 1})
    assert [i.points for i in result.items] == [2.0, 2.0, 0.5]
    assert result.score == pytest.approx(4.5 / 6.0)
    assert result.success is True


def test_count_points_are_capped_at_max_points():
    result = score_answers(sheet(reached(), stacked(max_points=3.0, per_unit=1.0)), {"reached": False, "stacked": 7})
    assert result.items[1].points == 3.0
    assert result.score == pytest.approx(3.0 / 5.0)
    assert result.success is False


def test_score_is_zero_when_no_item_carries_weight():
    result = score_answers(sheet(reached(max_points=0.0)), {"reached": True})
    assert result.score == 0.0 and result.success is True


def test_items_keep_sheet_order_with_success_item_first():
    s = sheet(reached(), stacked(), grasp())
    result = score_answers(s, [("grasp", 2), ("stacked", 0), ("reached", False)])
    assert [i.name for i in result.items] == ["reached", "stacked", "grasp"]
    assert [i.is_success_item for i in result.items] == [True, False, False]
    assert result.items[0].answer is False  # a present False answer, kept as an answer


def test_success_from_no_answer_when_no_is_the_success_answer():
    assert score_answers(sheet(reached(success_answer="no")), {"reached": False}).success is True
    assert score_answers(sheet(reached(success_answer="no")), {"reached": True}).success is False


def test_count_success_is_reaching_the_minimum():
    s = sheet(Item("blocks", "How many?", COUNT, 4.0, points_per_unit=1.0, success_answer="3"))
    assert score_answers(s, {"blocks": 3}).success is True
    assert score_answers(s, {"blocks": 2}).success is False


def test_choice_success_is_the_named_choice_and_index_zero_is_an_answer():
    s = sheet(grasp(success_answer="none"))
    result = score_answers(s, {"grasp": 0})
    assert result.success is True and result.items[0].answer == 0 and result.score == 0.0


def test_text_answers_round_trip():
    items = [reached(), stacked(), grasp(success_answer="firm")]
    for item, text in zip(items, ["no", "4", "partial"]):
        assert format_answer(item, parse_answer(item, text)) == text
    with pytest.raises(ScoreSheetError) as info:
        parse_answer(grasp(), "wobbly")
    assert info.value.item == "grasp" and "not one of the choices" in info.value.reason
