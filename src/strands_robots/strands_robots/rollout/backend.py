"""What the rollout loop drives: something that observes the arms and executes actions.

In process this is the arm driver core (``strands_robots.arm.driver.DriverCore`` through
``strands_robots.arm.backend.InProcessBackend``); in the rollout node it is a ROS client of the arm driver
node. The loop knows only this protocol.

Optional: ``fault_detail() -> str`` — empty while the driver is healthy; otherwise what is wrong, naming the
driver and the silence (``"arm driver /strands/arm_driver silent for 0.31 s"``). The loop asks before every
``send_action`` and after every step, and a non-empty detail ends the episode as an error (``error_type``
``DriverFault``). It is not a protocol member so that backends without a remote driver need not define it.
A backend whose observations are stale raises from ``observe()``: that also ends the episode as an error,
and the stale observation is never given to the policy nor recorded.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, runtime_checkable

from strands_robots.arm.verdict import ActionVerdict


@runtime_checkable
class RobotBackend(Protocol):
    """The robot as the control loop sees it."""

    def action_keys(self) -> tuple[str, ...]:
        """Every key ``send_action`` can apply, e.g. ``left.joint_1`` … ``right.gripper``."""

    def observe(self) -> dict[str, Any]:
        """Return a fresh observation: ``{key: float}`` joint positions/velocities/torques and ``sim_time_s``.

        Keys: ``<arm>.<joint>.pos``, ``<arm>.<joint>.vel``, ``<arm>.<joint>.effort`` for each actuator key,
        and ``sim_time_s`` (seconds of simulated or hardware time).
        """

    def send_action(self, action: Mapping[str, float]) -> ActionVerdict:
        """Apply what can be applied; a verdict for every key (or a coarse error)."""

    def reset(self, seed: int | None = None) -> None:
        """Return to the initial state (simulation: reset the model; hardware: no-op)."""

    def advance(self, dt: float) -> None:
        """Let ``dt`` seconds of robot time pass after an action.

        In process this steps the physics by ``dt`` (so ``sim_time_s`` advances per control step); a backend
        whose robot runs on its own clock (the driver node, real hardware) does nothing.
        """

    def safety_stop_detail(self) -> str:
        """Empty while the arms may move; otherwise every tripped check in the spec's text form, '; '-joined."""
