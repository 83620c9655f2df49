"""The arm driver node's command services, answered from the core: ``send_action`` and ``reset_safety``.

``send_action`` (and every streamed command) resolves and commands through the node's gate (:func:`run_gated`:
a driver that is not active answers "driver not active") and never waits on the runner: the verdict is known at
once, and a refused or partly unresolved command is logged (at most once a second, as the command stream's
refusals are). ``reset_safety`` is the lease holder's only, and every attempt is logged with who asked and who
holds the lease.
"""

from __future__ import annotations

from typing import Any, Callable, Tuple

from strands_robots_msgs.srv import ResetSafety, SendAction

from strands_robots.arm.lease import LeaseManager
from strands_robots.arm.verdict import ActionVerdict
from strands_robots.conversions.actions import verdict_to_response

__all__ = ["run_gated", "log_refusal", "send_action_response", "reset_safety_response"]

# run(core) -> verdict, run under the node's gate -> (verdict, safety stopped, robot time s)
Gated = Callable[[Callable[[Any], ActionVerdict]], Tuple[ActionVerdict, bool, float]]


def run_gated(gate: Any, state: Callable[[], Tuple[Any, bool]], publishers: Callable[[], Any],
              run: Callable[[Any], ActionVerdict]) -> Tuple[ActionVerdict, bool, float]:
    """``run(core) -> verdict`` under ``gate`` while active (else "driver not active"), the stop and robot time after.

    :param state: ``(core, active)`` as the node holds them, read under the gate.
    :param publishers: the node's publishers (None while unconfigured), read after; a change of the safety stop
        the command made is published at once.
    """
    stopped, sim_time = False, 0.0
    with gate:
        core, active = state()
        verdict = run(core) if active and core is not None else ActionVerdict.coarse("driver not active")
        if core is not None:
            stopped, sim_time = core.stopped, core.adapter.time_s()
    out = publishers()
    if out is not None and core is not None and stopped != out.published_stopped:
        out.safety_if_changed()
    return verdict, stopped, sim_time


def log_refusal(log: Any, step_index: int, verdict: ActionVerdict) -> None:
    """Log a refused command's reasons on the node's logger ``log``, at most once a second."""
    log.warning(f"command step {step_index}: "
                + (verdict.error or ", ".join(f"{k}: {r}" for k, r in verdict.reasons().items())),
                throttle_duration_sec=1.0)


def send_action_response(gated: Gated, req: SendAction.Request, log: Any) -> SendAction.Response:
    """Answer a ``send_action`` request: the command through ``gated``, its verdict as the response."""
    verdict, stopped, sim_time = gated(lambda core: core.execute(list(req.keys), list(req.values), req.lease_token))
    if verdict.is_coarse_error or verdict.unresolved_keys:
        log_refusal(log, req.step_index, verdict)
    return verdict_to_response(verdict, stopped=stopped, sim_time_s=sim_time)


def reset_safety_response(core: Any, leases: LeaseManager, req: ResetSafety.Request, res: ResetSafety.Response,
                          on_change: Callable[[], None], log: Any) -> ResetSafety.Response:
    """Answer a ``reset_safety`` request with the core's outcome (``core`` None: not configured), logged.

    :param on_change: publishes the safety stop if the reset changed it.
    """
    if core is None:
        res.ok, res.message = False, "driver not configured"
    else:
        outcome = core.reset_safety(req.lease_token)
        res.ok, res.message = outcome.ok, outcome.message
        on_change()
    who = req.operator_name or "unnamed operator"
    lease = leases.state()
    holder = lease.holder if lease.state == "held" else "nobody"
    log.warning(f"reset_safety by {who} (lease held by {holder}): {res.message}")
    return res
