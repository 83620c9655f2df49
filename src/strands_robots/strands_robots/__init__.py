"""strands_robots: robot-policy rollouts on arms, reported step by step.

The packages under this one split into a ROS-free core (simulation, rollout, policies, arm, station, relay,
client), the conversions to ROS messages (conversions, which import generated messages only on first use) and thin
rclpy shells (nodes).
"""

__version__ = "0.1.0"
