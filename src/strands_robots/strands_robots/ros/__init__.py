"""The ROS plumbing every node process shares: rclpy set-up and stop, QoS, executors, scheduling, asking again.

No node of its own: each process's node is in :mod:`strands_robots.nodes` (one subpackage per process).
"""
