"""strands_robots: robot-policy rollouts on arms, reported step by step.

The packages under this one split into a ROS-free core (simulation, rollout, policies, arm, station, relay,
client) and thin rclpy shells (nodes). Only ``nodes`` and ``convert`` import rclpy or generated messages.
"""

__version__ = "0.1.0"
