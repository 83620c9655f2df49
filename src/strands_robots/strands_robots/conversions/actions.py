"""Actions and verdicts <-> messages: ``SendAction`` and the command stream, from both sides.

The stream is ``ActionCommand`` out (the rollout's :func:`stream_command_msg`) and ``ActionVerdict`` back (the
driver's :func:`msg_to_stream_command` / :func:`stream_verdict_to_msg`).

Float arrays are handed over as ``array('d')`` so the generated setters do no per-element work.
"""

from __future__ import annotations

from array import array
from typing import Any, Callable, Mapping, Sequence

from strands_robots.conversions.messages import NS_PER_S, blank_factory, ros, time_to_ns


# -- actions and verdicts -------------------------------------------------------------------------------------
def action_to_request(action: Mapping[str, float], lease_token: str = "", step_index: int = 0) -> Any:
    """``SendAction.Request`` for an action mapping (keys in emission order; NaN passes through).

    :raises TypeError: a value that is not a real number.
    """
    req = ros().SendActionRequest()
    req.lease_token = lease_token
    req.step_index = step_index
    req.keys = list(action)
    req.values = array("d", action.values())
    return req


def request_to_action(req: Any) -> dict[str, float]:
    """Return the action mapping of a ``SendAction.Request`` (or ``ActionCommand``), in emission order.

    :raises ValueError: keys and values of different lengths.
    """
    keys, values = req.keys, req.values
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
    return dict(zip(keys, values))


def action_to_command(action: Mapping[str, float]) -> Any:
    """``ActionCommand`` (what the rollout emitted) for an action mapping."""
    cmd = ros().ActionCommand()
    cmd.keys = list(action)
    cmd.values = array("d", action.values())
    return cmd


command_to_action = request_to_action


def verdict_to_response(verdict: Any, stopped: bool = False, sim_time_s: float = 0.0) -> Any:
    """``SendAction.Response`` for an :class:`~strands_robots.arm.verdict.ActionVerdict`.

    :param stopped: safety stop in force after this call.
    :param sim_time_s: robot time after applying.
    """
    res = ros().SendActionResponse()
    res.applied_keys = list(verdict.applied_keys)
    res.unresolved_keys = list(verdict.unresolved_keys)
    res.unresolved_reasons = list(verdict.unresolved_reasons)
    res.error = verdict.error
    res.stopped = bool(stopped)
    res.sim_time_s = float(sim_time_s)
    return res


def response_to_verdict(res: Any) -> Any:
    """Return the :class:`~strands_robots.arm.verdict.ActionVerdict` of a ``SendAction.Response``.

    A response with ``error`` set is a coarse verdict: its key lists are dropped (nothing is known per key).
    """
    from strands_robots.arm.verdict import ActionVerdict

    if res.error:
        return ActionVerdict(error=res.error)
    return ActionVerdict(
        applied_keys=tuple(res.applied_keys),
        unresolved_keys=tuple(res.unresolved_keys),
        unresolved_reasons=tuple(res.unresolved_reasons),
    )


