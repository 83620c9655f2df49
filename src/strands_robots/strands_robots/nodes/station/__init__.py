"""The station process: its node (``node.py``, run as ``station_node``), its parameters and its ROS adapters.

The station's rules live in :mod:`strands_robots.station` (no rclpy); the files here put them on ROS: the robot
port that runs an episode on a rollout node (``robot_port.py``) with its goal (``episode_goal.py``), the arms'
leases (``lease.py``) and the policy a job's episodes get (``policy.py``).
"""
