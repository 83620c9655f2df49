"""Both meanings of success: a task's predicate judged on every step's observation and at the end of the episode.

A task's ``success_when`` (:mod:`~strands_robots.station.success_predicate`) is judged twice:

- **at every step**, by the rollout (:class:`SuccessWatch`): on the observation each step's action was inferred
  from, the predicate's inputs (the value of every key it reads, ``object_distance_m`` derived from the joints by
  ``cameras.reach``) go into the step's event and the recording, and the rollout reports whether it ever held
  and the first step it did;
- **at the end**, on the final observation the rollout took after its last step (its inputs in the Ended event
  and the recording), with the station's end condition for an ``end_condition`` predicate
  (:func:`judge_episode`).

``success_ever`` is true when the predicate held on some observation of the episode: a step's or the final one
(an ``end_condition`` predicate can only hold at the end, so for it both meanings agree). The task's ``headline``
parameter (:func:`headline_of`, the one place it is read) names which of the two is the episode's success: the
one the scripted operator answers the sheet's success item with, so the one every rate counts.
Pure: no rclpy; ``strands-robots rescore`` judges a recording with the same functions.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Tuple

from strands_robots.station.success_predicate import Predicate, parse_predicate

__all__ = ["PARAM_SUCCESS_WHEN", "PARAM_HEADLINE", "HEADLINE_AT_END", "HEADLINE_EVER", "HEADLINES", "headline_of",
           "predicate_of", "InputReader", "SuccessWatch", "Judgement", "judge_episode"]

PARAM_SUCCESS_WHEN = "success_when"   # the task's success predicate
PARAM_HEADLINE = "headline"           # which success is the episode's: success_at_end (default) or success_ever
HEADLINE_AT_END = "success_at_end"
HEADLINE_EVER = "success_ever"
HEADLINES = (HEADLINE_AT_END, HEADLINE_EVER)

DISTANCE_KEY = "object_distance_m"  # cameras.reach.DISTANCE_KEY (not imported: it loads MuJoCo)


def headline_of(parameters: Mapping[str, str]) -> str:
    """Return which success is a task's headline: its ``headline`` parameter, ``success_at_end`` without one.

    :raises ValueError: a value that is neither ``success_at_end`` nor ``success_ever``.
    """
    text = str(parameters.get(PARAM_HEADLINE, HEADLINE_AT_END)).strip()
    if text not in HEADLINES:
        raise ValueError(f"headline={text!r}: must be success_at_end or success_ever")
    return text


def predicate_of(parameters: Mapping[str, str]) -> Optional[Predicate]:
    """Return a task's success predicate (its ``success_when``), None when it has none."""
    text = parameters.get(PARAM_SUCCESS_WHEN, "")
    return parse_predicate(text) if text and text.strip() else None


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class InputReader:
    """Reads a predicate's inputs from an observation: the value of every key it reads, derived ones included.

    :param distance: measures ``object_distance_m`` from an observation's joints (``cameras.reach.ObjectDistance``
        for the task and seed); built on first use when None.
    """

    def __init__(self, predicate: Predicate, task_parameters: Mapping[str, str], seed: Optional[int],
                 distance: "Optional[Callable[[Mapping[str, Any]], Optional[float]]]" = None) -> None:
        self.predicate = predicate
        self._params = dict(task_parameters)
        self._seed = seed
        self._distance = distance

    def __call__(self, observation: Mapping[str, Any]) -> "dict[str, float]":
        """Return ``{key: value}`` for each key the predicate reads that the observation has (or derives)."""
        out: dict[str, float] = {}
        for key in self.predicate.reads:
            value = observation.get(key)
            if value is None and key == DISTANCE_KEY:
                value = self._measure(observation)
            if _number(value):
                out[key] = float(value)
        return out

    def _measure(self, observation: Mapping[str, Any]) -> Optional[float]:
        if self._distance is None:
            from strands_robots.cameras.reach import ObjectDistance

            self._distance = ObjectDistance(self._params, self._seed)
        return self._distance(observation)


class SuccessWatch:
    """A task's predicate judged on every step of one episode (the rollout's side).

    :meth:`step` is called with each step's index and the observation its action was inferred from; it returns
    the step's inputs and whether the predicate held, and keeps :attr:`ever` and :attr:`first_step`. A step
    that reuses the previous step's observation (a chunk) reuses its inputs. :meth:`end` reads the inputs of
    the final observation.
    """

    __slots__ = ("predicate", "_read", "_last_obs", "_last", "ever", "first_step")

    def __init__(self, predicate: Predicate, read: "Callable[[Mapping[str, Any]], Mapping[str, float]]") -> None:
        self.predicate = predicate
        self._read = read
        self._last_obs: Any = None
        self._last: "Tuple[tuple, tuple, bool]" = ((), (), False)
        self.ever = False
        self.first_step = -1

    @classmethod
    def for_task(cls, task_parameters: Mapping[str, str], seed: Optional[int]) -> "Optional[SuccessWatch]":
        """Return the watch of a task's ``success_when``, None when it has none.

        :raises ValueError: the predicate does not parse (the task was checked before: it does).
        """
        predicate = predicate_of(task_parameters)
        if predicate is None:
            return None
        return cls(predicate, InputReader(predicate, task_parameters, seed))

    @property
    def text(self) -> str:
        return self.predicate.text

    def step(self, index: int, observation: Mapping[str, Any]) -> "Tuple[tuple, tuple, bool]":
        """Judge step ``index`` on ``observation``: ``(input keys, input values, holds)``."""
        if not self.predicate.per_step:
            return (), (), False
        if observation is not self._last_obs:
            try:
                inputs = self._read(observation)
            except Exception:  # a derived input that cannot be measured here: no inputs, so it does not hold
                inputs = {}
            self._last = (tuple(inputs), tuple(inputs.values()), self.predicate.holds_on(inputs))
            self._last_obs = observation
        if self._last[2] and not self.ever:
            self.ever = True
            self.first_step = int(index)
        return self._last

    def end(self, observation: Optional[Mapping[str, Any]]) -> "Tuple[tuple, tuple]":
        """Return the predicate's inputs on the final observation: ``(keys, values)`` (empty when there is none)."""
        if observation is None or not self.predicate.per_step:
            return (), ()
        inputs = self._read(observation)
        return tuple(inputs), tuple(inputs.values())


@dataclass(frozen=True)
class Judgement:
    """Both meanings of one episode's success, and which one is its headline."""

    success_at_end: bool
    success_ever: bool
    headline: str = HEADLINE_AT_END

    @property
    def success(self) -> bool:
        """The headline's value: the episode's success."""
        return self.success_ever if self.headline == HEADLINE_EVER else self.success_at_end


def judge_episode(task_parameters: Mapping[str, str], end_condition: str, end_inputs: Mapping[str, Any],
                  steps_ever: bool) -> Optional[Judgement]:
    """Judge an episode's success both ways; None when its task has no ``success_when``.

    :param end_condition: how it ended (an ``end_condition`` predicate reads only that).
    :param end_inputs: the predicate's inputs on the final observation.
    :param steps_ever: the predicate held on some step's observation (the rollout's report).
    :raises ValueError: a malformed predicate or headline.
    """
    predicate = predicate_of(task_parameters)
    if predicate is None:
        return None
    at_end = predicate.judge(end_condition, end_inputs)
    return Judgement(success_at_end=at_end, success_ever=at_end or bool(steps_ever),
                     headline=headline_of(task_parameters))
