"""The arm driver's command stream: ``action_commands`` in, one ``ActionVerdict`` each on ``action_verdicts``.

Both names are relative to the driver's namespace; the QoS is :mod:`strands_robots.ros.qos`'s.

Each command is applied on arrival by the driver core's :meth:`~strands_robots.arm.driver.DriverCore.apply_command`
(the stale and out-of-order rules, then exactly the per-key path ``SendAction`` uses). Every command gets its
verdict, a refused one too ("driver not active" while inactive), so the rollout never waits for one in vain.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from strands_robots_msgs.msg import ActionCommand
from strands_robots_msgs.msg import ActionVerdict as ActionVerdictMsg

from strands_robots.conversions.actions import msg_to_stream_command, stream_verdict_to_msg
from strands_robots.arm.verdict import ActionVerdict
from strands_robots.ros import take
from strands_robots.ros.qos import COMMAND_QOS, VERDICT_QOS

COMMAND_TOPIC = "action_commands"
# Commands taken per callback beyond the one the executor hands over.
DRAIN_MAX = 32
VERDICT_TOPIC = "action_verdicts"


class CommandStream:
    """Subscribes to the commands and publishes the verdicts on ``node``.

    :param node: the driver node (its executor calls :meth:`_on_command`).
    :param apply: ``(command, received_ns) -> (verdict, stopped, sim_time_s)``; the node gates it on being active.
    :param now_ns: the node clock, for ``received``.
    :param on_refused: told about every verdict with an unresolved key or an error (throttled logging).
    :param callback_group: the node's command group (serialised with send_action and the leases).
    """

    def __init__(self, node: Any, apply: Callable[[Any, int], Tuple[ActionVerdict, bool, float]],
                 now_ns: Callable[[], int], on_refused: Callable[[int, ActionVerdict], None],
                 callback_group: Any = None) -> None:
        self._node = node
        self._apply = apply
        self._now_ns = now_ns
        self._on_refused = on_refused
        self._publisher = node.create_publisher(ActionVerdictMsg, VERDICT_TOPIC, VERDICT_QOS)
        self._subscription = node.create_subscription(ActionCommand, COMMAND_TOPIC, self._on_command, COMMAND_QOS,
                                                      callback_group=callback_group)
        self.received = 0

    def _on_command(self, msg: ActionCommand) -> None:
        self._handle(msg)
        # What else has arrived, bounded so lease renewals and the rest are never starved (ros/take.py).
        for queued_msg in take.queued(self._subscription, ActionCommand, DRAIN_MAX, lambda: self._node is not None):
            self._handle(queued_msg)

    def _handle(self, msg: ActionCommand) -> None:
        received_ns = self._now_ns()
        self.received += 1
        try:
            command = msg_to_stream_command(msg)
        except Exception as exc:  # never leave a command without its verdict
            verdict, stopped, sim_time = ActionVerdict.coarse(f"unreadable command: {exc}"), False, 0.0
        else:
            verdict, stopped, sim_time = self._apply(command, received_ns)
        reply = stream_verdict_to_msg(verdict, msg.run_id, msg.step_index, stopped, sim_time, received_ns)
        try:
            self._publisher.publish(reply)
        except Exception:
            if self._node is not None:  # not a cleanup racing this callback: a real failure
                raise
            return
        if verdict.is_coarse_error or verdict.unresolved_keys:
            self._on_refused(int(msg.step_index), verdict)

    def destroy(self) -> None:
        node: Optional[Any] = self._node
        if node is None:
            return
        self._node = None  # first: a callback still running sees it and stops
        node.destroy_subscription(self._subscription)
        node.destroy_publisher(self._publisher)