# -- the command stream, the rollout's side: ActionCommand out, ActionVerdict in -------------------------
def stream_command_msg(action: Mapping[str, float], run_id: str, step_index: int, lease_token: str,
                       sent_ns: int, apply_by_ns: int, lookahead: "Sequence[float]" = (),
                       lookahead_period_ns: int = 0) -> Any:
    """``ActionCommand`` for one step of the command stream (keys in emission order; NaN passes through).

    The lease token itself is not in the message: ``lease_proof`` is the HMAC of the command keyed by it
    (:mod:`strands_robots.arm.command_auth`), made over the exact doubles the message carries.

    :param sent_ns: when the rollout publishes it, ns since the epoch (the node clock without sim time).
    :param apply_by_ns: the driver refuses the command as ``stale`` after this time (same clock).
    :param lookahead: the chunk's next steps, flattened in the action's key order
        (:func:`strands_robots.arm.lookahead.flatten`), due every ``lookahead_period_ns``; signed with the rest.
    :raises TypeError: a value that is not a real number.
    """
    from strands_robots.arm.command_auth import command_message, sign

    cmd = ros().ActionCommand()
    keys = list(action)
    values = array("d", action.values())
    cmd.keys = keys
    cmd.values = values
    cmd.run_id = run_id
    cmd.step_index = int(step_index)
    ahead = array("d", lookahead)
    period_ns = int(lookahead_period_ns) if len(ahead) else 0
    cmd.lookahead = ahead
    cmd.lookahead_period.sec, cmd.lookahead_period.nanosec = divmod(period_ns, NS_PER_S)
    cmd.lease_proof = sign(lease_token, command_message(run_id, int(step_index), int(apply_by_ns), keys, values,
                                                        ahead, period_ns))
    cmd.sent.sec, cmd.sent.nanosec = divmod(int(sent_ns), NS_PER_S)
    cmd.apply_by.sec, cmd.apply_by.nanosec = divmod(int(apply_by_ns), NS_PER_S)
    return cmd


def verdict_msg_to_verdict(msg: Any) -> Any:
    """Return the :class:`~strands_robots.arm.verdict.ActionVerdict` of an ``ActionVerdict`` message.

    A message with ``error`` set is a coarse verdict: its key lists are dropped (nothing is known per key).
    ``stale`` and ``out_of_order`` refusals are per-key verdicts (every key unresolved with that reason).
    """
    from strands_robots.arm.verdict import ActionVerdict

    if msg.error:
        return ActionVerdict(error=msg.error)
    return ActionVerdict(
        applied_keys=tuple(msg.applied_keys),
        unresolved_keys=tuple(msg.unresolved_keys),
        unresolved_reasons=tuple(msg.unresolved_reasons),
    )


# -- the command stream, the driver's side ------------------------------------------------------------------
def msg_to_stream_command(msg: Any) -> Any:
    """Return the :class:`~strands_robots.arm.command_stream.StreamCommand` of an ``ActionCommand``.

    ``apply_by`` becomes nanoseconds; zero means no deadline. The lookahead is bounded here, where it enters.

    :raises strands_robots.arm.lookahead.LookaheadError: a lookahead over the bound or not a whole number of
        points (the driver answers such a command with a coarse error and applies nothing).
    """
    from strands_robots.arm.command_stream import StreamCommand
    from strands_robots.arm.lookahead import split_points

    keys = tuple(msg.keys)
    ahead = tuple(getattr(msg, "lookahead", ()))
    period_ns = time_to_ns(msg.lookahead_period) if ahead else 0
    split_points(keys, ahead, period_ns)
    return StreamCommand(keys, tuple(msg.values), msg.run_id, int(msg.step_index), msg.lease_proof,
                         time_to_ns(msg.apply_by), ahead, period_ns)


_NEW_VERDICT: "Callable[[], Any] | None" = None


def stream_verdict_to_msg(verdict: Any, run_id: str, step_index: int, stopped: bool = False,
                          sim_time_s: float = 0.0, received_ns: int = 0) -> Any:
    """Build the ``ActionVerdict`` message for a core verdict on one streamed command.

    SendAction's response fields, plus the command's run id and step and when it was received.
    """
    global _NEW_VERDICT
    if _NEW_VERDICT is None:
        from strands_robots_msgs.msg import ActionVerdict as VerdictMsg

        _NEW_VERDICT = blank_factory(VerdictMsg)
    m = _NEW_VERDICT()  # every field is assigned below (the verdict stream runs at the control rate)
    m.run_id = run_id
    m.step_index = int(step_index)
    m.applied_keys = list(verdict.applied_keys)
    m.unresolved_keys = list(verdict.unresolved_keys)
    m.unresolved_reasons = list(verdict.unresolved_reasons)
    m.error = verdict.error
    m.stopped = bool(stopped)
    m.sim_time_s = float(sim_time_s)
    received = ros().new_time()
    received.sec, received.nanosec = divmod(int(received_ns), NS_PER_S)
    m.received = received
    return m

