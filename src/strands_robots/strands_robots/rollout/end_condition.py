"""How a rollout's stop maps onto the station's end conditions (spec/evaluation-status.txt).

The rollout loop speaks ``stopped_reason`` (budget, predicate, cancelled, error, policy_completed,
safety_stop); an episode result speaks ``end_condition`` (timeout, policy_completed, lease_lost, authority_lost,
safety_stop, start_pose_unreached). A cancel is ``authority_lost`` only when the caller says who took the arms;
a plain cancel or an error has no end condition of its own, and the caller (the station) decides.
"""

from __future__ import annotations

from typing import Any

END_TIMEOUT = "timeout"
END_POLICY_COMPLETED = "policy_completed"
END_LEASE_LOST = "lease_lost"
END_AUTHORITY_LOST = "authority_lost"
END_SAFETY_STOP = "safety_stop"
END_START_POSE_UNREACHED = "start_pose_unreached"
END_CONDITIONS = (
    END_TIMEOUT,
    END_POLICY_COMPLETED,
    END_LEASE_LOST,
    END_AUTHORITY_LOST,
    END_SAFETY_STOP,
    END_START_POSE_UNREACHED,
)
# Beyond the spec's six (named in wire/proto/evaluation.proto): the station's own ends of an episode.
#: The policy itself failed the rollout (an exception in act, a malformed chunk, keys no actuator has): the
#: policy's episode, scored like any other, never re-run.
END_POLICY_ERROR = "policy_error"
#: The station's own infrastructure ended the rollout (the arm driver, the rollout node or the relay link died;
#: the policy silent past its deadline): kept with the reason, unscored (so out of the rates), its task re-run.
END_INFRASTRUCTURE_FAULT = "infrastructure_fault"
STATION_END_CONDITIONS = END_CONDITIONS + (END_POLICY_ERROR, END_INFRASTRUCTURE_FAULT)

_BY_STOPPED_REASON = {
    "budget": END_TIMEOUT,
    "predicate": END_POLICY_COMPLETED,
    "policy_completed": END_POLICY_COMPLETED,
    "safety_stop": END_SAFETY_STOP,
}


def end_condition_for(stopped_reason: str, *, cancel_reason: str = "") -> str:
    """Return the end condition of a rollout that stopped for ``stopped_reason``; empty when none.

    :param cancel_reason: the cooperative stop's reason; ``authority_lost`` / ``lease_lost`` pass through (the
        rollout node stops with ``lease_lost`` when the driver refuses its lease, and the station with
        ``authority_lost`` when an operator takes the arms).
    """
    if stopped_reason == "cancelled" and cancel_reason in (END_AUTHORITY_LOST, END_LEASE_LOST):
        return cancel_reason
    return _BY_STOPPED_REASON.get(stopped_reason, "")


def end_condition_of_result(result: Any) -> str:
    """``end_condition_for`` applied to a runner episode result dict (or a RunPolicyEnded)."""
    get = result.get if isinstance(result, dict) else (lambda k, d="": getattr(result, k, d))
    stopped_reason = str(get("stopped_reason", "") or "")
    return end_condition_for(stopped_reason, cancel_reason=str(get("end_detail", "") or ""))
