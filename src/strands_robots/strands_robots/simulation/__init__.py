"""In-process simulation API (no rclpy).

:class:`Simulation` with named robots and ``run_policy``, and the observer lane's events in
:mod:`strands_robots.simulation.observers`.
"""

from strands_robots.simulation.observers import (
    CooperativeStop,
    ObserverLane,
    RunPolicyEnded,
    RunPolicyStarted,
    RunPolicyStep,
)

__all__ = ["CooperativeStop", "ObserverLane", "RunPolicyEnded", "RunPolicyStarted", "RunPolicyStep", "Simulation"]


def __getattr__(name):  # Simulation imports the rollout loop, which imports observers: load it lazily
    if name == "Simulation":
        from strands_robots.simulation.simulation import Simulation

        return Simulation
    raise AttributeError(name)
