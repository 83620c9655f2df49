"""A comparison (A/B) job's request: the slots compared and, optionally, when to stop.

In the job file, beside the suite tasks::

    compare:
      slots: [vision, blind]        # 2..8 names, [A-Za-z0-9._-]{1,64}, each served by its own `job serve --slot`
      # or, with another team's policy:  slots: [vision, {name: theirs, team: lab_b}]
      stop:                         # optional: stop once the answer is clear
        when: separated             # the only rule: stop when an anytime-valid test separates the policies
        alpha: 0.05                 # the false-winner rate allowed, in (0, 0.5]
        max_blocks: 40              # at most this many blocks (default: every block the tasks make)
        or_out_of_reach: false      # also stop (not_separated) once separation within max_blocks is out of reach

A slot is the submitting team's unless it names another ``team`` (a client name of the relay): that team is
invited, the relay holds the job until every invited team accepted it, and only that team's token serves its slot.

A block is one suite task and one seed with every slot once; the job's ``tasks`` make its blocks (one per
trial). Without ``stop`` every block runs. Every refusal is a :class:`~.team_keys.TeamJobRefused` naming the key
(``compare.slots[1]``, ``compare.stop.alpha`` ...). Pure: the standard library only (the Evaluation Client ships it).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from strands_robots.job_model.team_keys import TeamJobRefused

__all__ = ["MIN_SLOTS", "MAX_SLOTS", "STOP_WHEN", "MAX_ALPHA", "StopRequest", "CompareRequest",
           "compare_from_mapping", "compare_to_mapping", "SLOT_PATTERN", "TEAM_PATTERN"]

MIN_SLOTS, MAX_SLOTS = 2, 8
#: A slot's name: it names a policy session at the relay and appears in every result.
SLOT_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
#: A team's name (a client name in the relay's tokens file).
TEAM_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: The keys of a slot written as a mapping (``{name: theirs, team: lab_b}``).
_SLOT_KEYS = ("name", "team")
#: The stop rules a job may ask for (``stop.when``).
STOP_WHEN = ("separated",)
#: The largest false-winner rate a job may allow: a larger one would name winners by chance half the time.
MAX_ALPHA = 0.5
_COMPARE_KEYS = ("slots", "stop")
_STOP_KEYS = ("when", "alpha", "max_blocks", "or_out_of_reach")
_MAX_BLOCKS = 100000


@dataclass(frozen=True)
class StopRequest:
    """``compare.stop``: stop when the policies are separated (or, if asked, once that is out of reach).

    :param max_blocks: the most blocks the job runs; None: every block the job's tasks make.
    """

    when: str = STOP_WHEN[0]
    alpha: float = 0.05
    max_blocks: Optional[int] = None
    or_out_of_reach: bool = False


@dataclass(frozen=True)
class CompareRequest:
    """``compare``: the slots (slot a is ``slots[0]``, b is ``slots[1]``) and the stop rule, if any.

    :param suite: the suite the blocks come from (the job's ``suite``; filled in by the station).
    :param teams: each slot's team, in the slots' order ("" the submitting team's); empty: every slot is its.
    """

    slots: Tuple[str, ...]
    stop: Optional[StopRequest] = None
    suite: str = ""
    teams: Tuple[str, ...] = ()

    def team_of(self, slot: str, owner: str) -> str:
        """Return the team that serves ``slot`` (``owner`` for the submitting team's own slots)."""
        index = self.slots.index(slot)
        return (self.teams[index] if index < len(self.teams) else "") or owner

    @property
    def invited(self) -> Tuple[str, ...]:
        """The other teams the job names, each once, in the slots' order."""
        return tuple(dict.fromkeys(t for t in self.teams if t))

    def blocks(self, trials: int) -> int:
        """Return the blocks a job whose tasks make ``trials`` trials runs at most."""
        if self.stop is None or self.stop.max_blocks is None:
            return trials
        return min(trials, self.stop.max_blocks)


def _refuse_unknown(data: Mapping, allowed: Tuple[str, ...], where: str) -> None:
    for key in data:
        if str(key) not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TeamJobRefused(f"{where}.{key}", f"unknown key {str(key)!r}{hint}; allowed: {', '.join(allowed)}")


def _stop(data: Any) -> StopRequest:
    if not isinstance(data, Mapping):
        raise TeamJobRefused("compare.stop", f"must be {{when: separated, alpha, max_blocks, or_out_of_reach}}, got "
                                             f"{type(data).__name__}")
    _refuse_unknown(data, _STOP_KEYS, "compare.stop")
    when = data.get("when", STOP_WHEN[0])
    if when not in STOP_WHEN:
        raise TeamJobRefused("compare.stop.when", f"{when!r} refused: the stop rule is one of {', '.join(STOP_WHEN)}")
    alpha = data.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) \
            or not 0 < alpha <= MAX_ALPHA:
        raise TeamJobRefused("compare.stop.alpha", f"{alpha!r} refused: must be a number in (0, {MAX_ALPHA}]")
    max_blocks = data.get("max_blocks")
    if max_blocks is not None and (isinstance(max_blocks, bool) or not isinstance(max_blocks, int)
                                   or not 1 <= max_blocks <= _MAX_BLOCKS):
        raise TeamJobRefused("compare.stop.max_blocks", f"{max_blocks!r} refused: must be an integer in "
                                                        f"[1, {_MAX_BLOCKS}]")
    reach = data.get("or_out_of_reach", False)
    if not isinstance(reach, bool):
        raise TeamJobRefused("compare.stop.or_out_of_reach", f"{reach!r} refused: must be true or false")
    return StopRequest(when, float(alpha), max_blocks, reach)


def compare_from_mapping(data: Any) -> CompareRequest:
    """Read a job's ``compare`` mapping.

    :raises TeamJobRefused: naming the key (``compare.slots``, ``compare.slots[i]``, ``compare.stop.<key>``).
    """
    if not isinstance(data, Mapping):
        raise TeamJobRefused("compare", f"must be {{slots: [a, b], stop: {{...}}}}, got {type(data).__name__}")
    _refuse_unknown(data, _COMPARE_KEYS, "compare")
    slots = data.get("slots")
    if not isinstance(slots, (list, tuple)) or not MIN_SLOTS <= len(slots) <= MAX_SLOTS:
        raise TeamJobRefused("compare.slots", f"must be a list of {MIN_SLOTS} to {MAX_SLOTS} slot names, got "
                                              f"{slots!r}")
    seen: dict = {}
    names, teams = [], []
    for index, entry in enumerate(slots):
        slot, team = _slot_entry(entry, index)
        names.append(slot)
        teams.append(team)
        if slot in seen:
            raise TeamJobRefused(f"compare.slots[{index}]", f"{slot!r} is also compare.slots[{seen[slot]}]: each "
                                                            f"slot is named once")
        seen[slot] = index
    stop = data.get("stop")
    return CompareRequest(tuple(names), None if stop is None else _stop(stop),
                          teams=tuple(teams) if any(teams) else ())


def _slot_entry(entry: Any, index: int) -> Tuple[str, str]:
    """Return ``(slot, team)`` of ``compare.slots[index]``: a name (the submitting team's) or ``{name, team}``."""
    where = f"compare.slots[{index}]"
    team = ""
    if isinstance(entry, Mapping):
        _refuse_unknown(entry, _SLOT_KEYS, where)
        if "name" not in entry:
            raise TeamJobRefused(f"{where}.name", "missing: a slot written as a mapping is {name: SLOT, team: TEAM}")
        team = entry.get("team", "")
        if not isinstance(team, str) or (team and not TEAM_PATTERN.match(team)):
            raise TeamJobRefused(f"{where}.team", f"{team!r} refused: a team is its client name at the relay "
                                                  f"(1-128 letters, digits, '.', '_' or '-', not first)")
        entry, where = entry["name"], f"{where}.name"
    if not isinstance(entry, str) or not SLOT_PATTERN.match(entry):
        raise TeamJobRefused(where, f"{entry!r} refused: a slot name is 1-64 letters, digits, '.', '_' or '-'")
    return entry, team


def compare_to_mapping(compare: CompareRequest) -> dict:
    """Return the job file's ``compare`` mapping (the inverse of :func:`compare_from_mapping`)."""
    teams = compare.teams or ("",) * len(compare.slots)
    out: dict = {"slots": [{"name": slot, "team": team} if team else slot for slot, team in zip(compare.slots, teams)]}
    if compare.stop is not None:
        stop = compare.stop
        out["stop"] = {"when": stop.when, "alpha": stop.alpha, "or_out_of_reach": stop.or_out_of_reach}
        if stop.max_blocks is not None:
            out["stop"]["max_blocks"] = stop.max_blocks
    return out
